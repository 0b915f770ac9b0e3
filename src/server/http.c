/*
 * http.c - libmicrohttpd transport: the listener, requests, bodies,
 * suspension of requests onto the worker pool, replies and their headers,
 * draining.
 *
 * The library listens and owns every client socket (one epoll thread);
 * http_conns.c adds admission, deadlines and the hang-ups of waiting
 * requests through the library's own hooks, http_rules.c the framing
 * rules. Per request the library calls: the URI log callback with the raw
 * target (the request state is made and the target checked before the
 * library unescapes it); the access handler once after the headers
 * (framing rules, route match; a refusal or an oversize Content-Length is
 * answered at once, with Connection: close for a refusal), once per body
 * chunk (appended, or discarded after 64 KiB and answered 400 at the end),
 * and once at the end. At the end a health route is answered inline; for
 * a lease route the connection is suspended and the request queued to a
 * worker (admission happens there, once the caller is known). The worker
 * runs the route (blocking on the database), marks the request done and
 * resumes the connection; the next call of the handler queues the reply.
 * A request thus wakes two threads: the library's and one worker. Every
 * reply gets X-Correlation-Id.
 *
 * A watch (GET /v1/leases/{lease_id}/watch) that finds its lease active
 * asks to be parked: the worker hands the request to the watch hub with the
 * connection still suspended (routes.c has given its admission shares back
 * already); when the hub wakes it, a worker runs the route's next step
 * (which answers or parks again). A parked request counts as suspended, so
 * shutdown waits for it; draining releases every parked watch first
 * (leased_main.c).
 */
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lease/clock.h"
#include "lease/log.h"
#include "app.h"
#include "copy_text.h"
#include "http_accept.h"
#include "http_conns.h"
#include "http_rules.h"
#include "request_ids.h"
#include "trusted_proxies.h"
#include "work_queue.h"

/* A client that keeps sending after its body passed the cap is cut off
 * once this much more has been read (the 400 cannot be sent mid-upload). */
#define DISCARD_MAX (1024 * 1024)
/* Per-connection memory of libmicrohttpd (headers and I/O buffers): room
 * for a head well past LEASED_HTTP_HEAD_MAX (refused in the envelope by
 * http_rules.c) and its parsed form; bodies are kept by us, bounded by
 * LEASED_BODY_MAX. A head past this memory the library refuses itself.
 * Not above 32 KiB: the library maps a larger pool with mmap for each
 * connection and unmaps it at close, and every munmap in a process with
 * many threads interrupts the other cores to flush their TLBs. Under a
 * flood of refused connections that was most of the event thread's time
 * (docs/benchmarks.md, "Front door under attack"); at 32 KiB the pool
 * comes from malloc. */
#define CONNECTION_MEMORY (32 * 1024)
/* LEASE_METRICS_LISTEN's budget: scrapers and probes need few connections. */
#define PROBE_CONNECTIONS 64
#define PROBE_CONNECTIONS_PER_SOURCE 8
#define PROBE_IDLE_S 10
/* A probe or a scrape sends its whole request at once: a connection that
 * has not in this time (or LEASE_RECEIVE_TIMEOUT_MS, if shorter) is cut. */
#define PROBE_RECEIVE_MS 2000
/* Connections past LEASE_MAX_CONNECTIONS the library still accepts, so
 * that they are answered 503 (http_conns.h) rather than closed unanswered. */
#define OVER_CAPACITY_ROOM 64
/* Longest wait_ms query value taken (more digits than any valid one). */
#define WAIT_MS_MAX 23
/* The bit of leased_http_t.suspended that says stop has begun: no request
 * is suspended any more. */
#define STOPPING ((int64_t)1 << 62)
/* Retry hint of a request its flow's queue refused: about one turn of
 * the workers over the flows. */
#define QUEUE_RETRY_MS 100

/* What a daemon's access handler is given: which listener it serves. */
typedef struct listener {
    leased_http_t *http;
    bool probes;           /* LEASE_METRICS_LISTEN: /metrics, /healthz, /readyz only */
    leased_conns_t *conns; /* its connections: caps, eviction, deadlines (http_conns.h) */
} listener_t;

struct leased_http {
    leased_app_t *app;
    const leased_http_routes_t *routes; /* registered by the app (http.h) */
    struct MHD_Daemon *daemon;
    struct MHD_Daemon *probes; /* LEASE_METRICS_LISTEN's own daemon, or NULL */
    listener_t main_listener, probe_listener;
    leased_conns_t *conns;       /* admission, deadlines, hang-ups (http_conns.h) */
    leased_conns_t *probe_conns; /* the probe listener's, or NULL */
    leased_acceptor_t *acceptor; /* accepts for the library (http_accept.h) */
    int listen_fd;         /* closed after the library stops */
    bool quiesced;         /* the library no longer accepts (main thread only) */
    int port;
    leased_work_queue_t *workers;
    /* Counted with atomics alone: a request changes them three times, and
     * a mutex the event thread and every worker took for each would be
     * contended under load (a system call and a context switch each time
     * it is). The mutex and condition are for the rare waiter (drain,
     * stop), which the counters wake only when one is waiting. */
    int64_t active;     /* requests between headers and reply sent */
    int64_t suspended;  /* requests on workers, | STOPPING once stop began */
    int64_t idle_waits; /* threads in wait_for_zero */
    uint64_t queue_refused_full, queue_refused_waited; /* atomic */
    uint64_t refusals_unlogged; /* atomic: since the last line about them */
    int64_t refusals_logged_ns; /* atomic: when that line was written */
    pthread_mutex_t idle_mutex;
    pthread_cond_t idle_cond;
};

