/*
 * http_conns.c - admission, client address and deadlines of the lease
 * listener's connections (see http_conns.h for what and why).
 *
 * Records live in one list under one mutex: the library's thread adds and
 * removes them (connection callback) and moves them between phases (access
 * handler, three times per request, uncontended); the deadline thread reads
 * them ten times a second. A record leaves the list, under the mutex,
 * before the library closes its socket, so a shutdown() made under the
 * mutex never reaches a descriptor reused by another connection.
 */
#include "http_conns.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "lease/clock.h"
#include "lease/log.h"
#include "json_codec.h"
#include "trusted_proxies.h"

#define SCAN_EVERY_MS 100
#define PROXY_WAIT_MS 250   /* a trusted proxy's header comes with its connection */
#define PROXY_HEAD_MAX 1024 /* PROXY v2 header with the TLVs proxies add */
#define SOURCE_BUCKETS 1024 /* power of two */

typedef enum phase {
    PH_HEADLESS = 0, /* no request head yet (since the connection or the last reply) */
    PH_RECEIVING,    /* head seen, body arriving */
    PH_ANSWERING,    /* whole: on a worker, waiting, or its reply going out */
    PH_GONE,         /* refused, timed out or evicted: shut down, the library closes it */
} phase_t;

typedef struct source {
    struct source *next;
    char key[64];
    int64_t open;
} source_t;

struct leased_conn {
    struct leased_conn *prev, *next;
    int fd;
    phase_t phase;
    bool first;       /* no request answered on it yet */
    int64_t since_ns; /* start of the phase (HEADLESS, RECEIVING) */
    source_t *src;    /* NULL: not counted per source (a trusted proxy itself) */
    char source[64];
};

struct leased_conns {
    leased_conns_config_t cfg;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    pthread_t thread;
    bool stop;
    leased_conn_t *list; /* newest first */
    int64_t open;
    source_t *sources[SOURCE_BUCKETS];
    uint64_t refused_capacity, refused_source, receive_timeouts, framing_refused,
        evicted_unproven; /* atomic */
};

static void count(uint64_t *c)
{
    __atomic_add_fetch(c, 1, __ATOMIC_RELAXED);
}

void leased_conns_address_text(const struct sockaddr *addr, socklen_t len, char out[64])
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

/* ---- per-source counts (under mu) ---------------------------------------- */

static size_t source_hash(const char *key)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *key; key++)
        h = (h ^ (unsigned char)*key) * 1099511628211ULL;
    return (size_t)(h & (SOURCE_BUCKETS - 1));
}

/* One more connection of key; NULL with *over when it holds its share. */
static source_t *source_take(leased_conns_t *cs, const char *key, bool *over)
{
    size_t b = source_hash(key);
    source_t *s = cs->sources[b];
    while (s && strcmp(s->key, key) != 0)
        s = s->next;
    *over = s && s->open >= cs->cfg.max_per_source;
    if (*over)
        return NULL;
    if (!s) {
        if (!(s = calloc(1, sizeof *s)))
            return NULL;
        snprintf(s->key, sizeof s->key, "%s", key);
        s->next = cs->sources[b];
        cs->sources[b] = s;
    }
    s->open++;
    return s;
}

static void source_release(leased_conns_t *cs, source_t *s)
{
    if (!s || --s->open > 0)
        return;
    source_t **pp = &cs->sources[source_hash(s->key)];
    while (*pp != s)
        pp = &(*pp)->next;
    *pp = s->next;
    free(s);
}

/* ---- refusals on the socket ------------------------------------------------ */

/* Writes the JSON error reply on fd (the library writes nothing on it at
 * this point), then shuts the socket down: the library reads the end of
 * the stream and closes the connection. */
static void refuse(int fd, int status, lease_code_t code)
{
    char corr[32];
    leased_http_correlation_id(corr);
    int64_t retry = status == 429 || status == 503 ? 1000 : 0;
    char *body = leased_codec_error_envelope(code, corr, NULL, retry, -1, NULL, NULL);
    const char *reason = status == 408   ? "Request Timeout"
                         : status == 429 ? "Too Many Requests"
                                         : "Service Unavailable";
    char head[512];
    int n =
        snprintf(head, sizeof head,
                 "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                 "X-Correlation-Id: %s\r\nCache-Control: no-store\r\n%sConnection: close\r\n\r\n",
                 status, reason, body ? strlen(body) : 0, corr, retry ? "Retry-After: 1\r\n" : "");
    if (body && n > 0 && (size_t)n < sizeof head) {
        struct iovec iov[2] = {{head, (size_t)n}, {body, strlen(body)}};
        struct msghdr msg = {.msg_iov = iov, .msg_iovlen = 2};
        ssize_t w = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)w; /* a small reply on a socket the library is not writing: it fits */
    }
    free(body);
    shutdown(fd, SHUT_RDWR);
}

