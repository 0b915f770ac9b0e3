/*
 * store_valkey.h - the Valkey/Redis adapter of the lease-store protocol
 * (docs/backends.md), over hiredis.
 *
 * Every operation is one FCALL of one function of the leased_v1 library
 * (src/store/valkey/leased.lua), which decides with the server's TIME; this
 * adapter only encodes requests, maps answers and transport failures onto
 * lease_code_t, and never decides in C what a function decides.
 *
 * lease_valkey_store_open makes it a lease_store_t (store_valkey_ops.c):
 * leased runs on it with LEASE_STORE_URL=redis://... (docs/backends.md
 * says what is not built and how each such operation answers).
 *
 * Thread safety: any thread may call; each call takes one of the pool's
 * connections (lease_valkey_config_t.pool_size) for its duration. Acquire,
 * renew and release go through the combiner first (combine_calls,
 * combine_items below): a thread may wait for a call in flight and have
 * its request sent in another thread's call.
 */
#ifndef LEASE_STORE_VALKEY_H
#define LEASE_STORE_VALKEY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lease/listener.h"
#include "lease/result.h"
#include "lease/store.h"

typedef struct lease_valkey lease_valkey_t;

typedef struct lease_valkey_config {
    const char *host;           /* "127.0.0.1" */
    int port;                   /* 6379 */
    const char *ns;             /* the namespace: [a-z0-9_-]{1,64} */
    int64_t connect_timeout_ms; /* 0: 2000 */
    bool check_only;            /* never FUNCTION LOAD: only check the library
                                 * loaded (leasectl migrate --status) */
    int min_replicas;           /* LEASE_VALKEY_MIN_REPLICAS: > 0, every write
                                 * function call is followed by WAIT n (bounded
                                 * by the call's deadline) and its answer is
                                 * lease_outcome_unknown unless n replicas
                                 * acknowledged it; 0: no WAIT */
    const char *user;           /* AUTH user (NULL or "": the default user) */
    const char *password;       /* NULL or "": no AUTH; copied, and wiped at
                                 * close; never in a message */
    int pool_size;              /* connections (LEASE_DB_POOL_SIZE under
                                 * leased); 0: one. Each call takes one for
                                 * the call and its WAIT */
    bool tls;                   /* rediss:// or valkeys://: every connection is
                                 * TLS, the server's certificate verified
                                 * (chain and host name); never plain */
    const char *tls_ca_file;    /* LEASE_STORE_CACERT: PEM CAs that sign the
                                 * server's certificate; NULL or "": the
                                 * system's CAs */
    const char *tls_cert_file;  /* LEASE_STORE_CERT, LEASE_STORE_KEY: a client
                                 * certificate and its key, or NULL */
    const char *tls_key_file;
    int combine_calls; /* LEASE_VALKEY_COMBINE_CALLS: acquire, renew and
                        * release calls in flight at once; requests that
                        * arrive meanwhile wait and go together in the
                        * next call (docs/backends.md, "Combined calls");
                        * 0: LEASE_VALKEY_COMBINE_CALLS */
    int combine_items; /* LEASE_VALKEY_COMBINE_ITEMS: requests one call
                        * carries at most (1: no combining, every request
                        * a call of its own as before); 0: the default */
} lease_valkey_config_t;

#define LEASE_VALKEY_COMBINE_CALLS 2  /* the defaults: docs/backends.md, "Combined calls" */
#define LEASE_VALKEY_COMBINE_ITEMS 16
#define LEASE_VALKEY_COMBINE_ITEMS_LIMIT 64 /* leased_v1_combined's COMBINED_MAX */

/* Connects, refuses a server without appendonly yes, appendfsync always and
 * maxmemory-policy noeviction (CONFIG GET), and loads the function library
 * (or checks that the one loaded is byte for byte this build's; with
 * check_only, refuses a server where it is not loaded). On failure
 * returns LEASE_BACKEND_UNAVAILABLE, *out NULL, and why in err. */
LEASE_MUST_USE lease_code_t lease_valkey_open(const lease_valkey_config_t *cfg,
                                              lease_valkey_t **out, char *err, size_t errlen);
