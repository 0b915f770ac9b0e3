/*
 * http_frame.c - request and reply framing for the front door (rules in
 * http_frame.h). Every function here reads only inside the length it is
 * given; nothing allocates.
 */
#include "http_frame.h"

#include <string.h>
#include <strings.h>

#include "lease/hex.h"

/* RFC 9110 tchar: the characters of a method or a header name. */
static bool is_tchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return true;
    return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool refuse(leased_http_reject_t *rej, const char *field, const char *reason)
{
    rej->status = 400;
    rej->code = LEASE_INVALID_LEASE_REQUEST;
    rej->field = field;
    rej->reason = reason;
    return false;
}

size_t leased_http_head_length(const char *buf, size_t len)
{
    for (size_t i = 3; i < len; i++)
        if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' && buf[i - 3] == '\r')
            return i + 1;
    return 0;
}

/* Whether n bytes at s equal the lower-case word w, ignoring ASCII case. */
static bool word_is(const char *s, size_t n, const char *w)
{
    return strlen(w) == n && strncasecmp(s, w, n) == 0;
}

/* The path of an origin-form target: %-escapes well formed, none decoding
 * to a control character, "/" or "\". */
static bool path_canonical(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '%')
            continue;
        if (i + 2 >= n)
            return false;
        int hi = lease_hex_digit((unsigned char)p[i + 1]);
        int lo = lease_hex_digit((unsigned char)p[i + 2]);
        if (hi < 0 || lo < 0)
            return false;
        int v = hi << 4 | lo;
        if (v < 0x20 || v == 0x7f || v == '/' || v == '\\')
            return false;
        i += 2;
    }
    return true;
}

/* The request line; h->line_len is the offset after its CRLF. */
static bool parse_request_line(const char *buf, size_t len, leased_http_head_t *h,
                               leased_http_reject_t *rej)
{
    size_t i = 0;
    while (i < len && is_tchar((unsigned char)buf[i]))
        i++;
    if (i == 0 || i > 16 || i >= len || buf[i] != ' ')
        return refuse(rej, "method", "malformed method");
    h->method = buf;
    h->method_len = i;
    h->is_head = i == 4 && memcmp(buf, "HEAD", 4) == 0;
    size_t t = ++i;
    while (i < len && (unsigned char)buf[i] > 0x20 && (unsigned char)buf[i] < 0x7f)
        i++;
    if (i == t || i >= len || buf[i] != ' ')
        return refuse(rej, "path", "malformed request target");
    if (buf[t] != '/')
        return refuse(rej, "path", "target is not origin-form");
    const char *q = memchr(buf + t, '?', i - t);
    h->path = buf + t;
    h->path_len = q ? (size_t)(q - (buf + t)) : i - t;
    h->plain_query_len = 0;
    if (q) {
        size_t qlen = (size_t)(buf + i - q);
        static const char plain[] = "?abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                    "0123456789._=&-";
        size_t k = 0;
        while (k < qlen && memchr(plain, q[k], sizeof plain - 1) && (k == 0 || q[k] != '?'))
            k++;
        if (k == qlen)
            h->plain_query_len = qlen;
    }
    if (!path_canonical(h->path, h->path_len))
        return refuse(rej, "path", "escaped control character, slash or malformed escape");
    i++;
    if (len - i < 10 || memcmp(buf + i, "HTTP/1.", 7) != 0 ||
        (buf[i + 7] != '0' && buf[i + 7] != '1') || buf[i + 8] != '\r' || buf[i + 9] != '\n')
        return refuse(rej, "request", "not HTTP/1.0 or HTTP/1.1");
    h->version_minor = buf[i + 7] - '0';
    h->line_len = i + 10;
    return true;
}

/* Counts of the fields whose duplicates the rules refuse. */
typedef struct seen {
    int length, encoding, authorization, host;
} seen_t;

