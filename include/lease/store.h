/*
 * store.h - the backend-neutral lease-store protocol.
 *
 * Typed requests in, typed results out (the records and results themselves
 * are lease/types.h, shared with the HTTP client). Every operation is one atomic
 * backend call that decides with backend time; the adapter (store_pg.c for
 * PostgreSQL) owns connections, deadlines, serialization retries and the
 * mapping of every backend outcome to a lease_code_t. No backend type, raw
 * error or message crosses this boundary.
 *
 * Ownership: request structs are borrowed for the duration of the call;
 * results are written into caller-owned structs. The only heap-owning
 * results are list pages (lease_list_result_free).
 * Thread safety: a lease_store_t may be used from many threads at once.
 */
#ifndef LEASE_STORE_H
#define LEASE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lease/clock.h"
#include "lease/identity.h"
#include "lease/result.h"
#include "lease/types.h"

#define LEASE_SCOPE_ACTORS_MAX 32
#define LEASE_CLASS_MAX 16

/* The authenticated caller, from auth (never from a request body). */
typedef struct lease_principal {
    char principal_id[LEASE_ID_MAX + 1];
    char client_id[LEASE_ID_MAX + 1];
    char credential_id[LEASE_ID_MAX + 1];
    char principal_class[LEASE_CLASS_MAX + 1]; /* "worker" | "admin" */
} lease_principal_t;

/* What every call carries. */
/* A call's serialization retries (40001, 40P01, 55P03), handed back to
 * its caller instead of slept through, so that no thread is held during
 * the pause: the store answers with again_after_ms > 0 (the answer's code
 * is then only a placeholder), and the caller makes the same call again
 * after that pause, with the same state. Set by the caller (yield), kept
 * by the store between the calls. */
typedef struct lease_retry {
    bool yield;             /* in: return between attempts instead of sleeping */
    int attempts;           /* the store's: attempts made so far */
    int64_t backoff_ms;     /* the store's: the next pause's bound */
    bool touched;           /* the store's: a statement reached the server */
    int64_t again_after_ms; /* out: > 0: not answered yet; call again after this pause */
} lease_retry_t;

typedef struct lease_call {
    char request_id[LEASE_ID_MAX + 1];         /* idempotency key (mutations) */
    char correlation_id[LEASE_CORRELATION_MAX + 1];
    char trace_id[LEASE_ID_MAX + 1];           /* audit correlation; may be "" */
    char deadline_class[LEASE_CLASS_MAX + 1];  /* "default" | "client" | "capped" */
    lease_deadline_t deadline;
    int64_t received_mono_ns;                  /* for audit latency */
    lease_principal_t principal;
    /* Hex SHA-256 over every behaviour-affecting input (lease_request_digest).
     * Filled by the service layer for mutations. */
    char request_digest[65];
    lease_retry_t *retry; /* NULL: the store pauses between attempts itself */
} lease_call_t;

typedef struct lease_acquire_req {
    lease_call_t call;
    lease_identity_t identity;
    char service_instance_id[LEASE_ID_MAX + 1];
    char execution_id[LEASE_ID_MAX + 1];
    char job_id[LEASE_ID_MAX + 1];
    char trace_id[LEASE_ID_MAX + 1];
    int64_t ttl_ms;              /* 0: policy default */
    int64_t maximum_lifetime_ms; /* 0: policy maximum */
    char metadata_json[LEASE_METADATA_MAX + 1]; /* validated compact object or "{}" */
    char session_id[LEASE_ID_MAX + 1]; /* "": no session; else the lease lives in it */
} lease_acquire_req_t;

/* renew (ttl_ms 0: keep the lease's effective TTL) and release. */
typedef struct lease_owner_req {
    lease_call_t call;
    lease_identity_t identity;
    char lease_id[LEASE_ID_MAX + 1];
    int64_t fencing_token;
    char service_instance_id[LEASE_ID_MAX + 1];
    int64_t ttl_ms;
} lease_owner_req_t;

