/*
 * http_client.h - a small libcurl client for tests of leased.
 *
 *   http_resp_t *r = http_call(base, "POST", "/v1/leases/acquire", token, body);
 *   assert_int_equal(r->status, 200);
 *   assert_string_equal(http_resp_str(r, "code"), "lease_acquired");
 *   http_resp_free(r);
 *
 * A client (http_client_new) keeps one connection alive across calls;
 * http_call makes a client for one call. Every call returns a response or
 * NULL on a transport failure (refused, reset, timeout; err says which).
 * Safe to use from many threads, one client per thread.
 */
#ifndef LEASE_TEST_HTTP_CLIENT_H
#define LEASE_TEST_HTTP_CLIENT_H

#include <jansson.h>
#include <stddef.h>

typedef struct http_resp {
    long status;
    char *body; /* NUL-terminated (the body itself may hold no NUL) */
    size_t body_len;
    json_t *json;  /* the body parsed, or NULL when it is not JSON */
    char *headers; /* raw response header block */
} http_resp_t;

typedef struct http_client http_client_t;

/* base: "http://127.0.0.1:PORT". timeout_ms bounds each call (0: 30 s). */
http_client_t *http_client_new(const char *base, long timeout_ms);
void http_client_free(http_client_t *c);

/*
 * One request. token: bearer token or NULL (no Authorization header);
 * body: JSON text or NULL (no body); headers: NULL-terminated extra
 * "Name: value" lines or NULL. err (may be NULL, >= 256 bytes) receives the
 * transport error when NULL is returned.
 */
http_resp_t *http_client_call(http_client_t *c, const char *method, const char *path,
                              const char *token, const char *body, const char *const *headers,
                              char *err);
/* The same with a body of explicit length (may hold NUL bytes). */
http_resp_t *http_client_call_raw(http_client_t *c, const char *method, const char *path,
                                  const char *token, const char *body, size_t body_len,
                                  const char *const *headers, char *err);

/* New connections the client has opened so far (keep-alive checks). */
long http_client_connects(const http_client_t *c);

/* One call on a fresh connection. */
http_resp_t *http_call(const char *base, const char *method, const char *path, const char *token,
                       const char *body);

/* Header value (case-insensitive name, value trimmed) or NULL. */
const char *http_resp_header(const http_resp_t *r, const char *name);
/* Top-level JSON string member, or NULL. */
const char *http_resp_str(const http_resp_t *r, const char *key);
/* Top-level JSON integer member, or -1. */
long long http_resp_int(const http_resp_t *r, const char *key);
/* A member by dotted path ("lease.fencing_token", "leases"), or NULL. */
json_t *http_resp_get(const http_resp_t *r, const char *path);

void http_resp_free(http_resp_t *r);

#endif
