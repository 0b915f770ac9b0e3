/*
 * client.h - the C client of leased over HTTP (libcurl).
 *
 * One function per route of docs/api.md. Answers come back in the typed
 * structs of lease/types.h: an error envelope becomes its lease_code_t (with
 * field and retry_after_ms), never a raw HTTP status or message.
 *
 * Every call has a finite deadline: it is sent as `deadline_ms` and enforced
 * locally with libcurl timeouts (libcurl waits on the monotonic clock).
 * Mutations carry a request id, generated per call ("req_" + 26 random
 * base32 characters) unless the caller names one.
 *
 * Outcome-unknown resolution: when a mutation may have taken effect but no
 * typed answer proves it (the transport failed after the request was sent,
 * a 5xx without a typed envelope, or a typed lease_outcome_unknown), the
 * client repeats the very same request (same request id, byte-identical
 * body) until a typed answer arrives or the deadline passes; only then does
 * it report LEASE_OUTCOME_UNKNOWN. A connection refused before anything was
 * sent is LEASE_BACKEND_UNAVAILABLE at once: nothing can have happened.
 *
 * Thread safety: a lease_client_t may be used from many threads at once;
 * each call borrows its own libcurl easy handle from a small pool, so
 * connections are reused. The bearer token is copied at creation, sent only
 * in the Authorization header, wiped on free and never logged.
 */
#ifndef LEASE_CLIENT_H
#define LEASE_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lease/identity.h"
#include "lease/result.h"
#include "lease/types.h"

#define LEASE_CLIENT_DEFAULT_URL "http://127.0.0.1:8080"
#define LEASE_CLIENT_DEFAULT_DEADLINE_MS 5000
#define LEASE_CLIENT_PAST_DEADLINE_MS 1000
#define LEASE_CLIENT_MAX_ANSWER (8 * 1024 * 1024) /* larger answers are refused */
#define LEASE_CLIENT_TRANSPORT_ERROR_MAX 320      /* lease_client_call_t.transport_error */

typedef struct lease_client lease_client_t;

/*
 * Per-call options in, per-call facts out. May be NULL for every call
 * (defaults: a generated request id, the default deadline, no body kept).
 * Initialise with LEASE_CLIENT_CALL_INIT or zero; release with
 * lease_client_call_clear when keep_body was set.
 */
typedef struct lease_client_call {
    /* in */
    const char *request_id; /* mutations: NULL or "" generates one */
    int64_t deadline_ms;    /* <= 0: LEASE_CLIENT_DEFAULT_DEADLINE_MS */
    /* > 0: an absolute deadline instead (Unix ms), sent as "deadline_at" on
     * the routes with a body and enforced locally for what is left of it.
     * One already past is still sent, bounded locally by
     * LEASE_CLIENT_PAST_DEADLINE_MS, so the answer is the service's
     * deadline_exceeded (and its audit row), not a guess. */
    int64_t deadline_at_ms;
    bool keep_body; /* keep the final answer's JSON text in body */
    /* out */
    char request_id_used[LEASE_ID_MAX + 1];         /* mutations: the id sent */
    char correlation_id[LEASE_CORRELATION_MAX + 1]; /* of the final answer, or "" */
    int http_status;                                /* of the final answer; 0 when none arrived */
    int attempts;               /* requests started, resolution repeats included */
    int64_t first_sent_mono_ns; /* CLOCK_MONOTONIC just before the first attempt */
    int64_t answered_mono_ns;   /* CLOCK_MONOTONIC when the final answer arrived; 0: none */
    /* Where a lease answer's local authority starts (docs/executor.md):
     * min(first_sent_mono_ns + the answer's waited_ms, answered_mono_ns),
     * i.e. first_sent_mono_ns unless a waited acquire was granted late in
     * its wait. Pass it to lease_held_start. 0 when no answer arrived. */
    int64_t anchor_mono_ns;
    char *body; /* keep_body: heap JSON text of the final answer or NULL */
    /* when an attempt got no HTTP answer: what the transport said, e.g.
     * "Failed to connect to 127.0.0.1 port 8080 ...: Couldn't connect to
     * server (Connection refused)"; "" otherwise. No secrets: the token
     * travels in a header, never in a transport message. */
    char transport_error[LEASE_CLIENT_TRANSPORT_ERROR_MAX];
} lease_client_call_t;

