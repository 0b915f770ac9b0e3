/*
 * digest.h - request digests for idempotency.
 *
 * A mutation's request_id is its idempotency key; the digest says whether a
 * retry under that key asks for the same thing. It is the SHA-256, as 64
 * lower-case hex characters, of one canonical encoding: a JSON object dumped
 * by jansson with JSON_SORT_KEYS | JSON_COMPACT (keys in byte order at every
 * depth, no whitespace) holding every input that can change what the
 * operation does, and nothing else.
 *
 * Always included:
 *   "op"             acquire | renew | release | force_release | revoke | commit
 *   the seven normalised identity components, under their own names
 *                    (tenant_id ... operation_class)
 *   "principal_id"   call.principal.principal_id (the owner the call acts as)
 * Per operation:
 *   acquire          service_instance_id, execution_id, job_id, trace_id,
 *                    ttl_ms, maximum_lifetime_ms, metadata (the parsed object,
 *                    so its key order and spacing do not matter)
 *   renew            lease_id, fencing_token, service_instance_id, ttl_ms
 *   release          lease_id, fencing_token, service_instance_id
 *   force_release,
 *   revoke           lease_id, fencing_token, reason, incident_id
 *   commit           lease_id, fencing_token, execution_id, trace_id, writes:
 *                    an array in request order of
 *                    {"kind":"document","key":K,"expected_revision":N,"body":B} or
 *                    {"kind":"publication","topic":T,"payload":P}, B and P parsed
 *
 * Never included, because a retry may legitimately change them: request_id
 * (it is the key), the deadline and deadline_class, correlation_id, latency,
 * call.trace_id (audit only; acquire and commit digest their own trace_id),
 * client_id, credential_id (a retry may come through a rotated credential of
 * the same principal) and principal_class.
 *
 * Unset numbers (ttl_ms 0 = policy default) enter as 0: a retry that names
 * the default explicitly is a different request. An acquire metadata text
 * that is not valid JSON (callers validate it first) enters as a JSON string
 * of its raw text, so it can never equal the digest of a valid object. A
 * string field that is not valid UTF-8 enters as {"hex": ...} of its bytes.
 *
 * On allocation failure out is set to "" (not 64 hex), which the store's
 * functions reject: the request fails closed instead of carrying a digest
 * that could match another request's.
 */
#ifndef LEASE_DIGEST_H
#define LEASE_DIGEST_H

#include <stdbool.h>

#include "lease/operations.h"
#include "lease/result.h"
#include "lease/store.h"

#define LEASE_DIGEST_HEX_LEN 64

/* The digest of a fixed-shape mutation from its field list
 * (lease/operations.h): the base members, then each field marked DIGEST
 * read from req (the operation's store request). False (out "") when a
 * field cannot be written (a kind with its own form, or out of memory).
 * The functions below are this one with their operation's list. */
bool lease_digest_fields(const char *op, const lease_call_t *call, const lease_identity_t *id,
                         const void *req, const lease_field_t *fields, char out[65]);
void lease_digest_acquire(const lease_acquire_req_t *r, char out[65]);
void lease_digest_renew(const lease_owner_req_t *r, char out[65]);
void lease_digest_release(const lease_owner_req_t *r, char out[65]);
/* force-release when revoke is false. */
void lease_digest_admin(const lease_admin_req_t *r, bool revoke, char out[65]);
/* False (out "") when a write's body/payload is missing or not valid JSON
 * (duplicate object keys count as invalid), or a write's kind is unknown. */
LEASE_MUST_USE bool lease_digest_commit(const lease_commit_req_t *r, char out[65]);

#endif