/* Marks c gone (under mu) and shuts its socket down, answering status
 * first when it is not 0. */
static void cut(leased_conn_t *c, int status, lease_code_t code)
{
    c->phase = PH_GONE;
    if (status)
        refuse(c->fd, status, code);
    else
        shutdown(c->fd, SHUT_RDWR);
}

/* ---- admission (the library's thread) --------------------------------------- */

/* A trusted peer's connection may start with a PROXY v2 header: consumed
 * (exactly its bytes) and its client address written to out. */
static void read_proxy_header(int fd, char out[64])
{
    uint8_t buf[PROXY_HEAD_MAX];
    int64_t end = lease_mono_now_ns() + (int64_t)PROXY_WAIT_MS * 1000000;
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
        struct sockaddr_storage ss;
        socklen_t len = 0;
        long hl = n > 0 ? leased_proxy_v2_parse(buf, (size_t)n, &ss, &len) : 0;
        if (hl < 0 || n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) ||
            (hl == 0 && n == (ssize_t)sizeof buf))
            return; /* not a PROXY header (a request, or nothing): the peer's address */
        if (hl > 0) {
            ssize_t got = recv(fd, buf, (size_t)hl, MSG_DONTWAIT);
            if (got == hl && len > 0)
                leased_conns_address_text((struct sockaddr *)&ss, len, out);
            return;
        }
        int left_ms = (int)((end - lease_mono_now_ns()) / 1000000);
        struct pollfd p = {fd, POLLIN, 0};
        if (left_ms <= 0 || poll(&p, 1, left_ms) <= 0)
            return;
    }
}

/* Connections between requests whose client has closed already (the
 * library accepts before it reads the hang-ups of the same round): cut
 * now, they give their slots back. True when there was one. */
static bool reap_hung_up(leased_conns_t *cs, const leased_conn_t *newcomer)
{
    size_t n = 0;
    for (leased_conn_t *c = cs->list; c; c = c->next)
        n += c->phase == PH_HEADLESS && c != newcomer;
    struct pollfd *p = n ? calloc(n, sizeof *p) : NULL;
    if (!p)
        return false;
    size_t i = 0;
    for (leased_conn_t *c = cs->list; c && i < n; c = c->next)
        if (c->phase == PH_HEADLESS && c != newcomer)
            p[i++] = (struct pollfd){c->fd, POLLRDHUP, 0};
    bool any = false;
    if (poll(p, n, 0) > 0) {
        i = 0;
        for (leased_conn_t *c = cs->list; c && i < n; c = c->next) {
            if (c->phase != PH_HEADLESS || c == newcomer)
                continue;
            if (p[i++].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
                cut(c, 0, LEASE_BACKEND_UNAVAILABLE);
                any = true;
            }
        }
    }
    free(p);
    return any;
}

/* Makes room: a connection whose client left, else the oldest one that
 * has sent no request head gives its slot up. */
static bool evict_headless(leased_conns_t *cs, const leased_conn_t *newcomer)
{
    if (reap_hung_up(cs, newcomer))
        return true;
    leased_conn_t *victim = NULL;
    for (leased_conn_t *c = cs->list; c; c = c->next)
        if (c->phase == PH_HEADLESS && c->first && c != newcomer)
            victim = c; /* the list is newest first: the last match is the oldest */
    if (!victim)
        return false;
    count(&cs->evicted_unproven);
    cut(victim, 0, LEASE_BACKEND_UNAVAILABLE);
    return true;
}

