/*
 * operations.h - one description per operation, the only place that says
 * what an operation is: its route, who may call it, whether it mutates,
 * the fields of its body (their rules, and which enter the request digest),
 * its audit event type, and the backend call it makes with the result codes
 * that call may answer.
 *
 * Everything else is built from these lists: the operation enum, the
 * server's route table (src/server/routes.c), the request decoder's field
 * rules (src/server/json_codec.c), the per-operation steps of the service
 * (src/server/service.c), the slot of a request's call (request.c), the
 * request digest (src/protocol/digest.c), the store adapter's table of
 * backend calls with the codes each may answer (src/store/pg_codec.h,
 * pg_codec_result.c), and the check that docs/openapi.yaml names the same
 * routes and body fields (tests/unit/test_openapi_routes.c). A new
 * optional field or a new route starts here (docs/architecture.md,
 * "Add an optional field", "Add a route").
 *
 * Lists are X-macros: a reader passes a macro that takes one row's columns
 * and expands each row with it. Depends on lease/store.h only (for the
 * request structs whose members the fields name), so the server, the store
 * and the protocol may all include it.
 */
#ifndef LEASE_OPERATIONS_H
#define LEASE_OPERATIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lease/store.h"

/*
 * The operations, in enum order:
 * X(ID, METHOD, PATH, NAME, CAPS, MUTATES, SHAPE, HANDLER, EVENT, STORE, FIELDS)
 *   ID       the enum's LEASED_OP_<ID>
 *   METHOD, PATH  the route; "{lease_id}" is one path segment
 *   NAME     the metrics and log label; for a mutation also the digest's "op"
 *   CAPS     LEASE_CAP_* of which the caller needs one; 0: no credential, and
 *            served on the HTTP event thread (it must never block)
 *   MUTATES  idempotent by request_id, digested, audited by the store itself
 *            when it changes state
 *   SHAPE    the store request its body decodes into, and the steps of that
 *            kind of request (LEASE_SHAPE_<SHAPE>): ACQUIRE, OWNER,
 *            OWNER_BATCH (items of owner requests), ADMIN (an administrator
 *            credential too), INSPECT, GET (the path's lease id, no body),
 *            LIST, COMMIT, SESSION (lease_session_req_t; a "{session_id}"
 *            path segment names the session), NONE
 *   HANDLER  the route's handler in routes.c (handle_<HANDLER>)
 *   EVENT    the audit event type of its refusals and reads (a string), or
 *            NULL for routes that are not audited
 *   STORE    the store call the service makes (service.c's store_<STORE>),
 *            none for routes that do not call the store
 *   FIELDS   its body's fields: LEASE_FIELDS_<FIELDS> below (NONE: no body)
 */