void lease_valkey_close(lease_valkey_t *v);
/* The pool's size: connections it may open (lease_valkey_config_t.pool_size). */
int lease_valkey_pool_size(const lease_valkey_t *v);
/* Connections lent out to calls now. */
int lease_valkey_pool_in_use(lease_valkey_t *v);

/* What the combiner did since open (counts). */
typedef struct lease_valkey_combine_stats {
    uint64_t calls;          /* acquire, renew and release calls made */
    uint64_t combined_calls; /* of them, calls that carried two or more requests */
    uint64_t combined_items; /* the requests those carried */
} lease_valkey_combine_stats_t;
void lease_valkey_combine_stats(lease_valkey_t *v, lease_valkey_combine_stats_t *out);

/* Binds a new namespace to the server's current incarnation (leasectl
 * migrate's part); repeating it on the same incarnation changes nothing,
 * except that a namespace without a page-token key (bound by an earlier
 * build) gets one: 32 random bytes made here, which sign its list page
 * tokens and are never answered by any function.
 * floor_token 0: none; else tokens start above it. *epoch: the epoch now. */
LEASE_MUST_USE lease_code_t lease_valkey_bind(lease_valkey_t *v, int64_t floor_token,
                                              int64_t *epoch, char *err, size_t errlen);
/* Rebinds a sealed (or any) namespace to the incarnation it runs on now:
 * a higher epoch (above floor_token when given), every live lease revoked. */
LEASE_MUST_USE lease_code_t lease_valkey_rebind(lease_valkey_t *v, const char *reason,
                                                int64_t floor_token, int64_t *epoch,
                                                int64_t *leases_revoked, char *err, size_t errlen);
/* The same, on behalf of operator_id (leasectl recover: recorded as the
 * principal of its audit events; NULL: none). LEASE_INVALID_LEASE_REQUEST:
 * the function refused (no reason, namespace not bound, a replica, no
 * epoch left; why in err); LEASE_BACKEND_UNAVAILABLE: it did not run or
 * its answer was lost. Audited in the same call: one target_lease_recover
 * event and one target_lease_revoke per lease it revokes. */
LEASE_MUST_USE lease_code_t lease_valkey_rebind_by(lease_valkey_t *v, const char *reason,
                                                   const char *operator_id, int64_t floor_token,
                                                   int64_t *epoch, int64_t *leases_revoked,
                                                   char *err, size_t errlen);

/* The lease operations, as lease_store_ops declares them. */
LEASE_MUST_USE lease_code_t lease_valkey_acquire(lease_valkey_t *v, const lease_acquire_req_t *req,
                                                 lease_result_t *res);
LEASE_MUST_USE lease_code_t lease_valkey_renew(lease_valkey_t *v, const lease_owner_req_t *req,
                                               lease_result_t *res);
LEASE_MUST_USE lease_code_t lease_valkey_release(lease_valkey_t *v, const lease_owner_req_t *req,
                                                 lease_result_t *res);
/* 1 to LEASE_RENEW_BATCH_MAX items in one call, each decided as the single
 * operation decides it (results[i]); returns LEASE_RENEWED / LEASE_RELEASED
 * when decided, else the failure of the whole call (no result set). */
LEASE_MUST_USE lease_code_t lease_valkey_renew_many(lease_valkey_t *v,
                                                    const lease_owner_req_t *reqs, size_t n,
                                                    const lease_deadline_t *deadline,
                                                    lease_result_t *results);
LEASE_MUST_USE lease_code_t lease_valkey_release_many(lease_valkey_t *v,
                                                      const lease_owner_req_t *reqs, size_t n,
                                                      const lease_deadline_t *deadline,
                                                      lease_result_t *results);
LEASE_MUST_USE lease_code_t lease_valkey_force_release(lease_valkey_t *v,
                                                       const lease_admin_req_t *req,
                                                       lease_result_t *res);
LEASE_MUST_USE lease_code_t lease_valkey_revoke(lease_valkey_t *v, const lease_admin_req_t *req,
                                                lease_result_t *res);
LEASE_MUST_USE lease_code_t lease_valkey_inspect(lease_valkey_t *v, const lease_inspect_req_t *req,
                                                 lease_result_t *res);