/* force-release and revoke: compare against the observed lease only. */
typedef struct lease_admin_req {
    lease_call_t call;
    lease_identity_t identity;
    char lease_id[LEASE_ID_MAX + 1];
    int64_t fencing_token;
    char reason[LEASE_REASON_MAX + 1];
    char incident_id[LEASE_ID_MAX + 1]; /* revoke only; may be "" */
} lease_admin_req_t;

/* A session call (docs/sql-api.md, "Sessions"): open names the instance
 * and TTL, keep-alive and close the session; the tenant is the caller's. */
typedef struct lease_session_req {
    lease_call_t call;
    char tenant_id[LEASE_NAME_MAX + 1];            /* from the credential's scope */
    char session_id[LEASE_ID_MAX + 1];             /* keep-alive, close */
    char service_instance_id[LEASE_ID_MAX + 1];    /* open */
    int64_t ttl_ms;                                /* open; 0: the policy's default */
} lease_session_req_t;

/* What a caller may see: tenant, program ("*" = all), actor names. */
typedef struct lease_scope {
    char tenant_id[LEASE_NAME_MAX + 1];
    char program_id[LEASE_NAME_MAX + 1];
    bool all_actors;
    size_t n_actors;
    char actor_names[LEASE_SCOPE_ACTORS_MAX][LEASE_NAME_MAX + 1];
} lease_scope_t;

typedef struct lease_inspect_req {
    lease_call_t call;
    lease_scope_t scope;     /* results outside it are lease_not_found */
    bool by_identity;        /* else by lease_id */
    lease_identity_t identity;
    char lease_id[LEASE_ID_MAX + 1];
} lease_inspect_req_t;

typedef struct lease_list_req {
    lease_call_t call;
    lease_scope_t scope;
    lease_list_by_t by;
    char tenant_id[LEASE_NAME_MAX + 1];
    char program_id[LEASE_NAME_MAX + 1];
    char target_namespace[LEASE_NAME_MAX + 1]; /* by target */
    char target_id[LEASE_TARGET_ID_MAX + 1];   /* by target */
    char owner_principal_id[LEASE_ID_MAX + 1]; /* by owner: the caller */
    int page_size;                             /* 0: server default */
    char page_token[LEASE_PAGE_TOKEN_MAX + 1]; /* "" for the first page */
} lease_list_req_t;

typedef struct lease_commit_req {
    lease_call_t call;
    lease_identity_t identity;
    char lease_id[LEASE_ID_MAX + 1];
    int64_t fencing_token;
    char execution_id[LEASE_ID_MAX + 1];
    char trace_id[LEASE_ID_MAX + 1];
    size_t n_writes;
    lease_write_t writes[LEASE_COMMIT_WRITES_MAX];
} lease_commit_req_t;

/* One audit event of a request that did not reach a mutation (denied,
 * invalid, conflict, rate-limited, backend failure, reads). Mutations are
 * audited inside their own transaction by the backend. */
typedef struct lease_audit_event {
    const char *event_type;            /* target_lease_acquire, ... */
    int64_t occurred_at_ms;
    int64_t latency_ms;
    lease_code_t code;
    const char *decision;              /* "allow" | "deny" | "error" */
    const char *backend_health;        /* "ok" | "degraded" | "unavailable" */
    lease_call_t call;
    bool has_identity;
    lease_identity_t identity;
    char lease_id[LEASE_ID_MAX + 1];
    int64_t fencing_token;
    char service_instance_id[LEASE_ID_MAX + 1];
    char execution_id[LEASE_ID_MAX + 1];
    char job_id[LEASE_ID_MAX + 1];
    int64_t requested_ttl_ms;
    lease_state_t previous_state;
    lease_state_t resulting_state;
    char reason[LEASE_REASON_MAX + 1];
    char incident_id[LEASE_ID_MAX + 1];
    int64_t event_count;   /* > 1: an aggregate of that many refusals (0 or 1: one) */
    char source_address[64]; /* the client's address, "" when not from HTTP */
} lease_audit_event_t;

