/*
 * http.h - the libmicrohttpd daemon of leased (threading model: see the
 * "HTTP service" section of docs/architecture.md).
 *
 * The library owns the listening socket and every client socket. One
 * epoll event thread of the library accepts, reads requests, bounds
 * bodies, answers health/metrics inline and suspends the connection of
 * each lease request while a worker of a fixed pool (LEASE_HTTP_THREADS)
 * runs it against the database; the worker resumes the connection and the
 * event thread sends the reply. Idle keep-alive connections therefore cost
 * a descriptor and small buffers, never a thread. Admission and deadlines:
 * http_conns.h; framing rules: http_rules.h.
 */
#ifndef LEASED_HTTP_H
#define LEASED_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lease/result.h"
#include "exchange.h"
#include "http_conns.h"

typedef struct leased_app leased_app_t;
typedef struct leased_http leased_http_t;

/* What the routes do with an exchange (registered by the app; routes.h
 * leased_routes_for_http): the transport calls these and nothing above it.
 * match fills ex->route and its transport fields (route_name, route_slot,
 * on_event_thread, quiet_log) and the {lease_id} segment into param; on a
 * miss it returns false, *wrong_method telling whether the path exists
 * with another method. dispatch runs a route (blocking on the database
 * unless on_event_thread); next runs the next step of an exchange that set
 * again_after_ms or was woken from a park; park_refused answers one the
 * watch hub refused; reply_error fills an error envelope. classify names
 * the flow a request queues in for a worker (work_queue.h), from its head;
 * cost says what a complete request costs there. Both run on the event
 * thread: never blocking. refuse answers a request the queue
 * refused (code and retry hint), audited, without running it. */
typedef struct leased_http_routes {
    bool (*match)(const char *method, const char *path, leased_exchange_t *ex, char *param,
                  size_t paramsz, bool *wrong_method);
    void (*dispatch)(leased_app_t *app, leased_exchange_t *ex);
    void (*next)(leased_app_t *app, leased_exchange_t *ex);
    void (*park_refused)(leased_app_t *app, leased_exchange_t *ex, bool full);
    void (*reply_error)(leased_exchange_t *ex, lease_code_t code, const char *field,
                        int64_t retry_after_ms);
    void (*classify)(leased_app_t *app, const leased_exchange_t *ex, char *key, size_t keysz);
    size_t (*cost)(const leased_exchange_t *ex);
    void (*refuse)(leased_app_t *app, leased_exchange_t *ex, lease_code_t code,
                   int64_t retry_after_ms);
} leased_http_routes_t;

/* Binds app->config's listen address and starts the event thread and the
 * workers. NULL with a one-line reason in err on failure. */
leased_http_t *leased_http_start(leased_app_t *app, const leased_http_routes_t *routes, char *err,
                                 size_t errsz);

/* The bound port (useful with port 0). */
int leased_http_port(const leased_http_t *h);

/* Stops accepting new connections (existing ones may finish their
 * requests; their replies say Connection: close). */
void leased_http_quiesce(leased_http_t *h);

/* The queue in front of the workers (work_queue.h) and its refusals. */
typedef struct leased_queue_stats {
    size_t queued, flows;
    uint64_t refused_full;   /* the flow held LEASE_MAX_QUEUED_PER_FLOW */
    uint64_t refused_waited; /* waited LEASE_MAX_QUEUE_WAIT_MS */
} leased_queue_stats_t;
void leased_http_queue_stats(leased_http_t *h, leased_queue_stats_t *out);

/* Counters of the front door (connections refused, timed out, ...). */
void leased_http_conn_stats(const leased_http_t *h, leased_conn_stats_t *out);

/* Requests received and not yet answered (headers seen, reply not sent). */
int64_t leased_http_active(const leased_http_t *h);

/* Waits until no request is active, at most timeout_ms. True when idle. */
bool leased_http_wait_idle(leased_http_t *h, int64_t timeout_ms);

/*
 * Stops the daemon and the workers and frees h; accepts NULL. From the
 * call on, complete requests are answered 503 at once instead of going to
 * a worker; requests already on workers get up to wait_ms to finish.
 * Returns false (and leaves the daemon running, to die with the process)
 * when some are still running then, because libmicrohttpd must not be
 * stopped with suspended connections.
 */
bool leased_http_stop(leased_http_t *h, int64_t wait_ms);

#endif
