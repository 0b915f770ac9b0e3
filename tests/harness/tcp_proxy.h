/*
 * tcp_proxy.h - a test-only TCP proxy on loopback that can delay or swallow
 * what the upstream (leased) sends back: the "slow network" and "answer
 * lost after the request was processed" of the executor's HTTP tests.
 *
 * Each accepted connection gets its own upstream connection and two pump
 * threads. Settings change at any time and apply to the next chunk read
 * from upstream; the upstream port (tcp_proxy_retarget) to the next
 * connection accepted: one address in front of a failover, as a virtual IP
 * or a Sentinel-aware proxy gives the clients.
 *
 * It can also hold a request on its way upstream (tcp_proxy_hold): the
 * call sent and unanswered, as a row lock holds it inside PostgreSQL, while
 * the client's other connections go on.
 */
#ifndef LEASE_TCP_PROXY_H
#define LEASE_TCP_PROXY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tcp_proxy {
    atomic_int delay_ms; /* added before forwarding each chunk from upstream */
    atomic_int drop;     /* upstream answers to swallow: the client connection is
                            closed instead of forwarding them */
    /* private */
    int listen_fd;
    uint16_t port;
    atomic_int upstream; /* the port each new connection is made to */
    atomic_bool stop;
    atomic_int open; /* connections being served */
    pthread_t acceptor;
    pthread_mutex_t mu; /* guards the hold below */
    pthread_cond_t cv;
    const char *hold_marker; /* NULL: nothing is held */
    unsigned hold_gen;       /* bumped by each release */
    int held;                /* chunks held now */
} tcp_proxy_t;

/* Listens on 127.0.0.1 (a free port) and forwards to 127.0.0.1:upstream.
 * Returns false (after printing why) when the socket cannot be set up. */
bool tcp_proxy_start(tcp_proxy_t *px, uint16_t upstream);
/* Stops accepting and waits (up to 10 s) for open connections to end; they
 * end when their client or upstream closes. */
void tcp_proxy_stop(tcp_proxy_t *px);
/* Connections accepted from now on go to 127.0.0.1:upstream; open ones
 * keep theirs (they end when it closes). */
void tcp_proxy_retarget(tcp_proxy_t *px, uint16_t upstream);
/* Client -> upstream chunks that contain marker (the caller keeps it alive)
 * are held, not forwarded, until tcp_proxy_release: that connection stops,
 * the others go on. The marker is looked for in each chunk read, so it must
 * not straddle two (a request id inside one small request does not). */
void tcp_proxy_hold(tcp_proxy_t *px, const char *marker);
/* How many chunks are held now. */
int tcp_proxy_held(tcp_proxy_t *px);
/* Forwards the held chunks and holds nothing more (until the next
 * tcp_proxy_hold). tcp_proxy_stop releases too. */
void tcp_proxy_release(tcp_proxy_t *px);
/* The port it listens on, for URLs other than http:// */
uint16_t tcp_proxy_port(const tcp_proxy_t *px);
/* "http://127.0.0.1:<port>" */
void tcp_proxy_url(const tcp_proxy_t *px, char *out, size_t outsz);

#endif