typedef enum request_state {
    RQ_RECEIVING = 0, /* headers and body arriving */
    RQ_RUNNING,       /* suspended, on a worker */
    RQ_DONE,          /* reply ready to queue */
} request_state_t;

typedef struct request {
    leased_http_t *http;
    struct MHD_Connection *conn;
    leased_exchange_t ex;
    bool wrong_method; /* no route: the path exists with another method */
    char path_param[LEASE_ID_MAX + 2];
    char *body;
    size_t body_len;
    size_t discarded;
    bool too_large;
    leased_conns_t *conns;    /* its listener's connections */
    leased_conn_t *link;      /* the connection's record there */
    const char *target_field; /* the raw target broke a rule (http_rules.h) */
    bool started;             /* the head arrived: counted in h->active */
    bool close;               /* refused by the framing rules: the connection ends */
    int state;                /* request_state_t, atomic between worker and event thread */
    leased_job_t job;         /* its turn on a worker (one at a time) */
    int64_t queued_ns;        /* when it was queued for a worker first */
    bool waited;              /* its socket is watched for a hang-up (http_conns.h) */
    bool on_probes;           /* arrived on the LEASE_METRICS_LISTEN listener */
    bool forwarded_invalid;   /* a trusted proxy's X-Forwarded-For did not parse */
    char flow[LEASED_FLOW_KEY_MAX]; /* its flow for a worker, named from its head */
} request_t;

/* Query arguments: only a watch reads one (wait_ms); any other argument,
 * or wait_ms twice or too long, marks the query invalid for it. Other routes
 * ignore the query string. */
static enum MHD_Result collect_query(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    (void)kind;
    request_t *rq = cls;
    if (strcmp(key, "wait_ms") != 0 || rq->ex.query_wait_ms || !value ||
        strlen(value) >= WAIT_MS_MAX)
        rq->ex.query_invalid = true;
    else
        rq->ex.query_wait_ms = value; /* the library's copy: valid until the request ends */
    return MHD_YES;
}

/* Every X-Forwarded-For line of a request, joined in order with ",". The
 * whole of it, however long (the head is bounded, http_rules.h): the
 * client address is read from its right end, so padding a client adds on
 * the left never hides what the trusted proxies appended. */
typedef struct forwarded {
    char *text;
    size_t len;
    bool failed; /* out of memory */
} forwarded_t;

static enum MHD_Result collect_forwarded(void *cls, enum MHD_ValueKind kind, const char *key,
                                         const char *value)
{
    (void)kind;
    forwarded_t *f = cls;
    if (strcasecmp(key, "X-Forwarded-For") != 0 || !value || f->failed)
        return MHD_YES;
    size_t add = strlen(value) + (f->text ? 1 : 0);
    char *grown = realloc(f->text, f->len + add + 1);
    if (!grown) {
        f->failed = true;
        return MHD_YES;
    }
    leased_copy_text2(grown + f->len, add + 1, f->text ? "," : "", value);
    f->text = grown;
    f->len += add;
    return MHD_YES;
}

/* The client's address: from a trusted proxy (LEASE_TRUSTED_PROXIES) the
 * rightmost untrusted X-Forwarded-For address, else the peer's (already
 * the PROXY header's, which http_conns.c read). out: 64 bytes. */
static void client_source(leased_http_t *h, request_t *rq, char *out)
{
    char peer[64];
    if (rq->link)
        leased_copy_text(peer, sizeof peer, leased_conns_source(rq->link));
    else
        leased_conns_peer(rq->conn, peer);
    const leased_trusted_proxies_t *tp = &h->app->config->trusted;
    forwarded_t f = {NULL, 0, false};
    if (tp->n > 0 && leased_trusted_proxies_has(tp, peer))
        MHD_get_connection_values(rq->conn, MHD_HEADER_KIND, collect_forwarded, &f);
    rq->forwarded_invalid =
        !leased_trusted_proxies_client(tp, peer, !f.failed ? f.text : NULL, out);
    free(f.text);
}

/* MHD_OPTION_URI_LOG_CALLBACK: a request line arrived; what it returns is
 * the request's context. The raw target is checked here, before the
 * library unescapes it. */
static void *on_request_line(void *cls, const char *uri, struct MHD_Connection *conn)
{
    const listener_t *l = cls;
    request_t *rq = calloc(1, sizeof *rq);
    if (!rq)
        return NULL;
    rq->http = l->http;
    rq->conn = conn;
    rq->on_probes = l->probes;
    rq->conns = l->conns;
    rq->ex.received_mono_ns = lease_mono_now_ns();
    rq->target_field = leased_http_rules_target(uri);
    leased_conns_begin(l->conns, leased_conns_of(conn));
    return rq;
}