#define LEASE_OPERATIONS(X)                                                                        \
    X(ACQUIRE, "POST", "/v1/leases/acquire", "acquire", LEASE_CAP_LEASE, true, ACQUIRE, operation, \
      "target_lease_acquire", acquire, ACQUIRE)                                                    \
    X(RENEW, "POST", "/v1/leases/renew", "renew", LEASE_CAP_LEASE, true, OWNER, operation,         \
      "target_lease_renew", renew, RENEW)                                                          \
    X(RELEASE, "POST", "/v1/leases/release", "release", LEASE_CAP_LEASE, true, OWNER, operation,   \
      "target_lease_release", release, RELEASE)                                                    \
    X(FORCE_RELEASE, "POST", "/v1/leases/force-release", "force_release", LEASE_CAP_FORCE_RELEASE, \
      true, ADMIN, operation, "target_lease_force_release", force_release, FORCE_RELEASE)          \
    X(REVOKE, "POST", "/v1/leases/revoke", "revoke", LEASE_CAP_REVOKE, true, ADMIN, operation,     \
      "target_lease_revoke", revoke, REVOKE)                                                       \
    X(GET, "GET", "/v1/leases/{lease_id}", "get", LEASE_CAP_READ, false, GET, operation,           \
      "target_lease_inspect", inspect, NONE)                                                       \
    X(INSPECT, "POST", "/v1/leases/inspect", "inspect", LEASE_CAP_READ, false, INSPECT, operation, \
      "target_lease_inspect", inspect, INSPECT)                                                    \
    /* list by owner is open to targets:lease too; the service checks the rest */                  \
    X(LIST, "POST", "/v1/leases/list", "list", LEASE_CAP_READ | LEASE_CAP_LEASE, false, LIST,      \
      operation, "target_lease_list", list, LIST)                                                  \
    /* a commit the store accepted audits itself; a refused one is "rejected" */                   \
    X(COMMIT, "POST", "/v1/commits", "commit", LEASE_CAP_LEASE, true, COMMIT, operation,           \
      "target_lease_commit_rejected", commit, COMMIT)                                              \
    /* targets:read watches what it may inspect; targets:lease its own leases */                   \
    X(WATCH, "GET", "/v1/leases/{lease_id}/watch", "watch", LEASE_CAP_READ | LEASE_CAP_LEASE,      \
      false, GET, watch, "target_lease_inspect", watch, NONE)                                      \
    /* a batch is not itself a mutation: each item is a renewal or release */                      \
    X(RENEW_BATCH, "POST", "/v1/leases/renew-batch", "renew_batch", LEASE_CAP_LEASE, false,        \
      OWNER_BATCH, operation, "target_lease_renew", renew_many, RENEW_BATCH)                       \
    X(RELEASE_BATCH, "POST", "/v1/leases/release-batch", "release_batch", LEASE_CAP_LEASE, false,  \
      OWNER_BATCH, operation, "target_lease_release", release_many, RELEASE_BATCH)                 \
    /* sessions (docs/api.md, "Sessions"): a keep-alive is written as a    \
     * mutation (no audit of its success: docs/contract.md leased-4) but the \
     * database keeps no idempotency record of it; its refusals are audited  \
     * as the refused renewals they stand for (lease.audit_event_type has no \
     * keep-alive type: migration 0028) */                                                          \
    X(SESSION_OPEN, "POST", "/v1/sessions", "session_open", LEASE_CAP_LEASE, true, SESSION,        \
      operation, "session_open", session_open, SESSION_OPEN)                                       \
    X(SESSION_KEEPALIVE, "POST", "/v1/sessions/{session_id}/keepalive", "session_keepalive",       \
      LEASE_CAP_LEASE, true, SESSION, operation, "target_lease_renew", session_keepalive,           \
      SESSION_KEEPALIVE)                                                                           \
    X(SESSION_CLOSE, "POST", "/v1/sessions/{session_id}/close", "session_close", LEASE_CAP_LEASE,  \
      true, SESSION, operation, "session_close", session_close, SESSION_CLOSE)                     \
    X(HEALTHZ, "GET", "/healthz", "healthz", 0, false, NONE, healthz, NULL, none, NONE)            \
    X(READYZ, "GET", "/readyz", "readyz", 0, false, NONE, readyz, NULL, none, NONE)                \
    X(METRICS, "GET", "/metrics", "metrics", 0, false, NONE, metrics, NULL, none, NONE)

/* The kinds of request (SHAPE): what an operation of that kind decodes
 * into and the service's steps for it; a new operation of an existing
 * shape needs no code. */
typedef enum lease_shape {
    LEASE_SHAPE_ACQUIRE,
    LEASE_SHAPE_OWNER,
    LEASE_SHAPE_OWNER_BATCH,
    LEASE_SHAPE_ADMIN,
    LEASE_SHAPE_INSPECT,
    LEASE_SHAPE_GET,
    LEASE_SHAPE_LIST,
    LEASE_SHAPE_COMMIT,
    LEASE_SHAPE_SESSION,
    LEASE_SHAPE_NONE,
} lease_shape_t;

/* The operations of the route table (docs/api.md, "Operations"). */
typedef enum leased_op {
#define LEASE_OPERATION_ENUM(ID, ...) LEASED_OP_##ID,
    LEASE_OPERATIONS(LEASE_OPERATION_ENUM)
#undef LEASE_OPERATION_ENUM
        LEASED_OP_COUNT
} leased_op_t;

/*
 * Body fields. F(NAME, KIND, PRESENCE, MEMBER, MIN, MAX, DIGEST), in the
 * order the decoder reads them (the first field that fails is the one the
 * answer names):
 *   NAME     the JSON key
 *   KIND     LEASE_FIELD_<KIND>: how it is read (lease_field_kind_t)
 *   PRESENCE REQUIRED, OPTIONAL, OPTIONAL_SET: optional, and digested only
 *            when given (a field added after requests were stored: the
 *            digest of a request without it stays what it was), or
 *            DIGEST_ONLY: not accepted in the body
 *            but entered into the digest as its zero value (force-release's
 *            incident_id: force-release and revoke share one digest form)
 *   MEMBER   where it lands in the shape's store request (lease_acquire_req_t
 *            ...); unused for kinds the decoder places itself
 *   MIN, MAX bounds of an INT
 *   DIGEST   whether it enters the request digest (lease/digest.h: every
 *            input that can change what the operation does, and nothing
 *            else; the identity and principal_id always do)
 */
