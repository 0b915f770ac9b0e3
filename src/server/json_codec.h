/*
 * json_codec.h - strict JSON decoding of request bodies and encoding of
 * lease objects and envelopes (docs/api.md).
 *
 * Decoding fails closed: duplicate keys, unknown fields, wrong types
 * (1.0 is not an integer, null is not a string), missing required fields
 * and out-of-bounds values are all invalid_lease_request, with the offending
 * field named as a dotted path ("lock_identity.target_id", "writes[1].key",
 * "body" for the body as a whole). Identities go through
 * lease_identity_normalize; nothing is repaired.
 */
#ifndef LEASED_JSON_CODEC_H
#define LEASED_JSON_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lease/store.h"
#include "request.h"

#define LEASED_BODY_MAX (64 * 1024) /* request bodies, bytes */
#define LEASED_METADATA_KEYS_MAX 16
#define LEASED_METADATA_KEY_MAX 64
#define LEASED_METADATA_STRING_MAX 256
#define LEASED_PAGE_SIZE_CAP 10000 /* sanity bound; the database policy decides */

typedef struct leased_codec_limits {
    int64_t max_wait_ms; /* LEASE_MAX_WAIT_MS: wait_ms above it is invalid */
} leased_codec_limits_t;

/* Why decoding failed: the field and a short reason for logs (both
 * static or copied; never the offending value). */
typedef struct leased_codec_error {
    char field[LEASE_FIELD_MAX + 1];
    const char *reason; /* "unknown field", "required", ... */
    /* A limit the client must know to fix the request, shown as the
     * answer's msg (a static string of ours, never the client's bytes);
     * NULL for the others, whose msg stays the code's own. */
    const char *bound;
} leased_codec_error_t;

/*
 * Decodes the body of op into req (made by leased_request_new(op)).
 * Returns true on success; on failure fills err and leaves req partially
 * filled (free it as usual). For LEASED_OP_GET the body must be empty and
 * lease_id is the path segment.
 */
LEASE_MUST_USE bool leased_codec_decode(leased_op_t op, const char *body, size_t len,
                                        const char *lease_id, const leased_codec_limits_t *limits,
                                        leased_request_t *req, leased_codec_error_t *err);

/* Who is looking at a lease: owner-private fields (service_instance_id,
 * execution_id, job_id, trace_id, metadata) appear when the viewer owns it
 * or holds audit:read; owner_principal_id/owner_client_id only with
 * audit:read. */
typedef struct leased_view {
    const char *principal_id; /* the caller's principal */
    bool audit_read;
} leased_view_t;

/* Each returns a heap string (free()) or NULL when out of memory. */

/* Success envelope of a single-lease result (acquire ... revoke, inspect);
 * replays add replayed and current_state. */
char *leased_codec_lease_envelope(const lease_result_t *res, const char *correlation_id,
                                  const leased_view_t *view);
/* Success envelope of a session call: "session" (docs/api.md, "Sessions"),
 * a close's "leases_ended" and "more", a replay's "replayed". */
char *leased_codec_session_envelope(const lease_result_t *res, const char *correlation_id);
/* Success envelope of a list page. */
/* A batch renewal or release that was decided: {"status": "success", "code":
 * "lease_renewed" or "lease_released" (code), "correlation_id", "results": [...]}, each result
 * the body a renewal or release of its own would have answered (status, code, lease or
 * msg/field/retry_after_ms), in request order, without a correlation id of its own. */
char *leased_codec_batch_envelope(lease_code_t code, const lease_result_t *results, size_t n,
                                  const char *correlation_id, const leased_view_t *view);
char *leased_codec_list_envelope(const lease_list_result_t *res, const char *correlation_id,
                                 const leased_view_t *view);
/* Success envelope of a commit. */
char *leased_codec_commit_envelope(const lease_commit_req_t *req, const lease_commit_result_t *res,
                                   const char *correlation_id);
/* Error envelope: field may be NULL or ""; retry_after_ms <= 0 is omitted;
 * current_revision < 0 is omitted (write_conflict carries it). */
/* reason (a stable word) and detail (replaces the code's message) may be NULL. */
char *leased_codec_error_envelope(lease_code_t code, const char *correlation_id, const char *field,
                                  int64_t retry_after_ms, int64_t current_revision,
                                  const char *reason, const char *detail);

#endif
