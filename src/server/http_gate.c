/*
 * http_gate.c - the front door (see http_gate.h): accept, admit, frame,
 * relay, time out, and answer in the JSON envelope what the library would
 * not.
 *
 * One thread runs a level-triggered epoll loop over the listening socket,
 * every client socket and the gate's end of every socket pair. Nothing else
 * touches a connection, so connections need no locks; only quiesce and stop
 * talk to the thread (eventfd + a flag). Per connection:
 *
 *   client --in--> [request framer] --to_lib--> library
 *   client <--out-- [reply framer]  <---------- library
 *
 * Request phases: IDLE (between requests), HEAD and BODY (receiving; the
 * receive deadline runs), DISCARD (reading the body of a request refused
 * as too large, to answer on a connection that stays usable), WAIT (passed
 * on, until the library's reply has gone through). The gate answers by
 * itself only when no reply of the library is in progress on the
 * connection, so its bytes never interleave with the library's.
 */
#include "http_gate.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include "lease/clock.h"
#include "lease/log.h"
#include "http.h"
#include "http_frame.h"
#include "json_codec.h"
#include "trusted_proxies.h"

#define READ_CHUNK (16 * 1024)
#define IN_MAX (LEASED_HTTP_HEAD_MAX + READ_CHUNK) /* client bytes held */
#define TO_LIB_MAX (64 * 1024)                     /* framed bytes not yet taken */
#define OUT_MAX (256 * 1024)                       /* reply bytes not yet sent */
#define SCAN_EVERY_NS INT64_C(100000000)           /* deadline scan period */
#define SOURCE_BUCKETS 1024                        /* power of two */
#define ACCEPT_BURST 64
#define CRLF_SKIP_MAX 8 /* empty lines tolerated before a request line */
/* After the gate's last answer: how long, and how much, it keeps reading
 * (and dropping) what the client still sends, so that closing with unread
 * data (which resets the connection) does not destroy the answer before
 * the client has read it. */
#define LINGER_NS INT64_C(1000000000)
#define LINGER_BYTES (256 * 1024)

typedef enum req_phase {
    PH_IDLE = 0, /* between requests */
    PH_PROXY,    /* a trusted proxy's connection: its PROXY header, if any */
    PH_HEAD,     /* request head arriving */
    PH_BODY,     /* body arriving, passed on as it comes */
    PH_DISCARD,  /* body of a refused request, read and dropped */
    PH_WAIT,     /* passed on; the library's reply has not all gone out */
} req_phase_t;

typedef enum reply_phase {
    RP_HEAD = 0,    /* expecting (more of) a reply head */
    RP_BODY,        /* relaying rleft more body bytes */
    RP_UNTIL_CLOSE, /* a reply without length: it ends when the library closes */
    RP_SWALLOW,     /* a library-made reply was replaced: drop what follows */
} reply_phase_t;

typedef struct byte_buf {
    char *p;
    size_t len, cap;
} byte_buf_t;

typedef struct source {
    struct source *next;
    char key[64];
    int64_t open;
} source_t;

struct gate_conn;

/* What an epoll event points at. */
typedef struct endpoint {
    struct gate_conn *conn; /* NULL: the listening socket or the wake fd */
    bool client;
} endpoint_t;

typedef struct gate_conn {
    struct gate_conn *prev, *next;
    endpoint_t ep_client, ep_lib;
    int cfd, lfd; /* client socket; the gate's end of the pair (-1 once closed) */
    source_t *src;
    uint32_t mask_client, mask_lib; /* interest registered */
    bool lib_parked;                /* lfd taken out of epoll (hung up while full) */
    req_phase_t phase;
    bool first;               /* no request finished on it yet */
    int64_t recv_deadline_ns; /* PH_HEAD, PH_BODY, PH_DISCARD, and PH_IDLE before the first */
    int64_t idle_since_ns;    /* PH_IDLE */
    int64_t out_progress_ns;  /* last write to the client while out was pending */
    byte_buf_t in, to_lib, out;
    size_t scanned; /* bytes of `in` searched for the end of the head */
    size_t crlf_skipped;
    bool is_head, keep_alive; /* of the request in progress */
    bool body_chunked;
    uint64_t body_left;
    leased_http_chunked_t chunked;
    leased_http_reject_t discard_answer; /* PH_DISCARD: the answer after the body */
    bool lib_has_request;                /* the library has seen (part of) this request */
    reply_phase_t rphase;
    byte_buf_t rhead;
    uint64_t rleft;
    bool client_eof, lib_eof;
    bool lib_shut;  /* the client's end of stream was passed on to the library */
    bool closing;   /* send what is in `out`, then close */
    bool answered;  /* the gate answered (and closes): linger before closing */
    bool lingering; /* answered and shut down for writing: draining input */
    int64_t linger_deadline_ns;
    size_t lingered;
    bool dead; /* closed; freed at the end of the loop round */
} gate_conn_t;

struct leased_gate {
    leased_gate_config_t cfg;
    leased_gate_handoff_fn handoff;
    void *cls;
    int listen_fd, epfd, wake_fd, reserve_fd;
    int port;
    pthread_t thread;
    bool started;
    pthread_mutex_t mu; /* quiesce/stop requests and their acknowledgement */
    pthread_cond_t cond;
    bool want_quiesce, quiesced, want_stop;
    int64_t stop_deadline_ns;
    endpoint_t ep_listen, ep_wake;
    gate_conn_t *conns;
    gate_conn_t *graveyard; /* closed this round, linked by next */
    source_t *sources[SOURCE_BUCKETS];
    int64_t open; /* atomic reads from other threads */
    uint64_t refused_capacity, refused_source, receive_timeouts, framing_refused, library_replies,
        evicted_unproven; /* atomic */
    int64_t next_scan_ns;
};

/* ---- buffers ------------------------------------------------------------ */

static bool buf_append(byte_buf_t *b, const char *data, size_t n)
{
    if (n == 0)
        return true;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return false;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
    return true;
}

