/*
 * json_text.h - compact JSON text whose numbers survive a round trip through
 * PostgreSQL jsonb (numeric) and back.
 *
 * jansson prints reals with 17 significant digits, so 0.1 goes out as
 * 0.10000000000000001 and jsonb, which keeps decimal text exactly, stores
 * that. lease_json_dumps prints each real in the shortest form that parses
 * back to the same double (0.1 stays 0.1), integers exactly, and everything
 * else as jansson's compact form does.
 *
 * The number rule of request metadata (docs/api.md "Numbers") lives here
 * too, so the request decoder and the result decoder apply the same bound,
 * and the two readers of stored metadata null a number beyond it alike.
 */
#ifndef LEASE_JSON_TEXT_H
#define LEASE_JSON_TEXT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "lease/identity.h"

/* The largest magnitude a metadata number may have: 2^53 - 1, the range in
 * which every integer is exact in an IEEE double (JavaScript's
 * Number.MAX_SAFE_INTEGER). */
#define LEASE_JSON_SAFE_INTEGER 9007199254740991LL

/* Buffer size for lease_json_real_text. */
#define LEASE_JSON_REAL_TEXT_MAX 32

/*
 * A growing buffer of compact JSON text, for encoders that write a fixed
 * shape directly: building a jansson tree only to dump it costs an
 * allocation and a hash insert per member, and was most of what leased spent
 * encoding a request (docs/benchmarks.md, "Where leased's instructions go").
 * Start from {0}; `failed` sticks once memory runs out, and
 * lease_json_take then answers NULL. The caller writes the punctuation
 * ("{", ",", ":") with lease_json_raw.
 */
typedef struct lease_json_buf {
    char *data;
    size_t len, cap;
    bool failed;
} lease_json_buf_t;

void lease_json_raw(lease_json_buf_t *b, const char *s, size_t n);
/* s[0..n) as a JSON string, escaped exactly as jansson escapes it. The
 * bytes must be valid UTF-8 (lease_json_utf8_valid). */
void lease_json_string(lease_json_buf_t *b, const char *s, size_t n);
void lease_json_int(lease_json_buf_t *b, long long v);
/* Any JSON value, as lease_json_dumps writes it (flags likewise). */
void lease_json_value(lease_json_buf_t *b, json_t *v, size_t flags);
/* Members and elements: lease_json_separate writes the comma a member or
 * element needs (none right after "{" or "["), lease_json_key the
 * separator, key and colon. lease_json_text writes a string that must be
 * UTF-8 (else the buffer fails, as jansson's json_string refused it). The
 * put_ forms write a whole member: put_str writes "" for NULL, put_str_opt
 * nothing for NULL or "", put_raw JSON text as it is. */
void lease_json_separate(lease_json_buf_t *b);
void lease_json_key(lease_json_buf_t *b, const char *k);
void lease_json_text(lease_json_buf_t *b, const char *v);
void lease_json_put_str(lease_json_buf_t *b, const char *k, const char *v);
void lease_json_put_str_opt(lease_json_buf_t *b, const char *k, const char *v);
void lease_json_put_int(lease_json_buf_t *b, const char *k, long long v);
void lease_json_put_raw(lease_json_buf_t *b, const char *k, const char *json);
/* The seven members of a lock identity (without the braces around them), in
 * the order of its canonical form; an empty operation class is written as
 * "default", which is what identity.c reads an absent one as. Shared by the
 * answers leased writes and the requests the store sends. */
void lease_json_put_identity(lease_json_buf_t *b, const lease_identity_t *id);
/* The text written (heap, free()), and b emptied; NULL when a write failed
 * or nothing was written. */
char *lease_json_take(lease_json_buf_t *b);
/* Whether s[0..n) is UTF-8 as jansson accepts it for a string (RFC 3629: no
 * overlong forms, no surrogates, nothing above U+10FFFF). */
bool lease_json_utf8_valid(const char *s, size_t n);

/*
 * Compact JSON text of v (any JSON value; not modified), heap (free()); NULL when out of
 * memory or v holds a real that is not finite. flags: 0 or JSON_SORT_KEYS
 * (keys in byte order at every depth); other jansson flags are ignored.
 */
char *lease_json_dumps(json_t *v, size_t flags);

/* The shortest decimal text of a finite double that strtod reads back as
 * the same value ("0.1", "1e+300", "-2.5"); negative zero prints as "0".
 * False for NaN and infinities. */
bool lease_json_real_text(double x, char out[LEASE_JSON_REAL_TEXT_MAX]);

/* Whether a JSON number is one metadata may hold: an integer or a finite
 * real of magnitude at most LEASE_JSON_SAFE_INTEGER. False for non-numbers. */
bool lease_json_number_safe(const json_t *v);

/*
 * Stored metadata as it reads back (docs/api.md "Numbers"): every member of
 * the object md that is a number lease_json_number_safe refuses is replaced
 * by null; other members are left as they are. False when one could not
 * be replaced (jansson refused; the others still are).
 *
 * Why: a metadata number must come back exactly as it was sent, through
 * jsonb (numeric) and through clients that hold numbers as doubles, so the
 * request decoder refuses one above 2^53-1. A stored value can still be
 * beyond the bound (written before leased-2, by SQL, or by hand into a
 * Valkey record), and metadata is the caller's own non-authoritative data:
 * one such value must not make the lease, its list or its history
 * unreadable, nor be answered as a number the caller could not have sent.
 * It reads as null instead. Both readers of stored metadata call this, the
 * PostgreSQL result decoder (pg_codec_result.c) and the answer encoder,
 * which reads the text the Valkey library hands over (json_encode.c), so
 * the two backends answer the same.
 */
bool lease_json_null_unsafe_numbers(json_t *md);

#endif