static void admit(leased_conns_t *cs, struct MHD_Connection *conn, void **socket_context)
{
    const union MHD_ConnectionInfo *fi =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *ai =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    leased_conn_t *c = calloc(1, sizeof *c);
    if (!c || !fi) {
        free(c);
        if (fi)
            refuse(fi->connect_fd, 503, LEASE_BACKEND_UNAVAILABLE);
        return;
    }
    c->fd = fi->connect_fd;
    c->first = true;
    c->since_ns = lease_mono_now_ns();
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    leased_conns_address_text(ai ? ai->client_addr : NULL,
                              ai && ai->client_addr && ai->client_addr->sa_family == AF_INET6
                                  ? (socklen_t)sizeof(struct sockaddr_in6)
                                  : (socklen_t)sizeof(struct sockaddr_in),
                              c->source);
    /* a trusted proxy brings many clients: each is counted under the
     * address its header names; the proxy itself only in the global bound */
    bool proxy = leased_trusted_proxies_has(cs->cfg.trusted, c->source);
    if (proxy)
        read_proxy_header(c->fd, c->source);
    bool counted = !proxy || !leased_trusted_proxies_has(cs->cfg.trusted, c->source);
    *socket_context = c;
    pthread_mutex_lock(&cs->mu);
    c->next = cs->list;
    if (cs->list)
        cs->list->prev = c;
    cs->list = c;
    __atomic_add_fetch(&cs->open, 1, __ATOMIC_RELAXED);
    bool over = false;
    if (cs->open > cs->cfg.max_connections && !evict_headless(cs, c)) {
        count(&cs->refused_capacity);
        cut(c, 503, LEASE_BACKEND_UNAVAILABLE);
    } else if (counted && !(c->src = source_take(cs, c->source, &over))) {
        if (over)
            count(&cs->refused_source);
        cut(c, over ? 429 : 503, over ? LEASE_RATE_LIMITED : LEASE_BACKEND_UNAVAILABLE);
    }
    pthread_mutex_unlock(&cs->mu);
}

static void forget(leased_conns_t *cs, leased_conn_t *c)
{
    pthread_mutex_lock(&cs->mu);
    if (c->prev)
        c->prev->next = c->next;
    else
        cs->list = c->next;
    if (c->next)
        c->next->prev = c->prev;
    __atomic_sub_fetch(&cs->open, 1, __ATOMIC_RELAXED);
    source_release(cs, c->src);
    pthread_mutex_unlock(&cs->mu);
    free(c);
}

void leased_conns_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                         enum MHD_ConnectionNotificationCode code)
{
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        admit(cls, conn, socket_context);
    else if (*socket_context)
        forget(cls, *socket_context);
    if (code == MHD_CONNECTION_NOTIFY_CLOSED)
        *socket_context = NULL;
}

leased_conn_t *leased_conns_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* ---- phases (the library's thread) ------------------------------------------ */

bool leased_conns_head(leased_conns_t *cs, leased_conn_t *c)
{
    if (!c)
        return true;
    pthread_mutex_lock(&cs->mu);
    bool live = c->phase != PH_GONE;
    if (live) {
        c->phase = PH_RECEIVING;
        if (!c->first) /* the first request's time counts from the connection */
            c->since_ns = lease_mono_now_ns();
    }
    pthread_mutex_unlock(&cs->mu);
    return live;
}

static bool set_phase(leased_conns_t *cs, leased_conn_t *c, phase_t to)
{
    if (!c)
        return true;
    pthread_mutex_lock(&cs->mu);
    bool live = c->phase != PH_GONE;
    if (live) {
        c->phase = to;
        c->since_ns = lease_mono_now_ns();
        if (to == PH_HEADLESS)
            c->first = false;
    }
    pthread_mutex_unlock(&cs->mu);
    return live;
}

bool leased_conns_answering(leased_conns_t *cs, leased_conn_t *c)
{
    return set_phase(cs, c, PH_ANSWERING);
}

void leased_conns_idle(leased_conns_t *cs, leased_conn_t *c)
{
    (void)set_phase(cs, c, PH_HEADLESS);
}

void leased_conns_count_framing(leased_conns_t *cs)
{
    count(&cs->framing_refused);
}

const char *leased_conns_source(const leased_conn_t *c)
{
    return c->source;
}

/* ---- deadlines (this module's thread) ----------------------------------------- */

static void scan(leased_conns_t *cs, int64_t now)
{
    int64_t receive_ns = lease_ms_to_ns_sat(cs->cfg.receive_timeout_ms);
    int64_t idle_ns = lease_ms_to_ns_sat(cs->cfg.idle_timeout_ms);
    for (leased_conn_t *c = cs->list; c; c = c->next) {
        bool receiving = c->phase == PH_RECEIVING || (c->phase == PH_HEADLESS && c->first);
        if (receiving && now - c->since_ns >= receive_ns) {
            count(&cs->receive_timeouts);
            cut(c, 408, LEASE_DEADLINE_EXCEEDED);
        } else if (c->phase == PH_HEADLESS && !c->first && now - c->since_ns >= idle_ns) {
            cut(c, 0, LEASE_BACKEND_UNAVAILABLE); /* idle between requests: closed without a word */
        }
    }
}

static void *deadlines_main(void *arg)
{
    leased_conns_t *cs = arg;
    pthread_mutex_lock(&cs->mu);
    while (!cs->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += SCAN_EVERY_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&cs->cond, &cs->mu, &ts);
        scan(cs, lease_mono_now_ns());
    }
    pthread_mutex_unlock(&cs->mu);
    return NULL;
}