#define LEASE_CLIENT_CALL_INIT                                                                     \
    {                                                                                              \
        0                                                                                          \
    }

/* Frees call->body (if any); the struct may be reused afterwards. */
void lease_client_call_clear(lease_client_call_t *call);

/* acquire. Strings are borrowed; NULL optional fields are omitted. */
typedef struct lease_client_acquire {
    lease_identity_input_t identity; /* raw components; the service normalises */
    const char *service_instance_id;
    const char *execution_id;
    const char *job_id;
    const char *trace_id;        /* optional */
    int64_t ttl_ms;              /* 0: policy default */
    int64_t maximum_lifetime_ms; /* 0: policy maximum */
    int64_t wait_ms;             /* 0: fail at once on conflict */
    const char *metadata_json;   /* optional JSON object text */
    /* optional: acquire the lease in this session (lease_client_session_open),
     * which then keeps it alive (docs/api.md, "Sessions"); NULL: none */
    const char *session_id;
} lease_client_acquire_t;

/* renew and release (ttl_ms only for renew; 0 keeps the lease's TTL). */
typedef struct lease_client_owner {
    lease_identity_input_t identity;
    const char *lease_id;
    int64_t fencing_token;
    const char *service_instance_id;
    int64_t ttl_ms;
} lease_client_owner_t;

/* force-release and revoke (incident_id only for revoke; may be NULL). */
typedef struct lease_client_admin {
    lease_identity_input_t identity;
    const char *lease_id;
    int64_t fencing_token;
    const char *reason;
    const char *incident_id;
} lease_client_admin_t;

typedef struct lease_client_list {
    lease_list_by_t by;
    const char *tenant_id;
    const char *program_id;
    const char *target_namespace; /* by target */
    const char *target_id;        /* by target */
    int page_size;                /* 0: server default */
    const char *page_token;       /* NULL or "": first page */
} lease_client_list_t;

/* A fenced commit; writes[i].json is the document body or publication
 * payload as JSON object text (borrowed). */
typedef struct lease_client_commit {
    lease_identity_input_t identity;
    const char *lease_id;
    int64_t fencing_token;
    const char *execution_id;
    const char *trace_id;
    size_t n_writes;
    const lease_write_t *writes;
} lease_client_commit_t;

/* /healthz and /readyz. */
typedef struct lease_client_health {
    char status[32];    /* "ok", "ready", "not_ready" */
    char reason[64];    /* not_ready: database_unreachable, schema_outdated, sealed, draining */
    int schema_version; /* readyz: 0 when absent */
} lease_client_health_t;

/*
 * Creates a client for base_url (NULL: LEASE_CLIENT_DEFAULT_URL; a trailing
 * slash is ignored). token may be NULL (health routes only). Returns NULL
 * when the URL is not http(s) or memory or libcurl initialisation fails.
 */
LEASE_MUST_USE lease_client_t *lease_client_new(const char *base_url, const char *token);
/* Frees the client and wipes its copy of the token; NULL is accepted. The
 * client must not be in use by another thread. */
void lease_client_free(lease_client_t *client);
/* The base URL the client talks to (borrowed, without trailing slash). */
const char *lease_client_url(const lease_client_t *client);
/* For https:// URLs: trust the CA certificates in path (PEM) instead of
 * the system's (a private CA); NULL or "" restores the default. Call before
 * sharing the client between threads. False when out of memory. leasectl
 * sets it from LEASE_CA_FILE. */