/* The head arrived (first call of the access handler): the request state
 * is filled in. False when the request must not run (its connection was
 * cut meanwhile). */
static bool request_start(request_t *rq, const char *url, const char *method)
{
    leased_http_t *h = rq->http;
    struct MHD_Connection *conn = rq->conn;
    rq->link = leased_conns_of(conn);
    if (!leased_conns_head(rq->conns, rq->link))
        return false;
    rq->started = true;
    __atomic_add_fetch(&h->active, 1, __ATOMIC_ACQ_REL);
    leased_correlation_id(rq->ex.correlation_id);
    (void)h->routes->match(method, url, &rq->ex, rq->path_param, sizeof rq->path_param,
                           &rq->wrong_method);
    rq->ex.path_param = rq->path_param;
    /* Read where the library holds the request head (its connection
     * memory, which it zeroes between requests), not copied: the bearer
     * token is in that buffer anyway, and a copy would be one more to wipe. */
    rq->ex.authorization = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, collect_query, rq);
    client_source(h, rq, rq->ex.source);
    (void)leased_traceparent_trace_id(
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "traceparent"), rq->ex.trace_id);
    return true;
}

static void request_free(request_t *rq)
{
    if (!rq)
        return;
    free(rq->ex.reply_body);
    free(rq->body);
    free(rq);
}

static void absorb(request_t *rq, const char *data, size_t n)
{
    bool fits = !rq->too_large && rq->body_len + n <= LEASED_BODY_MAX;
    char *grown = fits ? realloc(rq->body, rq->body_len + n) : NULL;
    if (!grown) {
        /* over the cap (or out of memory): refused, never half-read */
        rq->too_large = true;
        rq->discarded += n;
        return;
    }
    rq->body = grown;
    memcpy(rq->body + rq->body_len, data, n);
    rq->body_len += n;
}

static enum MHD_Result send_reply(request_t *rq)
{
    leased_http_t *h = rq->http;
    leased_exchange_t *ex = &rq->ex;
    static char fallback[] = "{\"status\":\"error\",\"code\":\"lease_backend_unavailable\","
                             "\"msg\":\"Internal error\",\"retryable\":true}";
    struct MHD_Response *resp;
    if (ex->reply_body) {
        resp = MHD_create_response_from_buffer(strlen(ex->reply_body), ex->reply_body,
                                               MHD_RESPMEM_MUST_FREE);
        if (resp)
            ex->reply_body = NULL; /* MHD owns it now */
    } else {
        ex->status = 503;
        snprintf(ex->code_label, sizeof ex->code_label, "lease_backend_unavailable");
        ex->content_type = "application/json";
        resp =
            MHD_create_response_from_buffer(sizeof fallback - 1, fallback, MHD_RESPMEM_PERSISTENT);
    }
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            ex->content_type ? ex->content_type : "application/json");
    MHD_add_response_header(resp, "X-Correlation-Id", ex->correlation_id);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if ((ex->status == 429 || ex->status == 503) && ex->retry_after_ms > 0) {
        char secs[24];
        snprintf(secs, sizeof secs, "%lld", (long long)((ex->retry_after_ms + 999) / 1000));
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, secs);
    }
    if (rq->close || __atomic_load_n(&h->app->draining, __ATOMIC_ACQUIRE))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = MHD_queue_response(rq->conn, (unsigned)ex->status, resp);
    MHD_destroy_response(resp);

    int64_t latency_ns = lease_mono_now_ns() - ex->received_mono_ns;
    leased_metrics_observe(h->app->metrics, ex->route_slot,
                           leased_metrics_code_slot(ex->code_label), latency_ns);
    if ((!ex->route || !ex->quiet_log) && LEASE_LOG_ENABLED(LEASE_LOG_INFO)) {
        lease_log_fields_t f = {ex->correlation_id, ex->trace_id,
                                ex->route ? ex->route_name : "unmatched", ex->code_label,
                                latency_ns / 1000000};
        lease_log_write(LEASE_LOG_INFO, &f, "request answered %d", ex->status);
    }
    return ret;
}

static enum MHD_Result reply_error_now(request_t *rq, lease_code_t code, const char *field)
{
    rq->http->routes->reply_error(&rq->ex, code, field, 0);
    return send_reply(rq);
}

/* After a route ran on a worker: re-queue it when it waits between
 * attempts, else hand the reply back to the event thread. */
static void after_route(request_t *rq);

static void continue_job(void *arg)
{
    request_t *rq = arg;
    rq->http->routes->next(rq->http->app, &rq->ex);
    after_route(rq);
}

/* A request refused before it ran: its own access line is left out (a
 * flood would write one per request) and one warning a second at most
 * says how many there were. */
