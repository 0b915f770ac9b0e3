/*
 * exchange.h - one request and its reply: the record the transport
 * (http.c) fills and the routes (routes.c) answer. Neither module's
 * functions are named here, so the transport sits below the routes with
 * no include circle: the routes reach it through the functions they
 * register (http.h, leased_http_routes_t).
 */
#ifndef LEASED_EXCHANGE_H
#define LEASED_EXCHANGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lease/store.h"

typedef struct leased_exchange leased_exchange_t;

#define LEASED_TRACE_ID_LEN 32
#define LEASED_CODE_LABEL_MAX 32

/* The fair shares (admission.h) an exchange holds until its final reply. */
typedef struct leased_claim {
    bool global;   /* one of LEASE_MAX_INFLIGHT */
    bool inflight; /* one of the credential's and tenant's requests in flight */
    bool waiting;  /* waiting work: an acquire that may wait (wait_ms > 0), a parked watch */
    char credential_id[LEASE_ID_MAX + 1];
    char tenant_id[LEASE_NAME_MAX + 1];
} leased_claim_t;

/* One request and its reply, shared by http.c (transport) and the handlers. */
struct leased_exchange {
    /* request: filled by http.c, borrowed for the exchange's lifetime */
    const struct leased_route *route; /* routes.h; opaque to the transport */
    /* the route as the transport sees it (set by the routes' match) */
    const char *route_name; /* log label */
    size_t route_slot;      /* metrics slot (the unmatched slot when no route) */
    bool on_event_thread;   /* never blocks: run on the library's thread */
    bool quiet_log;         /* /metrics, /healthz, /readyz: not logged per request */
    const char *path_param; /* the {lease_id} segment, else "" */
    const char *body;
    size_t body_len;
    const char *authorization; /* Authorization header, NULL when absent */
    const char *query_wait_ms; /* the wait_ms query argument, NULL when absent */
    bool query_invalid;        /* another query argument, a repeated or oversize wait_ms */
    char source[64];           /* the client's address ("127.0.0.1") */
    char trace_id[LEASED_TRACE_ID_LEN + 1]; /* from traceparent; "" when none */
    char correlation_id[LEASE_CORRELATION_MAX + 1];
    int64_t received_mono_ns;
    /* reply: filled by the handler */
    int status;
    char code_label[LEASED_CODE_LABEL_MAX + 1]; /* lease code name, or "ok"/"not_ready" */
    char *reply_body;                           /* heap; http.c frees */
    const char *content_type;                   /* static */
    int64_t retry_after_ms;                     /* > 0: Retry-After header (429, 503) */
    /* not final yet: call leased_routes_continue after again_after_ms
     * (an acquire waiting between attempts; no thread waits meanwhile) */
    int64_t again_after_ms;
    void *pending; /* the operation's state between attempts (routes.c) */
    /* not final yet: park the exchange in the watch hub (watch.h) on
     * park_lease_id until park_until_ns, having seen ids up to park_seq;
     * call leased_routes_continue when it wakes, or
     * leased_routes_park_refused when the hub refuses it */
    bool park_requested;
    char park_lease_id[LEASE_ID_MAX + 1];
    uint64_t park_seq;
    int64_t park_until_ns;
    /* set (atomically) by the transport when the client of a waiting
     * exchange went away (FIN or reset): its next step answers at once
     * with what it has, acquires nothing and parks no more */
    bool client_gone;
    leased_claim_t claim;
};

#endif
