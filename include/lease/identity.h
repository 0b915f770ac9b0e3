/*
 * identity.h - the canonical lock identity and its lock key.
 *
 * Seven components, validated and normalised exactly as docs/contract.md
 * ("Identity and lock keys") says; anything else is rejected, never repaired. The lock key is
 * SHA-256 over the compact JSON array ["v1",tenant,...,operation_class],
 * unpadded base64url, prefixed "starintel:target-lease:v1:". SQL
 * (lease.lock_key) derives the same key; tests/vectors/lock_keys.json proves
 * they agree.
 */
#ifndef LEASE_IDENTITY_H
#define LEASE_IDENTITY_H

#include <stdbool.h>
#include <stddef.h>

#include "lease/result.h"

#define LEASE_NAME_MAX 64       /* tenant, program, namespace, actor, workflow */
#define LEASE_TARGET_ID_MAX 128 /* target_id */
#define LEASE_OPCLASS_MAX 16    /* longest enum value is "maintenance" */
#define LEASE_LOCK_KEY_PREFIX "starintel:target-lease:v1:"
#define LEASE_LOCK_KEY_LEN (sizeof(LEASE_LOCK_KEY_PREFIX) - 1 + 43)

/* A normalised identity: every field valid, lower-cased where the rule says. */
typedef struct lease_identity {
    char tenant_id[LEASE_NAME_MAX + 1];
    char program_id[LEASE_NAME_MAX + 1];
    char target_namespace[LEASE_NAME_MAX + 1];
    char target_id[LEASE_TARGET_ID_MAX + 1];
    char actor_name[LEASE_NAME_MAX + 1];
    char workflow_name[LEASE_NAME_MAX + 1];
    char operation_class[LEASE_OPCLASS_MAX + 1];
} lease_identity_t;

/* Raw, untrusted components as received (borrowed strings). operation_class
 * NULL means absent (canonical "default"); any other NULL is invalid. */
typedef struct lease_identity_input {
    const char *tenant_id;
    const char *program_id;
    const char *target_namespace;
    const char *target_id;
    const char *actor_name;
    const char *workflow_name;
    const char *operation_class;
} lease_identity_input_t;

/*
 * Validates and normalises `in` into `out`. Returns true on success. On
 * failure returns false, leaves `out` unspecified and sets *bad_field (when
 * not NULL) to the offending component's name, e.g. "target_id" (a static
 * string).
 */
LEASE_MUST_USE bool lease_identity_normalize(const lease_identity_input_t *in,
                                             lease_identity_t *out, const char **bad_field);

/* Validates one component by name ("tenant_id", ...); writes the normalised
 * value into out (size outsz). Used by list filters that carry a subset. */
LEASE_MUST_USE bool lease_identity_component_normalize(const char *field, const char *value,
                                                       char *out, size_t outsz);

/* True when the two normalised identities are the same tuple. */
bool lease_identity_equal(const lease_identity_t *a, const lease_identity_t *b);

/* Derives the lock key of a normalised identity into out (LEASE_LOCK_KEY_LEN
 * characters plus NUL). */
void lease_lock_key(const lease_identity_t *id, char out[LEASE_LOCK_KEY_LEN + 1]);

/* Identifier fields that are not identity components (request_id, lease_id,
 * service_instance_id, execution_id, job_id, trace_id, incident_id): 1..128
 * of [A-Za-z0-9._:-]. */
#define LEASE_ID_MAX 128
bool lease_id_valid(const char *s);

#endif