static void buf_consume(byte_buf_t *b, size_t n)
{
    if (n >= b->len) {
        b->len = 0;
        return;
    }
    memmove(b->p, b->p + n, b->len - n);
    b->len -= n;
}

static void buf_free(byte_buf_t *b)
{
    free(b->p);
    *b = (byte_buf_t){0};
}

static void count(uint64_t *c)
{
    __atomic_add_fetch(c, 1, __ATOMIC_RELAXED);
}

/* ---- sources ------------------------------------------------------------ */

void leased_gate_source_text(const struct sockaddr *addr, socklen_t len, char out[64])
{
    snprintf(out, 64, "unknown");
    if (!addr)
        return;
    if (addr->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)addr)->sin_addr, out, 64);
    } else if (addr->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)(const void *)addr)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a6))
            inet_ntop(AF_INET, &a6->s6_addr[12], out, 64);
        else
            inet_ntop(AF_INET6, a6, out, 64);
    }
}

static size_t source_hash(const char *key)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *key; key++) {
        h ^= (unsigned char)*key;
        h *= 1099511628211ULL;
    }
    return (size_t)(h & (SOURCE_BUCKETS - 1));
}

static source_t *source_find(leased_gate_t *g, const char *key, bool create)
{
    size_t b = source_hash(key);
    for (source_t *s = g->sources[b]; s; s = s->next)
        if (strcmp(s->key, key) == 0)
            return s;
    if (!create)
        return NULL;
    source_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    snprintf(s->key, sizeof s->key, "%s", key);
    s->next = g->sources[b];
    g->sources[b] = s;
    return s;
}

static void source_release(leased_gate_t *g, source_t *s)
{
    if (!s || --s->open > 0)
        return;
    source_t **pp = &g->sources[source_hash(s->key)];
    while (*pp && *pp != s)
        pp = &(*pp)->next;
    if (*pp)
        *pp = s->next;
    free(s);
}

/* ---- answers of the gate ------------------------------------------------ */

/* The whole HTTP reply of an error, heap (free()), *len its length. */
static char *error_reply(int status, lease_code_t code, const char *field, int64_t retry_after_ms,
                         bool close, size_t *len)
{
    char corr[32];
    leased_http_correlation_id(corr);
    char *body = leased_codec_error_envelope(code, corr, field, retry_after_ms, -1, NULL, NULL);
    if (!body)
        return NULL;
    char retry[48] = "";
    if ((status == 429 || status == 503) && retry_after_ms > 0)
        snprintf(retry, sizeof retry, "Retry-After: %lld\r\n",
                 (long long)((retry_after_ms + 999) / 1000));
    size_t blen = strlen(body);
    size_t cap = blen + 512;
    char *out = malloc(cap);
    if (out) {
        int n = snprintf(out, cap,
                         "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
                         "Content-Length: %zu\r\nX-Correlation-Id: %s\r\n"
                         "Cache-Control: no-store\r\n%s%s\r\n%s",
                         status, leased_http_reason(status), blen, corr, retry,
                         close ? "Connection: close\r\n" : "", body);
        *len = n > 0 ? (size_t)n : 0;
    }
    free(body);
    if (out && LEASE_LOG_ENABLED(LEASE_LOG_DEBUG)) {
        lease_log_fields_t f = {corr, NULL, "gate", lease_code_name(code), -1};
        lease_log_write(LEASE_LOG_DEBUG, &f, "connection answered %d (%s)", status,
                        field ? field : "");
    }
    return out;
}

/* Answers a connection that is not admitted, and closes it. */
static void refuse_socket(int fd, int status, lease_code_t code)
{
    size_t len = 0;
    char *reply = error_reply(status, code, NULL, 1000, true, &len);
    if (reply) {
        /* a fresh socket's send buffer is empty: this does not block */
        ssize_t w = send(fd, reply, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)w;
        free(reply);
    }
    shutdown(fd, SHUT_WR);
    /* what the client already sent would make close() reset the
     * connection, possibly before the answer is read: drop it first */
    char sink[4096];
    for (int i = 0; i < 16 && recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++)
        ;
    close(fd);
}

/* ---- connections -------------------------------------------------------- */

static void set_interest(leased_gate_t *g, gate_conn_t *c)
{
    uint32_t want_client = 0, want_lib = 0;
    if (c->cfd >= 0) {
        if (c->lingering ||
            (!c->closing && !c->client_eof && c->in.len < IN_MAX && c->to_lib.len < TO_LIB_MAX))
            want_client |= EPOLLIN;
        if (c->out.len > 0)
            want_client |= EPOLLOUT;
        if (want_client != c->mask_client) {
            struct epoll_event ev = {.events = want_client, .data.ptr = &c->ep_client};
            epoll_ctl(g->epfd, EPOLL_CTL_MOD, c->cfd, &ev);
            c->mask_client = want_client;
        }
    }
    if (c->lfd >= 0) {
        if (!c->lib_eof && c->out.len < OUT_MAX)
            want_lib |= EPOLLIN;
        if (c->to_lib.len > 0)
            want_lib |= EPOLLOUT;
        if (c->lib_parked && want_lib) {
            struct epoll_event ev = {.events = want_lib, .data.ptr = &c->ep_lib};
            if (epoll_ctl(g->epfd, EPOLL_CTL_ADD, c->lfd, &ev) == 0) {
                c->lib_parked = false;
                c->mask_lib = want_lib;
            }
        } else if (!c->lib_parked && want_lib != c->mask_lib) {
            struct epoll_event ev = {.events = want_lib, .data.ptr = &c->ep_lib};
            epoll_ctl(g->epfd, EPOLL_CTL_MOD, c->lfd, &ev);
            c->mask_lib = want_lib;
        }
    }
}

/* The library's end is no longer wanted (its request was refused or the
 * connection ends): closing it makes the library drop its side. */