#define LEASE_DEADLINE_FIELDS(F)                                                                   \
    F("deadline_ms", DEADLINE_MS, OPTIONAL, call, 1, INT64_MAX / 1000000, false)                   \
    F("deadline_at", DEADLINE_AT, OPTIONAL, call, 0, 0, false)

#define LEASE_FIELDS_ACQUIRE(F)                                                                    \
    F("request_id", ID, REQUIRED, call.request_id, 0, 0, false)                                    \
    F("lock_identity", IDENTITY, REQUIRED, identity, 0, 0, false)                                  \
    F("service_instance_id", ID, REQUIRED, service_instance_id, 0, 0, true)                        \
    F("execution_id", ID, REQUIRED, execution_id, 0, 0, true)                                      \
    F("job_id", ID, REQUIRED, job_id, 0, 0, true)                                                  \
    F("trace_id", ID, OPTIONAL, trace_id, 0, 0, true)                                              \
    F("ttl_ms", INT, OPTIONAL, ttl_ms, 1, INT32_MAX, true)                                         \
    F("maximum_lifetime_ms", INT, OPTIONAL, maximum_lifetime_ms, 1, INT64_MAX / 1000000, true)     \
    F("metadata", METADATA, OPTIONAL, metadata_json, 0, 0, true)                                   \
    F("session_id", ID, OPTIONAL_SET, session_id, 0, 0, true)                                      \
    F("wait_ms", WAIT, OPTIONAL, call, 0, 0, false)                                                \
    LEASE_DEADLINE_FIELDS(F)

/* A renewal's fields, without the deadline (a batch item has none of its
 * own: the batch is one transaction with one deadline). */
#define LEASE_FIELDS_RENEW_ITEM(F)                                                                 \
    F("request_id", ID, REQUIRED, call.request_id, 0, 0, false)                                    \
    F("lock_identity", IDENTITY, REQUIRED, identity, 0, 0, false)                                  \
    F("lease_id", ID, REQUIRED, lease_id, 0, 0, true)                                              \
    F("fencing_token", INT, REQUIRED, fencing_token, 1, INT64_MAX, true)                           \
    F("service_instance_id", ID, REQUIRED, service_instance_id, 0, 0, true)                        \
    F("ttl_ms", INT, OPTIONAL, ttl_ms, 1, INT32_MAX, true)
#define LEASE_FIELDS_RENEW(F) LEASE_FIELDS_RENEW_ITEM(F) LEASE_DEADLINE_FIELDS(F)

#define LEASE_FIELDS_RELEASE_ITEM(F)                                                               \
    F("request_id", ID, REQUIRED, call.request_id, 0, 0, false)                                    \
    F("lock_identity", IDENTITY, REQUIRED, identity, 0, 0, false)                                  \
    F("lease_id", ID, REQUIRED, lease_id, 0, 0, true)                                              \
    F("fencing_token", INT, REQUIRED, fencing_token, 1, INT64_MAX, true)                           \
    F("service_instance_id", ID, REQUIRED, service_instance_id, 0, 0, true)
#define LEASE_FIELDS_RELEASE(F) LEASE_FIELDS_RELEASE_ITEM(F) LEASE_DEADLINE_FIELDS(F)

/* A batch's deadline is read before its items. */
#define LEASE_FIELDS_RENEW_BATCH(F)                                                                \
    LEASE_DEADLINE_FIELDS(F)                                                                       \
    F("renewals", ITEMS, REQUIRED, call, 1, LEASE_RENEW_BATCH_MAX, false)
#define LEASE_FIELDS_RELEASE_BATCH(F)                                                              \
    LEASE_DEADLINE_FIELDS(F)                                                                       \
    F("releases", ITEMS, REQUIRED, call, 1, LEASE_RENEW_BATCH_MAX, false)

