/*
 * json_text.c - compact JSON serialisation with shortest round-trip reals
 * (see json_text.h), and the metadata number bound.
 *
 * Output equals jansson's JSON_COMPACT output except for reals: strings are
 * escaped the same way (", \, the short escapes, other control characters
 * as \u00XX, everything else as UTF-8 bytes), objects keep jansson's
 * insertion order unless JSON_SORT_KEYS asks for byte order.
 */
#include "lease/json_text.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef lease_json_buf_t text_buf_t; /* json_text.h: `failed` sticks */

/* Room for extra more bytes and the terminating NUL; false (and `failed`)
 * when memory runs out. */
static bool reserve(text_buf_t *b, size_t extra)
{
    if (b->failed)
        return false;
    if (extra > SIZE_MAX / 2 - b->len) {
        b->failed = true;
        return false;
    }
    if (b->len + extra + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + extra + 1)
            cap *= 2;
        char *nd = realloc(b->data, cap);
        if (!nd) {
            b->failed = true;
            return false;
        }
        b->data = nd;
        b->cap = cap;
    }
    return true;
}

void lease_json_raw(text_buf_t *b, const char *s, size_t n)
{
    if (!reserve(b, n))
        return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void put(text_buf_t *b, const char *s, size_t n)
{
    lease_json_raw(b, s, n);
}

static void put_str(text_buf_t *b, const char *s)
{
    put(b, s, strlen(s));
}

/* Whether none of the eight bytes of w needs an escape: none below 0x20,
 * none '"' or '\\'. Bit tricks on the whole word, exact for "any byte":
 * (x - 0x01..) & ~x & 0x80.. is non-zero iff some byte of x is 0, and
 * (x - n*0x01..) & ~x & 0x80.. iff some byte is below n (n <= 0x80). */
static bool plain8(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t quote = w ^ (ones * '"'), backslash = w ^ (ones * '\\');
    uint64_t flagged =
        ((w - ones * 0x20) & ~w) | ((quote - ones) & ~quote) | ((backslash - ones) & ~backslash);
    return (flagged & highs) == 0;
}

void lease_json_string(text_buf_t *b, const char *s, size_t n)
{
    /* The worst case (every byte \u00XX) reserved once, then written in
     * place: strings are most of what the encoders write. */
    if (n > SIZE_MAX / 8 || !reserve(b, n * 6 + 2))
        return;
    static const char hex[] = "0123456789ABCDEF"; /* jansson's \u%04X */
    char *o = b->data + b->len;
    *o++ = '"';
    for (size_t i = 0; i < n; i++) {
        /* eight bytes at a time while none needs an escape (most text):
         * the byte loop alone was leased's costliest function on Valkey
         * (docs/benchmarks.md, "leased on Valkey") */
        while (n - i >= 8) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!plain8(w))
                break;
            memcpy(o, &w, 8);
            o += 8;
            i += 8;
        }
        if (i == n)
            break;
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *o++ = (char)c;
            continue;
        }
        *o++ = '\\';
        switch (c) {
        case '"':
        case '\\':
            *o++ = (char)c;
            break;
        case '\b':
            *o++ = 'b';
            break;
        case '\f':
            *o++ = 'f';
            break;
        case '\n':
            *o++ = 'n';
            break;
        case '\r':
            *o++ = 'r';
            break;
        case '\t':
            *o++ = 't';
            break;
        default:
            *o++ = 'u';
            *o++ = '0';
            *o++ = '0';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 15];
            break;
        }
    }
    *o++ = '"';
    b->len = (size_t)(o - b->data);
    b->data[b->len] = '\0';
}

bool lease_json_real_text(double x, char out[LEASE_JSON_REAL_TEXT_MAX])
{
    if (!isfinite(x))
        return false;
    if (x == 0) {
        /* jsonb has no negative zero: "-0" would come back as 0 anyway */
        snprintf(out, LEASE_JSON_REAL_TEXT_MAX, "0");
        return true;
    }
    /* 17 significant digits always round-trip; the first shorter precision
     * that does is the shortest text (%g picks plain or exponent form). */
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(out, LEASE_JSON_REAL_TEXT_MAX, "%.*g", prec, x);
        if (strtod(out, NULL) == x)
            return true;
    }
    return true;
}

bool lease_json_number_safe(const json_t *v)
{
    if (json_is_integer(v)) {
        json_int_t n = json_integer_value(v);
        return n >= -LEASE_JSON_SAFE_INTEGER && n <= LEASE_JSON_SAFE_INTEGER;
    }
    if (json_is_real(v)) {
        double x = json_real_value(v);
        return isfinite(x) && fabs(x) <= (double)LEASE_JSON_SAFE_INTEGER;
    }
    return false;
}

bool lease_json_null_unsafe_numbers(json_t *md)
{
    bool ok = true;
    const char *key;
    json_t *v;
    void *tmp;
    json_object_foreach_safe(md, tmp, key, v)
    {
        if (json_is_number(v) && !lease_json_number_safe(v) &&
            json_object_set_new(md, key, json_null()) != 0)
            ok = false;
    }
    return ok;
}