static void close_lib(leased_gate_t *g, gate_conn_t *c)
{
    if (c->lfd < 0)
        return;
    if (!c->lib_parked)
        epoll_ctl(g->epfd, EPOLL_CTL_DEL, c->lfd, NULL);
    close(c->lfd);
    c->lfd = -1;
    c->lib_eof = true;
    c->to_lib.len = 0;
}

/* Closes both ends and unlinks c; its memory is freed at the end of the
 * loop round (later events of the same round may still point at it). */
static void conn_close(leased_gate_t *g, gate_conn_t *c)
{
    if (c->dead)
        return;
    close_lib(g, c);
    if (c->cfd >= 0) {
        epoll_ctl(g->epfd, EPOLL_CTL_DEL, c->cfd, NULL);
        close(c->cfd);
        c->cfd = -1;
    }
    if (c->prev)
        c->prev->next = c->next;
    else
        g->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    source_release(g, c->src);
    c->src = NULL;
    __atomic_sub_fetch(&g->open, 1, __ATOMIC_RELAXED);
    c->dead = true;
    c->prev = NULL;
    c->next = g->graveyard;
    g->graveyard = c;
}

static void bury(leased_gate_t *g)
{
    while (g->graveyard) {
        gate_conn_t *c = g->graveyard;
        g->graveyard = c->next;
        buf_free(&c->in);
        buf_free(&c->to_lib);
        buf_free(&c->out);
        buf_free(&c->rhead);
        free(c);
    }
}

/* Queues reply bytes for the client; the slow-reader clock starts when
 * `out` stops being empty. */
static bool out_append(gate_conn_t *c, const char *data, size_t n)
{
    if (c->out.len == 0)
        c->out_progress_ns = lease_mono_now_ns();
    return buf_append(&c->out, data, n);
}

/* Sends what fd takes now of b without blocking; *sent tells whether any
 * byte went. False when the peer is gone. */