typedef struct lease_credential {
    char credential_id[LEASE_ID_MAX + 1];
    char principal_id[LEASE_ID_MAX + 1];
    char client_id[LEASE_ID_MAX + 1];
    lease_scope_t scope;
    bool admin;
    unsigned capabilities; /* LEASE_CAP_* bits */
    unsigned char secret_digest[32];
    int64_t created_at_ms;
    bool revoked;
    /* Expiry as the backend saw it at the lookup (no sentinel value): with
     * has_expiry, expires_in_ms of validity were left at backend time (0:
     * already expired, every past instant included); without, none. */
    bool has_expiry;
    int64_t expires_in_ms;
} lease_credential_t;

enum {
    LEASE_CAP_LEASE = 1u << 0,         /* targets:lease */
    LEASE_CAP_READ = 1u << 1,          /* targets:read */
    LEASE_CAP_FORCE_RELEASE = 1u << 2, /* targets:force-release */
    LEASE_CAP_REVOKE = 1u << 3,        /* targets:revoke */
    LEASE_CAP_AUDIT_READ = 1u << 4,    /* audit:read */
};

typedef struct lease_health {
    bool reachable;
    bool schema_current;
    bool sealed;
    int schema_version;
    int expected_schema_version;
    int64_t active_leases;
} lease_health_t;

typedef struct lease_store_stats {
    int pool_size;
    int pool_in_use;
    int pool_waiting;
    uint64_t serialization_retries;
    uint64_t outcome_unknown;
    uint64_t backend_errors;
    uint64_t sealed_refusals;    /* decisions refused: the namespace is sealed */
    uint64_t combined_calls;     /* Valkey: calls that carried two or more requests */
    uint64_t combined_items;     /* Valkey: the requests those calls carried */
} lease_store_stats_t;

typedef struct lease_sweep_result {
    bool ran;               /* false: another instance holds the sweep lock */
    int64_t expired;        /* leases moved to history as expired */
    int64_t idempotency_purged;
    int64_t history_purged;
    int64_t audit_purged;
} lease_sweep_result_t;

/* The background housekeeping, in separate bounded steps (sweeper.c). */
typedef enum lease_housekeeping_step {
    LEASE_STEP_NAMESPACE = 0, /* lease.check_namespace: seal after a restore or failover */
    LEASE_STEP_EXPIRE,        /* lease.expire_due: expired leases into history */
    LEASE_STEP_PURGE,         /* lease.purge_due: rows past retention */
    LEASE_STEP_COUNT
} lease_housekeeping_step_t;

/* The retention-bounded tables lease.purge_due trims. */
typedef enum lease_retention_table {
    LEASE_TABLE_IDEMPOTENCY = 0,
    LEASE_TABLE_HISTORY,
    LEASE_TABLE_LEASE_INDEX,
    LEASE_TABLE_AUDIT,
    LEASE_TABLE_COUNT
} lease_retention_table_t;

typedef struct lease_housekeeping_result {
    bool ran;        /* false: another instance holds the sweep lock */
    bool more;       /* a batch was full: rows are still due */
    int64_t expired; /* LEASE_STEP_EXPIRE: leases moved to history */
    int64_t lag_ms;  /* LEASE_STEP_EXPIRE: how long ago the oldest lease it found expired */
    int64_t purged[LEASE_TABLE_COUNT];      /* LEASE_STEP_PURGE: rows deleted */
    int64_t purge_lag_ms[LEASE_TABLE_COUNT]; /* how far past retention the oldest row left is */
    int64_t sessions_purged; /* LEASE_STEP_PURGE: ended sessions deleted (lease.purge_due) */
} lease_housekeeping_result_t;

