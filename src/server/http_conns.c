/*
 * http_conns.c - admission, client address, deadlines and hang-ups of the
 * lease listener's connections (see http_conns.h for what and why).
 *
 * Records live in one list under one mutex: the library's thread adds and
 * removes them (connection callback) and moves them between phases (access
 * handler, three times per request, uncontended); a worker marks one
 * waiting; this module's thread reads them ten times a second and on each
 * hang-up. A record leaves the list, under the mutex, before the library
 * closes its socket, so a shutdown() made under the mutex never reaches a
 * descriptor reused by another connection.
 *
 * Hang-up registrations are one-shot (EPOLLRDHUP | EPOLLONESHOT), keyed by
 * descriptor: the thread looks the record up under the mutex and checks
 * with poll() that the descriptor is hung up now, so an event that raced
 * with leased_conns_unwait (and a descriptor number reused since) calls
 * nothing.
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
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "lease/clock.h"
#include "lease/hash.h"
#include "lease/log.h"
#include "json_codec.h"
#include "request_ids.h"
#include "trusted_proxies.h"

#define SCAN_EVERY_MS 100
#define REAP_CHUNK 128      /* descriptors asked per poll() when reaping */
/* A request head still arriving after this long is a trickle, not a client
 * writing its head (one write, a few packets): when the table is full it may
 * give its slot to a client of a source that holds fewer connections. */
#define TRICKLE_GRACE_MS 250

typedef enum phase {
    PH_HEADLESS = 0, /* no request head yet (since the connection or the last reply) */
    PH_RECEIVING,    /* head seen, body arriving */
    PH_ANSWERING,    /* whole: on a worker, waiting, or its reply going out */
    PH_GONE,         /* refused, timed out or evicted: shut down, the library closes it */
} phase_t;

/* The client address a trusted proxy's header named for a connection the
 * acceptor handed to the library (http_accept.h), until its admission. */
typedef struct expected {
    struct expected *next;
    int fd;
    char source[64];
} expected_t;

/* The open connections of one client address (those counted per source). */
typedef struct source_count {
    struct source_count *next; /* in its bucket */
    int64_t n;
    char source[64];
} source_count_t;

struct leased_conn {
    struct leased_conn *prev, *next;
    int fd;
    phase_t phase;
    bool first;          /* no request answered on it yet */
    int64_t since_ns;    /* start of the phase (HEADLESS, RECEIVING) */
    int64_t begun_ns;    /* HEADLESS: when its request line came (0: nothing sent) */
    bool unread;         /* HEADLESS: bytes the library had not read yet were seen */
    source_count_t *src; /* counted per source (not a trusted proxy itself), until cut */
    void *waiting;       /* its request waits: the arg of cfg.gone (leased_conns_wait) */
    char source[64];
};

struct leased_conns {
    leased_conns_config_t cfg;
    pthread_mutex_t mu;
    pthread_t thread;
    int epfd, stop_fd; /* hang-ups of waiting requests; the thread's stop */
    bool stop;
    leased_conn_t *list; /* newest first */
    int64_t open;
    int64_t cut;              /* of open: shut down, not closed by the library yet */
    source_count_t **sources; /* hash of source_count_t, nsources buckets */
    expected_t *expected;     /* PROXY headers' addresses of connections handed over */
    size_t nsources;
    uint64_t refused_capacity, refused_source, receive_timeouts, framing_refused,
        evicted; /* atomic */
};

static void count(uint64_t *c)
{
    __atomic_add_fetch(c, 1, __ATOMIC_RELAXED);
}

/* A socket address as text (IPv4-mapped IPv6 as IPv4); "unknown" else. */
static void address_text(const struct sockaddr *addr, char out[64])
{
    snprintf(out, 64, "unknown");
    if (!addr)
        return;
    if (addr->sa_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)addr)->sin_addr, out, 64);
    } else if (addr->sa_family == AF_INET6) {
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)(const void *)addr)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a6))
            inet_ntop(AF_INET, &a6->s6_addr[12], out, 64);
        else
            inet_ntop(AF_INET6, a6, out, 64);
    }
}

void leased_conns_peer(struct MHD_Connection *conn, char out[64])
{
    const union MHD_ConnectionInfo *ai =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    address_text(ai ? ai->client_addr : NULL, out);
}