#define LEASE_FIELDS_FORCE_RELEASE(F)                                                              \
    F("request_id", ID, REQUIRED, call.request_id, 0, 0, false)                                    \
    F("lock_identity", IDENTITY, REQUIRED, identity, 0, 0, false)                                  \
    F("lease_id", ID, REQUIRED, lease_id, 0, 0, true)                                              \
    F("fencing_token", INT, REQUIRED, fencing_token, 1, INT64_MAX, true)                           \
    F("reason", TEXT, REQUIRED, reason, 0, 0, true)                                                \
    F("incident_id", ID, DIGEST_ONLY, incident_id, 0, 0, true)                                     \
    LEASE_DEADLINE_FIELDS(F)

#define LEASE_FIELDS_REVOKE(F)                                                                     \
    F("request_id", ID, REQUIRED, call.request_id, 0, 0, false)                                    \
    F("lock_identity", IDENTITY, REQUIRED, identity, 0, 0, false)                                  \
    F("lease_id", ID, REQUIRED, lease_id, 0, 0, true)                                              \
    F("fencing_token", INT, REQUIRED, fencing_token, 1, INT64_MAX, true)                           \
    F("reason", TEXT, REQUIRED, reason, 0, 0, true)                                                \
    F("incident_id", ID, OPTIONAL, incident_id, 0, 0, true)                                        \
    LEASE_DEADLINE_FIELDS(F)

#define LEASE_FIELDS_INSPECT(F)                                                                    \
    F("lock_identity", IDENTITY, REQUIRED, identity, 0, 0, false)                                  \
    LEASE_DEADLINE_FIELDS(F)

/* A list's filters follow rules between fields (by=target needs
 * target_namespace and target_id, ...): json_codec.c's decode_list reads
 * them; these rows say which keys are accepted and required. tenant_id and
 * program_id are required by target and program; by owner they default to
 * the credential's (service.c). */
#define LEASE_FIELDS_LIST(F)                                                                       \
    F("by", LIST_FILTER, REQUIRED, call, 0, 0, false)                                              \
    F("tenant_id", LIST_FILTER, OPTIONAL, tenant_id, 0, 0, false)                                  \
    F("program_id", LIST_FILTER, OPTIONAL, program_id, 0, 0, false)                                \
    F("target_namespace", LIST_FILTER, OPTIONAL, target_namespace, 0, 0, false)                    \
    F("target_id", LIST_FILTER, OPTIONAL, target_id, 0, 0, false)                                  \
    F("page_size", LIST_FILTER, OPTIONAL, page_size, 0, 0, false)                                  \
    F("page_token", LIST_FILTER, OPTIONAL, page_token, 0, 0, false)                                \
    LEASE_DEADLINE_FIELDS(F)

/* A commit's writes enter its digest in their own form (lease/digest.h). */
#define LEASE_FIELDS_COMMIT(F)                                                                     \
    F("request_id", ID, REQUIRED, call.request_id, 0, 0, false)                                    \
    F("lock_identity", IDENTITY, REQUIRED, identity, 0, 0, false)                                  \
    F("lease_id", ID, REQUIRED, lease_id, 0, 0, true)                                              \
    F("fencing_token", INT, REQUIRED, fencing_token, 1, INT64_MAX, true)                           \
    F("execution_id", ID, REQUIRED, execution_id, 0, 0, true)                                      \
    F("trace_id", ID, REQUIRED, trace_id, 0, 0, true)                                              \
    F("writes", WRITES, REQUIRED, writes, 1, LEASE_COMMIT_WRITES_MAX, true)                        \
    LEASE_DEADLINE_FIELDS(F)

/* Sessions: the tenant is the credential's, the session id the path's. */
#define LEASE_FIELDS_SESSION_OPEN(F)                                                               \
    F("request_id", ID, REQUIRED, call.request_id, 0, 0, false)                                    \
    F("service_instance_id", ID, REQUIRED, service_instance_id, 0, 0, true)                        \
    F("ttl_ms", INT, OPTIONAL, ttl_ms, 1, INT32_MAX, true)                                         \
    LEASE_DEADLINE_FIELDS(F)
#define LEASE_FIELDS_SESSION_KEEPALIVE(F) LEASE_DEADLINE_FIELDS(F)
#define LEASE_FIELDS_SESSION_CLOSE(F)                                                              \
    F("request_id", ID, REQUIRED, call.request_id, 0, 0, false)                                    \
    LEASE_DEADLINE_FIELDS(F)