static void refused_before_running(leased_http_t *h, request_t *rq, uint64_t *counter)
{
    __atomic_add_fetch(counter, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&h->refusals_unlogged, 1, __ATOMIC_RELAXED);
    rq->ex.quiet_log = true;
    int64_t now = lease_mono_now_ns();
    int64_t last = __atomic_load_n(&h->refusals_logged_ns, __ATOMIC_RELAXED);
    if (now - last < 1000000000LL ||
        !__atomic_compare_exchange_n(&h->refusals_logged_ns, &last, now, false, __ATOMIC_RELAXED,
                                     __ATOMIC_RELAXED))
        return;
    uint64_t n = __atomic_exchange_n(&h->refusals_unlogged, 0, __ATOMIC_RELAXED);
    LOG_WARN("%llu requests answered 429 before running since the last such line: their flow's "
             "queue was full or they waited too long for a worker (leased_http_queue_*_total)",
             (unsigned long long)n);
}

static void run_job(void *arg)
{
    request_t *rq = arg;
    leased_http_t *h = rq->http;
    /* waited past its bound for a worker: refused, not run (its client
     * retries after the hint; the deadline may not have passed yet) */
    int64_t waited_ms = (lease_mono_now_ns() - rq->queued_ns) / 1000000;
    if (waited_ms >= h->app->config->max_queue_wait_ms) {
        refused_before_running(h, rq, &h->queue_refused_waited);
        h->routes->refuse(h->app, &rq->ex, LEASE_RATE_LIMITED, QUEUE_RETRY_MS);
    } else
        h->routes->dispatch(h->app, &rq->ex);
    after_route(rq);
}

/* The watch hub woke a parked request: its next step runs on a worker. */
static void watch_woken(void *arg)
{
    request_t *rq = arg;
    /* accepted even while stopping */
    leased_work_queue_push_after(rq->http->workers, &rq->job, continue_job, rq, 0);
}

/* Hang-up of a waiting request's client (http_conns.h, lock held): its
 * next step answers at once and gives its slots back. */
static void client_gone(void *arg)
{
    request_t *rq = arg;
    __atomic_store_n(&rq->ex.client_gone, true, __ATOMIC_RELEASE);
}

/* ... then (no lock; rq may be gone, only compared): a parked watch is
 * woken now. A waiting acquire stops at its next attempt (at most
 * BACKOFF_MAX_MS later, service.c). */
static void wake_gone(void *cls, void *arg)
{
    leased_http_t *h = cls;
    (void)leased_watch_cancel(h->app->watch, arg);
}

/* Parks rq unless its client is gone already; under the connections'
 * lock, so a hang-up either is seen here or finds rq parked. */
static leased_watch_park_result_t park(leased_http_t *h, request_t *rq)
{
    leased_exchange_t *ex = &rq->ex;
    leased_conns_lock(h->conns);
    leased_watch_park_result_t pr = LEASED_WATCH_STOPPING;
    if (!__atomic_load_n(&ex->client_gone, __ATOMIC_ACQUIRE))
        pr = leased_watch_park(h->app->watch, ex->park_lease_id, ex->park_seq, ex->park_until_ns,
                               watch_woken, rq);
    leased_conns_unlock(h->conns);
    return pr;
}

/* *count went down: a thread in wait_for_zero hears it. Its count goes up
 * before it reads ours, and we read it after ours went down (both
 * sequentially consistent): either it sees the new count or we see it
 * waiting, and it waits holding the mutex we take to wake it. */
static void count_down(leased_http_t *h, int64_t *count)
{
    __atomic_sub_fetch(count, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&h->idle_waits, __ATOMIC_SEQ_CST) > 0) {
        pthread_mutex_lock(&h->idle_mutex);
        pthread_cond_broadcast(&h->idle_cond);
        pthread_mutex_unlock(&h->idle_mutex);
    }
}

/* The reply is ready: the event thread sends it. Counted down only once
 * resumed: stop must never see "idle" with a connection still suspended
 * (libmicrohttpd must not be stopped so). h outlives this call: the
 * workers are joined before it is freed. rq may be freed as soon as the
 * resume is done. */
static void resume(request_t *rq)
{
    leased_http_t *h = rq->http;
    __atomic_store_n(&rq->state, RQ_DONE, __ATOMIC_RELEASE);
    MHD_resume_connection(rq->conn);
    count_down(h, &h->suspended);
}

static void after_route(request_t *rq)
{
    leased_http_t *h = rq->http;
    while (rq->ex.again_after_ms > 0 || rq->ex.park_requested) {
        /* it waits: its client going away is heard (http_conns.h) */
        rq->waited = rq->waited || leased_conns_wait(h->conns, rq->link, rq);
        if (rq->ex.park_requested) {
            rq->ex.park_requested = false;
            leased_watch_park_result_t pr = park(h, rq);
            if (pr == LEASED_WATCH_PARKED)
                return; /* rq belongs to the hub now: not even read again */
            h->routes->park_refused(h->app, &rq->ex, pr == LEASED_WATCH_FULL);
            continue;
        }
        leased_work_queue_push_after(h->workers, &rq->job, continue_job, rq, rq->ex.again_after_ms);
        return;
    }
    /* the socket may be closed once resumed */
    if (rq->waited)
        leased_conns_unwait(h->conns, rq->link);
    resume(rq);
}

