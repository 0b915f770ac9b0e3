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
 * too, so the request decoder and the result decoder apply the same bound.
 */
#ifndef LEASE_JSON_TEXT_H
#define LEASE_JSON_TEXT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* The largest magnitude a metadata number may have: 2^53 - 1, the range in
 * which every integer is exact in an IEEE double (JavaScript's
 * Number.MAX_SAFE_INTEGER). */
#define LEASE_JSON_SAFE_INTEGER 9007199254740991LL

/* Buffer size for lease_json_real_text. */
#define LEASE_JSON_REAL_TEXT_MAX 32

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

#endif