/* ---- connections per source (under mu) -------------------------------------
 *
 * A small chained hash of the sources that hold connections: admission asks
 * a source's count once per connection, and eviction once per candidate,
 * so neither walks the list per source. An entry lives while its count is
 * above zero. */

static size_t source_bucket(const leased_conns_t *cs, const char *source)
{
    return (size_t)lease_fnv1a(source) & (cs->nsources - 1);
}

/* c's source entry, made when absent; NULL when out of memory. */
static source_count_t *source_of(leased_conns_t *cs, const char *source, bool make)
{
    source_count_t **b = &cs->sources[source_bucket(cs, source)];
    for (source_count_t *e = *b; e; e = e->next)
        if (strcmp(e->source, source) == 0)
            return e;
    if (!make)
        return NULL;
    source_count_t *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    snprintf(e->source, sizeof e->source, "%s", source);
    e->next = *b;
    *b = e;
    return e;
}

/* c no longer counts for its source (cut, or closed). */
static void uncount(leased_conns_t *cs, leased_conn_t *c)
{
    source_count_t *e = c->src;
    if (!e)
        return;
    c->src = NULL;
    if (--e->n > 0)
        return;
    source_count_t **p = &cs->sources[source_bucket(cs, e->source)];
    while (*p != e)
        p = &(*p)->next;
    *p = e->next;
    free(e);
}

/* ---- refusals on the socket ------------------------------------------------ */

/* Writes the JSON error reply on fd (the library writes nothing on it at
 * this point), then shuts the socket down: the library reads the end of
 * the stream and closes the connection. */