static unsigned long long content_length(const char *v)
{
    unsigned long long n = 0;
    for (; v && *v; v++) {
        if (*v < '0' || *v > '9')
            return 0; /* malformed: libmicrohttpd answers it */
        n = n * 10 + (unsigned)(*v - '0');
        if (n > DISCARD_MAX)
            return DISCARD_MAX + 1ULL;
    }
    return n;
}

/*
 * Whether to refuse an oversize body before reading it. Answering before
 * the body makes libmicrohttpd close the connection with the body unread,
 * which can reset the connection before the client reads the answer; so
 * that is only done when the client waits for "100 Continue" (nothing sent
 * yet) or the body is too large to be worth reading. Otherwise the body is
 * read and discarded, and the 400 goes out on a connection that stays
 * usable.
 */
static bool refuse_before_body(struct MHD_Connection *conn)
{
    unsigned long long n = content_length(
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH));
    if (n <= LEASED_BODY_MAX)
        return false;
    const char *expect = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
    return n > DISCARD_MAX || (expect && strcasecmp(expect, "100-continue") == 0);
}

/* The request is complete: answer it here or hand it to a worker. */
static enum MHD_Result complete(request_t *rq)
{
    leased_http_t *h = rq->http;
    leased_exchange_t *ex = &rq->ex;
    /* with a listener of their own, the probes are served there only, and
     * only they are */
    if (ex->route && h->probes && ex->on_event_thread != rq->on_probes)
        return reply_error_now(rq, LEASE_INVALID_LEASE_REQUEST, "path");
    if (!ex->route)
        return reply_error_now(rq, LEASE_INVALID_LEASE_REQUEST,
                               rq->wrong_method ? "method" : "path");
    if (rq->too_large)
        return reply_error_now(rq, LEASE_INVALID_LEASE_REQUEST, "body");
    ex->body = rq->body ? rq->body : "";
    ex->body_len = rq->body_len;
    if (ex->on_event_thread) {
        h->routes->dispatch(h->app, ex);
        return send_reply(rq);
    }
    /* Classified now, admitted into its flow's queue (bounded per flow,
     * served in turn: work_queue.h); the rest of admission (rates, shares,
     * the global in-flight bound) happens on the worker once the caller is
     * authenticated (routes.c). */
    size_t cost = h->routes->cost(ex);
    /* Counting the suspension and checking for stop are one atomic step,
     * so that leased_http_stop either sees this request or it never starts. */
    int64_t was = __atomic_load_n(&h->suspended, __ATOMIC_SEQ_CST);
    while (!(was & STOPPING) && !__atomic_compare_exchange_n(&h->suspended, &was, was + 1, false,
                                                             __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        ;
    if (was & STOPPING) {
        h->routes->reply_error(ex, LEASE_BACKEND_UNAVAILABLE, NULL, 1000);
        return send_reply(rq);
    }
    __atomic_store_n(&rq->state, RQ_RUNNING, __ATOMIC_RELEASE);
    MHD_suspend_connection(rq->conn);
    rq->queued_ns = lease_mono_now_ns();
    leased_push_result_t pushed = leased_work_queue_push(h->workers, &rq->job, run_job, rq, rq->flow, cost);
    if (pushed == LEASED_PUSH_FLOW_FULL) {
        refused_before_running(h, rq, &h->queue_refused_full);
        h->routes->refuse(h->app, ex, LEASE_RATE_LIMITED, QUEUE_RETRY_MS);
        resume(rq);
    } else if (pushed != LEASED_PUSH_OK) {
        h->routes->reply_error(ex, LEASE_BACKEND_UNAVAILABLE, NULL, 1000);
        resume(rq);
    }
    return MHD_YES;
}

/* Classifies a request from its head and, when its flow's queue is full
 * already, answers 429 before its body is read (the connection then
 * closes): a flow past its bound costs leased no body, whatever it sends.
 * The queue's own bound still decides for a request that gets further. */
static enum MHD_Result refuse_when_flow_full(request_t *rq)
{
    leased_http_t *h = rq->http;
    h->routes->classify(h->app, &rq->ex, rq->flow, sizeof rq->flow);
    if (!leased_work_queue_full(h->workers, rq->flow))
        return MHD_YES;
    refused_before_running(h, rq, &h->queue_refused_full);
    rq->close = true;
    (void)leased_conns_answering(rq->conns, rq->link);
    h->routes->refuse(h->app, &rq->ex, LEASE_RATE_LIMITED, QUEUE_RETRY_MS);
    return send_reply(rq);
}

/* The probe listener's thread yields the CPU to everything else: a scrape
 * flood gets what lease traffic leaves (Linux: nice applies per thread). */
static void lower_probe_thread(void)
{
    static __thread bool lowered;
    if (lowered)
        return;
    lowered = true;
    if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19) != 0)
        LOG_WARN("cannot lower the priority of the probe listener: %s", strerror(errno));
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    const listener_t *l = cls;
    request_t *rq = *con_cls;
    if (!rq) /* on_request_line ran out of memory */
        return MHD_NO;
    if (!rq->started) {
        if (!request_start(rq, url, method))
            return MHD_NO;
        if (l->probes)
            lower_probe_thread();
        const char *field = rq->target_field;
        if (!field)
            field = leased_http_rules_head(conn, method, version, url);
        if (!field && rq->forwarded_invalid)
            field = "X-Forwarded-For"; /* never charged to the proxy in silence */
        if (field) {
            leased_conns_count_framing(rq->conns);
            rq->close = true;
            (void)leased_conns_answering(rq->conns, rq->link);
            return reply_error_now(rq, LEASE_INVALID_LEASE_REQUEST, field);
        }
        if (refuse_before_body(conn)) {
            rq->too_large = true;
            (void)leased_conns_answering(rq->conns, rq->link);
            return reply_error_now(rq, LEASE_INVALID_LEASE_REQUEST, "body");
        }
        if (rq->ex.route && !rq->ex.on_event_thread)
            return refuse_when_flow_full(rq);
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        absorb(rq, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return rq->discarded > DISCARD_MAX ? MHD_NO : MHD_YES;
    }
    int state = __atomic_load_n(&rq->state, __ATOMIC_ACQUIRE);
    if (state == RQ_DONE)
        return send_reply(rq);
    if (state == RQ_RUNNING)
        return MHD_YES;
    if (!leased_conns_answering(rq->conns, rq->link))
        return MHD_NO; /* answered 408 meanwhile: it must not run */
    return complete(rq);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)toe;
    const listener_t *l = cls;
    leased_http_t *h = l->http;
    request_t *rq = *con_cls;
    if (!rq)
        return;
    *con_cls = NULL;
    bool started = rq->started;
    leased_conns_idle(l->conns, leased_conns_of(conn));
    request_free(rq);
    if (started)
        count_down(h, &h->active); /* leased_http_wait_idle hears it */
}