LEASE_MUST_USE bool lease_client_set_ca_file(lease_client_t *client, const char *path);

/*
 * The operations. Each returns the typed outcome and also stores it in the
 * result struct; on success the lease (or page, or commit results) is
 * filled. Transport outcomes: LEASE_BACKEND_UNAVAILABLE (nothing was sent,
 * or a read failed), LEASE_DEADLINE_EXCEEDED (the deadline passed before anything
 * was sent), LEASE_OUTCOME_UNKNOWN (a mutation may have taken effect and
 * repeating its request id until the deadline did not tell).
 */
LEASE_MUST_USE lease_code_t lease_client_acquire(lease_client_t *client,
                                                 const lease_client_acquire_t *req,
                                                 lease_client_call_t *call, lease_result_t *res);
LEASE_MUST_USE lease_code_t lease_client_renew(lease_client_t *client,
                                               const lease_client_owner_t *req,
                                               lease_client_call_t *call, lease_result_t *res);
/*
 * POST /v1/leases/renew-batch: n renewals (1..100) in one request and one
 * database transaction. request_ids: NULL, or n ids (a NULL or "" entry
 * generates one); a repeat of the call (outcome unknown) sends the same
 * ids, so it is safe. Returns LEASE_RENEWED when the batch was decided:
 * then results[i] is what renewals[i]'s own lease_client_renew would have
 * answered (one lease_lost does not fail the others); any other code is
 * the whole call's (results[i].code holds it too). call->request_id is not
 * used.
 */
LEASE_MUST_USE lease_code_t lease_client_renew_many(lease_client_t *client,
                                                    const lease_client_owner_t *renewals, size_t n,
                                                    const char *const *request_ids,
                                                    lease_client_call_t *call,
                                                    lease_result_t *results);
LEASE_MUST_USE lease_code_t lease_client_release(lease_client_t *client,
                                                 const lease_client_owner_t *req,
                                                 lease_client_call_t *call, lease_result_t *res);
/*
 * POST /v1/leases/release-batch: n releases (1..100) in one request and one
 * database transaction, as lease_client_renew_many renews (ttl_ms is not
 * sent). Returns LEASE_RELEASED when the batch was decided: then
 * results[i] is what releases[i]'s own lease_client_release would have
 * answered; any other code is the whole call's.
 */
LEASE_MUST_USE lease_code_t lease_client_release_many(lease_client_t *client,
                                                      const lease_client_owner_t *releases,
                                                      size_t n, const char *const *request_ids,
                                                      lease_client_call_t *call,
                                                      lease_result_t *results);
LEASE_MUST_USE lease_code_t lease_client_force_release(lease_client_t *client,
                                                       const lease_client_admin_t *req,
                                                       lease_client_call_t *call,
                                                       lease_result_t *res);
LEASE_MUST_USE lease_code_t lease_client_revoke(lease_client_t *client,
                                                const lease_client_admin_t *req,
                                                lease_client_call_t *call, lease_result_t *res);
/* GET /v1/leases/{lease_id} */
LEASE_MUST_USE lease_code_t lease_client_inspect_id(lease_client_t *client, const char *lease_id,
                                                    lease_client_call_t *call, lease_result_t *res);
/*
 * GET /v1/leases/{lease_id}/watch?wait_ms=N: the lease as soon as it is no
 * longer active (res->lease.state released, revoked or expired), or as it
 * is (active) once wait_ms passed; LEASE_INSPECTED either way. The call's
 * deadline defaults to wait_ms + LEASE_CLIENT_DEFAULT_DEADLINE_MS. With
 * abort_fd >= 0 the call also ends at once when that fd becomes readable
 * (answering LEASE_BACKEND_UNAVAILABLE): a held lease stopping its watch.
 */
LEASE_MUST_USE lease_code_t lease_client_watch(lease_client_t *client, const char *lease_id,
                                               int64_t wait_ms, int abort_fd,
                                               lease_client_call_t *call, lease_result_t *res);
