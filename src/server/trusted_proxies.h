/*
 * trusted_proxies.h - LEASE_TRUSTED_PROXIES: the peers whose word on the
 * client's address is taken (a reverse proxy, a load balancer).
 *
 * From a trusted peer only, the client address comes from a PROXY protocol
 * v2 header at the start of the connection (read by http_conns.c, it keys the
 * per-source connection limit too) or, per request, from X-Forwarded-For:
 * the rightmost address that is not itself trusted. Everything else (an
 * untrusted peer's headers, a malformed list) is ignored: the address is
 * the peer's own.
 */
#ifndef LEASED_TRUSTED_PROXIES_H
#define LEASED_TRUSTED_PROXIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "lease/result.h"

#define LEASED_TRUSTED_PROXIES_MAX 32

typedef struct leased_cidr {
    int family; /* AF_INET or AF_INET6 */
    uint8_t addr[16];
    int prefix;
} leased_cidr_t;

typedef struct leased_trusted_proxies {
    leased_cidr_t ranges[LEASED_TRUSTED_PROXIES_MAX];
    size_t n;
} leased_trusted_proxies_t;

/* "10.0.0.0/8, 127.0.0.1, ::1/128" (a bare address is one host); "" is
 * none. False when an entry is not a numeric address with a prefix in
 * range, or there are too many. */
bool leased_trusted_proxies_parse(const char *spec, leased_trusted_proxies_t *out);

/* Whether the numeric address text (IPv4 or IPv6) lies in a range. */
bool leased_trusted_proxies_has(const leased_trusted_proxies_t *tp, const char *addr);

/* The client address of a request that came from peer (text) with the
 * X-Forwarded-For values xff (comma-separated, in order, any length;
 * NULL: none): the rightmost address that is not trusted, when peer is
 * trusted; else peer. Only the entries from the right up to that address
 * are read (what lies left of it is the client's own word, padding
 * included). False (out: peer) when one of those is not a numeric address:
 * the request is refused, never charged to the proxy in silence. out: 64
 * bytes. */
LEASE_MUST_USE bool leased_trusted_proxies_client(const leased_trusted_proxies_t *tp,
                                                  const char *peer, const char *xff, char out[64]);

/* Length of a PROXY protocol v2 header at the start of buf: > 0 when a
 * whole one is there (*addr and *addrlen: the source it carries, addrlen 0 for
 * LOCAL or an unknown family), 0 when more bytes are needed, -1 when buf
 * does not start with one (or it is malformed). */
long leased_proxy_v2_parse(const uint8_t *buf, size_t len, struct sockaddr_storage *addr,
                           socklen_t *addrlen);

#endif