typedef struct lease_store lease_store_t;

/* The operations an adapter implements. Every function returns the typed
 * outcome (also stored in the result struct where there is one). */
typedef struct lease_store_ops {
    lease_code_t (*acquire)(lease_store_t *, const lease_acquire_req_t *, lease_result_t *);
    lease_code_t (*renew)(lease_store_t *, const lease_owner_req_t *, lease_result_t *);
    lease_code_t (*renew_many)(lease_store_t *, const lease_owner_req_t *reqs, size_t n,
                               const lease_deadline_t *, lease_result_t *results);
    lease_code_t (*release)(lease_store_t *, const lease_owner_req_t *, lease_result_t *);
    lease_code_t (*release_many)(lease_store_t *, const lease_owner_req_t *reqs, size_t n,
                                 const lease_deadline_t *, lease_result_t *results);
    lease_code_t (*force_release)(lease_store_t *, const lease_admin_req_t *, lease_result_t *);
    lease_code_t (*revoke)(lease_store_t *, const lease_admin_req_t *, lease_result_t *);
    lease_code_t (*inspect)(lease_store_t *, const lease_inspect_req_t *, lease_result_t *);
    lease_code_t (*list)(lease_store_t *, const lease_list_req_t *, lease_list_result_t *);
    lease_code_t (*fenced_commit)(lease_store_t *, const lease_commit_req_t *,
                                  lease_commit_result_t *);
    lease_code_t (*sweep)(lease_store_t *, int batch, const lease_deadline_t *,
                          lease_sweep_result_t *);
    lease_code_t (*record_audit)(lease_store_t *, const lease_audit_event_t *, size_t n,
                                 const lease_deadline_t *);
    lease_code_t (*housekeep)(lease_store_t *, lease_housekeeping_step_t, int batch,
                              int64_t grace_ms, const lease_deadline_t *,
                              lease_housekeeping_result_t *);
    lease_code_t (*credential_lookup)(lease_store_t *, const char *credential_id,
                                      const lease_deadline_t *, lease_credential_t *out,
                                      bool *found);
    lease_code_t (*health)(lease_store_t *, const lease_deadline_t *, lease_health_t *);
    void (*stats)(lease_store_t *, lease_store_stats_t *);
    void (*close)(lease_store_t *);
    /* Sessions (PostgreSQL, docs/sql-api.md "Sessions"); NULL on a backend
     * that keeps none: the dispatchers refuse a request naming a session. */
    lease_code_t (*session_open)(lease_store_t *, const lease_session_req_t *, lease_result_t *);
    lease_code_t (*session_keepalive)(lease_store_t *, const lease_session_req_t *,
                                      lease_result_t *);
    lease_code_t (*session_close)(lease_store_t *, const lease_session_req_t *, lease_result_t *);
} lease_store_ops_t;

struct lease_store {
    const lease_store_ops_t *ops;
    void *impl;
};

/* Thin dispatchers so callers never touch the vtable. */
LEASE_MUST_USE lease_code_t lease_store_acquire(lease_store_t *s, const lease_acquire_req_t *req,
                                                lease_result_t *res);
LEASE_MUST_USE lease_code_t lease_store_renew(lease_store_t *s, const lease_owner_req_t *req,
                                              lease_result_t *res);
/* Many renewals in one transaction (LEASE_RENEW_BATCH_MAX at most): each
 * reqs[i] decided as lease_store_renew decides it, answered in results[i].
 * Returns LEASE_RENEWED when the batch was decided (each result says what
 * happened to its lease), else the failure of the whole call (no result
 * is set: retrying the batch is safe, every item has its request id). */
#define LEASE_RENEW_BATCH_MAX 100
LEASE_MUST_USE lease_code_t lease_store_renew_many(lease_store_t *s, const lease_owner_req_t *reqs,
                                                   size_t n, const lease_deadline_t *deadline,
                                                   lease_result_t *results);