static bool send_some(int fd, byte_buf_t *b, bool *sent)
{
    while (b->len > 0) {
        ssize_t n = send(fd, b->p, b->len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            buf_consume(b, (size_t)n);
            *sent = true;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
    return true;
}

/* Whether a non-blocking recv's answer n says the peer is gone (end of
 * stream or an error that trying again will not cure). */
static bool recv_gone(ssize_t n)
{
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* Sends what it can of `out`; false when the client is gone. */
static bool flush_out(gate_conn_t *c)
{
    bool sent = false;
    bool ok = send_some(c->cfd, &c->out, &sent);
    if (sent)
        c->out_progress_ns = lease_mono_now_ns();
    return ok;
}

/* Writes what it can of `to_lib`; false when the library's end is gone. */
static bool flush_to_lib(gate_conn_t *c)
{
    bool sent = false;
    return c->lfd < 0 || send_some(c->lfd, &c->to_lib, &sent);
}

/* Whether the gate may answer on c now: no library reply is in progress. */
static bool may_answer(const gate_conn_t *c)
{
    return c->rphase == RP_HEAD && c->rhead.len == 0;
}

/*
 * The gate answers the request in progress. With close (every refusal but
 * a body read and dropped), nothing more is read, the library's side is
 * dropped and the connection closes once the answer is out.
 */
static void answer(leased_gate_t *g, gate_conn_t *c, const leased_http_reject_t *rej, bool close)
{
    if (c->closing) {
        /* already ending after what `out` holds: nothing more is said */
        close_lib(g, c);
        return;
    }
    if (!may_answer(c)) {
        /* a library reply is half out: nothing can be said; just close */
        c->closing = true;
        c->client_eof = true;
        close_lib(g, c);
        return;
    }
    size_t len = 0;
    int64_t retry = rej->status == 429 || rej->status == 503 ? 1000 : 0;
    char *reply = error_reply(rej->status, rej->code, rej->field, retry, close, &len);
    if (!reply || !out_append(c, reply, len))
        close = true;
    free(reply);
    if (close) {
        c->closing = true;
        c->client_eof = true; /* read nothing more */
        c->answered = true;
        close_lib(g, c);
        return;
    }
    c->phase = PH_IDLE;
    c->idle_since_ns = lease_mono_now_ns();
    c->first = false;
}

/* A request refused by the framing rules. */
static void refuse_request(leased_gate_t *g, gate_conn_t *c, const leased_http_reject_t *rej)
{
    count(&g->framing_refused);
    answer(g, c, rej, true);
}

/* The request is whole and passed on; the reply is awaited. */
static void request_passed(gate_conn_t *c)
{
    c->phase = PH_WAIT;
}

static void read_proxy_header(leased_gate_t *g, gate_conn_t *c);

/* Frames what arrived from the client, as far as the current phase allows. */
static void process_in(leased_gate_t *g, gate_conn_t *c)
{
    while (!c->closing) {
        switch (c->phase) {
        case PH_IDLE: {
            /* a few empty lines before a request line are tolerated */
            while (c->in.len >= 2 && c->in.p[0] == '\r' && c->in.p[1] == '\n' &&
                   c->crlf_skipped < CRLF_SKIP_MAX) {
                buf_consume(&c->in, 2);
                c->crlf_skipped += 2;
            }
            if (c->in.len == 0 || (c->in.len == 1 && c->in.p[0] == '\r'))
                return;
            c->crlf_skipped = 0;
            if (!c->first)
                c->recv_deadline_ns = lease_time_add_sat(
                    lease_mono_now_ns(), lease_ms_to_ns_sat(g->cfg.receive_timeout_ms));
            c->phase = PH_HEAD;
            c->scanned = 0;
            break;
        }
        case PH_HEAD: {
            /* resume the search where it stopped (a trickle of bytes must
             * not make each read rescan the whole head) */
            size_t from = c->scanned > 3 ? c->scanned - 3 : 0;
            size_t hl = leased_http_head_length(c->in.p + from, c->in.len - from);
            if (hl == 0) {
                c->scanned = c->in.len;
                if (c->in.len > LEASED_HTTP_HEAD_MAX) {
                    leased_http_reject_t rej = {400, LEASE_INVALID_LEASE_REQUEST, "headers",
                                                "request head larger than 16 KiB"};
                    refuse_request(g, c, &rej);
                }
                return;
            }
            hl += from;
            leased_http_head_t h;
            leased_http_reject_t rej;
            if (!leased_http_parse_head(c->in.p, hl, &h, &rej)) {
                refuse_request(g, c, &rej);
                return;
            }
            c->is_head = h.is_head;
            c->keep_alive = h.keep_alive;
            c->body_chunked = h.chunked;
            c->body_left = h.has_length ? h.content_length : 0;
            memset(&c->chunked, 0, sizeof c->chunked);
            if (h.has_length && h.content_length > g->cfg.body_max) {
                leased_http_reject_t big = {400, LEASE_INVALID_LEASE_REQUEST, "body",
                                            "body larger than 64 KiB"};
                if (h.expect_continue || h.content_length > g->cfg.discard_max) {
                    /* not worth reading (or the client waits for 100
                     * Continue): answer now and close */
                    count(&g->framing_refused);
                    answer(g, c, &big, true);
                    return;
                }
                /* read and drop it, then answer on a connection that
                 * stays usable */
                c->discard_answer = big;
                buf_consume(&c->in, hl);
                c->phase = PH_DISCARD;
                break;
            }
            char *fwd = malloc(hl);
            if (!fwd) {
                leased_http_reject_t oom = {503, LEASE_BACKEND_UNAVAILABLE, NULL, "out of memory"};
                answer(g, c, &oom, true);
                return;
            }
            size_t fl = leased_http_forward_head(c->in.p, hl, &h, fwd);
            bool ok = buf_append(&c->to_lib, fwd, fl);
            free(fwd);
            if (!ok) {
                leased_http_reject_t oom = {503, LEASE_BACKEND_UNAVAILABLE, NULL, "out of memory"};
                answer(g, c, &oom, true);
                return;
            }
            buf_consume(&c->in, hl);
            c->lib_has_request = true;
            if (!h.chunked && c->body_left == 0) {
                request_passed(c);
                return;
            }
            c->phase = PH_BODY;
            break;
        }
        case PH_BODY: {
            if (c->in.len == 0 || c->to_lib.len >= TO_LIB_MAX)
                return;
            size_t take;
            bool done;
            if (c->body_chunked) {
                leased_http_reject_t rej;
                leased_http_chunked_status_t st = leased_http_chunked_feed(
                    &c->chunked, c->in.p, c->in.len, g->cfg.body_max, &take, &rej);
                if (st == LEASED_CHUNKED_BAD) {
                    refuse_request(g, c, &rej);
                    return;
                }
                done = st == LEASED_CHUNKED_DONE;
            } else {
                take = c->in.len < c->body_left ? c->in.len : (size_t)c->body_left;
                c->body_left -= take;
                done = c->body_left == 0;
            }
            if (!buf_append(&c->to_lib, c->in.p, take)) {
                leased_http_reject_t oom = {503, LEASE_BACKEND_UNAVAILABLE, NULL, "out of memory"};
                answer(g, c, &oom, true);
                return;
            }
            buf_consume(&c->in, take);
            if (done) {
                request_passed(c);
                return;
            }
            break;
        }
        case PH_DISCARD: {
            if (c->in.len == 0)
                return;
            size_t take = c->in.len < c->body_left ? c->in.len : (size_t)c->body_left;
            buf_consume(&c->in, take);
            c->body_left -= take;
            if (c->body_left > 0)
                return;
            count(&g->framing_refused);
            answer(g, c, &c->discard_answer, !c->keep_alive);
            break; /* a pipelined request may follow */
        }
        case PH_PROXY:
            read_proxy_header(g, c);
            if (c->phase == PH_PROXY)
                return;
            break;
        case PH_WAIT:
            return;
        }
    }
}

/* The library's reply to the request in progress has gone through. */
static void reply_done(leased_gate_t *g, gate_conn_t *c, bool library_closes)
{
    c->rphase = RP_HEAD;
    c->rhead.len = 0;
    if (c->phase != PH_WAIT)
        return; /* an early reply (before the whole body): the library closes */
    c->lib_has_request = false;
    c->first = false;
    c->phase = PH_IDLE; /* nothing is awaited any more */
    c->idle_since_ns = lease_mono_now_ns();
    if (library_closes || c->client_eof || !c->keep_alive) {
        c->closing = true;
        return;
    }
    process_in(g, c); /* a pipelined request */
}

/* A reply head the library made itself (no correlation id): replaced by
 * the envelope of its status. */
static void replace_library_reply(leased_gate_t *g, gate_conn_t *c, int status)
{
    count(&g->library_replies);
    leased_http_reject_t rej = {400, LEASE_INVALID_LEASE_REQUEST, "request", "library error reply"};
    if (status >= 500)
        rej = (leased_http_reject_t){503, LEASE_BACKEND_UNAVAILABLE, NULL, "library error reply"};
    else if (status == 413)
        rej.field = "body";
    else if (status == 414 || status == 431)
        rej.field = "headers";
    c->rhead.len = 0;
    c->rphase = RP_HEAD;
    answer(g, c, &rej, true);
    c->rphase = RP_SWALLOW;
}

/* Out of memory in the middle of a reply: nothing sensible can be sent;
 * the connection ends (the client resolves by request id). */
static void lost(leased_gate_t *g, gate_conn_t *c)
{
    c->closing = true;
    c->client_eof = true;
    c->out.len = 0;
    close_lib(g, c);
}

/* Relays n bytes the library wrote, reply by reply. */
static void process_lib(leased_gate_t *g, gate_conn_t *c, const char *data, size_t n)
{
    while (n > 0 && !(c->closing && c->rphase == RP_SWALLOW)) {
        switch (c->rphase) {
        case RP_HEAD: {
            size_t before = c->rhead.len;
            size_t room = LEASED_HTTP_RESPONSE_HEAD_MAX - before;
            size_t take = n < room ? n : room;
            if (!buf_append(&c->rhead, data, take)) {
                lost(g, c);
                return;
            }
            size_t hl = leased_http_head_length(c->rhead.p, c->rhead.len);
            if (hl == 0) {
                if (c->rhead.len >= LEASED_HTTP_RESPONSE_HEAD_MAX)
                    replace_library_reply(g, c, 500);
                return; /* all of data is in rhead */
            }
            /* bytes of data past the head are handled in the next round */
            size_t used = hl - before;
            data += used;
            n -= used;
            leased_http_reply_head_t rh;
            if (!leased_http_parse_reply_head(c->rhead.p, hl, &rh)) {
                replace_library_reply(g, c, 500);
                return;
            }
            /* interim replies (100 Continue) are the library's own by
             * design; any other without our correlation id is an error it
             * made itself */
            bool interim = rh.status >= 100 && rh.status < 200;
            if (!rh.ours && !interim) {
                replace_library_reply(g, c, rh.status);
                return;
            }
            if (!out_append(c, c->rhead.p, hl)) {
                lost(g, c);
                return;
            }
            c->rhead.len = 0;
            if (interim)
                break; /* the reply proper follows */
            if (c->is_head || rh.status == 204 || rh.status == 304 ||
                (rh.has_length && rh.content_length == 0)) {
                reply_done(g, c, rh.close);
                break;
            }
            if (rh.has_length && !rh.chunked) {
                c->rphase = RP_BODY;
                c->rleft = rh.content_length;
                if (rh.close)
                    c->keep_alive = false;
            } else {
                c->rphase = RP_UNTIL_CLOSE;
            }
            break;
        }
        case RP_BODY: {
            size_t take = n < c->rleft ? n : (size_t)c->rleft;
            if (!out_append(c, data, take)) {
                lost(g, c);
                return;
            }
            data += take;
            n -= take;
            c->rleft -= take;
            if (c->rleft == 0)
                reply_done(g, c, false);
            break;
        }
        case RP_UNTIL_CLOSE:
            if (!out_append(c, data, n)) {
                lost(g, c);
                return;
            }
            n = 0;
            break;
        case RP_SWALLOW:
            n = 0;
            break;
        }
    }
}

/* The library closed its end. */
static void lib_closed(leased_gate_t *g, gate_conn_t *c)
{
    bool waiting = c->phase == PH_WAIT && may_answer(c);
    if (c->rphase == RP_UNTIL_CLOSE)
        c->rphase = RP_HEAD;
    close_lib(g, c);
    if (waiting) {
        /* passed on and never answered (the library failed or stopped) */
        leased_http_reject_t rej = {503, LEASE_BACKEND_UNAVAILABLE, NULL, "no reply"};
        answer(g, c, &rej, true);
        return;
    }
    c->closing = true;
    c->client_eof = true;
}

/* After any event: move bytes on as far as they go, then close or update
 * the interest set. */
static void pump(leased_gate_t *g, gate_conn_t *c)
{
    if (c->dead)
        return;
    if (c->lfd >= 0) {
        size_t before = c->to_lib.len;
        if (!flush_to_lib(c))
            lib_closed(g, c);
        else if (c->to_lib.len < before && (c->phase == PH_BODY || c->phase == PH_HEAD))
            process_in(g, c); /* room again for framed bytes */
        if (c->lfd >= 0 && !flush_to_lib(c))
            lib_closed(g, c);
    }
    if (c->cfd >= 0 && !flush_out(c)) {
        conn_close(g, c);
        return;
    }
    /* the client went away while its request waits: the library's end
     * hears it too, so a waiting request is released (http_hangup.h) */
    if (c->client_eof && !c->lib_shut && c->phase == PH_WAIT && c->lfd >= 0 && c->to_lib.len == 0) {
        shutdown(c->lfd, SHUT_WR);
        c->lib_shut = true;
    }
    if (c->closing && c->out.len == 0) {
        if (c->lingering || c->cfd < 0 || !c->answered) {
            conn_close(g, c);
            return;
        }
        /* the gate's own answer is out: half-close and drain a little */
        shutdown(c->cfd, SHUT_WR);
        close_lib(g, c);
        c->lingering = true;
        c->linger_deadline_ns = lease_mono_now_ns() + LINGER_NS;
    }
    set_interest(g, c);
}

static void on_client(leased_gate_t *g, gate_conn_t *c, uint32_t events)
{
    if (events & EPOLLERR) {
        conn_close(g, c);
        return;
    }
    if (c->lingering) {
        char buf[READ_CHUNK];
        ssize_t n = recv(c->cfd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0)
            c->lingered += (size_t)n;
        if (recv_gone(n) || c->lingered > LINGER_BYTES || (events & (EPOLLHUP | EPOLLERR)))
            conn_close(g, c);
        return;
    }
    if ((events & EPOLLIN) && (c->mask_client & EPOLLIN)) {
        char buf[READ_CHUNK];
        size_t room = IN_MAX - c->in.len;
        ssize_t n = recv(c->cfd, buf, room < sizeof buf ? room : sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
            if (!buf_append(&c->in, buf, (size_t)n)) {
                conn_close(g, c);
                return;
            }
            process_in(g, c);
        } else if (recv_gone(n)) {
            c->client_eof = true;
            if (c->phase != PH_WAIT) {
                /* nothing asked, or asked incompletely: nothing to answer */
                conn_close(g, c);
                return;
            }
        }
    } else if ((events & EPOLLHUP) && !(events & EPOLLOUT)) {
        conn_close(g, c);
        return;
    }
    pump(g, c);
}

static void on_lib(leased_gate_t *g, gate_conn_t *c, uint32_t events)
{
    if (c->lfd < 0)
        return;
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        if (!(c->mask_lib & EPOLLIN)) {
            /* hung up while `out` is full: park it until the client reads */
            epoll_ctl(g->epfd, EPOLL_CTL_DEL, c->lfd, NULL);
            c->lib_parked = true;
            c->mask_lib = 0;
            pump(g, c);
            return;
        }
        char buf[READ_CHUNK];
        ssize_t n = recv(c->lfd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0)
            process_lib(g, c, buf, (size_t)n);
        else if (recv_gone(n))
            lib_closed(g, c);
    }
    pump(g, c);
}

/* Deadlines: requests that do not arrive, idle connections, clients that
 * do not read. */
static void scan_deadlines(leased_gate_t *g, int64_t now)
{
    int64_t idle_ns = lease_ms_to_ns_sat(g->cfg.idle_timeout_ms);
    gate_conn_t *next;
    for (gate_conn_t *c = g->conns; c; c = next) {
        next = c->next;
        if (c->lingering) {
            if (now >= c->linger_deadline_ns)
                conn_close(g, c);
            continue;
        }
        if (c->out.len > 0 && now - c->out_progress_ns >= idle_ns) {
            conn_close(g, c); /* the client stopped reading */
            continue;
        }
        bool receiving = c->phase == PH_HEAD || c->phase == PH_BODY || c->phase == PH_DISCARD ||
                         c->phase == PH_PROXY || (c->phase == PH_IDLE && c->first);
        if (receiving && !c->closing && now >= c->recv_deadline_ns) {
            count(&g->receive_timeouts);
            leased_http_reject_t rej = {408, LEASE_DEADLINE_EXCEEDED, NULL,
                                        "request not received in time"};
            answer(g, c, &rej, true);
            pump(g, c);
        } else if (c->phase == PH_IDLE && !c->first && c->out.len == 0 && may_answer(c) &&
                   now - c->idle_since_ns >= idle_ns) {
            conn_close(g, c);
        }
    }
}

/* Whether c has never brought a whole request head: it holds a slot and
 * has not shown it will use it. */
static bool unproven(const gate_conn_t *c)
{
    return c->first && (c->phase == PH_IDLE || c->phase == PH_HEAD || c->phase == PH_PROXY) &&
           !c->lib_has_request && !c->closing && !c->lingering && c->out.len == 0;
}

/* All slots are taken: the oldest connection that has not sent a whole
 * request head yet gives its slot up (closed without an answer, as an idle
 * connection may be), so idle or trickling connections cannot keep working
 * clients out. False when every connection has a request. */
static bool evict_unproven(leased_gate_t *g)
{
    gate_conn_t *victim = NULL;
    for (gate_conn_t *c = g->conns; c; c = c->next)
        if (unproven(c) && (!victim || c->recv_deadline_ns < victim->recv_deadline_ns))
            victim = c;
    if (!victim)
        return false;
    count(&g->evicted_unproven);
    conn_close(g, victim);
    return true;
}

/* A source's count of connections, one more; false (nothing taken) when
 * it holds its share already. */
static source_t *source_take(leased_gate_t *g, const char *key, bool bounded, bool *over)
{
    *over = false;
    source_t *src = source_find(g, key, true);
    if (src && bounded && src->open >= g->cfg.max_per_source) {
        *over = true;
        if (src->open == 0)
            source_release(g, src);
        return NULL;
    }
    if (src)
        src->open++;
    return src;
}

/* Gives c to the library under the client's address: a socket pair, the
 * library's end handed over, the gate's end watched. False when that
 * fails (nothing of it is left open). */
static bool hand_over(leased_gate_t *g, gate_conn_t *c, const struct sockaddr *addr,
                      socklen_t addrlen)
{
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) != 0)
        return false;
    /* the library takes its end (and closes it itself on failure) */
    if (!g->handoff(g->cls, pair[1], addr, addrlen)) {
        close(pair[0]);
        return false;
    }
    c->lfd = pair[0];
    c->lib_eof = false;
    c->mask_lib = EPOLLIN;
    struct epoll_event el = {.events = EPOLLIN, .data.ptr = &c->ep_lib};
    if (epoll_ctl(g->epfd, EPOLL_CTL_ADD, c->lfd, &el) != 0) {
        close(c->lfd);
        c->lfd = -1;
        return false;
    }
    return true;
}

