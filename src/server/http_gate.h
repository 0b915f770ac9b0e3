/*
 * http_gate.h - the front door of leased: the listening socket, and every
 * client connection until it closes.
 *
 * libmicrohttpd answers framing errors with HTML of its own, takes the
 * first of two Content-Length or Authorization headers, unescapes %00 in
 * paths, lets a trickling client hold a connection for as long as it keeps
 * sending, and leaves connections past its limit in the listen backlog. The
 * gate stands in front of it, in one thread:
 *
 * - it accepts every connection at once; past LEASE_MAX_CONNECTIONS the
 *   oldest connection that has not sent a whole request head yet is closed
 *   to make room, and only when there is none it answers 503 and closes;
 *   past LEASE_MAX_CONNECTIONS_PER_SOURCE (one client address) 429 and
 *   closes, in the JSON envelope either way;
 * - it hands each admitted connection to the library through a socket pair
 *   and relays bytes both ways, framing every request itself
 *   (http_frame.h): a request the rules refuse never reaches the library;
 *   the gate answers it (JSON, correlation id) and closes the connection;
 * - it bounds time: a request must arrive whole (head and body) within
 *   LEASE_RECEIVE_TIMEOUT_MS of its first byte (of the connection's
 *   opening, for its first request), however slowly it trickles, else 408;
 *   a connection idle between requests for LEASE_IDLE_TIMEOUT_MS, or whose
 *   client stops reading a reply that long, is closed;
 * - it passes one request at a time: a pipelined request waits (buffered)
 *   until the reply before it has been relayed, so a refusal never lands in
 *   the middle of another reply;
 * - it checks every reply head the library writes: one without the
 *   X-Correlation-Id every leased reply carries was made by the library
 *   itself and is replaced by the JSON envelope of its status.
 *
 * Counts are per leased instance (docs/config.md).
 */
#ifndef LEASED_HTTP_GATE_H
#define LEASED_HTTP_GATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

typedef struct leased_gate leased_gate_t;

typedef struct leased_gate_config {
    const char *host; /* numeric IPv4 or IPv6 address */
    int port;         /* 0: any free port */
    int64_t max_connections;
    int64_t max_per_source;
    int64_t receive_timeout_ms;
    int64_t idle_timeout_ms;
    uint64_t body_max;    /* larger bodies are refused */
    uint64_t discard_max; /* ... after being read and dropped, up to this size */
    /* LEASE_TRUSTED_PROXIES: their connections may start with a PROXY
     * protocol v2 header naming the client (trusted_proxies.h) */
    const struct leased_trusted_proxies *trusted;
} leased_gate_config_t;

/*
 * Gives an admitted connection to the HTTP library: fd is the library's
 * end of a socket pair, addr the client's address. Returns false when the
 * library refused it (and closed fd); the gate then answers 503.
 */
typedef bool (*leased_gate_handoff_fn)(void *cls, int fd, const struct sockaddr *addr,
                                       socklen_t addrlen);

/* Binds, listens and starts the gate thread. NULL with a one-line reason
 * in err on failure. */
leased_gate_t *leased_gate_start(const leased_gate_config_t *cfg, leased_gate_handoff_fn handoff,
                                 void *cls, char *err, size_t errsz);

/* The bound port. */
int leased_gate_port(const leased_gate_t *g);

/* Closes the listening socket (new connections are refused by the
 * system); open connections go on. Returns once it is closed. */
void leased_gate_quiesce(leased_gate_t *g);

/* Call after the library has stopped (its ends are closed): relays what
 * it had written for at most wait_ms, then closes every connection, stops
 * the thread and frees g. Accepts NULL. */
void leased_gate_stop(leased_gate_t *g, int64_t wait_ms);

typedef struct leased_gate_stats {
    int64_t open;              /* connections open now */
    uint64_t refused_capacity; /* past LEASE_MAX_CONNECTIONS */
    uint64_t refused_source;   /* past LEASE_MAX_CONNECTIONS_PER_SOURCE */
    uint64_t receive_timeouts; /* 408: a request did not arrive in time */
    uint64_t framing_refused;  /* requests refused by the framing rules */
    uint64_t library_replies;  /* library-made replies replaced by the envelope */
    uint64_t evicted_unproven; /* closed to make room: no whole request head yet */
} leased_gate_stats_t;

void leased_gate_stats(const leased_gate_t *g, leased_gate_stats_t *out);

/* The client address of a socket address as text ("127.0.0.1", "::1";
 * IPv4-mapped IPv6 as IPv4): the key of per-source limits. out: 64 bytes. */
void leased_gate_source_text(const struct sockaddr *addr, socklen_t len, char out[64]);

#endif