#define LEASE_FIELDS_NONE(F)

/* How a field is read. */
typedef enum lease_field_kind {
    LEASE_FIELD_ID,          /* identifier: 1..128 of [A-Za-z0-9._:-] */
    LEASE_FIELD_INT,         /* integer within [min, max] */
    LEASE_FIELD_TEXT,        /* free text: 1.. bytes of UTF-8, no control characters */
    LEASE_FIELD_IDENTITY,    /* lock_identity, normalised (lease/identity.h) */
    LEASE_FIELD_METADATA,    /* the flat metadata object, stored with sorted keys */
    LEASE_FIELD_WAIT,        /* wait_ms: 0..LEASE_MAX_WAIT_MS (the server's setting) */
    LEASE_FIELD_DEADLINE_MS, /* the request's relative deadline */
    LEASE_FIELD_DEADLINE_AT, /* the request's absolute deadline (exclusive with deadline_ms) */
    LEASE_FIELD_ITEMS,       /* a batch's array of min..max items */
    LEASE_FIELD_WRITES,      /* a commit's array of min..max writes */
    LEASE_FIELD_LIST_FILTER, /* a list's filter: the list's own rules */
} lease_field_kind_t;

typedef enum lease_field_presence {
    LEASE_FIELD_OPTIONAL = 0,
    LEASE_FIELD_REQUIRED,
    LEASE_FIELD_DIGEST_ONLY,
    LEASE_FIELD_OPTIONAL_SET,
} lease_field_presence_t;

typedef struct lease_field {
    const char *name;
    lease_field_kind_t kind;
    lease_field_presence_t presence;
    size_t offset; /* of MEMBER in the shape's store request */
    size_t size;   /* of MEMBER (a string's capacity) */
    int64_t min, max;
    bool digest;
} lease_field_t;

/* One row of a field list as a lease_field_t of store request type T:
 * #define ROW(...) LEASE_FIELD_OF(lease_owner_req_t, __VA_ARGS__)
 * static const lease_field_t renew[] = {LEASE_FIELDS_RENEW(ROW)}; */
#define LEASE_FIELD_OF(T, NAME, KIND, PRESENCE, MEMBER, MIN, MAX, DIGEST)                          \
    {NAME,                                                                                         \
     LEASE_FIELD_##KIND,                                                                           \
     LEASE_FIELD_##PRESENCE,                                                                       \
     offsetof(T, MEMBER),                                                                          \
     sizeof(((T *)0)->MEMBER),                                                                     \
     MIN,                                                                                          \
     MAX,                                                                                          \
     DIGEST},

/* An operation's fields and, for a mutation, the digest's op name. */
typedef struct lease_operation {
    const char *name;
    bool mutates;
    lease_shape_t shape;
    const char *event_type; /* NULL: not audited */
    const lease_field_t *fields;
    size_t n_fields;
} lease_operation_t;

/* The description of op (< LEASED_OP_COUNT). */
const lease_operation_t *lease_operation(leased_op_t op);

/* The batches: B(BATCH, ITEM, DECIDED): each item of BATCH is an ITEM
 * operation (decoded, digested and audited as one), and DECIDED is the
 * batch's code when it was decided (each item then answers its own). */
#define LEASE_BATCHES(B)                                                                           \
    B(RENEW_BATCH, RENEW, LEASE_RENEWED)                                                           \
    B(RELEASE_BATCH, RELEASE, LEASE_RELEASED)

/* The item operation of a batch, and the code of a decided batch;
 * LEASED_OP_COUNT and LEASE_CODE_COUNT for an operation that is not one. */
leased_op_t lease_operation_item(leased_op_t batch);
lease_code_t lease_operation_decided(leased_op_t batch);

/* The field lists of a batch's items (the renewals or releases they are). */
extern const lease_field_t lease_renew_item_fields[];
extern const size_t lease_renew_item_fields_n;
extern const lease_field_t lease_release_item_fields[];
extern const size_t lease_release_item_fields_n;

/*
 * The backend calls of the lease operations, for the store adapter:
 * C(ID, FUNCTION, RESOLVABLE, CODES)
 *   ID         the adapter's STORE_PG_OP_<ID>
 *   FUNCTION   the SQL function's name (lease.<FUNCTION>), also the name
 *              logs and quarantine rows give the call
 *   RESOLVABLE a lease mutation: a lost reply is outcome-unknown, resolved by
 *              the caller repeating its request id
 *   CODES      the lease_code_t bits (LEASE_CODE_BIT) its answer may carry;
 *              0 for batches (each item answers as its single operation)
 */