/* One accepted socket: admitted and handed over (a trusted proxy's once
 * its PROXY header, if any, is read), or answered and closed. */
static void admit(leased_gate_t *g, int fd, const struct sockaddr *addr, socklen_t addrlen)
{
    char key[64];
    leased_gate_source_text(addr, addrlen, key);
    if (g->open >= g->cfg.max_connections && !evict_unproven(g)) {
        count(&g->refused_capacity);
        refuse_socket(fd, 503, LEASE_BACKEND_UNAVAILABLE);
        return;
    }
    /* a trusted proxy brings many clients: each is counted once its PROXY
     * header names it; the proxy itself only under the global bound */
    bool proxy = leased_trusted_proxies_has(g->cfg.trusted, key);
    bool over;
    source_t *src = source_take(g, key, !proxy, &over);
    if (!src) {
        if (over)
            count(&g->refused_source);
        refuse_socket(fd, over ? 429 : 503, over ? LEASE_RATE_LIMITED : LEASE_BACKEND_UNAVAILABLE);
        return;
    }
    gate_conn_t *c = calloc(1, sizeof *c);
    if (!c) {
        source_release(g, src);
        refuse_socket(fd, 503, LEASE_BACKEND_UNAVAILABLE);
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int64_t now = lease_mono_now_ns();
    c->cfd = fd;
    c->lfd = -1;
    c->lib_eof = true;
    c->src = src;
    c->first = true;
    c->recv_deadline_ns = lease_time_add_sat(now, lease_ms_to_ns_sat(g->cfg.receive_timeout_ms));
    c->ep_client = (endpoint_t){c, true};
    c->ep_lib = (endpoint_t){c, false};
    c->mask_client = EPOLLIN;
    c->next = g->conns;
    if (g->conns)
        g->conns->prev = c;
    g->conns = c;
    __atomic_add_fetch(&g->open, 1, __ATOMIC_RELAXED);
    struct epoll_event ec = {.events = EPOLLIN, .data.ptr = &c->ep_client};
    bool ok = epoll_ctl(g->epfd, EPOLL_CTL_ADD, fd, &ec) == 0;
    if (ok && proxy)
        c->phase = PH_PROXY; /* handed over once the client's address is known */
    else if (ok)
        ok = hand_over(g, c, addr, addrlen);
    if (!ok) {
        epoll_ctl(g->epfd, EPOLL_CTL_DEL, fd, NULL);
        c->cfd = -1;
        conn_close(g, c);
        refuse_socket(fd, 503, LEASE_BACKEND_UNAVAILABLE);
    }
}

/* PH_PROXY: a trusted proxy's connection starts with a PROXY protocol v2
 * header or with the request itself. Either way the connection then goes
 * to the library, under the address the header names (re-counted against
 * that address's share) or the proxy's own. */
static void read_proxy_header(leased_gate_t *g, gate_conn_t *c)
{
    struct sockaddr_storage ss;
    socklen_t len = 0;
    long hl = leased_proxy_v2_parse((const uint8_t *)c->in.p, c->in.len, &ss, &len);
    if (hl == 0)
        return; /* more to come (within the receive deadline) */
    if (hl > 0)
        buf_consume(&c->in, (size_t)hl);
    struct sockaddr_storage peer;
    socklen_t plen = sizeof peer;
    if (len == 0 && getpeername(c->cfd, (struct sockaddr *)&peer, &plen) == 0) {
        ss = peer;
        len = plen;
    }
    char key[64];
    leased_gate_source_text((struct sockaddr *)&ss, len, key);
    if (strcmp(key, c->src->key) != 0) {
        bool over;
        source_t *src = source_take(g, key, true, &over);
        if (!src) {
            if (over)
                count(&g->refused_source);
            leased_http_reject_t rej = {over ? 429 : 503,
                                        over ? LEASE_RATE_LIMITED : LEASE_BACKEND_UNAVAILABLE, NULL,
                                        "connections per source"};
            answer(g, c, &rej, true);
            return;
        }
        source_release(g, c->src);
        c->src = src;
    }
    c->phase = PH_IDLE;
    if (!hand_over(g, c, (struct sockaddr *)&ss, len)) {
        leased_http_reject_t rej = {503, LEASE_BACKEND_UNAVAILABLE, NULL, "hand-over failed"};
        answer(g, c, &rej, true);
    }
}

static void accept_some(leased_gate_t *g)
{
    for (int i = 0; i < ACCEPT_BURST && g->listen_fd >= 0; i++) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        int fd = accept4(g->listen_fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            admit(g, fd, (struct sockaddr *)&ss, len);
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        if ((errno == EMFILE || errno == ENFILE) && g->reserve_fd >= 0) {
            /* out of descriptors: use the reserve to answer one and close
             * it, instead of leaving the backlog spinning */
            close(g->reserve_fd);
            g->reserve_fd = -1;
            fd = accept4(g->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd >= 0) {
                count(&g->refused_capacity);
                refuse_socket(fd, 503, LEASE_BACKEND_UNAVAILABLE);
            }
            g->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
            continue;
        }
        return; /* EAGAIN, or an error the next round retries */
    }
}

static void close_listener(leased_gate_t *g)
{
    if (g->listen_fd < 0)
        return;
    epoll_ctl(g->epfd, EPOLL_CTL_DEL, g->listen_fd, NULL);
    close(g->listen_fd);
    g->listen_fd = -1;
}

static void *gate_main(void *arg)
{
    leased_gate_t *g = arg;
    struct epoll_event events[128];
    bool stopping = false;
    for (;;) {
        int n = epoll_wait(g->epfd, events, 128, 100);
        for (int i = 0; i < n; i++) {
            endpoint_t *ep = events[i].data.ptr;
            if (ep == &g->ep_listen) {
                accept_some(g);
            } else if (ep == &g->ep_wake) {
                uint64_t v;
                ssize_t r = read(g->wake_fd, &v, sizeof v);
                (void)r;
            } else if (ep->conn->dead) {
                continue; /* closed earlier in this round */
            } else if (ep->client) {
                on_client(g, ep->conn, events[i].events);
            } else {
                on_lib(g, ep->conn, events[i].events);
            }
        }
        pthread_mutex_lock(&g->mu);
        if (g->want_quiesce && !g->quiesced) {
            close_listener(g);
            g->quiesced = true;
            pthread_cond_broadcast(&g->cond);
        }
        if (g->want_stop && !stopping) {
            stopping = true;
            close_listener(g);
        }
        int64_t stop_deadline = g->stop_deadline_ns;
        pthread_mutex_unlock(&g->mu);
        int64_t now = lease_mono_now_ns();
        if (now >= g->next_scan_ns) {
            scan_deadlines(g, now);
            g->next_scan_ns = now + SCAN_EVERY_NS;
        }
        bury(g);
        if (stopping && (!g->conns || now >= stop_deadline))
            break;
    }
    while (g->conns)
        conn_close(g, g->conns);
    bury(g);
    return NULL;
}

/* Room for three descriptors per connection (client, pair ends) and the
 * rest of the process. */
static void raise_fd_limit(int64_t max_connections)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    rlim_t want = (rlim_t)(max_connections * 3 + 256);
    if (rl.rlim_cur >= want)
        return;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want ? want : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < want)
        LOG_WARN("open file limit %llu is below the %llu that %lld connections need; "
                 "connections past it are answered 503",
                 (unsigned long long)rl.rlim_cur, (unsigned long long)want,
                 (long long)max_connections);
}