/* fmt is the library's own format string */
__attribute__((format(printf, 2, 0))) static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    if (!LEASE_LOG_ENABLED(LEASE_LOG_WARN))
        return;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    LOG_WARN("libmicrohttpd: %s", msg);
}

/* host (numeric, checked by config.c) and port as a socket address. */
static socklen_t listen_address(const char *host, int port, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
    struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
    if (strchr(host, ':')) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        return inet_pton(AF_INET6, host, &a6->sin6_addr) == 1 ? sizeof *a6 : 0;
    }
    a4->sin_family = AF_INET;
    a4->sin_port = htons((uint16_t)port);
    return inet_pton(AF_INET, host, &a4->sin_addr) == 1 ? sizeof *a4 : 0;
}

/*
 * LEASE_METRICS_LISTEN: a daemon of its own, with its own thread and a
 * small connection budget (per address and in all), for /metrics,
 * /healthz and /readyz, so that scraping or probing them, however hard,
 * takes neither the lease listener's connections nor its event thread.
 */
static bool start_probes(leased_http_t *h, char *err, size_t errsz)
{
    const leased_config_t *cfg = h->app->config;
    struct sockaddr_storage ss;
    if (!listen_address(cfg->metrics_host, cfg->metrics_port, &ss)) {
        snprintf(err, errsz, "metrics listen address %s is not numeric", cfg->metrics_host);
        return false;
    }
    /* the same rules as the lease listener's connections (http_conns.h),
     * with budgets of their own: an idle or trickling connection makes
     * room for a probe, fairly per source, and a head must come whole
     * within PROBE_RECEIVE_MS */
    static const leased_trusted_proxies_t no_proxies = {0};
    leased_conns_config_t pc = {
        .max_connections = PROBE_CONNECTIONS,
        .max_per_source = PROBE_CONNECTIONS_PER_SOURCE,
        .receive_timeout_ms =
            cfg->receive_timeout_ms < PROBE_RECEIVE_MS ? cfg->receive_timeout_ms : PROBE_RECEIVE_MS,
        .idle_timeout_ms = PROBE_IDLE_S * 1000,
        .trusted = &no_proxies,
    };
    h->probe_conns = leased_conns_start(&pc);
    h->probe_listener.conns = h->probe_conns;
    if (!h->probe_conns) {
        snprintf(err, errsz, "cannot start the probe listener's connection thread");
        return false;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG |
                     (ss.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    h->probes = MHD_start_daemon(
        flags, (uint16_t)cfg->metrics_port, NULL, NULL, on_request, &h->probe_listener,
        MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)(PROBE_CONNECTIONS + OVER_CAPACITY_ROOM),
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)PROBE_IDLE_S, MHD_OPTION_NOTIFY_CONNECTION,
        leased_conns_notify, h->probe_conns, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
        &h->probe_listener, MHD_OPTION_URI_LOG_CALLBACK, on_request_line, &h->probe_listener,
        MHD_OPTION_SIGPIPE_HANDLED_BY_APP, 1, MHD_OPTION_END);
    if (!h->probes) {
        snprintf(err, errsz,
                 "cannot listen on %s port %d for the probes; set LEASE_METRICS_LISTEN to "
                 "another address",
                 cfg->metrics_host, cfg->metrics_port);
        return false;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->probes, MHD_DAEMON_INFO_BIND_PORT);
    LOG_INFO("metrics and health served at %s port %u", cfg->metrics_host,
             di ? (unsigned)di->port : 0U);
    return true;
}

