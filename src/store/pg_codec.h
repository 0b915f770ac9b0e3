/*
 * pg_codec.h - the JSON of docs/sql-api.md, both ways.
 *
 * Requests: store.h structs -> one jsonb text argument of lease.<fn>(...).
 * Results: the function's jsonb text -> store.h structs. Decoding is strict
 * about what it reads (types, bounds, which codes an operation may answer)
 * and tolerant of fields it does not know. Anything malformed decodes to
 * LEASE_BACKEND_UNAVAILABLE and a log line; it never crashes and never
 * passes half-read data on.
 *
 * No libpq here, so tests/unit/test_pg_codec.c runs without a database.
 */
#ifndef LEASE_STORE_PG_CODEC_H
#define LEASE_STORE_PG_CODEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lease/clock.h"
#include "lease/operations.h"
#include "lease/store.h"

/* Every backend call the adapter makes: the lease operations' calls
 * (lease/operations.h, LEASE_STORE_CALLS: their functions, whether a lost
 * reply is resolvable, the codes each may answer), then the adapter's own. */
typedef enum store_pg_op {
#define STORE_PG_OP_ENUM(ID, FUNCTION, RESOLVABLE, CODES) STORE_PG_OP_##ID,
    LEASE_STORE_CALLS(STORE_PG_OP_ENUM)
#undef STORE_PG_OP_ENUM
        STORE_PG_OP_SWEEP,
    STORE_PG_OP_RECORD_AUDIT,
    STORE_PG_OP_CREDENTIAL_LOOKUP,
    STORE_PG_OP_HEALTH,
    STORE_PG_OP_HOUSEKEEPING, /* lease.check_namespace, lease.expire_due, lease.purge_due */
    STORE_PG_OP_COUNT
} store_pg_op_t;

/* "acquire", "list_by_owner", ... (the SQL function's name). */
const char *store_pg_op_name(store_pg_op_t op);
/* The lease mutations: a lost reply is outcome-unknown, resolved by the
 * caller repeating its request id. Reads cannot have committed anything, and
 * nobody resolves an internal write (sweep, audit batch): for those a lost
 * reply is backend_unavailable. */
bool store_pg_op_resolvable(store_pg_op_t op);
/* Whether `code` is an answer the operation's SQL function may give. */
bool store_pg_op_allows(store_pg_op_t op, lease_code_t code);

/*
 * Encoders. Each returns the request as compact JSON text (caller frees with
 * free()), or NULL. On NULL, *bad_field names the offending request field
 * when the input was invalid (e.g. "metadata", "writes[2].body": the caller
 * answers invalid_lease_request), or is NULL when memory ran out.
 * now_mono_ns is the moment of the call, for latency_ms. An acquisition, a
 * renewal, a release and their batches are not JSON: they go as typed
 * arguments (below).
 */
/* op: STORE_PG_OP_FORCE_RELEASE or STORE_PG_OP_REVOKE (only revoke sends
 * incident_id). */
LEASE_MUST_USE char *store_pg_encode_admin(store_pg_op_t op, const lease_admin_req_t *req,
                                           int64_t now_mono_ns, const char **bad_field);
LEASE_MUST_USE char *store_pg_encode_inspect(const lease_inspect_req_t *req, int64_t now_mono_ns,
                                             const char **bad_field);
LEASE_MUST_USE char *store_pg_encode_list(const lease_list_req_t *req, int64_t now_mono_ns,
                                          const char **bad_field);
LEASE_MUST_USE char *store_pg_encode_commit(const lease_commit_req_t *req, int64_t now_mono_ns,
                                            const char **bad_field);
/*
 * The arguments of lease.acquire_brief_typed, renew_brief_typed and
 * release_brief_typed (docs/sql-api.md, "Typed calls"), in their order:
 * what the service sends for an acquisition, a renewal or a release: the
 * fields of docs/sql-api.md's "Common request fields", one argument each,
 * in place of a jsonb request. values[i] is
 * argument i + 1 as text, NULL for SQL NULL (an optional field left empty,
 * the default operation class, no TTL, no metadata); it points into the
 * request or into this struct, so both must outlive the call.
 */