static int bind_listener(const leased_gate_config_t *cfg, int *port, char *err, size_t errsz)
{
    struct sockaddr_storage ss;
    socklen_t len;
    memset(&ss, 0, sizeof ss);
    int family;
    if (strchr(cfg->host, ':')) {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)cfg->port);
        if (inet_pton(AF_INET6, cfg->host, &a6->sin6_addr) != 1)
            goto bad_address;
        family = AF_INET6;
        len = sizeof *a6;
    } else {
        struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)cfg->port);
        if (inet_pton(AF_INET, cfg->host, &a4->sin_addr) != 1)
            goto bad_address;
        family = AF_INET;
        len = sizeof *a4;
    }
    int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errsz, "cannot create a socket: %s", strerror(errno));
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, SOMAXCONN) != 0) {
        /* name the address, the system's reason and the setting that
         * changes it: "Failed to bind to port 0" sent people looking */
        char why[128];
        snprintf(err, errsz,
                 "cannot listen on %s%s%s:%d: %s; set LEASE_LISTEN=HOST:PORT (or --listen "
                 "HOST:PORT) to another address",
                 family == AF_INET6 ? "[" : "", cfg->host, family == AF_INET6 ? "]" : "", cfg->port,
                 strerror_r(errno, why, sizeof why));
        close(fd);
        return -1;
    }
    socklen_t got = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &got);
    *port = ntohs(family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                     : ((struct sockaddr_in *)&ss)->sin_port);
    return fd;
