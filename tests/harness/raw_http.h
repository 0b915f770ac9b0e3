/*
 * raw_http.h - HTTP over a plain socket, for tests that must send what no
 * well-behaved client library would (conflicting headers, %00 in paths,
 * trickled heads) and see exactly what comes back, connection close
 * included.
 *
 *   raw_conn_t *c = raw_connect(port, "127.0.0.2");   // local address, or NULL
 *   raw_send(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
 *   raw_resp_t *r = raw_read(c, 5000);                 // one reply, or NULL
 *   ... r->status, r->json, raw_header(r, "X-Correlation-Id") ...
 *   assert_true(raw_closed(c, 5000));                  // the server closed it
 *   raw_resp_free(r); raw_close(c);
 */
#ifndef LEASE_TEST_RAW_HTTP_H
#define LEASE_TEST_RAW_HTTP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct raw_conn raw_conn_t;

typedef struct raw_resp {
    int status;
    char *head; /* status line and headers, NUL-terminated */
    char *body; /* NUL-terminated */
    size_t body_len;
    json_t *json; /* body parsed, or NULL */
} raw_resp_t;

/* Connects to 127.0.0.1:port from local_addr (e.g. "127.0.0.2"; NULL: any).
 * NULL when the connection fails. */
raw_conn_t *raw_connect(int port, const char *local_addr);
/* Like raw_connect, with the socket non-blocking and the connect possibly
 * in progress (for opening many at once); poll raw_fd for writability. */
raw_conn_t *raw_connect_async(int port, const char *local_addr);
int raw_fd(const raw_conn_t *c);
/* Sends all of data (text) / n bytes; false when the connection failed. */
bool raw_send(raw_conn_t *c, const char *text);
bool raw_send_bytes(raw_conn_t *c, const void *data, size_t n);
/* One reply (by Content-Length) within timeout_ms; NULL on timeout, close
 * or a malformed reply. Bytes after it stay buffered for the next call. */
raw_resp_t *raw_read(raw_conn_t *c, int timeout_ms);
/* Whether the peer closed (EOF or reset) within timeout_ms, with nothing
 * more than already buffered bytes before it. */
bool raw_closed(raw_conn_t *c, int timeout_ms);
void raw_close(raw_conn_t *c);

/* Header value (case-insensitive name, trimmed; static buffer per call). */
const char *raw_header(const raw_resp_t *r, const char *name);
/* Top-level string member of the JSON body, or NULL. */
const char *raw_str(const raw_resp_t *r, const char *key);
void raw_resp_free(raw_resp_t *r);

/* One request (text) on a connection of its own from local_addr; its
 * answer within 10 s (NULL: none). */
raw_resp_t *raw_call(int port, const char *local_addr, const char *text);
/* The text of a POST of body (JSON) to path with a bearer token (heap). */
char *raw_post_text(const char *path, const char *token, const char *body);

#endif
