/*
 * admission.h - admission control: a token bucket per credential and one
 * global bound on requests in flight. Both answer with how long a retry
 * should wait; the caller turns a refusal into 429 lease_rate_limited.
 */
#ifndef LEASED_ADMISSION_H
#define LEASED_ADMISSION_H

#include <stdbool.h>
#include <stdint.h>

#include "lease/result.h"

typedef struct leased_admission leased_admission_t;

/* rate_per_s: tokens per second per credential, and the bucket size (burst);
 * max_inflight: requests admitted at once. NULL when out of memory. */
leased_admission_t *leased_admission_new(int64_t rate_per_s, int64_t max_inflight);
void leased_admission_free(leased_admission_t *adm);

/* Admits one request into the global bound. False (with *retry_after_ms)
 * when max_inflight requests are already in; then do not call leave. */
LEASE_MUST_USE bool leased_admission_enter(leased_admission_t *adm, int64_t *retry_after_ms);
void leased_admission_leave(leased_admission_t *adm);
int64_t leased_admission_inflight(const leased_admission_t *adm);

/* Takes one token from credential_id's bucket at monotonic time now_ns.
 * False (with *retry_after_ms until the next token) when it is empty. */
LEASE_MUST_USE bool leased_admission_take(leased_admission_t *adm, const char *credential_id,
                                          int64_t now_ns, int64_t *retry_after_ms);

/* Counters for metrics. */
uint64_t leased_admission_rejected_rate(const leased_admission_t *adm);
uint64_t leased_admission_rejected_inflight(const leased_admission_t *adm);

#endif