#define STORE_PG_TYPED_MAX_ARGS 25
/*
 * The typed calls the service makes on every lease operation: each one's
 * SQL and the name a direct session prepares it under (store_pg.c,
 * "prepared statements"), so that the database parses, analyses and plans
 * it once per session instead of once per call.
 */
typedef enum store_pg_typed {
    STORE_PG_TYPED_ACQUIRE,
    STORE_PG_TYPED_RENEW,
    STORE_PG_TYPED_RELEASE,
    STORE_PG_TYPED_RENEW_MANY,
    STORE_PG_TYPED_RELEASE_MANY,
    STORE_PG_TYPED_COUNT
} store_pg_typed_t;
typedef struct store_pg_typed_call {
    const char *name; /* the prepared statement's name */
    const char *sql;  /* the call, $1..$N */
} store_pg_typed_call_t;
extern const store_pg_typed_call_t store_pg_typed_calls[STORE_PG_TYPED_COUNT];

typedef struct store_pg_typed_args {
    const char *sql;      /* the call, $1..$nargs */
    const char *prepared; /* its name in store_pg_typed_calls */
    int nargs;
    const char *values[STORE_PG_TYPED_MAX_ARGS];
    char fencing_token[24], ttl_ms[24], maximum_lifetime_ms[24], latency_ms[24];
    char deadline_at[LEASE_TIME_LEN + 1];
    char *literals; /* the call's composites (store_pg_typed_args_free) */
} store_pg_typed_args_t;
/* The identity's components at the head of a typed call's values. */
#define STORE_PG_IDENTITY_FIELDS 7
/* op: STORE_PG_OP_RENEW or STORE_PG_OP_RELEASE. Two arguments, the text
 * literals of lease.identity and lease.renew_request (a release:
 * lease.release_request, the renewal's fields without ttl_ms; migration
 * 0030), whose fields are the values the positional call had, in its
 * order. False when a string is not UTF-8 or out of memory (the caller
 * answers as for a failed encoding). On true, free with
 * store_pg_typed_args_free after the call. */
LEASE_MUST_USE bool store_pg_encode_owner_typed(store_pg_op_t op, const lease_owner_req_t *req,
                                                int64_t now_mono_ns, store_pg_typed_args_t *out);
/* An acquisition's arguments: two, the text literals of lease.identity
 * and lease.acquire_request (migration 0029), whose fields are the values
 * the positional call had, in its order (the identity's seven, then the
 * rest; session_id last). The metadata goes as the request holds it (an
 * object the request decoder validated and wrote); none, or {}, is NULL.
 * False with *bad_field "metadata" when it is not a JSON object (the
 * caller's input: invalid_lease_request), with *bad_field NULL when a
 * string is not UTF-8 or out of memory. On true, free with
 * store_pg_typed_args_free after the call. */
LEASE_MUST_USE bool store_pg_encode_acquire_typed(const lease_acquire_req_t *req,
                                                  int64_t now_mono_ns, store_pg_typed_args_t *out,
                                                  const char **bad_field);
void store_pg_typed_args_free(store_pg_typed_args_t *a);
/* A session call's arguments (docs/sql-api.md, "Sessions"): op
 * STORE_PG_OP_SESSION_OPEN, _KEEPALIVE or _CLOSE. The statement is sent as
 * text (not prepared: a session call is rare beside a renewal). False when
 * a string is not UTF-8. */
LEASE_MUST_USE bool store_pg_encode_session_typed(store_pg_op_t op, const lease_session_req_t *req,
                                                  int64_t now_mono_ns, store_pg_typed_args_t *out);
/*
 * The arguments of lease.renew_many_brief_typed or release_many_brief_typed
 * (docs/sql-api.md, "Typed batches"): each argument of the single typed call
 * (store_pg_encode_owner_typed, one place for what each argument is: the
 * two composites' literals) as a PostgreSQL array literal with one element
 * per request, in order. values point into `arrays`
 * (store_pg_typed_many_free frees it).
 */
