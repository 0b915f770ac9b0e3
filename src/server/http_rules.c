/*
 * http_rules.c - framing rules over libmicrohttpd's parsed request (see
 * http_rules.h). The library keeps every header field it parsed, in order
 * and with duplicates; one walk over them counts what must be unique.
 */
#include "http_rules.h"

#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>

#include "lease/hex.h"

/* RFC 9110 tchar */
static bool is_tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

const char *leased_http_rules_target(const char *uri)
{
    if (!uri || uri[0] != '/')
        return "path"; /* absolute-form, "*", or nothing */
    bool in_query = false;
    for (const unsigned char *p = (const unsigned char *)uri; *p; p++) {
        if (*p == ' ')
            return "request"; /* the library split the line at its last space */
        if (*p < 0x21 || *p > 0x7e)
            return "path";
        if (*p == '?')
            in_query = true;
        if (*p != '%' || in_query)
            continue;
        int hi = lease_hex_digit((unsigned char)p[1]),
            lo = hi < 0 ? -1 : lease_hex_digit((unsigned char)p[2]);
        if (lo < 0)
            return "path";
        int c = hi * 16 + lo;
        if (c < 0x20 || c == 0x7f || c == '/' || c == '\\')
            return "path";
        p += 2;
    }
    return NULL;
}

typedef struct head_walk {
    size_t fields, bytes;
    int host, content_length, transfer_encoding, authorization;
    bool bad_field, te_not_chunked;
} head_walk_t;

static enum MHD_Result walk(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                            const char *value, size_t value_size)
{
    (void)kind;
    head_walk_t *w = cls;
    w->fields++;
    w->bytes += key_size + value_size + 4; /* ": " and CRLF */
    if (key_size == 0)
        w->bad_field = true;
    for (size_t i = 0; i < key_size; i++)
        if (!is_tchar((unsigned char)key[i]))
            w->bad_field = true;
    for (size_t i = 0; value && i < value_size; i++) {
        unsigned char c = (unsigned char)value[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            w->bad_field = true;
    }
    if (strcasecmp(key, "Host") == 0)
        w->host++;
    else if (strcasecmp(key, "Content-Length") == 0)
        w->content_length++;
    else if (strcasecmp(key, "Authorization") == 0)
        w->authorization++;
    else if (strcasecmp(key, "Transfer-Encoding") == 0) {
        w->transfer_encoding++;
        if (!value || strcasecmp(value, "chunked") != 0)
            w->te_not_chunked = true;
    }
    return MHD_YES;
}

const char *leased_http_rules_head(struct MHD_Connection *conn, const char *method,
                                   const char *version, const char *url)
{
    bool v11 = strcmp(version, "HTTP/1.1") == 0;
    if (!v11 && strcmp(version, "HTTP/1.0") != 0)
        return "request";
    if (!method[0])
        return "method";
    for (const char *m = method; *m; m++)
        if (!is_tchar((unsigned char)*m))
            return "method";
    head_walk_t w = {0};
    MHD_get_connection_values_n(conn, MHD_HEADER_KIND, walk, &w);
    w.bytes += strlen(method) + strlen(url) + strlen(version) + 4;
    if (w.bad_field || w.fields > LEASED_HTTP_HEADER_LINES_MAX || w.bytes > LEASED_HTTP_HEAD_MAX)
        return "headers";
    if (w.host > 1 || (v11 && w.host == 0))
        return "headers.host";
    if (w.transfer_encoding > 1 || w.te_not_chunked || (w.transfer_encoding && w.content_length) ||
        (w.transfer_encoding && !v11))
        return "headers.transfer-encoding";
    if (w.content_length > 1)
        return "headers.content-length";
    if (w.authorization > 1)
        return "headers.authorization";
    return NULL;
}
