/*
 * http_accept.h - the lease listener's acceptor: accepts connections and
 * hands each to libmicrohttpd (MHD_add_connection), after reading the
 * PROXY protocol v2 header of a trusted peer as its bytes arrive.
 *
 * Why not the library's own accept: a trusted proxy's header must be taken
 * off the socket before the library reads a byte of it, and the library
 * offers no hook between its accept() and its first read. Reading the
 * header there (in its connection callback) meant waiting on the library's
 * event thread, which stalled every other connection; here the waiting is
 * an event of this module's own epoll loop, bounded by a deadline, and the
 * header may be as long as its format allows (16 + 65,535 bytes: proxies
 * add TLVs). A connection from any other peer is handed over at once.
 */
#ifndef LEASED_HTTP_ACCEPT_H
#define LEASED_HTTP_ACCEPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct leased_trusted_proxies;
typedef struct leased_acceptor leased_acceptor_t;

/* Hands fd to the library: addr is the peer's address; source the client
 * address its PROXY header named ("" when none). False when the library
 * refused it (it has closed fd then). */
typedef bool (*leased_handover_fn)(void *cls, int fd, const struct sockaddr *addr,
                                   socklen_t addrlen, const char *source);

typedef struct leased_acceptor_config {
    int listen_fd; /* non-blocking, listening */
    const struct leased_trusted_proxies *trusted;
    int64_t header_timeout_ms; /* a trusted peer's header must arrive within this */
    size_t max_pending;        /* trusted connections whose header is awaited */
    leased_handover_fn handover;
    void *cls;
} leased_acceptor_config_t;

/* Starts the acceptor's thread; NULL when out of memory or threads. */
leased_acceptor_t *leased_acceptor_start(const leased_acceptor_config_t *cfg);
/* No connection is accepted any more (those accepted are still handed
 * over or closed). Safe to call more than once. */
void leased_acceptor_quiesce(leased_acceptor_t *a);
/* Stops the thread, closes the connections whose header never came, and
 * frees; accepts NULL. The listening socket is the caller's. */
void leased_acceptor_stop(leased_acceptor_t *a);

#endif