/* A fenced commit of documents (lease.fenced_commit on Valkey:
 * leased_v1_fenced_commit): commit_accepted with one revision per write,
 * write_conflict (field, current_revision), lease_lost, or a failure; a
 * commit with a publication is refused (lease_backend_unavailable: the
 * outbox needs PostgreSQL) and nothing is written. */
LEASE_MUST_USE lease_code_t lease_valkey_fenced_commit(lease_valkey_t *v,
                                                       const lease_commit_req_t *req,
                                                       lease_commit_result_t *res);
/* The active, unexpired leases of one tenant/program (target, owner) in
 * the caller's scope, a page at a time (res->leases: lease_list_result_free). */
LEASE_MUST_USE lease_code_t lease_valkey_list(lease_valkey_t *v, const lease_list_req_t *req,
                                              lease_list_result_t *res);
/* Authentication's lookup: LEASE_INSPECTED and *found, LEASE_NOT_FOUND, or
 * a failure; revocation and expiry judged at the server's TIME. */
LEASE_MUST_USE lease_code_t lease_valkey_credential_lookup(lease_valkey_t *v,
                                                           const char *credential_id,
                                                           const lease_deadline_t *deadline,
                                                           lease_credential_t *out, bool *found);
/* Credential administration (leasectl credential on Valkey):
 * request_json has the members of lease.credential_create (secret_digest:
 * the hex digest leasectl computes, never the secret; expires_at_ms: Unix
 * ms, optional). *row_json (free()) is the row without the digest.
 * LEASE_INVALID_LEASE_REQUEST: the function refused the request (why in
 * err); LEASE_BACKEND_UNAVAILABLE: it did not run or its answer was lost. */
LEASE_MUST_USE lease_code_t lease_valkey_credential_create(lease_valkey_t *v,
                                                           const char *request_json,
                                                           char **row_json, char *err,
                                                           size_t errlen);
LEASE_MUST_USE lease_code_t lease_valkey_credential_revoke(lease_valkey_t *v,
                                                           const char *credential_id, bool *revoked,
                                                           char *err, size_t errlen);
/* The same, recording who revoked it (operator_id, e.g. "leasectl:alice";
 * NULL: nobody named) in its audit event; credential_create's request
 * takes the same as its "operator" member. Both are audited in the call
 * (credential_create / credential_revoke, priority high). */
LEASE_MUST_USE lease_code_t lease_valkey_credential_revoke_by(lease_valkey_t *v,
                                                              const char *credential_id,
                                                              const char *operator_id,
                                                              bool *revoked, char *err,
                                                              size_t errlen);
/* Appends audit events to the namespace's Stream (leased_v1_record_audit,
 * which trims it by the audit retention). LEASE_INSPECTED when appended;
 * never waits for replicas (LEASE_VALKEY_MIN_REPLICAS is for decisions). */
LEASE_MUST_USE lease_code_t lease_valkey_record_audit(lease_valkey_t *v,
                                                      const lease_audit_event_t *events, size_t n,
                                                      const lease_deadline_t *deadline);
/* The expiry step (lease.expire_due; leased_v1_expire_due): moves up to
 * batch (1..10000) leases expired at least grace_ms (0..3600000) ago into
 * history, oldest first: res->ran, expired, more, lag_ms. Never waits for
 * replicas (housekeeping, not a decision). LEASE_INSPECTED, or
 * LEASE_BACKEND_UNAVAILABLE (a sealed namespace, a failure). */
LEASE_MUST_USE lease_code_t lease_valkey_expire_due(lease_valkey_t *v, int batch, int64_t grace_ms,
                                                    const lease_deadline_t *deadline,
                                                    lease_housekeeping_result_t *res);
/* The audit export (docs/backends.md, "Audit export"). audit_read: up to
 * count (1..1000; 0: 100) entries after `after` (NULL or "": after the
 * export cursor, else from the start) as *page_json (free()):
 * {"entries":[{"id":"MS-SEQ",FIELD:VALUE,...},...],"cursor":"MS-SEQ"|null,
 * "first":"MS-SEQ"|null} ("first": the oldest entry kept). Reads only.
 * audit_ack: the export has taken every entry up to id: the cursor moves
 * there (never back, never past the last entry; "0-0" registers an export
 * that has taken nothing), so that no entry after it is trimmed, and what
 * the retention allows now goes at once (*trimmed entries). Both:
 * LEASE_INVALID_LEASE_REQUEST when the function refused (why in err). */