/* Room for a descriptor per connection and the rest of the process. */
static void raise_fd_limit(int64_t connections)
{
    struct rlimit rl;
    rlim_t want = (rlim_t)(connections + 256);
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want)
        return;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want ? want : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < want)
        LOG_WARN("open file limit %llu is below the %llu that %lld connections need",
                 (unsigned long long)rl.rlim_cur, (unsigned long long)want, (long long)connections);
}

/* The listening socket, bound here rather than by the library so that a
 * failure names the address, the system's reason and the setting that
 * changes it ("Failed to bind to port 0" sent people looking). */
static int bind_listener(const char *host, int port, int *bound, char *err, size_t errsz)
{
    struct sockaddr_storage ss;
    socklen_t len = listen_address(host, port, &ss);
    if (!len) {
        snprintf(err, errsz, "listen address %s is not numeric", host);
        return -1;
    }
    bool v6 = ss.ss_family == AF_INET6;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0) {
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (v6)
            setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    }
    if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, SOMAXCONN) != 0) {
        char why[128];
        snprintf(err, errsz,
                 "cannot listen on %s%s%s:%d: %s; set LEASE_LISTEN=HOST:PORT (or --listen "
                 "HOST:PORT) to another address",
                 v6 ? "[" : "", host, v6 ? "]" : "", port, strerror_r(errno, why, sizeof why));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    getsockname(fd, (struct sockaddr *)&ss, &len);
    *bound =
        ntohs(v6 ? ((struct sockaddr_in6 *)&ss)->sin6_port : ((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}

/* The acceptor's hand-over (http_accept.h): the PROXY header's address
 * waits for the connection's admission (http_conns.h). */
static bool hand_to_library(void *cls, int fd, const struct sockaddr *addr, socklen_t addrlen,
                            const char *source)
{
    leased_http_t *h = cls;
    bool expected = source[0] && leased_conns_expect(h->conns, fd, source);
    if (MHD_add_connection(h->daemon, fd, addr, addrlen) == MHD_YES)
        return true;
    if (expected)
        leased_conns_unexpect(h->conns, fd);
    return false;
}

/* Stops what leased_http_start started, in the reverse order. */
static void teardown(leased_http_t *h)
{
    if (h->daemon)
        leased_http_quiesce(h);
    leased_acceptor_stop(h->acceptor); /* hands nothing over any more */
    if (h->probes)
        MHD_stop_daemon(h->probes);
    if (h->daemon)
        MHD_stop_daemon(h->daemon); /* closes every connection */
    if (h->listen_fd >= 0)
        close(h->listen_fd);
    leased_conns_stop(h->conns);
    leased_conns_stop(h->probe_conns);
    leased_work_queue_free(h->workers);
    pthread_cond_destroy(&h->idle_cond);
    pthread_mutex_destroy(&h->idle_mutex);
    free(h);
}

leased_http_t *leased_http_start(leased_app_t *app, const leased_http_routes_t *routes, char *err,
                                 size_t errsz)
{
    const leased_config_t *cfg = app->config;
    leased_http_t *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, errsz, "out of memory");
        return NULL;
    }
    h->app = app;
    h->routes = routes;
    h->listen_fd = -1;
    h->main_listener = (listener_t){h, false, NULL};
    h->probe_listener = (listener_t){h, true, NULL};
    pthread_mutex_init(&h->idle_mutex, NULL);
    pthread_condattr_t attr; /* deadlines on the monotonic clock */
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&h->idle_cond, &attr);
    pthread_condattr_destroy(&attr);
    h->workers = leased_work_queue_new((size_t)cfg->http_threads, (size_t)cfg->max_queued_per_flow);
    leased_conns_config_t cc = {
        .max_connections = cfg->max_connections,
        /* a per-source cap above the global one is the global one */
        .max_per_source = cfg->max_connections_per_source < cfg->max_connections
                              ? cfg->max_connections_per_source
                              : cfg->max_connections,
        .receive_timeout_ms = cfg->receive_timeout_ms,
        .idle_timeout_ms = cfg->idle_timeout_ms,
        .trusted = &cfg->trusted,
        .gone = client_gone,
        .woken = wake_gone,
        .cls = h,
    };
    h->conns = leased_conns_start(&cc);
    h->main_listener.conns = h->conns;
    if (!h->workers || !h->conns) {
        snprintf(err, errsz, "cannot start %lld worker threads", (long long)cfg->http_threads);
        goto fail;
    }
    raise_fd_limit(cfg->max_connections + OVER_CAPACITY_ROOM);
    h->listen_fd = bind_listener(cfg->listen_host, cfg->listen_port, &h->port, err, errsz);
    if (h->listen_fd < 0)
        goto fail;
    /* The library's idle timeout (whole seconds) closes connections that
     * stop reading a reply; http_conns.c bounds receiving and idleness to
     * the millisecond. The pedantic checks stay off: they would refuse a
     * missing Host or a space in the target in HTML, which http_rules.c
     * refuses in the envelope. */
    unsigned idle_s = (unsigned)((cfg->idle_timeout_ms + 999) / 1000);
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
                     MHD_USE_ITC | MHD_USE_NO_LISTEN_SOCKET;
    /* the logger option comes first so that even option errors reach it */
    h->daemon = MHD_start_daemon(
        flags, (uint16_t)h->port, NULL, NULL, on_request, &h->main_listener,
        MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)(cfg->max_connections + OVER_CAPACITY_ROOM), MHD_OPTION_CONNECTION_TIMEOUT,
        idle_s > 0 ? idle_s : 1U, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY,
        MHD_OPTION_NOTIFY_CONNECTION, leased_conns_notify, h->conns, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, &h->main_listener, MHD_OPTION_URI_LOG_CALLBACK, on_request_line,
        &h->main_listener, MHD_OPTION_STRICT_FOR_CLIENT, 0, MHD_OPTION_SIGPIPE_HANDLED_BY_APP, 1,
        MHD_OPTION_END);
    if (!h->daemon) {
        snprintf(err, errsz, "cannot start the HTTP library");
        goto fail;
    }
    /* the acceptor hands sockets to the library (MHD_add_connection, which
     * MHD_USE_ITC makes safe from its thread), reading a trusted proxy's
     * header first without stalling the library's thread */
    leased_acceptor_config_t ac = {
        .listen_fd = h->listen_fd,
        .trusted = &cfg->trusted,
        .header_timeout_ms = cfg->receive_timeout_ms,
        .max_pending = (size_t)cfg->max_connections,
        .handover = hand_to_library,
        .cls = h,
    };
    h->acceptor = leased_acceptor_start(&ac);
    if (!h->acceptor) {
        snprintf(err, errsz, "cannot start the accepting thread");
        goto fail;
    }
    if (cfg->metrics_listen && cfg->metrics_listen[0] && !start_probes(h, err, errsz))
        goto fail;
    return h;