/* One header field (name and value, OWS trimmed) into h. */
static bool take_field(const char *name, size_t nlen, const char *value, size_t vlen,
                       leased_http_head_t *h, seen_t *seen, leased_http_reject_t *rej)
{
    if (word_is(name, nlen, "content-length")) {
        if (++seen->length > 1)
            return refuse(rej, "headers.content-length", "more than one Content-Length");
        if (vlen == 0 || vlen > 19)
            return refuse(rej, "headers.content-length", "Content-Length is not 1..19 digits");
        uint64_t n = 0;
        for (size_t i = 0; i < vlen; i++) {
            if (value[i] < '0' || value[i] > '9')
                return refuse(rej, "headers.content-length", "Content-Length is not digits");
            n = n * 10 + (uint64_t)(value[i] - '0');
        }
        h->has_length = true;
        h->content_length = n;
    } else if (word_is(name, nlen, "transfer-encoding")) {
        if (++seen->encoding > 1)
            return refuse(rej, "headers.transfer-encoding", "more than one Transfer-Encoding");
        if (!word_is(value, vlen, "chunked"))
            return refuse(rej, "headers.transfer-encoding", "only chunked is supported");
        h->chunked = true;
    } else if (word_is(name, nlen, "authorization")) {
        if (++seen->authorization > 1)
            return refuse(rej, "headers.authorization", "more than one Authorization");
    } else if (word_is(name, nlen, "host")) {
        if (++seen->host > 1)
            return refuse(rej, "headers.host", "more than one Host");
    } else if (word_is(name, nlen, "expect")) {
        if (word_is(value, vlen, "100-continue"))
            h->expect_continue = true;
    } else if (word_is(name, nlen, "connection")) {
        /* a comma-separated list of options */
        size_t i = 0;
        while (i < vlen) {
            while (i < vlen && (value[i] == ' ' || value[i] == '\t' || value[i] == ','))
                i++;
            size_t s = i;
            while (i < vlen && value[i] != ',' && value[i] != ' ' && value[i] != '\t')
                i++;
            if (word_is(value + s, i - s, "close"))
                h->keep_alive = false;
            else if (word_is(value + s, i - s, "keep-alive") && h->version_minor == 0)
                h->keep_alive = true;
        }
    }
    return true;
}

bool leased_http_parse_head(const char *buf, size_t len, leased_http_head_t *h,
                            leased_http_reject_t *rej)
{
    memset(h, 0, sizeof *h);
    memset(rej, 0, sizeof *rej);
    if (len > LEASED_HTTP_HEAD_MAX)
        return refuse(rej, "headers", "request head larger than 16 KiB");
    if (len < 4 || memcmp(buf + len - 4, "\r\n\r\n", 4) != 0)
        return refuse(rej, "request", "incomplete head");
    if (!parse_request_line(buf, len, h, rej))
        return false;
    h->keep_alive = h->version_minor == 1;
    seen_t seen = {0};
    size_t i = h->line_len, lines = 0;
    while (i < len) {
        if (buf[i] == '\r') {
            if (i + 2 != len || buf[i + 1] != '\n')
                return refuse(rej, "headers", "stray carriage return");
            break;
        }
        if (buf[i] == ' ' || buf[i] == '\t')
            return refuse(rej, "headers", "folded header line");
        if (++lines > LEASED_HTTP_HEADER_LINES_MAX)
            return refuse(rej, "headers", "more than 100 header fields");
        size_t name = i;
        while (i < len && is_tchar((unsigned char)buf[i]))
            i++;
        if (i == name || i >= len || buf[i] != ':')
            return refuse(rej, "headers", "malformed header name");
        size_t nlen = i - name;
        i++;
        while (i < len && (buf[i] == ' ' || buf[i] == '\t'))
            i++;
        size_t value = i;
        while (i < len && buf[i] != '\r') {
            unsigned char c = (unsigned char)buf[i];
            if ((c < 0x20 && c != '\t') || c == 0x7f)
                return refuse(rej, "headers", "control character in a header value");
            i++;
        }
        if (i + 1 >= len || buf[i + 1] != '\n')
            return refuse(rej, "headers", "header line without CRLF");
        size_t vend = i;
        while (vend > value && (buf[vend - 1] == ' ' || buf[vend - 1] == '\t'))
            vend--;
        if (!take_field(buf + name, nlen, buf + value, vend - value, h, &seen, rej))
            return false;
        i += 2;
    }
    if (h->chunked && h->has_length)
        return refuse(rej, "headers.transfer-encoding",
                      "Content-Length together with Transfer-Encoding");
    if (h->chunked && h->version_minor == 0)
        return refuse(rej, "headers.transfer-encoding", "Transfer-Encoding in HTTP/1.0");
    if (h->version_minor == 1 && seen.host == 0)
        return refuse(rej, "headers.host", "HTTP/1.1 without Host");
    return true;
}

