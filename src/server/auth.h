/*
 * auth.h - bearer authentication, capabilities and canonical scope.
 *
 * Credentials are looked up through the store (lease.credential_lookup) and
 * cached briefly; revocation takes effect within the cache TTL (a few
 * seconds), also for work already waiting (lease_auth_recheck); expiry is
 * exact, on backend time. Every decision here is made on normalised identities.
 */
#ifndef LEASE_AUTH_H
#define LEASE_AUTH_H

#include <stdbool.h>
#include <stdint.h>

#include "lease/store.h"
#include "lease/token.h"

/* The authenticated caller of one request. */
typedef struct lease_caller {
    lease_principal_t principal; /* principal_class "admin" or "worker" */
    lease_scope_t scope;
    unsigned capabilities; /* LEASE_CAP_* */
    bool admin;
} lease_caller_t;

typedef struct lease_auth_config {
    int64_t cache_ttl_ms; /* how long a looked-up credential is trusted */
    const char *pepper;   /* LEASE_TOKEN_PEPPER, may be NULL */
} lease_auth_config_t;

typedef struct lease_auth lease_auth_t;

/* Creates the authenticator over a store (borrowed; must outlive it). */
lease_auth_t *lease_auth_new(lease_store_t *store, const lease_auth_config_t *cfg);
void lease_auth_free(lease_auth_t *auth);

/*
 * Authenticates the value of an Authorization header (may be NULL).
 * Returns true and fills *out on success. On failure returns false and sets
 * *code to LEASE_INVALID_CREDENTIAL (missing, malformed, unknown, wrong secret,
 * revoked, expired: indistinguishable to the caller) or
 * LEASE_BACKEND_UNAVAILABLE / LEASE_DEADLINE_EXCEEDED when the lookup could not be
 * made. Never logs the token.
 */
LEASE_MUST_USE bool lease_auth_authenticate(lease_auth_t *auth, const char *authorization,
                                            const lease_deadline_t *deadline, lease_caller_t *out,
                                            lease_code_t *code);

/*
 * The budgets of a request's source (client address), asked only when the
 * cache cannot vouch for the credential (unknown to it, stale, or failing):
 * a request with a valid cached credential passes neither.
 * - admit_uncached: the source's rate of such requests; false refuses the
 *   request (LEASE_RATE_LIMITED) before anything else is done for it.
 * - allow_lookup: the source's budget of failed authentications; false
 *   means it is spent: no lookup is made and every failure, whatever its
 *   id, answers LEASE_RATE_LIMITED instead of LEASE_INVALID_CREDENTIAL.
 * Either may be NULL (no bound). Both must be quick; the retry hint of a
 * refusal goes to retry_after_ms.
 */
typedef struct lease_auth_gate {
    bool (*admit_uncached)(void *cls, int64_t *retry_after_ms);
    bool (*allow_lookup)(void *cls, int64_t *retry_after_ms);
    void *cls;
    int64_t retry_after_ms; /* set when a request was refused */
} lease_auth_gate_t;

/*
 * The tenant of the credential in authorization when the cache alone
 * vouches for it (a row fetched within the last minute, the right secret,
 * valid now): for classifying a request before it runs. The row may be
 * older than the cache window (a tenant whose requests all wait in its
 * queue refreshes nothing, and must not slip into an address's flow
 * meanwhile); the request is authenticated as always when it runs. Never asks the store, never
 * blocks; false when the cache cannot vouch (the request is then
 * classified by its client address). tenant: LEASE_NAME_MAX + 1 bytes.
 */
LEASE_MUST_USE bool lease_auth_cached_tenant(lease_auth_t *auth, const char *authorization,
                                             char *tenant);

/* lease_auth_authenticate with a source's budgets (gate may be NULL). */
LEASE_MUST_USE bool lease_auth_authenticate_gated(lease_auth_t *auth, const char *authorization,
                                                  const lease_deadline_t *deadline,
                                                  lease_auth_gate_t *gate, lease_caller_t *out,
                                                  lease_code_t *code);

/*
 * Whether the credential of a caller authenticated earlier is still valid
 * now (not revoked, not expired), as the cache (entries at most the cache
 * TTL old) or else the store says: for work that waited after its
 * authentication (an acquire between attempts, a parked watch). False with
 * *code LEASE_INVALID_CREDENTIAL when it is not, or LEASE_BACKEND_UNAVAILABLE /
 * LEASE_DEADLINE_EXCEEDED when the store could not be asked.
 */
LEASE_MUST_USE bool lease_auth_recheck(lease_auth_t *auth, const lease_caller_t *caller,
                                       const lease_deadline_t *deadline, lease_code_t *code);

/* Parses "Bearer lsk_..." (scheme case-insensitive, one or more spaces)
 * into the credential id and the secret's bytes (wipe them after use). */
LEASE_MUST_USE bool lease_auth_parse_bearer(const char *authorization,
                                            char id[LEASE_CREDENTIAL_ID_LEN + 1],
                                            unsigned char secret[LEASE_SECRET_BYTES]);

/* Whether the caller holds every capability bit in caps. */
bool lease_auth_has(const lease_caller_t *caller, unsigned caps);
/* Whether a normalised identity lies inside the caller's scope. */
bool lease_auth_in_scope(const lease_caller_t *caller, const lease_identity_t *id);
/* Whether tenant/program (list filters) lie inside the caller's scope. */
bool lease_auth_program_in_scope(const lease_caller_t *caller, const char *tenant_id,
                                 const char *program_id);

/* Forgets a cached credential (tests, and revocation seen elsewhere). */
void lease_auth_forget(lease_auth_t *auth, const char *credential_id);

#endif
