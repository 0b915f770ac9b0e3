/*
 * http_accept.c - accepts the lease listener's connections, reads a
 * trusted peer's PROXY v2 header without waiting on anyone, and hands the
 * socket to libmicrohttpd (see http_accept.h for why).
 *
 * One thread sleeps in epoll on the listening socket, the sockets of
 * trusted peers whose header is still arriving (edge-triggered: each new
 * segment wakes it once, and the header is peeked, never consumed past its
 * end, so the request behind it stays for the library), and an eventfd
 * for quiesce and stop. A header that has not come whole within
 * header_timeout_ms closes its connection; so does a malformed one from a
 * trusted peer. A trusted peer that sends something other than a PROXY
 * header (a proxy that forwards X-Forwarded-For instead) is handed over
 * at once, as any other peer is.
 */
#include "http_accept.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "lease/clock.h"
#include "lease/log.h"
#include "trusted_proxies.h"

#define PROXY_V2_FIXED 16  /* signature, version, family, length */
#define SWEEP_EVERY_MS 100 /* deadlines of awaited headers */
#define TAG_LISTEN ((uint64_t)1 << 40)
#define TAG_WAKE ((uint64_t)2 << 40)

typedef struct pending {
    struct pending *prev, *next;
    int fd;
    int64_t until_ns;
    struct sockaddr_storage peer;
    socklen_t peerlen;
} pending_t;

struct leased_acceptor {
    leased_acceptor_config_t cfg;
    pthread_t thread;
    int epfd, wake_fd;
    pthread_mutex_t mu; /* quiescing, stopping: set by others, read by the thread */
    bool quiescing, stopping;
    bool listening; /* the thread's own: the listening socket is in its epoll */
    pending_t *pending;
    size_t npending;
};

static void drop_pending(leased_acceptor_t *a, pending_t *p, bool close_fd)
{
    if (p->prev)
        p->prev->next = p->next;
    else
        a->pending = p->next;
    if (p->next)
        p->next->prev = p->prev;
    a->npending--;
    epoll_ctl(a->epfd, EPOLL_CTL_DEL, p->fd, NULL);
    if (close_fd)
        close(p->fd);
    free(p);
}

static void hand_over(leased_acceptor_t *a, int fd, const struct sockaddr_storage *peer,
                      socklen_t peerlen, const char *source)
{
    (void)a->cfg.handover(a->cfg.cls, fd, (const struct sockaddr *)peer, peerlen, source);
}

static void address_text(const struct sockaddr_storage *ss, socklen_t len, char out[64])
{
    snprintf(out, 64, "%s", "");
    if (len == 0)
        return;
    if (ss->ss_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)ss)->sin_addr, out, 64);
    } else if (ss->ss_family == AF_INET6) {
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)(const void *)ss)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a6))
            inet_ntop(AF_INET, &a6->s6_addr[12], out, 64);
        else
            inet_ntop(AF_INET6, a6, out, 64);
    }
}

/* What arrived on a trusted peer's socket so far: the whole header (taken
 * off the socket, the connection handed over with the address it names),
 * something else (handed over untouched), or not enough yet. */
static void read_header(leased_acceptor_t *a, pending_t *p)
{
    uint8_t fixed[PROXY_V2_FIXED];
    ssize_t n = recv(p->fd, fixed, sizeof fixed, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        drop_pending(a, p, true); /* gone before its header */
        return;
    }
    if (n < 0)
        return;
    struct sockaddr_storage client;
    socklen_t clientlen = 0;
    long whole = leased_proxy_v2_parse(fixed, (size_t)n, &client, &clientlen);
    if (whole < 0) {
        /* not a PROXY header: the library reads it as it comes */
        int fd = p->fd;
        struct sockaddr_storage peer = p->peer;
        socklen_t peerlen = p->peerlen;
        drop_pending(a, p, false);
        hand_over(a, fd, &peer, peerlen, "");
        return;
    }
    if (n < PROXY_V2_FIXED)
        return;
    size_t want = PROXY_V2_FIXED + (((size_t)fixed[14] << 8) | fixed[15]);
    uint8_t *head = malloc(want);
    if (!head) {
        drop_pending(a, p, true);
        return;
    }
    n = recv(p->fd, head, want, MSG_PEEK | MSG_DONTWAIT);
    whole = n > 0 ? leased_proxy_v2_parse(head, (size_t)n, &client, &clientlen) : 0;
    if (whole > 0 && (size_t)whole == want && recv(p->fd, head, want, MSG_DONTWAIT) == n) {
        char source[64];
        address_text(&client, clientlen, source); /* "" for LOCAL: the peer's */
        int fd = p->fd;
        struct sockaddr_storage peer = p->peer;
        socklen_t peerlen = p->peerlen;
        drop_pending(a, p, false);
        hand_over(a, fd, &peer, peerlen, source);
    } else if (whole < 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        drop_pending(a, p, true); /* a malformed header from a trusted peer */
    }
    free(head);
}