size_t leased_http_forward_head(const char *buf, size_t len, const leased_http_head_t *h, char *out)
{
    size_t n = 0;
    memcpy(out + n, h->method, h->method_len);
    n += h->method_len;
    out[n++] = ' ';
    memcpy(out + n, h->path, h->path_len + h->plain_query_len);
    n += h->path_len + h->plain_query_len;
    memcpy(out + n, h->version_minor ? " HTTP/1.1\r\n" : " HTTP/1.0\r\n", 11);
    n += 11;
    memcpy(out + n, buf + h->line_len, len - h->line_len);
    n += len - h->line_len;
    return n;
}

enum chunk_state {
    CH_SIZE = 0, /* hex digits of a chunk size */
    CH_EXT,      /* ;extensions up to CR */
    CH_SIZE_LF,  /* LF after the size line */
    CH_DATA,     /* chunk data */
    CH_DATA_CR,  /* CR after chunk data */
    CH_DATA_LF,  /* LF after chunk data */
    CH_TRAILER,  /* start of a trailer line (or the final CRLF) */
    CH_TRAILER_TEXT,
    CH_TRAILER_LF,
    CH_FINAL_LF,
};

static leased_http_chunked_status_t chunk_bad(leased_http_reject_t *rej, const char *field,
                                              const char *reason)
{
    refuse(rej, field, reason);
    return LEASED_CHUNKED_BAD;
}

leased_http_chunked_status_t leased_http_chunked_feed(leased_http_chunked_t *c, const char *buf,
                                                      size_t len, uint64_t body_max,
                                                      size_t *consumed, leased_http_reject_t *rej)
{
    size_t i = 0;
    *consumed = 0;
    while (i < len) {
        unsigned char b = (unsigned char)buf[i];
        switch (c->state) {
        case CH_SIZE: {
            int v = lease_hex_digit(b);
            if (v >= 0) {
                if (++c->line_len > 16)
                    return chunk_bad(rej, "body", "chunk size too long");
                c->left = c->left << 4 | (uint64_t)v;
                i++;
                break;
            }
            if (c->line_len == 0)
                return chunk_bad(rej, "body", "chunk size missing");
            if (c->left > body_max || c->total + c->left > body_max)
                return chunk_bad(rej, "body", "chunked body larger than 64 KiB");
            if (b == ';') {
                c->state = CH_EXT;
            } else if (b == '\r') {
                c->state = CH_SIZE_LF;
            } else {
                return chunk_bad(rej, "body", "malformed chunk size line");
            }
            i++;
            break;
        }
        case CH_EXT:
            if (++c->line_len > LEASED_HTTP_CHUNK_LINE_MAX)
                return chunk_bad(rej, "body", "chunk extension too long");
            if (b == '\r')
                c->state = CH_SIZE_LF;
            else if ((b < 0x20 && b != '\t') || b == 0x7f)
                return chunk_bad(rej, "body", "control character in a chunk extension");
            i++;
            break;
        case CH_SIZE_LF:
            if (b != '\n')
                return chunk_bad(rej, "body", "chunk size line without CRLF");
            i++;
            c->line_len = 0;
            if (c->left == 0) {
                c->state = CH_TRAILER;
            } else {
                c->total += c->left;
                c->state = CH_DATA;
            }
            break;
        case CH_DATA: {
            size_t take = len - i < c->left ? len - i : (size_t)c->left;
            c->left -= take;
            i += take;
            if (c->left == 0)
                c->state = CH_DATA_CR;
            break;
        }
        case CH_DATA_CR:
            if (b != '\r')
                return chunk_bad(rej, "body", "chunk data without CRLF");
            c->state = CH_DATA_LF;
            i++;
            break;
        case CH_DATA_LF:
            if (b != '\n')
                return chunk_bad(rej, "body", "chunk data without CRLF");
            c->state = CH_SIZE;
            c->line_len = 0;
            i++;
            break;
        case CH_TRAILER:
            c->state = b == '\r' ? CH_FINAL_LF : CH_TRAILER_TEXT;
            if (b == ' ' || b == '\t')
                return chunk_bad(rej, "body", "folded trailer line");
            if (b != '\r')
                continue; /* the byte is trailer text: count it there */
            i++;
            break;
        case CH_TRAILER_TEXT:
            if (++c->trailer_len > LEASED_HTTP_TRAILER_MAX)
                return chunk_bad(rej, "body", "trailer section too large");
            if (b == '\r')
                c->state = CH_TRAILER_LF;
            else if ((b < 0x20 && b != '\t') || b == 0x7f)
                return chunk_bad(rej, "body", "control character in a trailer");
            i++;
            break;
        case CH_TRAILER_LF:
            if (b != '\n')
                return chunk_bad(rej, "body", "trailer line without CRLF");
            c->state = CH_TRAILER;
            i++;
            break;
        case CH_FINAL_LF:
            if (b != '\n')
                return chunk_bad(rej, "body", "chunked body without its final CRLF");
            i++;
            *consumed = i;
            return LEASED_CHUNKED_DONE;
        default:
            return chunk_bad(rej, "body", "chunk decoder state");
        }
    }
    *consumed = i;
    return LEASED_CHUNKED_MORE;
}

