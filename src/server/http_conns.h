/*
 * http_conns.h - every client connection of the lease listener, as
 * libmicrohttpd holds it: admission, the client's address, deadlines, and
 * the hang-up of a client whose request waits.
 *
 * libmicrohttpd listens, accepts and reads every socket itself; this module
 * adds, through the library's own hooks, only what it has no option for:
 *
 * - admission in the connection callback (MHD_OPTION_NOTIFY_CONNECTION,
 *   called on the library's thread as a connection starts): past
 *   LEASE_MAX_CONNECTIONS the oldest connection that has not sent a request
 *   head yet is shut down to make room, and only when there is none the
 *   new one is answered 503; past LEASE_MAX_CONNECTIONS_PER_SOURCE 429 (the
 *   library's per-IP limit closes without a word and cannot key on the
 *   PROXY header's address);
 * - the client address a trusted peer's PROXY protocol v2 header named
 *   (read by the acceptor before it handed the socket over, http_accept.h:
 *   leased_conns_expect), which keys the per-source limit, logs and the
 *   audit;
 * - a total receive deadline (slowloris: the library's own timeout restarts
 *   with every byte): a connection's first request must arrive whole within
 *   LEASE_RECEIVE_TIMEOUT_MS of the connection, a later one's body within
 *   that of its head, else 408; a connection idle between requests for
 *   LEASE_IDLE_TIMEOUT_MS is closed;
 * - the hang-up (FIN or reset) of a client whose request waits (a parked
 *   watch, an acquire between attempts): the library watches neither the
 *   socket nor the client of a suspended connection, so its waiting work
 *   would hold its slots until wait_ms ended.
 *
 * One thread of this module sleeps in epoll on the sockets of waiting
 * requests, reports a hang-up the moment it comes, and checks the
 * deadlines ten times a second.
 *
 * A refusal (503, 429, 408) is written straight onto the socket, in the
 * JSON envelope with Connection: close, only while the library writes
 * nothing on it (a connection just accepted, or a request still arriving);
 * the socket is then shut down, which the library reads as the client
 * closing. Counts are per leased instance (docs/config.md).
 */
#ifndef LEASED_HTTP_CONNS_H
#define LEASED_HTTP_CONNS_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct leased_conns leased_conns_t;
typedef struct leased_conn leased_conn_t; /* the socket context of one connection */

typedef struct leased_conns_config {
    int64_t max_connections;
    int64_t max_per_source;
    int64_t receive_timeout_ms;
    int64_t idle_timeout_ms;
    const struct leased_trusted_proxies *trusted; /* LEASE_TRUSTED_PROXIES */
    /* A waiting request's client hung up: gone(arg) runs with the lock of
     * leased_conns_lock held (it must not block nor call this module),
     * then woken(cls, arg) with no lock held, where arg may be freed
     * already: woken may compare the pointer, never follow it. */
    void (*gone)(void *arg);
    void (*woken)(void *cls, void *arg);
    void *cls;
} leased_conns_config_t;

typedef struct leased_conn_stats {
    int64_t open;              /* connections open now */
    uint64_t refused_capacity; /* past LEASE_MAX_CONNECTIONS */
    uint64_t refused_source;   /* past LEASE_MAX_CONNECTIONS_PER_SOURCE */
    uint64_t receive_timeouts; /* 408: a request did not arrive in time */
    uint64_t framing_refused;  /* requests refused by the framing rules (http.c) */
    uint64_t evicted;          /* closed to make room: idle, or no request head yet */
} leased_conn_stats_t;

/* Starts the thread. NULL when out of memory or threads. */
leased_conns_t *leased_conns_start(const leased_conns_config_t *cfg);
/* Stops the thread and frees; call after the library stopped. NULL is fine. */
void leased_conns_stop(leased_conns_t *cs);

/* fd, about to be handed to the library, comes from a trusted proxy whose
 * PROXY header named source: its admission counts it under that address.
 * False when out of memory (it counts under the proxy's). unexpect takes
 * it back when the library refused the socket. */
bool leased_conns_expect(leased_conns_t *cs, int fd, const char *source);
void leased_conns_unexpect(leased_conns_t *cs, int fd);

/* The MHD_OPTION_NOTIFY_CONNECTION callback (cls: the leased_conns_t). */
void leased_conns_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                         enum MHD_ConnectionNotificationCode code);

/* The connection's record, or NULL (a connection of another daemon). */
leased_conn_t *leased_conns_of(struct MHD_Connection *conn);

/* A request line arrived (the head may still be arriving): from now on the
 * connection is receiving a request, which eviction spares (a trickle
 * past a short grace excepted, http_conns.c). */
void leased_conns_begin(leased_conns_t *cs, leased_conn_t *c);
/* A request head arrived (first call of the access handler): its receive
 * deadline now bounds the body. False when the connection was refused,
 * timed out or evicted meanwhile: the request must not run. */
bool leased_conns_head(leased_conns_t *cs, leased_conn_t *c);
/* The request is whole (or refused): no receive deadline until its reply
 * is sent. False when the connection was timed out (answered 408) or
 * evicted meanwhile: the request must not run. */
bool leased_conns_answering(leased_conns_t *cs, leased_conn_t *c);
/* The reply went out: the connection is idle until the next head. */
void leased_conns_idle(leased_conns_t *cs, leased_conn_t *c);
/* A request was refused by the framing rules (counted here). */
void leased_conns_count_framing(leased_conns_t *cs);

/* c's request waits: gone(arg) and woken(cls, arg), once, when its client
 * hangs up, unless leased_conns_unwait comes first. False when the socket
 * cannot be watched (the request then waits as if its client stayed). */
bool leased_conns_wait(leased_conns_t *cs, leased_conn_t *c, void *arg);
/* From return on, c's hang-up calls nothing and arg may be freed. Call
 * before resuming the connection (its socket may be closed after). */
void leased_conns_unwait(leased_conns_t *cs, leased_conn_t *c);
/* The lock gone runs under: a caller that checks what gone sets, then acts
 * on it, holds it across both. */
void leased_conns_lock(leased_conns_t *cs);
void leased_conns_unlock(leased_conns_t *cs);

/* The client's address ("127.0.0.1", "::1"; the PROXY header's when a
 * trusted proxy sent one). 64 bytes, valid while the connection is. */
const char *leased_conns_source(const leased_conn_t *c);
/* The peer's address of any connection (IPv4-mapped IPv6 as IPv4). */
void leased_conns_peer(struct MHD_Connection *conn, char out[64]);

void leased_conns_stats(const leased_conns_t *cs, leased_conn_stats_t *out);

#endif