static void accept_all(leased_acceptor_t *a)
{
    for (;;) {
        struct sockaddr_storage peer;
        socklen_t peerlen = sizeof peer;
        int fd = accept4(a->cfg.listen_fd, (struct sockaddr *)&peer, &peerlen,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE)
                LOG_WARN("cannot accept a connection: %s", strerror(errno));
            return; /* EAGAIN, or a passing error: the next readiness retries */
        }
        char text[64];
        address_text(&peer, peerlen, text);
        if (!leased_trusted_proxies_has(a->cfg.trusted, text)) {
            hand_over(a, fd, &peer, peerlen, "");
            continue;
        }
        pending_t *p = a->npending < a->cfg.max_pending ? calloc(1, sizeof *p) : NULL;
        if (!p) {
            close(fd); /* a trusted peer with that many headers outstanding */
            continue;
        }
        *p = (pending_t){.fd = fd, .peer = peer, .peerlen = peerlen};
        p->until_ns = lease_mono_now_ns() + a->cfg.header_timeout_ms * 1000000;
        struct epoll_event e = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET,
                                .data.u64 = (uint64_t)(unsigned)fd};
        if (epoll_ctl(a->epfd, EPOLL_CTL_ADD, fd, &e) != 0) {
            free(p);
            close(fd);
            continue;
        }
        p->next = a->pending;
        if (a->pending)
            a->pending->prev = p;
        a->pending = p;
        a->npending++;
        read_header(a, p); /* it may have come with the connection */
    }
}

static void sweep(leased_acceptor_t *a, int64_t now)
{
    for (pending_t *p = a->pending, *next; p; p = next) {
        next = p->next;
        if (now >= p->until_ns)
            drop_pending(a, p, true);
    }
}

static void *acceptor_main(void *arg)
{
    leased_acceptor_t *a = arg;
    struct epoll_event ev[64];
    int64_t next_sweep = lease_mono_now_ns() + SWEEP_EVERY_MS * 1000000LL;
    for (;;) {
        /* the flags before the wait: a wake-up drained below after a flag
         * was set is never lost (the flag is seen here on the next turn) */
        pthread_mutex_lock(&a->mu);
        bool quiescing = a->quiescing, stopping = a->stopping;
        pthread_mutex_unlock(&a->mu);
        if (stopping)
            return NULL;
        if (quiescing && a->listening) {
            epoll_ctl(a->epfd, EPOLL_CTL_DEL, a->cfg.listen_fd, NULL);
            a->listening = false;
        }
        int left_ms = (int)((next_sweep - lease_mono_now_ns() + 999999) / 1000000);
        int n = epoll_wait(a->epfd, ev, 64, a->pending ? (left_ms > 0 ? left_ms : 0) : -1);
        for (int i = 0; i < n; i++) {
            uint64_t tag = ev[i].data.u64;
            if (tag == TAG_WAKE) {
                uint64_t v;
                ssize_t r = read(a->wake_fd, &v, sizeof v);
                (void)r;
            } else if (tag == TAG_LISTEN) {
                if (a->listening)
                    accept_all(a);
            } else {
                for (pending_t *p = a->pending; p; p = p->next)
                    if (p->fd == (int)tag) {
                        read_header(a, p);
                        break;
                    }
            }
        }
        int64_t now = lease_mono_now_ns();
        if (now >= next_sweep) {
            sweep(a, now);
            next_sweep = now + SWEEP_EVERY_MS * 1000000LL;
        }
    }
}

leased_acceptor_t *leased_acceptor_start(const leased_acceptor_config_t *cfg)
{
    leased_acceptor_t *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->cfg = *cfg;
    pthread_mutex_init(&a->mu, NULL);
    a->epfd = epoll_create1(EPOLL_CLOEXEC);
    a->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event wake = {.events = EPOLLIN, .data.u64 = TAG_WAKE};
    struct epoll_event listen = {.events = EPOLLIN, .data.u64 = TAG_LISTEN};
    if (a->epfd < 0 || a->wake_fd < 0 || epoll_ctl(a->epfd, EPOLL_CTL_ADD, a->wake_fd, &wake) ||
        epoll_ctl(a->epfd, EPOLL_CTL_ADD, cfg->listen_fd, &listen)) {
        if (a->epfd >= 0)
            close(a->epfd);
        if (a->wake_fd >= 0)
            close(a->wake_fd);
        pthread_mutex_destroy(&a->mu);
        free(a);
        return NULL;
    }
    a->listening = true;
    if (pthread_create(&a->thread, NULL, acceptor_main, a) != 0) {
        close(a->epfd);
        close(a->wake_fd);
        pthread_mutex_destroy(&a->mu);
        free(a);
        return NULL;
    }
    return a;
}

static void wake(leased_acceptor_t *a)
{
    uint64_t one = 1;
    ssize_t w = write(a->wake_fd, &one, sizeof one);
    (void)w;
}

void leased_acceptor_quiesce(leased_acceptor_t *a)
{
    if (!a)
        return;
    pthread_mutex_lock(&a->mu);
    a->quiescing = true;
    pthread_mutex_unlock(&a->mu);
    wake(a);
}

void leased_acceptor_stop(leased_acceptor_t *a)
{
    if (!a)
        return;
    pthread_mutex_lock(&a->mu);
    a->stopping = true;
    pthread_mutex_unlock(&a->mu);
    wake(a);
    pthread_join(a->thread, NULL);
    while (a->pending)
        drop_pending(a, a->pending, true);
    close(a->epfd);
    close(a->wake_fd);
    pthread_mutex_destroy(&a->mu);
    free(a);
}