bool leased_http_parse_reply_head(const char *buf, size_t len, leased_http_reply_head_t *out)
{
    memset(out, 0, sizeof *out);
    if (len < 16 || memcmp(buf, "HTTP/1.", 7) != 0 || buf[8] != ' ')
        return false;
    int status = 0;
    for (int i = 9; i < 12; i++) {
        if (buf[i] < '0' || buf[i] > '9')
            return false;
        status = status * 10 + (buf[i] - '0');
    }
    out->status = status;
    const char *p = memchr(buf, '\n', len);
    while (p && (size_t)(p + 1 - buf) < len) {
        const char *line = p + 1;
        const char *end = memchr(line, '\n', len - (size_t)(line - buf));
        if (!end)
            return false;
        size_t n = (size_t)(end - line);
        if (n > 0 && line[n - 1] == '\r')
            n--;
        if (n == 0)
            return true;
        const char *colon = memchr(line, ':', n);
        if (colon) {
            size_t nlen = (size_t)(colon - line);
            const char *v = colon + 1;
            size_t vlen = n - nlen - 1;
            while (vlen > 0 && (*v == ' ' || *v == '\t')) {
                v++;
                vlen--;
            }
            while (vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
                vlen--;
            if (word_is(line, nlen, "content-length")) {
                uint64_t cl = 0;
                if (vlen == 0 || vlen > 19)
                    return false;
                for (size_t i = 0; i < vlen; i++) {
                    if (v[i] < '0' || v[i] > '9')
                        return false;
                    cl = cl * 10 + (uint64_t)(v[i] - '0');
                }
                out->has_length = true;
                out->content_length = cl;
            } else if (word_is(line, nlen, "transfer-encoding")) {
                out->chunked = true;
            } else if (word_is(line, nlen, "x-correlation-id")) {
                out->ours = true;
            } else if (word_is(line, nlen, "connection") && word_is(v, vlen, "close")) {
                out->close = true;
            }
        }
        p = end;
    }
    return false;
}

const char *leased_http_reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 429:
        return "Too Many Requests";
    case 503:
        return "Service Unavailable";
    default:
        return "Error";
    }
}
