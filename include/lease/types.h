/*
 * types.h - the typed records and results every layer speaks: a lease as
 * stored, the answer of a single-lease operation, a list page, a fenced
 * commit's writes and answer.
 *
 * Shared by the store protocol (lease/store.h, which adds the requests, the
 * caller's principal and scope, audit events, credentials and the adapter
 * vtable) and the HTTP client (lease/client.h), which needs only these.
 * Ownership: plain structs, caller-owned; the one heap member is a list
 * page's leases (lease_list_result_free).
 */
#ifndef LEASE_TYPES_H
#define LEASE_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lease/identity.h"
#include "lease/result.h"

#define LEASE_METADATA_MAX 2048 /* compact JSON text of the metadata object */
#define LEASE_REASON_MAX 512    /* force-release / revoke reason */
#define LEASE_DETAIL_MAX 160    /* a result's human detail (lease_result_t.detail) */
#define LEASE_CORRELATION_MAX 64
#define LEASE_FIELD_MAX 64 /* name of an offending request field */
#define LEASE_PAGE_TOKEN_MAX 1024
#define LEASE_COMMIT_WRITES_MAX 32
#define LEASE_DOC_KEY_MAX 256
/* A publication's topic: at most what an AMQP short string carries (the
 * routing key and the message's type property), so every row the outbox
 * accepts can be published (docs/relay.md). Topics are ASCII. */
#define LEASE_TOPIC_MAX 255

typedef enum lease_state {
    LEASE_STATE_NONE = 0, /* no lease (unknown or never existed) */
    LEASE_STATE_ACTIVE,   /* held and unexpired at backend time */
    LEASE_STATE_EXPIRED,  /* backend time reached expires_at */
    LEASE_STATE_RELEASED, /* released by the owner or force-released */
    LEASE_STATE_REVOKED,  /* revoked by an administrator (security) */
} lease_state_t;

const char *lease_state_name(lease_state_t s); /* "active", ... "" */
LEASE_MUST_USE bool lease_state_parse(const char *s, lease_state_t *out);

/* A lease as stored: active, or terminal from history. */
typedef struct lease_record {
    lease_identity_t identity;
    char lease_id[LEASE_ID_MAX + 1];
    int64_t fencing_token;
    lease_state_t state;
    int64_t acquired_at_ms;
    int64_t renewed_at_ms;
    int64_t expires_at_ms;
    int64_t ended_at_ms; /* terminal records only, else 0 */
    int64_t ttl_ms;
    int64_t maximum_lifetime_ms;
    char owner_principal_id[LEASE_ID_MAX + 1];
    char owner_client_id[LEASE_ID_MAX + 1];
    char owner_credential_id[LEASE_ID_MAX + 1];
    char service_instance_id[LEASE_ID_MAX + 1];
    char execution_id[LEASE_ID_MAX + 1];
    char job_id[LEASE_ID_MAX + 1];
    char trace_id[LEASE_ID_MAX + 1];
    char request_id[LEASE_ID_MAX + 1];
    char metadata_json[LEASE_METADATA_MAX + 1]; /* compact JSON object, "{}" if none */
    char end_reason[LEASE_REASON_MAX + 1];      /* terminal: admin reason */
    char incident_id[LEASE_ID_MAX + 1];         /* terminal: revoke incident */
    char session_id[LEASE_ID_MAX + 1];          /* the session it lives in, "" if none */
} lease_record_t;

/* A session (docs/sql-api.md, "Sessions"): state "open", "expired" (open
 * but past expires_at at backend time) or "closed" (expires_at is then the
 * close time). */
typedef struct lease_session {
    char session_id[LEASE_ID_MAX + 1];
    char tenant_id[LEASE_NAME_MAX + 1];
    char owner_principal_id[LEASE_ID_MAX + 1];
    char owner_credential_id[LEASE_ID_MAX + 1];
    char service_instance_id[LEASE_ID_MAX + 1];
    int64_t ttl_ms;
    int64_t created_at_ms;
    int64_t renewed_at_ms;
    int64_t expires_at_ms;
    char state[16];
} lease_session_t;

/* The answer of every single-lease operation, and of the session calls. */
typedef struct lease_result {
    lease_code_t code;
    bool has_lease; /* lease is filled */
    lease_record_t lease;
    bool replayed;                   /* answered from the idempotency record */
    lease_state_t current_state;     /* replays: the lease's state now */
    int64_t retry_after_ms;          /* > 0 when a retry can help */
    char field[LEASE_FIELD_MAX + 1]; /* invalid_lease_request: offending field */
    /* lease_backend_unavailable: why, as a stable word ("namespace_sealed",
     * "token_limit"), else "". */
    char reason[32];
    /* invalid_lease_request: a human detail safe to show (the TTL bounds),
     * else "". */
    char detail[LEASE_DETAIL_MAX + 1];
    /* lease_acquired: how long leased held the request before the attempt
     * that granted it (its monotonic clock, from receipt to the start of
     * that attempt); 0 when the first attempt granted or for a replay. A
     * client anchors its authority at min(first send + waited_ms, arrival)
     * (docs/executor.md). */
    int64_t waited_ms;
    /* the session calls: the session, and for a close how many of its
     * leases it released and whether the sweeper ends the rest (more) */
    bool has_session;
    lease_session_t session;
    int64_t leases_ended;
    bool more;
} lease_result_t;

typedef enum lease_list_by {
    LEASE_LIST_BY_OWNER,   /* the caller's own leases in tenant/program */
    LEASE_LIST_BY_TARGET,  /* tenant/program/namespace/target */
    LEASE_LIST_BY_PROGRAM, /* tenant/program */
} lease_list_by_t;

typedef struct lease_list_result {
    lease_code_t code;
    char field[LEASE_FIELD_MAX + 1];
    size_t count;
    lease_record_t *leases;                         /* heap; lease_list_result_free */
    char next_page_token[LEASE_PAGE_TOKEN_MAX + 1]; /* "" on the last page */
} lease_list_result_t;

void lease_list_result_free(lease_list_result_t *res);

typedef enum lease_write_kind {
    LEASE_WRITE_DOCUMENT,    /* key, expected_revision, body */
    LEASE_WRITE_PUBLICATION, /* topic, payload -> outbox */
} lease_write_kind_t;

typedef struct lease_write {
    lease_write_kind_t kind;
    char key[LEASE_DOC_KEY_MAX + 1]; /* document key or publication topic */
    int64_t expected_revision;       /* documents: 0 = must not exist yet */
    const char *json;                /* body or payload, compact JSON (borrowed) */
} lease_write_t;

typedef struct lease_commit_result {
    lease_code_t code;
    bool replayed;
    char field[LEASE_FIELD_MAX + 1]; /* e.g. "writes[1].expected_revision" */
    int64_t retry_after_ms;
    size_t n_writes;
    /* per write: the document's new revision, or the outbox row id */
    int64_t revisions[LEASE_COMMIT_WRITES_MAX];
    int64_t current_revision; /* write_conflict: the revision found */
} lease_commit_result_t;

#endif