LEASE_MUST_USE lease_code_t lease_store_release(lease_store_t *s, const lease_owner_req_t *req,
                                                lease_result_t *res);
/* Many releases in one transaction (LEASE_RENEW_BATCH_MAX at most), as
 * lease_store_renew_many renews: each reqs[i] decided as
 * lease_store_release decides it. Returns LEASE_RELEASED when the batch
 * was decided, else the failure of the whole call (no result is set). */
LEASE_MUST_USE lease_code_t lease_store_release_many(lease_store_t *s,
                                                     const lease_owner_req_t *reqs, size_t n,
                                                     const lease_deadline_t *deadline,
                                                     lease_result_t *results);
LEASE_MUST_USE lease_code_t lease_store_force_release(lease_store_t *s,
                                                      const lease_admin_req_t *req,
                                                      lease_result_t *res);
LEASE_MUST_USE lease_code_t lease_store_revoke(lease_store_t *s, const lease_admin_req_t *req,
                                               lease_result_t *res);
LEASE_MUST_USE lease_code_t lease_store_inspect(lease_store_t *s, const lease_inspect_req_t *req,
                                                lease_result_t *res);
LEASE_MUST_USE lease_code_t lease_store_list(lease_store_t *s, const lease_list_req_t *req,
                                             lease_list_result_t *res);
LEASE_MUST_USE lease_code_t lease_store_fenced_commit(lease_store_t *s,
                                                      const lease_commit_req_t *req,
                                                      lease_commit_result_t *res);
LEASE_MUST_USE lease_code_t lease_store_sweep(lease_store_t *s, int batch,
                                              const lease_deadline_t *deadline,
                                              lease_sweep_result_t *res);
/* One housekeeping step, a transaction of its own: LEASE_STEP_EXPIRE moves
 * up to batch leases expired at least grace_ms ago to history, and
 * LEASE_STEP_PURGE deletes up to batch rows past retention of each table,
 * both at READ COMMITTED (they take part in no serialization failure);
 * LEASE_STEP_NAMESPACE checks the namespace (SERIALIZABLE, as every
 * decision). Returns LEASE_INSPECTED on success. */
LEASE_MUST_USE lease_code_t lease_store_housekeep(lease_store_t *s, lease_housekeeping_step_t step,
                                                  int batch, int64_t grace_ms,
                                                  const lease_deadline_t *deadline,
                                                  lease_housekeeping_result_t *res);
LEASE_MUST_USE lease_code_t lease_store_record_audit(lease_store_t *s,
                                                     const lease_audit_event_t *events, size_t n,
                                                     const lease_deadline_t *deadline);
LEASE_MUST_USE lease_code_t lease_store_credential_lookup(lease_store_t *s,
                                                          const char *credential_id,
                                                          const lease_deadline_t *deadline,
                                                          lease_credential_t *out, bool *found);
LEASE_MUST_USE lease_code_t lease_store_health(lease_store_t *s, const lease_deadline_t *deadline,
                                               lease_health_t *out);
/* Sessions: open (lease_acquired with res->session), keep-alive
 * (lease_renewed), close (lease_released, leases_ended, more). A backend
 * without sessions answers invalid_lease_request naming session_id. */
LEASE_MUST_USE lease_code_t lease_store_session_open(lease_store_t *s,
                                                     const lease_session_req_t *req,
                                                     lease_result_t *res);
LEASE_MUST_USE lease_code_t lease_store_session_keepalive(lease_store_t *s,
                                                          const lease_session_req_t *req,
                                                          lease_result_t *res);
LEASE_MUST_USE lease_code_t lease_store_session_close(lease_store_t *s,
                                                      const lease_session_req_t *req,
                                                      lease_result_t *res);
void lease_store_stats(lease_store_t *s, lease_store_stats_t *out);
/* Closes the store and frees it; NULL is accepted. */
void lease_store_close(lease_store_t *s);

#endif
