/*
 * http_frame.h - HTTP/1.1 message framing as the front door (http_gate.c)
 * checks it, before libmicrohttpd sees a byte.
 *
 * Pure functions over byte buffers, no I/O, so they are unit tested and
 * fuzzed directly (tests/fuzz/fuzz_http_frame.c). The rules are stricter
 * than RFC 9112 requires wherever a lenient reading could let two parsers
 * disagree about where a request ends (request smuggling) or what it names:
 *
 * - lines end in CRLF; a bare LF, obs-fold, whitespace before a colon, a
 *   control character or NUL anywhere in the head is refused;
 * - the target is origin-form of visible ASCII; in its path, %-escapes
 *   must be well formed and must not decode to a control character, "/"
 *   or "\" (so /v1/leases/<id>%00x can never name <id>); the query string
 *   is dropped before the request is passed on (no route takes one);
 * - HTTP/1.0 or HTTP/1.1 only; HTTP/1.1 needs exactly one Host;
 * - at most one Content-Length (digits only), at most one
 *   Transfer-Encoding and only "chunked", never both, and at most one
 *   Authorization;
 * - the head is at most LEASED_HTTP_HEAD_MAX bytes and
 *   LEASED_HTTP_HEADER_LINES_MAX lines.
 *
 * A refusal says which HTTP status and request field to answer with; the
 * gate answers it in the JSON envelope and closes the connection.
 */
#ifndef LEASED_HTTP_FRAME_H
#define LEASED_HTTP_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lease/result.h"

#define LEASED_HTTP_HEAD_MAX (16 * 1024)   /* request line + headers, bytes */
#define LEASED_HTTP_HEADER_LINES_MAX 100   /* header fields per request */
#define LEASED_HTTP_CHUNK_LINE_MAX 256     /* chunk-size line with extensions */
#define LEASED_HTTP_TRAILER_MAX 4096       /* trailer section of a chunked body */
#define LEASED_HTTP_RESPONSE_HEAD_MAX 8192 /* what the gate buffers of a reply head */

/* Why a request is refused: the answer's status, code and field. */
typedef struct leased_http_reject {
    int status;         /* 400, 408, 429, 503 */
    lease_code_t code;  /* LEASE_INVALID_LEASE_REQUEST, LEASE_DEADLINE_EXCEEDED, ... */
    const char *field;  /* "headers.content-length", "path", ...; static */
    const char *reason; /* for the log; static */
} leased_http_reject_t;

/* A request head that passed every rule. Pointers are into the caller's
 * buffer. */
typedef struct leased_http_head {
    const char *method; /* not NUL-terminated */
    size_t method_len;
    const char *path; /* the target without its query */
    size_t path_len;
    size_t plain_query_len; /* "?..." after the path when it holds only [A-Za-z0-9._=&-], else 0 */
    size_t line_len;        /* the request line including its CRLF */
    int version_minor;      /* HTTP/1.<n>, 0 or 1 */
    bool has_length;
    uint64_t content_length;
    bool chunked;
    bool expect_continue;
    bool keep_alive; /* what the client asked: 1.1 without close, 1.0 with keep-alive */
    bool is_head;    /* method HEAD: the reply has no body */
} leased_http_head_t;

/* Length of the head at the start of buf (through the empty line), 0 when
 * it is not complete yet. */
size_t leased_http_head_length(const char *buf, size_t len);

/* Parses a complete head of len bytes (as leased_http_head_length
 * measured). True with *out filled; false with *rej filled. */
bool leased_http_parse_head(const char *buf, size_t len, leased_http_head_t *out,
                            leased_http_reject_t *rej);

/* The head as it is passed on: the request line without its query (a
 * query of plain characters only is kept: GET /v1/leases/{id}/watch reads
 * wait_ms, and nothing in it needs unescaping), then the header lines
 * unchanged. out needs len bytes; returns the length. */
size_t leased_http_forward_head(const char *buf, size_t len, const leased_http_head_t *h,
                                char *out);

/* Incremental decoder of a chunked body (only to find where it ends and
 * how large it is; the bytes are passed on as they are). */
typedef struct leased_http_chunked {
    int state;          /* internal */
    uint64_t left;      /* data bytes left in the current chunk */
    size_t line_len;    /* bytes of the current size or trailer line */
    size_t trailer_len; /* bytes of trailer section so far */
    uint64_t total;     /* data bytes so far */
} leased_http_chunked_t;

typedef enum leased_http_chunked_status {
    LEASED_CHUNKED_MORE = 0, /* every byte consumed; the body goes on */
    LEASED_CHUNKED_DONE,     /* the body ended after *consumed bytes */
    LEASED_CHUNKED_BAD,      /* malformed or over body_max: *rej says why */
} leased_http_chunked_status_t;

/* Feeds len bytes; *consumed says how many belong to the body. */
leased_http_chunked_status_t leased_http_chunked_feed(leased_http_chunked_t *c, const char *buf,
                                                      size_t len, uint64_t body_max,
                                                      size_t *consumed, leased_http_reject_t *rej);

/* A reply head as libmicrohttpd wrote it. */
typedef struct leased_http_reply_head {
    int status;
    bool has_length;
    uint64_t content_length;
    bool chunked;
    bool ours;  /* carries X-Correlation-Id: made by leased, not by the library */
    bool close; /* Connection: close */
} leased_http_reply_head_t;

/* Parses a complete reply head of len bytes; false when it is malformed. */
bool leased_http_parse_reply_head(const char *buf, size_t len, leased_http_reply_head_t *out);

/* The reason phrase of a status the gate answers with. */
const char *leased_http_reason(int status);

#endif
