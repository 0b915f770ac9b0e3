/*
 * routes.h - the route table: the only place a request finds its handler.
 *
 * Built from the operation descriptor (lease/operations.h), one route per
 * operation. Each route names its method, path, operation, metrics label, the
 * capabilities that may call it and whether it may run on the HTTP event
 * thread (it must never block: health and metrics) or on a worker (it
 * waits on the database). docs/openapi.yaml lists the same routes;
 * tests/unit/test_openapi_routes.c proves both agree.
 */
#ifndef LEASED_ROUTES_H
#define LEASED_ROUTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lease/store.h"
#include "exchange.h"
#include "request.h"
#include "service.h"

typedef struct leased_app leased_app_t;

/* ctx is begun, and authenticated and authorised for the route's
 * capabilities when the route has any. */
typedef void (*leased_handler_fn)(leased_app_t *app, leased_exchange_t *ex, leased_op_ctx_t *ctx);

typedef struct leased_route {
    const char *method; /* "GET" | "POST" */
    const char *path;   /* "/v1/leases/acquire"; "{lease_id}" is one path segment */
    leased_op_t op;
    const char *name;     /* metrics and log label */
    unsigned caps_any;    /* LEASE_CAP_* of which the caller needs one; 0 = no credential */
    bool on_event_thread; /* never blocks: served without a worker */
    leased_handler_fn handler;
} leased_route_t;

/* The table (n rows). */
const leased_route_t *leased_routes_table(size_t *n);

typedef enum leased_route_miss {
    LEASED_ROUTE_FOUND = 0,
    LEASED_ROUTE_NO_PATH,   /* no route has this path */
    LEASED_ROUTE_NO_METHOD, /* the path exists with another method */
} leased_route_miss_t;

/*
 * Finds the route of method and path (no query string). On success
 * returns it and copies a {lease_id} segment into param (size paramsz,
 * truncated values are caught by validation later); else NULL and *miss
 * says why.
 */
const leased_route_t *leased_routes_match(const char *method, const char *path, char *param,
                                          size_t paramsz, leased_route_miss_t *miss);

/* The routes as the transport calls them (http.h): registered with
 * leased_http_start by the app, so the transport never names a route. */
const struct leased_http_routes *leased_routes_for_http(void);

/*
 * Runs a matched route: the client address's rate, the credential (whose
 * lookups a source with failing authentications may be refused), the
 * credential's rate, capability, the credential's and tenant's share of
 * requests in flight, then the handler. Fills the reply part of ex. Blocks
 * on the database for routes that are not on_event_thread. Shares are
 * released with the final reply (here, or in leased_routes_continue).
 */
void leased_routes_dispatch(leased_app_t *app, leased_exchange_t *ex);

/* The next attempt of an exchange that set again_after_ms, or of a parked
 * watch that woke; sets again_after_ms or park_requested again, or fills
 * the reply. */
void leased_routes_continue(leased_app_t *app, leased_exchange_t *ex);

/* The watch hub refused to park ex (full: too many watches wait; else it
 * is shutting down): fills the reply without another database call. */
void leased_routes_park_refused(leased_app_t *app, leased_exchange_t *ex, bool full);

/* Fills ex with an error envelope (code's HTTP status). */
void leased_routes_reply_error(leased_exchange_t *ex, lease_code_t code, const char *field,
                               int64_t retry_after_ms);

#endif