#define LEASE_CODE_BIT(c) (1u << (c))
#define LEASE_MUTATION_FAILURES                                                                    \
    (LEASE_CODE_BIT(LEASE_LOST) | LEASE_CODE_BIT(LEASE_IDEMPOTENCY_CONFLICT) |                     \
     LEASE_CODE_BIT(LEASE_INVALID_LEASE_REQUEST) | LEASE_CODE_BIT(LEASE_DEADLINE_EXCEEDED) |       \
     LEASE_CODE_BIT(LEASE_BACKEND_UNAVAILABLE))
#define LEASE_READ_FAILURES                                                                        \
    (LEASE_CODE_BIT(LEASE_INVALID_LEASE_REQUEST) | LEASE_CODE_BIT(LEASE_DEADLINE_EXCEEDED) |       \
     LEASE_CODE_BIT(LEASE_BACKEND_UNAVAILABLE))

#define LEASE_STORE_CALLS(C)                                                                       \
    /* lease_lost: the session it names is not open, not unexpired or not the caller's */        \
    C(ACQUIRE, "acquire", true,                                                                    \
      LEASE_CODE_BIT(LEASE_ACQUIRED) | LEASE_CODE_BIT(LEASE_CONFLICT) |                            \
          LEASE_CODE_BIT(LEASE_LOST) |                                                             \
          LEASE_CODE_BIT(LEASE_IDEMPOTENCY_CONFLICT) |                                             \
          LEASE_CODE_BIT(LEASE_INVALID_LEASE_REQUEST) | LEASE_CODE_BIT(LEASE_DEADLINE_EXCEEDED) |  \
          LEASE_CODE_BIT(LEASE_BACKEND_UNAVAILABLE))                                               \
    C(RENEW, "renew", true, LEASE_CODE_BIT(LEASE_RENEWED) | LEASE_MUTATION_FAILURES)               \
    C(RELEASE, "release", true, LEASE_CODE_BIT(LEASE_RELEASED) | LEASE_MUTATION_FAILURES)          \
    C(FORCE_RELEASE, "force_release", true,                                                        \
      LEASE_CODE_BIT(LEASE_RELEASED) | LEASE_MUTATION_FAILURES)                                    \
    C(REVOKE, "revoke", true, LEASE_CODE_BIT(LEASE_REVOKED) | LEASE_MUTATION_FAILURES)             \
    C(INSPECT, "inspect", false,                                                                   \
      LEASE_CODE_BIT(LEASE_INSPECTED) | LEASE_CODE_BIT(LEASE_NOT_FOUND) | LEASE_READ_FAILURES)     \
    C(LIST_BY_OWNER, "list_by_owner", false, LEASE_CODE_BIT(LEASE_LISTED) | LEASE_READ_FAILURES)   \
    C(LIST_BY_TARGET, "list_by_target", false, LEASE_CODE_BIT(LEASE_LISTED) | LEASE_READ_FAILURES) \
    C(LIST_BY_PROGRAM, "list_by_program", false,                                                   \
      LEASE_CODE_BIT(LEASE_LISTED) | LEASE_READ_FAILURES)                                          \
    C(FENCED_COMMIT, "fenced_commit", true,                                                        \
      LEASE_CODE_BIT(LEASE_COMMIT_ACCEPTED) | LEASE_CODE_BIT(LEASE_WRITE_CONFLICT) |               \
          LEASE_MUTATION_FAILURES)                                                                 \
    C(RENEW_MANY, "renew_many", true, 0)                                                           \
    C(RELEASE_MANY, "release_many", true, 0)                                                       \
    C(SESSION_OPEN, "session_open", true, LEASE_CODE_BIT(LEASE_ACQUIRED) | LEASE_MUTATION_FAILURES) \
    C(SESSION_KEEPALIVE, "session_keepalive", true,                                                \
      LEASE_CODE_BIT(LEASE_RENEWED) | LEASE_MUTATION_FAILURES)                                     \
    C(SESSION_CLOSE, "session_close", true, LEASE_CODE_BIT(LEASE_RELEASED) | LEASE_MUTATION_FAILURES)

#endif
