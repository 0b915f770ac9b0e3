/*
 * trusted_proxies.c - address ranges, X-Forwarded-For and the PROXY
 * protocol v2 header (see trusted_proxies.h).
 */
#include "trusted_proxies.h"
#include "copy_text.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool parse_addr(const char *text, int *family, uint8_t addr[16])
{
    memset(addr, 0, 16);
    if (inet_pton(AF_INET, text, addr) == 1) {
        *family = AF_INET;
        return true;
    }
    if (inet_pton(AF_INET6, text, addr) == 1) {
        /* an IPv4-mapped address is the IPv4 address */
        static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (memcmp(addr, mapped, 12) == 0) {
            memmove(addr, addr + 12, 4);
            memset(addr + 4, 0, 12);
            *family = AF_INET;
        } else {
            *family = AF_INET6;
        }
        return true;
    }
    return false;
}

/* Copies the trimmed [from, to) into out (size n); false when it does not fit. */
static bool trimmed(const char *from, const char *to, char *out, size_t n)
{
    while (from < to && (*from == ' ' || *from == '\t'))
        from++;
    while (to > from && (to[-1] == ' ' || to[-1] == '\t'))
        to--;
    if ((size_t)(to - from) >= n)
        return false;
    memcpy(out, from, (size_t)(to - from));
    out[to - from] = '\0';
    return true;
}

bool leased_trusted_proxies_parse(const char *spec, leased_trusted_proxies_t *out)
{
    memset(out, 0, sizeof *out);
    const char *p = spec ? spec : "";
    while (*p) {
        const char *end = strchr(p, ',');
        if (!end)
            end = p + strlen(p);
        char item[80];
        if (!trimmed(p, end, item, sizeof item))
            return false;
        p = *end ? end + 1 : end;
        if (!item[0]) {
            if (!*p && out->n > 0)
                break; /* a trailing comma */
            return false;
        }
        if (out->n == LEASED_TRUSTED_PROXIES_MAX)
            return false;
        leased_cidr_t *r = &out->ranges[out->n];
        char *slash = strchr(item, '/');
        int prefix = -1;
        if (slash) {
            *slash = '\0';
            char *e = NULL;
            long v = strtol(slash + 1, &e, 10);
            if (!slash[1] || *e || v < 0 || v > 128)
                return false;
            prefix = (int)v;
        }
        if (!parse_addr(item, &r->family, r->addr))
            return false;
        int bits = r->family == AF_INET ? 32 : 128;
        if (prefix > bits)
            return false;
        r->prefix = prefix < 0 ? bits : prefix;
        out->n++;
    }
    return true;
}

static bool in_range(const leased_cidr_t *r, int family, const uint8_t addr[16])
{
    if (r->family != family)
        return false;
    int full = r->prefix / 8, rest = r->prefix % 8;
    if (memcmp(r->addr, addr, (size_t)full) != 0)
        return false;
    if (rest == 0)
        return true;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (r->addr[full] & mask) == (addr[full] & mask);
}

bool leased_trusted_proxies_has(const leased_trusted_proxies_t *tp, const char *addr)
{
    int family;
    uint8_t a[16];
    if (!tp || tp->n == 0 || !addr || !parse_addr(addr, &family, a))
        return false;
    for (size_t i = 0; i < tp->n; i++)
        if (in_range(&tp->ranges[i], family, a))
            return true;
    return false;
}

bool leased_trusted_proxies_client(const leased_trusted_proxies_t *tp, const char *peer,
                                   const char *xff, char out[64])
{
    leased_copy_text(out, 64, peer);
    if (!xff || !xff[0] || !leased_trusted_proxies_has(tp, peer))
        return true;
    /* from the right: entries the trusted proxies appended, up to the
     * first address that is not a proxy's; what lies left of it is the
     * client's own word and is not read. A malformed entry on the way:
     * the header is not believed (false). All trusted: the leftmost. */
    char chosen[64] = "";
    const char *end = xff + strlen(xff);
    for (;;) {
        const char *start = end;
        while (start > xff && start[-1] != ',')
            start--;
        char item[64];
        int family;
        uint8_t a[16];
        if (!trimmed(start, end, item, sizeof item) || !parse_addr(item, &family, a))
            return false;
        inet_ntop(family, a, chosen, sizeof chosen); /* IPv4-mapped as IPv4 */
        if (!leased_trusted_proxies_has(tp, chosen) || start == xff)
            break;
        end = start - 1;
    }
    leased_copy_text(out, 64, chosen);
    return true;
}

long leased_proxy_v2_parse(const uint8_t *buf, size_t len, struct sockaddr_storage *addr,
                           socklen_t *addrlen)
{
    static const uint8_t sig[12] = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D,
                                    0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};
    size_t cmp = len < sizeof sig ? len : sizeof sig;
    if (memcmp(buf, sig, cmp) != 0)
        return -1;
    if (len < 16)
        return 0;
    uint8_t ver_cmd = buf[12], fam = buf[13];
    size_t body = ((size_t)buf[14] << 8) | buf[15];
    if ((ver_cmd & 0xF0) != 0x20 || (ver_cmd & 0x0F) > 1)
        return -1;
    if (len < 16 + body)
        return 0;
    *addrlen = 0;
    memset(addr, 0, sizeof *addr);
    bool proxied = (ver_cmd & 0x0F) == 1;       /* PROXY; LOCAL (0) carries no client */
    if (proxied && fam == 0x11 && body >= 12) { /* TCP over IPv4 */
        struct sockaddr_in *a4 = (struct sockaddr_in *)addr;
        a4->sin_family = AF_INET;
        memcpy(&a4->sin_addr, buf + 16, 4);
        memcpy(&a4->sin_port, buf + 24, 2);
        *addrlen = sizeof *a4;
    } else if (proxied && fam == 0x21 && body >= 36) { /* TCP over IPv6 */
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)addr;
        a6->sin6_family = AF_INET6;
        memcpy(&a6->sin6_addr, buf + 16, 16);
        memcpy(&a6->sin6_port, buf + 48, 2);
        *addrlen = sizeof *a6;
    }
    return (long)(16 + body);
}
