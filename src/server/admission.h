/*
 * admission.h - admission control: token buckets (per credential; per
 * client address for requests the credential cache cannot vouch for;
 * failed authentications per client address), one global bound on requests in flight, and fair
 * shares of it per credential and per tenant. Each refusal says how long a retry should wait; the
 * caller turns it into 429 lease_rate_limited. All bounds are per leased instance.
 */
#ifndef LEASED_ADMISSION_H
#define LEASED_ADMISSION_H

#include <stdbool.h>
#include <stdint.h>

#include "lease/result.h"

typedef struct leased_admission leased_admission_t;

/* rate_per_s: tokens per second per credential, and the bucket size (burst);
 * max_inflight: requests admitted at once. NULL when out of memory. Until
 * leased_admission_configure, the other bounds do not limit anything. */
leased_admission_t *leased_admission_new(int64_t rate_per_s, int64_t max_inflight);
void leased_admission_free(leased_admission_t *adm);

typedef struct leased_admission_limits {
    int64_t max_inflight_per_credential; /* LEASE_MAX_INFLIGHT_PER_CREDENTIAL */
    int64_t max_inflight_per_tenant;     /* LEASE_MAX_INFLIGHT_PER_TENANT */
    int64_t max_waiting_per_credential;  /* LEASE_MAX_WAITING_PER_CREDENTIAL */
    int64_t max_waiting_per_tenant;      /* LEASE_MAX_WAITING_PER_TENANT */
    int64_t source_rate_per_s;           /* LEASE_SOURCE_RATE_LIMIT */
    int64_t auth_failure_rate_per_s;     /* LEASE_AUTH_FAILURE_LIMIT */
} leased_admission_limits_t;

/* Sets the bounds beyond the global ones (before serving). */
void leased_admission_configure(leased_admission_t *adm, const leased_admission_limits_t *limits);

/* Admits one request into the global bound. False (with *retry_after_ms)
 * when max_inflight requests are already in; then do not call leave. */
LEASE_MUST_USE bool leased_admission_enter(leased_admission_t *adm, int64_t *retry_after_ms);
void leased_admission_leave(leased_admission_t *adm);
int64_t leased_admission_inflight(const leased_admission_t *adm);

/* Takes one token from credential_id's bucket at monotonic time now_ns.
 * False (with *retry_after_ms until the next token) when it is empty. */
LEASE_MUST_USE bool leased_admission_take(leased_admission_t *adm, const char *credential_id,
                                          int64_t now_ns, int64_t *retry_after_ms);

/* One token from the client address's bucket, for a request whose
 * credential the cache cannot vouch for (auth.h, lease_auth_gate_t): a
 * valid cached credential never takes one. */
LEASE_MUST_USE bool leased_admission_source_take(leased_admission_t *adm, const char *source,
                                                 int64_t now_ns, int64_t *retry_after_ms);
/* Whether the client address may still make the store look a credential
 * up: false (with *retry_after_ms) once its failed authentications emptied
 * its bucket. Takes nothing. */
LEASE_MUST_USE bool leased_admission_lookup_allowed(leased_admission_t *adm, const char *source,
                                                    int64_t now_ns, int64_t *retry_after_ms);
/* Records one failed authentication of the client address. */
void leased_admission_auth_failed(leased_admission_t *adm, const char *source, int64_t now_ns);

/* A fair share: one request of credential_id (of tenant_id) in flight, or
 * (waiting) one acquire that may wait. False (with *retry_after_ms) when
 * the credential or the tenant already holds its bound; then do not call
 * unclaim. */
LEASE_MUST_USE bool leased_admission_claim(leased_admission_t *adm, const char *credential_id,
                                           const char *tenant_id, bool waiting,
                                           int64_t *retry_after_ms);
void leased_admission_unclaim(leased_admission_t *adm, const char *credential_id,
                              const char *tenant_id, bool waiting);

/* Counters for metrics. */
typedef struct leased_admission_stats {
    uint64_t rejected_rate;     /* credential token bucket */
    uint64_t rejected_inflight; /* global in-flight bound */
    uint64_t rejected_source;   /* client address bucket */
    uint64_t rejected_lookups;  /* refused credential lookups (failed authentications) */
    uint64_t rejected_share;    /* credential or tenant share */
} leased_admission_stats_t;
void leased_admission_stats(leased_admission_t *adm, leased_admission_stats_t *out);

uint64_t leased_admission_rejected_rate(const leased_admission_t *adm);
uint64_t leased_admission_rejected_inflight(const leased_admission_t *adm);

#endif