leased_conns_t *leased_conns_start(const leased_conns_config_t *cfg)
{
    leased_conns_t *cs = calloc(1, sizeof *cs);
    if (!cs)
        return NULL;
    cs->cfg = *cfg;
    pthread_mutex_init(&cs->mu, NULL);
    pthread_cond_init(&cs->cond, NULL);
    if (pthread_create(&cs->thread, NULL, deadlines_main, cs) != 0) {
        pthread_cond_destroy(&cs->cond);
        pthread_mutex_destroy(&cs->mu);
        free(cs);
        return NULL;
    }
    return cs;
}

void leased_conns_stop(leased_conns_t *cs)
{
    if (!cs)
        return;
    pthread_mutex_lock(&cs->mu);
    cs->stop = true;
    pthread_cond_signal(&cs->cond);
    pthread_mutex_unlock(&cs->mu);
    pthread_join(cs->thread, NULL);
    for (size_t i = 0; i < SOURCE_BUCKETS; i++)
        while (cs->sources[i]) {
            source_t *s = cs->sources[i];
            cs->sources[i] = s->next;
            free(s);
        }
    pthread_cond_destroy(&cs->cond);
    pthread_mutex_destroy(&cs->mu);
    free(cs);
}

void leased_conns_stats(const leased_conns_t *cs, leased_conn_stats_t *out)
{
    memset(out, 0, sizeof *out);
    if (!cs)
        return;
    out->open = __atomic_load_n(&cs->open, __ATOMIC_RELAXED);
    out->refused_capacity = __atomic_load_n(&cs->refused_capacity, __ATOMIC_RELAXED);
    out->refused_source = __atomic_load_n(&cs->refused_source, __ATOMIC_RELAXED);
    out->receive_timeouts = __atomic_load_n(&cs->receive_timeouts, __ATOMIC_RELAXED);
    out->framing_refused = __atomic_load_n(&cs->framing_refused, __ATOMIC_RELAXED);
    out->evicted_unproven = __atomic_load_n(&cs->evicted_unproven, __ATOMIC_RELAXED);
}

/* Random bytes for correlation ids, drawn from getrandom a batch at a time
 * per thread: one system call per CORRELATION_BATCH ids, not one per
 * request. */
#define CORRELATION_BATCH 64
static __thread unsigned char correlation_pool[26 * CORRELATION_BATCH];
static __thread size_t correlation_used = sizeof correlation_pool;

void leased_http_correlation_id(char out[32])
{
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz234567";
    if (correlation_used + 26 > sizeof correlation_pool) {
        if (getrandom(correlation_pool, sizeof correlation_pool, 0) !=
            (ssize_t)sizeof correlation_pool) {
            /* getrandom on Linux does not fail for small requests once the
             * pool is initialised; jitter is unique enough for a
             * correlation id */
            for (size_t i = 0; i < sizeof correlation_pool; i++)
                correlation_pool[i] = (unsigned char)lease_jitter(256);
        }
        correlation_used = 0;
    }
    const unsigned char *raw = correlation_pool + correlation_used;
    correlation_used += 26;
    memcpy(out, "corr_", 5);
    for (size_t i = 0; i < 26; i++)
        out[5 + i] = alphabet[raw[i] & 31];
    out[31] = '\0';
}
