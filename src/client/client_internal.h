/*
 * client_internal.h - what the client module's files share: the libcurl
 * transport (client_http.c) and the JSON codec of answers (client_codec.c).
 * Not installed; callers use lease/client.h.
 */
#ifndef LEASE_CLIENT_INTERNAL_H
#define LEASE_CLIENT_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lease/client.h"
#include "lease/clock.h"
#include "lease/types.h"

/* What one HTTP exchange came to, judged only by the transport. */
typedef enum client_transport {
    CLIENT_ANSWERED,   /* an HTTP answer arrived (any status) */
    CLIENT_NOT_SENT,   /* nothing reached the service: refused, unresolvable,
                          connect timeout; the request cannot have acted */
    CLIENT_MAYBE_SENT, /* failed after the request may have been delivered */
} client_transport_t;

typedef struct client_http_answer {
    client_transport_t transport;
    bool timed_out; /* the local deadline cut the exchange */
    bool aborted;   /* the abort fd became readable: the caller gave up */
    int status;     /* HTTP status when answered, else 0 */
    char *body;     /* heap, NUL-terminated; NULL when no body */
    size_t len;
    char correlation_id[LEASE_CORRELATION_MAX + 1]; /* X-Correlation-Id */
    int64_t retry_after_ms;                         /* Retry-After, 0 if none */
    char error[LEASE_CLIENT_TRANSPORT_ERROR_MAX];   /* no answer: libcurl's words and errno */
} client_http_answer_t;

typedef struct client_http_pool client_http_pool_t;

/* A pool of idle libcurl easy handles (keeps connections alive between
 * calls). NULL when libcurl cannot be initialised. */
client_http_pool_t *client_http_pool_new(void);
void client_http_pool_free(client_http_pool_t *pool);
/* Trust the CA certificates in path (PEM) for https:// instead of the
 * system's; NULL restores the default. False when out of memory. */
LEASE_MUST_USE bool client_http_pool_set_ca_file(client_http_pool_t *pool, const char *path);

/*
 * One HTTP exchange. method "GET" or "POST" (body NULL for GET);
 * authorization is the full header line or NULL. Bounded by the deadline's
 * monotonic time; the caller checks the deadline has not passed. With
 * abort_fd >= 0 the exchange also ends, at once, when that fd becomes
 * readable (out->aborted; the fd is not read). Fills *out (release with
 * client_http_answer_clear). Thread-safe.
 */
void client_http_perform(client_http_pool_t *pool, const char *method, const char *url,
                         const char *authorization, const char *body,
                         const lease_deadline_t *deadline, int abort_fd, client_http_answer_t *out);
void client_http_answer_clear(client_http_answer_t *ans);

/* A decoded answer body. typed is true only for a well-formed envelope
 * ("status" and a known "code" that agree); root is then owned. */
typedef struct client_envelope {
    bool typed;
    lease_code_t code;
    char correlation_id[LEASE_CORRELATION_MAX + 1];
    int64_t retry_after_ms;
    char field[LEASE_FIELD_MAX + 1];
    bool replayed;
    int64_t waited_ms; /* lease_acquired: "waited_ms" (absent or invalid: 0) */
    lease_state_t current_state;
    int64_t current_revision;
    json_t *root;
} client_envelope_t;

/* Decodes body; returns env->typed. */
bool client_envelope_decode(const char *body, size_t len, client_envelope_t *env);
void client_envelope_clear(client_envelope_t *env);

/* Decodes a lease object of docs/api.md into out; false when a required
 * field is missing or malformed. */
LEASE_MUST_USE bool client_lease_decode(const json_t *obj, lease_record_t *out);

/* Decodes a session object of docs/api.md ("Sessions"); false when a
 * required field is missing or malformed. */
LEASE_MUST_USE bool client_session_decode(const json_t *obj, lease_session_t *out);

/* The lock_identity object of a request; operation_class NULL is omitted. */
json_t *client_identity_json(const lease_identity_input_t *id);

/*
 * One object a layer above the client keeps per client (the held leases'
 * renewal group, renewals.c): made by make(c) on the first call, under the
 * client's lock (NULL: not made, tried again next time), returned as is
 * afterwards, and given to drop by lease_client_free. The client holds it
 * without knowing what it is: the layer above calls down, never the
 * client up (tests/layers: no circle among the module's files).
 */
void *client_attachment(lease_client_t *c, void *(*make)(lease_client_t *), void (*drop)(void *));

/* Where a lease answer's local authority starts: min(first_sent_ns +
 * waited_ms, answered_ns), saturating; waited_ms < 0 counts as 0 and
 * answered_ns 0 (unknown) as no bound (lease_client_call_t.anchor_mono_ns). */
int64_t client_anchor_ns(int64_t first_sent_ns, int64_t waited_ms, int64_t answered_ns);

#endif