bad_address:
    snprintf(err, errsz, "listen address %s is not numeric", cfg->host);
    return -1;
}

/* Releases what leased_gate_start made, as far as it got (the thread, if
 * any, has ended). */
static void gate_free(leased_gate_t *g)
{
    close_listener(g);
    for (size_t i = 0; i < SOURCE_BUCKETS; i++) {
        while (g->sources[i]) {
            source_t *s = g->sources[i];
            g->sources[i] = s->next;
            free(s);
        }
    }
    if (g->epfd >= 0)
        close(g->epfd);
    if (g->wake_fd >= 0)
        close(g->wake_fd);
    if (g->reserve_fd >= 0)
        close(g->reserve_fd);
    pthread_cond_destroy(&g->cond);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

leased_gate_t *leased_gate_start(const leased_gate_config_t *cfg, leased_gate_handoff_fn handoff,
                                 void *cls, char *err, size_t errsz)
{
    leased_gate_t *g = calloc(1, sizeof *g);
    if (!g) {
        snprintf(err, errsz, "out of memory");
        return NULL;
    }
    g->cfg = *cfg;
    g->handoff = handoff;
    g->cls = cls;
    g->listen_fd = g->epfd = g->wake_fd = g->reserve_fd = -1;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cond, NULL);
    raise_fd_limit(cfg->max_connections);
    g->listen_fd = bind_listener(cfg, &g->port, err, errsz);
    if (g->listen_fd < 0)
        goto fail;
    g->epfd = epoll_create1(EPOLL_CLOEXEC);
    g->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    g->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (g->epfd < 0 || g->wake_fd < 0) {
        snprintf(err, errsz, "cannot create the event loop: %s", strerror(errno));
        goto fail;
    }
    g->ep_listen = (endpoint_t){NULL, false};
    g->ep_wake = (endpoint_t){NULL, false};
    struct epoll_event el = {.events = EPOLLIN, .data.ptr = &g->ep_listen};
    struct epoll_event ew = {.events = EPOLLIN, .data.ptr = &g->ep_wake};
    if (epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->listen_fd, &el) != 0 ||
        epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->wake_fd, &ew) != 0) {
        snprintf(err, errsz, "cannot watch the listening socket: %s", strerror(errno));
        goto fail;
    }
    if (pthread_create(&g->thread, NULL, gate_main, g) != 0) {
        snprintf(err, errsz, "cannot start the connection thread");
        goto fail;
    }
    g->started = true;
    return g;
