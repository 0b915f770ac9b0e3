/*
 * service.h - one function per lease operation, between HTTP and the store.
 *
 * The service owns every decision that is not the database's: deadlines
 * (default, cap, already passed => deadline_exceeded without touching the
 * database), authentication and authorisation (capability, canonical scope,
 * administrator credential), request digests for idempotency, bounded
 * acquire waiting, and audit events for requests that never reach a
 * mutation (the store audits mutations inside their own transaction).
 * It knows nothing of JSON or HTTP.
 */
#ifndef LEASED_SERVICE_H
#define LEASED_SERVICE_H

#include <stdbool.h>
#include <stdint.h>

#include "lease/store.h"
#include "audit_queue.h"
#include "auth.h"
#include "request.h"

typedef struct leased_service leased_service_t;

typedef struct leased_service_config {
    int64_t default_deadline_ms; /* LEASE_DEFAULT_DEADLINE_MS */
    int64_t max_deadline_ms;     /* LEASE_MAX_DEADLINE_MS */
    int64_t max_wait_ms;         /* LEASE_MAX_WAIT_MS */
} leased_service_config_t;

/* The context of one request, threaded through every step. */
typedef struct leased_op_ctx {
    leased_op_t op;
    char correlation_id[LEASE_CORRELATION_MAX + 1];
    char trace_id[LEASE_ID_MAX + 1]; /* from traceparent; a body trace_id wins */
    int64_t received_mono_ns;
    int64_t received_wall_ms;
    char source[64]; /* the client's address (audit, per-source limits) */
    bool authenticated;
    lease_caller_t caller; /* valid when authenticated */
} leased_op_ctx_t;

/* What an operation answered. Clear with leased_outcome_clear. */
typedef struct leased_outcome {
    lease_code_t code;
    char field[LEASE_FIELD_MAX + 1]; /* invalid_lease_request, write_conflict */
    int64_t retry_after_ms;          /* > 0 when a retry can help */
    int64_t current_revision;        /* write_conflict, else -1 */
    const char *reason;              /* lease_backend_unavailable: why (borrowed), or NULL */
    const char *detail;              /* a safe human detail for msg (borrowed), or NULL */
    lease_result_t lease;            /* single-lease operations */
    lease_list_result_t list;        /* LIST (heap-owning) */
    lease_commit_result_t commit;    /* COMMIT */
    /* RENEW_BATCH or RELEASE_BATCH decided (code LEASE_RENEWED or
     * LEASE_RELEASED): one result per renewal or release, in
     * request order (heap; freed by leased_outcome_clear) */
    lease_result_t *items;
    size_t n_items;
    /* > 0: not final yet. An acquire that may wait conflicted; call
     * leased_service_run_again after this many milliseconds. */
    int64_t again_after_ms;
    int64_t backoff_ms; /* waiting state between attempts */
    int attempts;
    /* The store's serialization retries, paused with no thread held: when
     * again_after_ms is set from here, the same call is made again. */
    lease_retry_t store_retry;
} leased_outcome_t;

void leased_outcome_clear(leased_outcome_t *out);

/* All borrowed; they must outlive the service. NULL when out of memory. */
leased_service_t *leased_service_new(lease_store_t *store, lease_auth_t *auth,
                                     leased_audit_queue_t *audit,
                                     const leased_service_config_t *cfg);
void leased_service_free(leased_service_t *svc);

/* Starts a request context (correlation id, trace id and the client's
 * address are copied; source may be NULL). */
void leased_service_begin(leased_op_ctx_t *ctx, leased_op_t op, const char *correlation_id,
                          const char *traceparent_trace_id, const char *source,
                          int64_t received_mono_ns);

/* Authenticates the Authorization header value (NULL when absent). True
 * with ctx->caller filled; else false with *code LEASE_INVALID_CREDENTIAL,
 * LEASE_RATE_LIMITED (the source's budgets, see lease_auth_gate_t),
 * LEASE_BACKEND_UNAVAILABLE or
 * LEASE_DEADLINE_EXCEEDED (audited, aggregated per source: see
 * leased_audit_queue_count). gate may be NULL. */
LEASE_MUST_USE bool leased_service_authenticate(leased_service_t *svc, leased_op_ctx_t *ctx,
                                                const char *authorization, lease_auth_gate_t *gate,
                                                lease_code_t *code);

/* Whether the caller holds one of caps_any; else false with *code
 * LEASE_ACCESS_DENIED (audited). */
LEASE_MUST_USE bool leased_service_authorize(leased_service_t *svc, leased_op_ctx_t *ctx,
                                             unsigned caps_any, lease_code_t *code);

/* Audits a request refused before it reached an operation (invalid body,
 * rate limit). req may be NULL or partially decoded. Refusals of
 * unauthenticated requests and rate limits are aggregated per source,
 * credential and window (one event with a count). */
/* The tenant whose cached credential authorization carries (auth.h,
 * lease_auth_cached_tenant): false when the cache cannot vouch for it. */
LEASE_MUST_USE bool leased_service_cached_tenant(leased_service_t *svc, const char *authorization,
                                                 char *tenant);

void leased_service_audit_refusal(leased_service_t *svc, const leased_op_ctx_t *ctx,
                                  lease_code_t code, const leased_request_t *req);

/*
 * Runs a decoded request: deadline, authorisation, digest, store call,
 * audit. Fills out; returns out->code. ctx must be authenticated. When
 * out->again_after_ms > 0 the answer is not final (an acquire with wait_ms
 * conflicted and may try again): keep ctx, req and out, and call
 * leased_service_run_again after that pause, without holding a thread.
 */
/* Whether out waits for the store's own retry (not an acquire's wait):
 * it must be run again even when its client has gone, to be answered and
 * audited. */
bool leased_service_retrying(const leased_outcome_t *out);

lease_code_t leased_service_run(leased_service_t *svc, leased_op_ctx_t *ctx, leased_request_t *req,
                                leased_outcome_t *out);
/* The next attempt of a waiting acquire (same request id and digest). */
lease_code_t leased_service_run_again(leased_service_t *svc, leased_op_ctx_t *ctx,
                                      leased_request_t *req, leased_outcome_t *out);

/* Whether the caller's credential is still valid now (lease_auth_recheck,
 * within the credential cache's TTL): for work that waited since its
 * authentication. deadline may be NULL (the default deadline). False with
 * *code LEASE_INVALID_CREDENTIAL, or LEASE_BACKEND_UNAVAILABLE/LEASE_DEADLINE_EXCEEDED
 * when it could not be told. Always true for an unauthenticated ctx. */
LEASE_MUST_USE bool leased_service_recheck(leased_service_t *svc, const leased_op_ctx_t *ctx,
                                           const lease_deadline_t *deadline, lease_code_t *code);

/* Fills the request digest of a mutation (lease/digest.h) into its call,
 * or into each item's call for a batch, from the decoded request and the
 * caller's principal_id already in the call; reads carry none (true).
 * False when it cannot be computed (allocation failure). */
LEASE_MUST_USE bool leased_service_digest(leased_request_t *req);

/* The highest fencing token any answer of this process carried since it
 * started (acquire, renew, release, revoke, inspect, list, batches...), 0
 * when none: the gauge leased_fencing_token_max, read by
 * `leasectl recover --floor-from` (docs/operators.md, "Recovery"). */
int64_t leased_service_fencing_token_max(const leased_service_t *svc);

/* Ends acquire waits early (shutdown): waiting acquires answer their last
 * conflict at their next attempt. */
void leased_service_stop_waiting(leased_service_t *svc);

#endif