static void refuse(int fd, int status, lease_code_t code)
{
    char corr[32];
    leased_correlation_id(corr);
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
static void cut(leased_conns_t *cs, leased_conn_t *c, int status, lease_code_t code)
{
    c->phase = PH_GONE;
    cs->cut++;
    uncount(cs, c);
    if (status)
        refuse(c->fd, status, code);
    else
        shutdown(c->fd, SHUT_RDWR);
}

/* Whether the client of fd has closed its side or reset. */
static bool hung_up(int fd)
{
    struct pollfd p = {fd, POLLRDHUP, 0};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* ---- admission (the library's thread) --------------------------------------- */

/* The client address a trusted peer's PROXY header named for fd
 * (leased_conns_expect), taken off the list; false when there is none. */
static bool take_expected(leased_conns_t *cs, int fd, char out[64])
{
    for (expected_t **p = &cs->expected; *p; p = &(*p)->next)
        if ((*p)->fd == fd) {
            expected_t *e = *p;
            *p = e->next;
            snprintf(out, 64, "%s", e->source);
            free(e);
            return true;
        }
    return false;
}

bool leased_conns_expect(leased_conns_t *cs, int fd, const char *source)
{
    expected_t *e = calloc(1, sizeof *e);
    if (!e)
        return false;
    e->fd = fd;
    snprintf(e->source, sizeof e->source, "%s", source);
    pthread_mutex_lock(&cs->mu);
    e->next = cs->expected;
    cs->expected = e;
    pthread_mutex_unlock(&cs->mu);
    return true;
}

void leased_conns_unexpect(leased_conns_t *cs, int fd)
{
    char unused[64];
    pthread_mutex_lock(&cs->mu);
    (void)take_expected(cs, fd, unused);
    pthread_mutex_unlock(&cs->mu);
}

/* Connections between requests whose client has closed already (the
 * library accepts before it reads the hang-ups of the same round): cut
 * now, they give their slots back. Only source's when it is not NULL.
 * True when there was one. This runs on every refusal at a limit, which a
 * client can provoke at will: the candidates are asked in one poll() per
 * REAP_CHUNK of them, not one system call each. */
static bool reap_hung_up(leased_conns_t *cs, const leased_conn_t *newcomer,
                         const source_count_t *source)
{
    struct pollfd p[REAP_CHUNK];
    leased_conn_t *who[REAP_CHUNK];
    bool any = false;
    for (leased_conn_t *c = cs->list; c;) {
        nfds_t n = 0;
        for (; c && n < REAP_CHUNK; c = c->next)
            if (c->phase == PH_HEADLESS && c != newcomer && (!source || c->src == source)) {
                p[n] = (struct pollfd){c->fd, POLLRDHUP, 0};
                who[n++] = c;
            }
        if (n == 0 || poll(p, n, 0) <= 0)
            continue;
        for (nfds_t i = 0; i < n; i++)
            if (p[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
                cut(cs, who[i], 0, LEASE_BACKEND_UNAVAILABLE);
                any = true;
            }
    }
    return any;
}

/*
 * The connection to close to make room, or NULL. Fair per source: the
 * candidate of the source holding the most connections goes first, so a
 * client that floods the table only ever evicts its own connections.
 *
 * Candidates, in this order:
 * 1. a connection between requests: idle after an answer (the longest idle
 *    first), else, when the table is full (not a source's share: a source
 *    at its cap is refused rather than lose a connection it just opened),
 *    one that has sent nothing yet (the oldest first);
 * 2. with trickles (the table is full, not a source's share), a request
 *    head still arriving TRICKLE_GRACE_MS after its request line, of a
 *    source that holds more connections than the newcomer's.
 * Never a request whose head arrived (its body arriving, or being
 * answered). With only_source, candidates of that source alone.
 */
static leased_conn_t *pick_victim(const leased_conns_t *cs, const leased_conn_t *newcomer,
                                  const source_count_t *only_source, bool trickles)
{
    leased_conn_t *best = NULL;
    int64_t best_n = -1;
    int64_t mine = newcomer->src ? newcomer->src->n : 0;
    int64_t now = lease_mono_now_ns();
    int64_t trickle_before = now - (int64_t)TRICKLE_GRACE_MS * 1000000;
    for (int pass = 0; pass < (trickles ? 2 : 1) && !best; pass++) {
        for (leased_conn_t *c = cs->list; c; c = c->next) {
            if (c->phase != PH_HEADLESS || c == newcomer || (only_source && c->src != only_source))
                continue;
            int64_t n = c->src ? c->src->n : 0;
            if (pass == 0 ? c->begun_ns != 0 || c->unread || (only_source && c->first)
                          : c->begun_ns == 0 || c->begun_ns > trickle_before || n <= mine)
                continue;
            int64_t at = pass == 0 ? c->since_ns : c->begun_ns;
            int64_t best_at = !best ? 0 : pass == 0 ? best->since_ns : best->begun_ns;
            bool better = !best || n > best_n ||
                          (n == best_n && ((!c->first && best->first) ||
                                           (c->first == best->first && at <= best_at)));
            if (better) {
                best = c;
                best_n = n;
            }
        }
    }
    return best;
}

/* Makes room for newcomer (a client that left, else pick_victim's); false
 * when there is none to close. */
static bool make_room(leased_conns_t *cs, const leased_conn_t *newcomer,
                      const source_count_t *only_source)
{
    if (reap_hung_up(cs, newcomer, only_source))
        return true;
    leased_conn_t *victim = pick_victim(cs, newcomer, only_source, !only_source);
    /* "sent nothing" as the library saw it: bytes it has not read yet make
     * a request that began (a few tries; the candidates are walked each) */
    int unread = 0;
    for (int tries = 0; victim && victim->phase == PH_HEADLESS && !victim->begun_ns &&
                        ioctl(victim->fd, FIONREAD, &unread) == 0 && unread > 0;
         tries++) {
        /* spared until the library reads it; not a trickle by that alone
         * (only a request line the library parsed starts the grace) */
        victim->unread = true;
        victim = tries < 4 ? pick_victim(cs, newcomer, only_source, !only_source) : NULL;
    }
    if (!victim)
        return false;
    count(&cs->evicted);
    cut(cs, victim, 0, LEASE_BACKEND_UNAVAILABLE);
    return true;
}

static void admit(leased_conns_t *cs, struct MHD_Connection *conn, void **socket_context)
{
    const union MHD_ConnectionInfo *fi =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
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
    leased_conns_peer(conn, c->source);
    /* a trusted proxy brings many clients: each is counted under the
     * address its header names; the proxy itself only in the global bound */
    bool proxy = leased_trusted_proxies_has(cs->cfg.trusted, c->source);
    *socket_context = c;
    pthread_mutex_lock(&cs->mu);
    if (proxy) {
        char named[64];
        if (take_expected(cs, c->fd, named) && named[0])
            snprintf(c->source, sizeof c->source, "%s", named);
    }
    bool counted = !proxy || !leased_trusted_proxies_has(cs->cfg.trusted, c->source);
    c->next = cs->list;
    if (cs->list)
        cs->list->prev = c;
    cs->list = c;
    __atomic_add_fetch(&cs->open, 1, __ATOMIC_RELAXED);
    source_count_t *src = counted ? source_of(cs, c->source, true) : NULL;
    if (src) {
        c->src = src;
        src->n++;
    }
    if (counted && !src) {
        count(&cs->refused_capacity); /* out of memory */
        cut(cs, c, 503, LEASE_BACKEND_UNAVAILABLE);
    } else if (src && src->n > cs->cfg.max_per_source && !make_room(cs, c, src)) {
        /* its own share is full of requests being received or answered */
        count(&cs->refused_source);
        cut(cs, c, 429, LEASE_RATE_LIMITED);
    } else if (cs->open - cs->cut > cs->cfg.max_connections && !make_room(cs, c, NULL)) {
        /* a connection cut (to make room for this one at its source's cap,
         * too) holds no slot, though the library has not closed it yet */
        count(&cs->refused_capacity);
        cut(cs, c, 503, LEASE_BACKEND_UNAVAILABLE);
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
    uncount(cs, c);
    if (c->phase == PH_GONE)
        cs->cut--;
    __atomic_sub_fetch(&cs->open, 1, __ATOMIC_RELAXED);
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

static bool set_phase(leased_conns_t *cs, leased_conn_t *c, phase_t to)
{
    if (!c)
        return true;
    pthread_mutex_lock(&cs->mu);
    bool live = c->phase != PH_GONE;
    if (live) {
        /* the first request's time counts from the connection */
        if (to != PH_RECEIVING || !c->first)
            c->since_ns = lease_mono_now_ns();
        c->first = c->first && to != PH_HEADLESS;
        c->phase = to;
        c->begun_ns = 0;
        c->unread = false;
    }
    pthread_mutex_unlock(&cs->mu);
    return live;
}

void leased_conns_begin(leased_conns_t *cs, leased_conn_t *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&cs->mu);
    if (c->phase == PH_HEADLESS && !c->begun_ns)
        c->begun_ns = lease_mono_now_ns();
    pthread_mutex_unlock(&cs->mu);
}

bool leased_conns_head(leased_conns_t *cs, leased_conn_t *c)
{
    return set_phase(cs, c, PH_RECEIVING);
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

/* ---- waiting requests (a worker) ------------------------------------------------ */

bool leased_conns_wait(leased_conns_t *cs, leased_conn_t *c, void *arg)
{
    if (!c)
        return false;
    pthread_mutex_lock(&cs->mu);
    struct epoll_event e = {.events = EPOLLRDHUP | EPOLLONESHOT,
                            .data.u64 = (uint64_t)(unsigned)c->fd};
    bool ok = c->waiting || epoll_ctl(cs->epfd, EPOLL_CTL_ADD, c->fd, &e) == 0;
    if (ok)
        c->waiting = arg;
    pthread_mutex_unlock(&cs->mu);
    return ok;
}

static void unwait(leased_conns_t *cs, leased_conn_t *c)
{
    if (c->waiting)
        epoll_ctl(cs->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    c->waiting = NULL;
}

void leased_conns_unwait(leased_conns_t *cs, leased_conn_t *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&cs->mu);
    unwait(cs, c);
    pthread_mutex_unlock(&cs->mu);
}

void leased_conns_lock(leased_conns_t *cs)
{
    pthread_mutex_lock(&cs->mu);
}

void leased_conns_unlock(leased_conns_t *cs)
{
    pthread_mutex_unlock(&cs->mu);
}

/* ---- deadlines and hang-ups (this module's thread) ------------------------------ */

static void scan(leased_conns_t *cs, int64_t now)
{
    int64_t receive_ns = lease_ms_to_ns_sat(cs->cfg.receive_timeout_ms);
    int64_t idle_ns = lease_ms_to_ns_sat(cs->cfg.idle_timeout_ms);
    for (leased_conn_t *c = cs->list; c; c = c->next) {
        /* the first request counts from the connection, a later one's
         * head from its request line, a body from its head */
        bool later_head = c->phase == PH_HEADLESS && !c->first && c->begun_ns;
        bool receiving = c->phase == PH_RECEIVING || (c->phase == PH_HEADLESS && c->first);
        int64_t from = later_head ? c->begun_ns : c->since_ns;
        if ((receiving || later_head) && now - from >= receive_ns) {
            count(&cs->receive_timeouts);
            cut(cs, c, 408, LEASE_DEADLINE_EXCEEDED);
        } else if (c->phase == PH_HEADLESS && !c->first && now - c->since_ns >= idle_ns) {
            cut(cs, c, 0,
                LEASE_BACKEND_UNAVAILABLE); /* idle between requests: closed without a word */
        }
    }
}

/* The waiting request of fd when its client has hung up (under mu): taken
 * off the watch and marked gone; NULL for a stale event. Hang-ups are rare:
 * the list is walked for each. */
static void *take_hung_up(leased_conns_t *cs, int fd)
{
    leased_conn_t *c = cs->list;
    while (c && !(c->fd == fd && c->waiting))
        c = c->next;
    if (!c || !hung_up(fd))
        return NULL; /* stale: unwaited, and the number reused */
    void *arg = c->waiting;
    unwait(cs, c);
    cs->cfg.gone(arg);
    return arg;
}

static void *conns_main(void *arg)
{
    leased_conns_t *cs = arg;
    struct epoll_event ev[64];
    void *gone[64];
    int64_t next_scan = lease_mono_now_ns() + SCAN_EVERY_MS * 1000000LL;
    for (;;) {
        int left_ms = (int)((next_scan - lease_mono_now_ns() + 999999) / 1000000);
        int n = epoll_wait(cs->epfd, ev, 64, left_ms > 0 ? left_ms : 0);
        int k = 0;
        pthread_mutex_lock(&cs->mu);
        bool stop = cs->stop;
        for (int i = 0; i < n && !stop; i++)
            if ((int)ev[i].data.u64 != cs->stop_fd &&
                (gone[k] = take_hung_up(cs, (int)ev[i].data.u64)))
                k++;
        int64_t now = lease_mono_now_ns();
        if (!stop && now >= next_scan) {
            scan(cs, now);
            next_scan = now + SCAN_EVERY_MS * 1000000LL;
        }
        pthread_mutex_unlock(&cs->mu);
        for (int i = 0; i < k; i++)
            cs->cfg.woken(cs->cfg.cls, gone[i]);
        if (stop)
            return NULL;
    }
}

leased_conns_t *leased_conns_start(const leased_conns_config_t *cfg)
{
    leased_conns_t *cs = calloc(1, sizeof *cs);
    if (!cs)
        return NULL;
    cs->cfg = *cfg;
    /* a bucket per connection, rounded up to a power of two */
    cs->nsources = 64;
    while (cs->nsources < (size_t)cfg->max_connections && cs->nsources < ((size_t)1 << 20))
        cs->nsources <<= 1;
    cs->sources = calloc(cs->nsources, sizeof *cs->sources);
    if (!cs->sources) {
        free(cs);
        return NULL;
    }
    pthread_mutex_init(&cs->mu, NULL);
    cs->epfd = epoll_create1(EPOLL_CLOEXEC);
    cs->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event e = {.events = EPOLLIN, .data.u64 = (uint64_t)(unsigned)cs->stop_fd};
    if (cs->epfd < 0 || cs->stop_fd < 0 ||
        epoll_ctl(cs->epfd, EPOLL_CTL_ADD, cs->stop_fd, &e) != 0 ||
        pthread_create(&cs->thread, NULL, conns_main, cs) != 0) {
        if (cs->epfd >= 0)
            close(cs->epfd);
        if (cs->stop_fd >= 0)
            close(cs->stop_fd);
        pthread_mutex_destroy(&cs->mu);
        free(cs->sources);
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
    pthread_mutex_unlock(&cs->mu);
    uint64_t one = 1;
    ssize_t w = write(cs->stop_fd, &one, sizeof one);
    (void)w;
    pthread_join(cs->thread, NULL);
    close(cs->epfd);
    close(cs->stop_fd);
    pthread_mutex_destroy(&cs->mu);
    /* the library stopped first: every connection was forgotten, and with
     * it every source entry */
    free(cs->sources);
    while (cs->expected) {
        expected_t *e = cs->expected;
        cs->expected = e->next;
        free(e);
    }
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
    out->evicted = __atomic_load_n(&cs->evicted, __ATOMIC_RELAXED);
}