static int compare_keys(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void put_value(text_buf_t *b, json_t *v, size_t flags)
{
    lease_json_value(b, v, flags);
}

static void put_object(text_buf_t *b, json_t *v, size_t flags)
{
    size_t n = json_object_size(v);
    const char **keys = n ? malloc(n * sizeof *keys) : NULL;
    if (n && !keys) {
        b->failed = true;
        return;
    }
    size_t i = 0;
    const char *key;
    json_t *member;
    json_object_foreach(v, key, member)
    {
        keys[i++] = key;
    }
    if ((flags & JSON_SORT_KEYS) && n > 1)
        qsort(keys, n, sizeof *keys, compare_keys);
    put(b, "{", 1);
    for (i = 0; i < n && !b->failed; i++) {
        if (i)
            put(b, ",", 1);
        lease_json_string(b, keys[i], strlen(keys[i]));
        put(b, ":", 1);
        put_value(b, json_object_get(v, keys[i]), flags);
    }
    put(b, "}", 1);
    free(keys);
}

void lease_json_value(text_buf_t *b, json_t *v, size_t flags)
{
    char num[LEASE_JSON_REAL_TEXT_MAX];
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        put_object(b, v, flags);
        break;
    case JSON_ARRAY:
        put(b, "[", 1);
        for (size_t i = 0; i < json_array_size(v) && !b->failed; i++) {
            if (i)
                put(b, ",", 1);
            put_value(b, json_array_get(v, i), flags);
        }
        put(b, "]", 1);
        break;
    case JSON_STRING:
        lease_json_string(b, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER:
        snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        put_str(b, num);
        break;
    case JSON_REAL:
        if (!lease_json_real_text(json_real_value(v), num)) {
            b->failed = true;
            return;
        }
        put_str(b, num);
        break;
    case JSON_TRUE:
        put_str(b, "true");
        break;
    case JSON_FALSE:
        put_str(b, "false");
        break;
    case JSON_NULL:
    default:
        put_str(b, "null");
        break;
    }
}

/* What snprintf's %lld writes, without interpreting a format for each of the
 * half dozen numbers an answer or a request carries. */
void lease_json_int(text_buf_t *b, long long v)
{
    char num[24];
    char *p = num + sizeof num;
    /* the magnitude in unsigned arithmetic: -LLONG_MIN does not fit */
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u > 0);
    if (v < 0)
        *--p = '-';
    put(b, p, (size_t)(num + sizeof num - p));
}

void lease_json_separate(text_buf_t *b)
{
    if (b->len > 0 && b->data[b->len - 1] != '{' && b->data[b->len - 1] != '[')
        put(b, ",", 1);
}

void lease_json_text(text_buf_t *b, const char *v)
{
    size_t n = strlen(v);
    if (!lease_json_utf8_valid(v, n)) {
        b->failed = true;
        return;
    }
    lease_json_string(b, v, n);
}

void lease_json_key(text_buf_t *b, const char *k)
{
    lease_json_separate(b);
    lease_json_string(b, k, strlen(k));
    put(b, ":", 1);
}

void lease_json_put_str(text_buf_t *b, const char *k, const char *v)
{
    lease_json_key(b, k);
    lease_json_text(b, v ? v : "");
}

void lease_json_put_str_opt(text_buf_t *b, const char *k, const char *v)
{
    if (v && *v)
        lease_json_put_str(b, k, v);
}

void lease_json_put_int(text_buf_t *b, const char *k, long long v)
{
    lease_json_key(b, k);
    lease_json_int(b, v);
}

void lease_json_put_identity(text_buf_t *b, const lease_identity_t *id)
{
    lease_json_put_str(b, "tenant_id", id->tenant_id);
    lease_json_put_str(b, "program_id", id->program_id);
    lease_json_put_str(b, "target_namespace", id->target_namespace);
    lease_json_put_str(b, "target_id", id->target_id);
    lease_json_put_str(b, "actor_name", id->actor_name);
    lease_json_put_str(b, "workflow_name", id->workflow_name);
    lease_json_put_str(b, "operation_class",
                       id->operation_class[0] ? id->operation_class : "default");
}

void lease_json_put_raw(text_buf_t *b, const char *k, const char *json)
{
    lease_json_key(b, k);
    put_str(b, json);
}

char *lease_json_take(text_buf_t *b)
{
    if (b->failed || !b->data) {
        free(b->data);
        *b = (text_buf_t){0};
        return NULL;
    }
    char *text = b->data;
    *b = (text_buf_t){0};
    return text;
}

bool lease_json_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        size_t len;
        unsigned cp;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) {
            len = 2;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            cp = c & 0x07;
        } else {
            return false; /* a continuation byte, an overlong C0/C1, or F5-FF */
        }
        if (n - i < len)
            return false;
        for (size_t k = 1; k < len; k++) {
            if ((p[i + k] & 0xC0) != 0x80)
                return false;
            cp = (cp << 6) | (p[i + k] & 0x3F);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += len;
    }
    return true;
}

char *lease_json_dumps(json_t *v, size_t flags)
{
    if (!v)
        return NULL;
    text_buf_t b = {0};
    put_value(&b, v, flags);
    return lease_json_take(&b);
}