fail:
    teardown(h);
    return NULL;
}

int leased_http_port(const leased_http_t *h)
{
    return h->port;
}

void leased_http_quiesce(leased_http_t *h)
{
    /* The acceptor stops accepting. Its thread may still be in accept()
     * on the socket: it stops listening now (shutdown: new connections are
     * refused by the system) and is closed once that thread has ended. */
    if (!h->quiesced) {
        leased_acceptor_quiesce(h->acceptor);
        shutdown(h->listen_fd, SHUT_RDWR);
    }
    h->quiesced = true;
}

void leased_http_queue_stats(leased_http_t *h, leased_queue_stats_t *out)
{
    memset(out, 0, sizeof *out);
    if (!h)
        return;
    leased_work_queue_depth(h->workers, &out->queued, &out->flows);
    out->refused_full = __atomic_load_n(&h->queue_refused_full, __ATOMIC_RELAXED);
    out->refused_waited = __atomic_load_n(&h->queue_refused_waited, __ATOMIC_RELAXED);
}

void leased_http_conn_stats(const leased_http_t *h, leased_conn_stats_t *out)
{
    leased_conns_stats(h ? h->conns : NULL, out);
}

int64_t leased_http_active(const leased_http_t *h)
{
    return __atomic_load_n(&h->active, __ATOMIC_ACQUIRE);
}

/* Waits until *count (without the STOPPING bit) is 0, or until the
 * monotonic end_ns; count_down wakes it. */
static bool wait_for_zero(leased_http_t *h, const int64_t *count, int64_t end_ns)
{
    pthread_mutex_lock(&h->idle_mutex);
    __atomic_add_fetch(&h->idle_waits, 1, __ATOMIC_SEQ_CST);
    while ((__atomic_load_n(count, __ATOMIC_SEQ_CST) & ~STOPPING) > 0 &&
           lease_mono_now_ns() < end_ns) {
        struct timespec ts = {(time_t)(end_ns / 1000000000), (long)(end_ns % 1000000000)};
        pthread_cond_timedwait(&h->idle_cond, &h->idle_mutex, &ts);
    }
    __atomic_sub_fetch(&h->idle_waits, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&h->idle_mutex);
    return (__atomic_load_n(count, __ATOMIC_SEQ_CST) & ~STOPPING) == 0;
}

bool leased_http_wait_idle(leased_http_t *h, int64_t timeout_ms)
{
    return wait_for_zero(h, &h->active, lease_mono_now_ns() + timeout_ms * 1000000);
}

bool leased_http_stop(leased_http_t *h, int64_t wait_ms)
{
    if (!h)
        return true;
    __atomic_or_fetch(&h->suspended, STOPPING, __ATOMIC_SEQ_CST);
    /* requests that slipped in after the caller saw "idle" finish first */
    bool idle = wait_for_zero(h, &h->suspended,
                              lease_mono_now_ns() + (wait_ms > 0 ? wait_ms : 0) * 1000000);
    if (idle)
        teardown(h);
    return idle;
}
