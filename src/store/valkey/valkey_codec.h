/*
 * valkey_codec.h - requests of the store protocol as the leased_v1
 * functions' JSON argument, and their answers (flat RESP arrays of
 * name/value pairs) as typed results. No decision is made here.
 */
#ifndef LEASE_VALKEY_CODEC_H
#define LEASE_VALKEY_CODEC_H

#include <hiredis/hiredis.h>
#include <stdbool.h>

#include "lease/store.h"

/* Each returns a heap string (free()) or NULL when out of memory. */
char *valkey_encode_acquire(const lease_acquire_req_t *req);
char *valkey_encode_owner(const lease_owner_req_t *req, bool renew);
/* A batch: {"renewals": [...]} (renew) or {"releases": [...]}. */
char *valkey_encode_owner_many(const lease_owner_req_t *reqs, size_t n, bool renew);
char *valkey_encode_admin(const lease_admin_req_t *req);
char *valkey_encode_inspect(const lease_inspect_req_t *req);
char *valkey_encode_list(const lease_list_req_t *req);
/* A fenced commit: the lease reference, execution and trace, and each
 * write with its body or payload as JSON text ("body_json",
 * "payload_json": stored byte for byte). NULL also when a write's kind is
 * unknown. */
char *valkey_encode_commit(const lease_commit_req_t *req);
/* Audit events: {"events": [{field: value, ...}, ...]}, the fields of the
 * audit Stream (docs/backends.md), empty ones left out. */
char *valkey_encode_audit(const lease_audit_event_t *events, size_t n);

/* The value named name in a flat name/value array, or NULL. */
const redisReply *valkey_field(const redisReply *pairs, const char *name);
/* Integer value of name; false when absent or not an integer. */
bool valkey_int_field(const redisReply *pairs, const char *name, long long *out);

/* An answer of a lease function into res. Returns false when the answer is
 * malformed (not a name/value array, an unknown code or state, a value too
 * long for its field): the caller fails closed. */
bool valkey_decode_result(const redisReply *reply, lease_result_t *res);

/* A batch's answer: {"results", {answer...}} with n answers into results
 * (*refusal LEASE_CODE_COUNT), or a refusal of the whole batch (*refusal its
 * code, results untouched). False when malformed (also when the number of
 * answers is not n). */
bool valkey_decode_many(const redisReply *reply, size_t n, lease_result_t *results,
                        lease_code_t *refusal);

/* A list's answer into res (leases on the heap: lease_list_result_free).
 * Returns its code, or LEASE_CODE_COUNT when malformed (res freed). */
lease_code_t valkey_decode_list(const redisReply *reply, lease_list_result_t *res);

/* A fenced commit's answer into res: its code, and for commit_accepted one
 * revision per write (n_writes of them), for write_conflict the field and
 * current_revision. False when malformed (also when the results do not
 * match the writes). */
bool valkey_decode_commit(const redisReply *reply, size_t n_writes, lease_commit_result_t *res);

/* credential_lookup's answer: {"found", 0}, or the row (its secret's
 * digest included: the caller wipes it). False when malformed. */
bool valkey_decode_credential(const redisReply *reply, lease_credential_t *c, bool *found);

#endif