LEASE_MUST_USE lease_code_t lease_valkey_audit_read(lease_valkey_t *v, const char *after, int count,
                                                    char **page_json, char *err, size_t errlen);
LEASE_MUST_USE lease_code_t lease_valkey_audit_ack(lease_valkey_t *v, const char *id,
                                                   long long *trimmed, char *err, size_t errlen);
/* Every credential, oldest first, without digests: *rows_json (free()) is
 * a JSON array of lease.credential_list's objects (times as
 * "2026-08-05T12:00:00.000Z", null when none). */
LEASE_MUST_USE lease_code_t lease_valkey_credential_list(lease_valkey_t *v, char **rows_json,
                                                         char *err, size_t errlen);
LEASE_MUST_USE lease_code_t lease_valkey_health(lease_valkey_t *v, const lease_deadline_t *deadline,
                                                lease_health_t *out);

/* The adapter as a lease_store_t (lease_store_ops): the operations above
 * and audit events; what the library does not decide (publications of a
 * fenced commit, the old sweep) is refused with lease_backend_unavailable
 * (docs/backends.md). Opening
 * refuses a server without the durability settings, as lease_valkey_open. */
LEASE_MUST_USE lease_code_t lease_valkey_store_open(const lease_valkey_config_t *cfg,
                                                    lease_store_t **out, char *err, size_t errlen);
/* The adapter behind a store opened by lease_valkey_store_open, else NULL. */
lease_valkey_t *lease_valkey_of(lease_store_t *s);

/* The Valkey feed of ended leases behind GET /v1/leases/{id}/watch
 * (lease/listener.h; valkey_listener.c): SUBSCRIBE lease:{ns}:ended on a
 * connection of its own (every leased_v1 function that ends a lease
 * publishes the id there), and the batched poll FCALL_RO
 * leased_v1_watch_ended on another. cfg's host, port, ns, user, password,
 * connect_timeout_ms and TLS settings are copied; subscribe false: poll only
 * (LEASE_WATCH_LISTEN=false). Nothing connects until the first wait or
 * poll. Returns 0, or -1 with a reason in err. */
LEASE_MUST_USE int lease_valkey_listener_open(const lease_valkey_config_t *cfg, bool subscribe,
                                              lease_listener_t **out, char *err, size_t errsz);

/* Store URLs: redis://[USER:PASSWORD@]HOST[:PORT][/0][?namespace=NAME]
 * (valkey:// alike; port 6379, namespace "leased" by default; USER and
 * PASSWORD percent-encoded, USER empty for the default user); rediss://
 * and valkeys:// the same over TLS. Messages never quote the credentials. */
typedef struct lease_valkey_url {
    bool tls; /* rediss:// or valkeys:// */
    char host[256];
    int port;
    char ns[65];
    char user[128];     /* "": AUTH password (the default user) */
    char password[512]; /* "": no AUTH; lease_valkey_url_wipe when done */
} lease_valkey_url_t;

/* Overwrites the parsed password. */
void lease_valkey_url_wipe(lease_valkey_url_t *u);

/* Whether url names a Valkey/Redis store (rediss:// included). */
bool lease_valkey_url_is(const char *url);
LEASE_MUST_USE bool lease_valkey_url_parse(const char *url, lease_valkey_url_t *out, char *err,
                                           size_t errlen);

/* The TLS files (LEASE_STORE_CACERT, LEASE_STORE_CERT, LEASE_STORE_KEY;
 * NULL or "": unset) go with the URL u: none with a plain URL, a client
 * certificate with its key, every file readable now (a typo is a bad
 * setting at start, not a store that never answers). False with why in
 * err. */
LEASE_MUST_USE bool lease_valkey_tls_files_check(const lease_valkey_url_t *u, const char *ca_file,
                                                 const char *cert_file, const char *key_file,
                                                 char *err, size_t errlen);

#endif