typedef struct store_pg_typed_many {
    const char *sql;
    const char *prepared; /* its name in store_pg_typed_calls */
    int nargs;
    const char *values[STORE_PG_TYPED_MAX_ARGS];
    char *arrays;
} store_pg_typed_many_t;
/* op: STORE_PG_OP_RENEW_MANY or STORE_PG_OP_RELEASE_MANY; n: 1 to 100.
 * False (nothing to free) when a string is not UTF-8 or out of memory. */
LEASE_MUST_USE bool store_pg_encode_owner_many_typed(store_pg_op_t op,
                                                     const lease_owner_req_t *reqs, size_t n,
                                                     int64_t now_mono_ns,
                                                     store_pg_typed_many_t *out);
void store_pg_typed_many_free(store_pg_typed_many_t *m);
/* A JSON array of lease.audit_events rows. */
LEASE_MUST_USE char *store_pg_encode_audit(const lease_audit_event_t *events, size_t n,
                                           const char **bad_field);

/* The list function of a request's `by`. */
store_pg_op_t store_pg_list_op(lease_list_by_t by);

/* JSON text that must be an object (duplicate keys refused): results, and
 * the JSON embedded in requests. NULL when text is NULL, does not parse or
 * is not an object. A number too large for jansson (jsonb numeric has no
 * bound) is read as null rather than failing the whole text. */
LEASE_MUST_USE json_t *store_pg_parse_object(const char *text);

/*
 * Decoders. Each fills `out` (zeroed first) and returns the decoded code;
 * malformed text, a code the operation may not answer, or a success without
 * its payload returns LEASE_BACKEND_UNAVAILABLE for reads and
 * LEASE_OUTCOME_UNKNOWN for lease mutations (and logs why). Metadata never
 * makes a record unreadable: values it cannot hold exactly read as null.
 */
lease_code_t store_pg_decode_result(store_pg_op_t op, const char *text, lease_result_t *out);
/* lease.renew_many's {"results": [...]}: exactly n answers, each decoded
 * as store_pg_decode_result decodes a renewal's into results[i]. Returns
 * LEASE_RENEWED, or LEASE_OUTCOME_UNKNOWN (logged) when the whole answer
 * cannot be read (an item's own malformed answer is that item's). */
lease_code_t store_pg_decode_renew_many(const char *text, size_t n, lease_result_t *results);
/* lease.release_many's answer, the same way: LEASE_RELEASED when read. */
lease_code_t store_pg_decode_release_many(const char *text, size_t n, lease_result_t *results);
/* The recovery epoch and WAL position lease.check_namespace answers
 * ("epoch", "timeline", "wal_lsn" "X/Y"). Returns 0, or -1 when absent or
 * malformed. */
int store_pg_decode_position(const char *text, int *epoch, int *timeline, uint64_t *wal_lsn);
/* On success out->leases is heap (lease_list_result_free). */
lease_code_t store_pg_decode_list(store_pg_op_t op, const char *text, lease_list_result_t *out);
lease_code_t store_pg_decode_commit(const char *text, size_t n_writes, lease_commit_result_t *out);
/* The internal operations below (sweep, credential, health, audit count)
 * have no wire code of their own: they answer LEASE_INSPECTED on success. */
/* The two jsonb results of lease.sweep_expired and lease.purge_retention. */
lease_code_t store_pg_decode_sweep(const char *sweep_text, const char *purge_text,
                                   lease_sweep_result_t *out);
/* The jsonb result of lease.expire_due or lease.purge_due (step says
 * which); LEASE_STEP_NAMESPACE has none to decode. */
lease_code_t store_pg_decode_housekeeping(lease_housekeeping_step_t step, const char *text,
                                          lease_housekeeping_result_t *out);
/* text NULL (SQL null): not found. Found answers LEASE_INSPECTED, not found
 * LEASE_NOT_FOUND with *found false. */
lease_code_t store_pg_decode_credential(const char *text, lease_credential_t *out, bool *found);
/* Fills everything but `reachable`; answers LEASE_INSPECTED. */
lease_code_t store_pg_decode_health(const char *text, lease_health_t *out);
/* lease.record_audit's integer: how many rows went in. */
lease_code_t store_pg_decode_audit_count(const char *text, size_t expected);

#endif
