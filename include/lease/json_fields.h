/*
 * json_fields.h - the JSON members every layer reads and writes alike.
 *
 * Reading answers: the service's answers in the C client
 * (src/client/client_codec.c) and the SQL functions' answers in the store
 * (src/store/pg_codec_result.c) use one set of getters with one rule:
 *
 * - absent and JSON null mean "not given": the output is "" or 0 and the
 *   read succeeds unless the member is required;
 * - a present member must have the right type and fit: a string no longer
 *   than its buffer and without an embedded NUL (a required string is not
 *   empty), an integer at least min, a time an RFC 3339 string.
 *
 * A false answer means the answer is malformed; outputs are then
 * unspecified. Requests are not read here: the service's strict request
 * decoder (src/server/json_codec.c) names the offending field and why.
 */
#ifndef LEASE_JSON_FIELDS_H
#define LEASE_JSON_FIELDS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lease/identity.h"

LEASE_MUST_USE bool lease_json_get_str(const json_t *o, const char *key, char *buf, size_t size,
                                       bool required);
LEASE_MUST_USE bool lease_json_get_int(const json_t *o, const char *key, int64_t *out,
                                       bool required, int64_t min);
/* An RFC 3339 string into milliseconds since the epoch (lease_time_parse). */
LEASE_MUST_USE bool lease_json_get_time(const json_t *o, const char *key, int64_t *out_ms,
                                        bool required);
/* Never required: absent is false. */
LEASE_MUST_USE bool lease_json_get_bool(const json_t *o, const char *key, bool *out);

/*
 * The lock_identity object of an answer: the six components required, the
 * operation class optional ("default" when absent). Copies what it was
 * given; it does not normalise (the service and the database did).
 */
LEASE_MUST_USE bool lease_json_get_identity(const json_t *o, lease_identity_t *id);

/* The lock_identity object of a normalised identity, all seven components
 * (the wire's, the audit's and the relay's): a new reference, NULL when out
 * of memory. */
json_t *lease_json_identity(const lease_identity_t *id);

#endif