fail:
    gate_free(g);
    return NULL;
}

int leased_gate_port(const leased_gate_t *g)
{
    return g->port;
}

static void wake(leased_gate_t *g)
{
    uint64_t one = 1;
    ssize_t w = write(g->wake_fd, &one, sizeof one);
    (void)w;
}

void leased_gate_quiesce(leased_gate_t *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->mu);
    g->want_quiesce = true;
    wake(g);
    while (!g->quiesced)
        pthread_cond_wait(&g->cond, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

void leased_gate_stop(leased_gate_t *g, int64_t wait_ms)
{
    if (!g)
        return;
    if (g->started) {
        pthread_mutex_lock(&g->mu);
        g->want_stop = true;
        g->stop_deadline_ns =
            lease_time_add_sat(lease_mono_now_ns(), lease_ms_to_ns_sat(wait_ms > 0 ? wait_ms : 0));
        wake(g);
        pthread_mutex_unlock(&g->mu);
        pthread_join(g->thread, NULL);
    }
    gate_free(g);
}

void leased_gate_stats(const leased_gate_t *g, leased_gate_stats_t *out)
{
    memset(out, 0, sizeof *out);
    if (!g)
        return;
    out->open = __atomic_load_n(&g->open, __ATOMIC_RELAXED);
    out->refused_capacity = __atomic_load_n(&g->refused_capacity, __ATOMIC_RELAXED);
    out->refused_source = __atomic_load_n(&g->refused_source, __ATOMIC_RELAXED);
    out->receive_timeouts = __atomic_load_n(&g->receive_timeouts, __ATOMIC_RELAXED);
    out->framing_refused = __atomic_load_n(&g->framing_refused, __ATOMIC_RELAXED);
    out->library_replies = __atomic_load_n(&g->library_replies, __ATOMIC_RELAXED);
    out->evicted_unproven = __atomic_load_n(&g->evicted_unproven, __ATOMIC_RELAXED);
}