/* POST /v1/leases/inspect: the active lease of an identity */
LEASE_MUST_USE lease_code_t lease_client_inspect_identity(lease_client_t *client,
                                                          const lease_identity_input_t *identity,
                                                          lease_client_call_t *call,
                                                          lease_result_t *res);
/* res->leases is heap: lease_list_result_free. */
LEASE_MUST_USE lease_code_t lease_client_list(lease_client_t *client,
                                              const lease_client_list_t *req,
                                              lease_client_call_t *call, lease_list_result_t *res);
LEASE_MUST_USE lease_code_t lease_client_commit(lease_client_t *client,
                                                const lease_client_commit_t *req,
                                                lease_client_call_t *call,
                                                lease_commit_result_t *res);
/*
 * GET /healthz (ready false) or /readyz (ready true). Returns LEASE_INSPECTED
 * when the service answered 200, LEASE_BACKEND_UNAVAILABLE when it answered
 * not ready (out->reason says why) or could not be reached.
 */
LEASE_MUST_USE lease_code_t lease_client_health(lease_client_t *client, bool ready,
                                                lease_client_call_t *call,
                                                lease_client_health_t *out);
/*
 * GET /metrics and reads the unlabelled integer sample name (e.g.
 * "leased_fencing_token_max") into *value. Returns LEASE_INSPECTED when
 * found, LEASE_NOT_FOUND when the service answered 200 without it (or not
 * as an integer), LEASE_BACKEND_UNAVAILABLE when it could not be reached
 * or answered another status (call->http_status, call->transport_error).
 */
LEASE_MUST_USE lease_code_t lease_client_metric(lease_client_t *client, const char *name,
                                                lease_client_call_t *call, int64_t *value);

/*
 * Sessions (docs/api.md, "Sessions"; PostgreSQL backend only: another
 * answers 400 invalid_lease_request naming session_id). A session keeps
 * every lease acquired in it (lease_client_acquire_t.session_id) alive with
 * one keep-alive. Answers fill res->session (res->has_session).
 *
 * open: POST /v1/sessions (LEASE_ACQUIRED), idempotent by the call's
 * request id; ttl_ms 0 is the policy's default.
 * keepalive: POST /v1/sessions/{id}/keepalive (LEASE_RENEWED): expires_at
 * becomes the service's now + TTL. It carries no request id (a repeat
 * extends again), so an unknown outcome is repeated as any mutation's;
 * its authority starts at call->first_sent_mono_ns.
 * close: POST /v1/sessions/{id}/close (LEASE_RELEASED): ends every lease
 * in it (res->leases_ended, res->more).
 * A session closed, expired, unknown or another principal's answers
 * LEASE_LOST.
 */
LEASE_MUST_USE lease_code_t lease_client_session_open(lease_client_t *client,
                                                      const char *service_instance_id,
                                                      int64_t ttl_ms, lease_client_call_t *call,
                                                      lease_result_t *res);
LEASE_MUST_USE lease_code_t lease_client_session_keepalive(lease_client_t *client,
                                                           const char *session_id,
                                                           lease_client_call_t *call,
                                                           lease_result_t *res);
LEASE_MUST_USE lease_code_t lease_client_session_close(lease_client_t *client,
                                                       const char *session_id,
                                                       lease_client_call_t *call,
                                                       lease_result_t *res);

/* The borrowed raw view of a normalised identity, for feeding an answer's
 * identity back into the next request. */
lease_identity_input_t lease_client_identity_of(const lease_identity_t *id);

/*
 * Writes prefix + 26 random lower-case base32 characters (130 bits from
 * RAND_bytes) into out. Returns false when out is too small or the system
 * random generator fails.
 */
LEASE_MUST_USE bool lease_client_new_id(const char *prefix, char *out, size_t outsz);

#endif
