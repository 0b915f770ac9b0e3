/*
 * store_pg.c - the PostgreSQL adapter of the lease-store protocol
 * (include/lease/store_pg.h): one call of one SQL function per operation,
 * deadlines, serialization retries, quarantine of corrupt records, and the
 * mapping of every outcome to a lease_code_t.
 *
 * Transaction model: every operation is one round trip and one implicit
 * SERIALIZABLE transaction whatever the login role's default. On a session
 * through a pooler it is one simple-protocol string,
 * `SET TRANSACTION ISOLATION LEVEL SERIALIZABLE; SELECT lease.<fn>(...)::text`
 * (pg_conn.c, store_pg_stmt_t.serializable), and the session keeps no state,
 * so the adapter works behind PgBouncer in transaction mode and leaks
 * nothing to other clients of its pool. On a direct session the typed calls
 * are prepared statements instead ("Prepared statements" below). health()
 * alone runs an explicit READ COMMITTED READ ONLY transaction.
 *
 * A repeated request id is the functions' to answer (docs/sql-api.md, "One
 * behaviour for every caller"): they find it after the conflict and give
 * the stored result, so the adapter sends every call once per attempt.
 *
 * Outcome rules (docs/architecture.md, "Deadlines and outcome-unknown"):
 * - nothing sent yet and the deadline passed (waiting for the pool, or
 *   connecting): deadline_exceeded, the database untouched;
 * - cannot connect (after one reconnect): backend_unavailable;
 * - sent, and a cancel the server confirmed (57014): deadline_exceeded;
 * - sent, then the session ended or stayed silent: outcome_unknown for
 *   lease mutations, backend_unavailable for reads (nothing can have
 *   committed) and internal writes (sweep, audit batch: nobody resolves
 *   them by request id, so they are not counted as outcome unknown);
 * - 40001/40P01/55P03: the whole call again after a jittered backoff while
 *   the deadline allows, then backend_unavailable.
 *
 * Internal operations without a wire code (sweep, record_audit,
 * credential_lookup, health) answer LEASE_INSPECTED on success;
 * credential_lookup answers LEASE_NOT_FOUND when there is no such row.
 */
#include "lease/store_pg.h"

#include "lease/identity.h"

#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_codec.h"
#include "pg_conn.h"
#include "pg_log.h"
#include "pg_pool.h"
#include "pg_pred_locks.h"
#include "pg_sqlstate.h"

#define BACKOFF_FIRST_MS 5
#define BACKOFF_CAP_MS 200
#define RETRY_AFTER_UNAVAILABLE_MS 250
#define QUARANTINE_BUDGET_MS 1000
#define POOL_SIZE_MAX 1024
#define CONNECT_ATTEMPTS 2 /* the first connection and one reconnect */

typedef struct store_pg {
    lease_store_t base;
    store_pg_pool_t *pool;
    store_pg_connparams_t params;
    uint64_t serialization_retries; /* __atomic */
    uint64_t outcome_unknown;
    uint64_t backend_errors;
    uint64_t sealed_refusals;
    /* The highest WAL insert position a check saw, and on which timeline
     * (lease.check_namespace): a later check that finds the database behind
     * it on the same timeline seals (an older copy was restored). Kept here,
     * not in the database, which a copy would carry along. Checked before
     * the first decision of every new session and by every sweep. */
    pthread_mutex_t seen_lock;
    bool seen; /* the three below hold a position */
    int seen_epoch;
    int seen_timeline;
    uint64_t seen_wal_lsn;
    bool pred_locks_checked; /* __atomic: the settings check ran (pg_pred_locks.h) */
    bool no_prepared;        /* lease_store_pg_config_t.no_prepared_statements */
} store_pg_t;

/* One backend call as the retry loop sees it. */
typedef struct call_spec {
    store_pg_op_t op;
    store_pg_stmt_t stmt;
    const lease_deadline_t *deadline;
    const lease_call_t *call;         /* for logs; may be NULL */
    lease_retry_t *retry;             /* the caller takes the pauses (store.h); may be NULL */
    const lease_identity_t *identity; /* for quarantine; may be NULL */
} call_spec_t;

typedef struct call_outcome {
    bool ok;                /* reply.values hold the function's answer */
    lease_code_t code;      /* when !ok */
    int64_t retry_after_ms; /* when !ok */
    bool reached_backend;   /* a reply (OK or ERROR) came from the server */
    store_pg_reply_t reply;
} call_outcome_t;

static void count(uint64_t *counter)
{
    __atomic_add_fetch(counter, 1, __ATOMIC_RELAXED);
}

static void log_call(store_pg_severity_t sev, const char *event, const call_spec_t *spec,
                     const char *sqlstate, const char *condition, const char *message, int attempt)
{
    if (!store_pg_log_enabled(sev))
        return;
    store_pg_log_rec_t rec = {
        .event = event,
        .op = store_pg_op_name(spec->op),
        .sqlstate = sqlstate,
        .condition = condition,
        .message = message,
        .correlation_id = spec->call ? spec->call->correlation_id : NULL,
        .request_id = spec->call ? spec->call->request_id : NULL,
        .attempt = attempt,
    };
    store_pg_log(sev, &rec);
}

static void fail(call_outcome_t *out, lease_code_t code, bool retryable)
{
    out->ok = false;
    out->code = code;
    out->retry_after_ms =
        retryable && code == LEASE_BACKEND_UNAVAILABLE ? RETRY_AFTER_UNAVAILABLE_MS : 0;
}

/* The lock key an LS001 error names in its DETAIL ("lock_key=<key>"). */
static bool detail_lock_key(const char *detail, char *out, size_t outsz)
{
    static const char prefix[] = "lock_key=";
    const char *p = strstr(detail, prefix);
    if (!p)
        return false;
    p += sizeof prefix - 1;
    size_t n = strcspn(p, " \t\r\n,;");
    if (n == 0 || n >= outsz)
        return false;
    memcpy(out, p, n);
    out[n] = '\0';
    return true;
}

/* Records the corrupt record in a separate short transaction on the same
 * (idle, healthy) session; the caller's answer does not depend on it. The
 * key is the one the backend named, else derived from the request's
 * identity by lease.lock_key. */
static void quarantine(store_pg_t *pg, PGconn *conn, const call_spec_t *spec,
                       const store_pg_reply_t *err)
{
    log_call(STORE_PG_LOG_ALERT, "lease_record_corrupt", spec, err->sqlstate,
             "lease_record_corrupt", err->message, 0);
    lease_deadline_t budget = lease_deadline_in(QUARANTINE_BUDGET_MS);
    const lease_identity_t *id = spec->identity;
    char key[LEASE_LOCK_KEY_LEN + 64];
    const char *params[9] = {NULL};
    store_pg_stmt_t stmt = {.params = params, .serializable = true};
    if (detail_lock_key(err->detail, key, sizeof key)) {
        params[0] = key;
        params[1] = store_pg_op_name(spec->op);
        params[2] = err->primary;
        stmt.sql = "SELECT lease.quarantine($1, $2, $3)";
        stmt.nparams = 3;
    } else if (id) {
        params[0] = id->tenant_id;
        params[1] = id->program_id;
        params[2] = id->target_namespace;
        params[3] = id->target_id;
        params[4] = id->actor_name;
        params[5] = id->workflow_name;
        params[6] = id->operation_class[0] ? id->operation_class : "default";
        params[7] = store_pg_op_name(spec->op);
        params[8] = err->primary;
        stmt.sql = "SELECT lease.quarantine(lease.lock_key($1,$2,$3,$4,$5,$6,$7), $8, $9)";
        stmt.nparams = 9;
    } else {
        log_call(STORE_PG_LOG_ALERT, "quarantine_skipped", spec, err->sqlstate, NULL,
                 "no lock key in the error and no identity in the request", 0);
        return;
    }
    store_pg_reply_t r;
    store_pg_conn_exec((struct pg_conn *)conn, &stmt, &budget, &r);
    if (r.status != STORE_PG_EXEC_OK) {
        count(&pg->backend_errors);
        log_call(STORE_PG_LOG_ALERT, "quarantine_failed", spec, r.sqlstate, NULL, r.message, 0);
    }
    store_pg_reply_clear(&r);
}

/* The namespace check's parameters: the epoch and position seen so far
 * (NULL before any check). Texts live in the caller's buffers. */
static void seen_params(store_pg_t *pg, char epoch[16], char timeline[16], char lsn[32],
                        const char *params[3])
{
    pthread_mutex_lock(&pg->seen_lock);
    bool seen = pg->seen;
    int ep = pg->seen_epoch, tl = pg->seen_timeline;
    uint64_t pos = pg->seen_wal_lsn;
    pthread_mutex_unlock(&pg->seen_lock);
    snprintf(epoch, 16, "%d", ep);
    snprintf(timeline, 16, "%d", tl);
    snprintf(lsn, 32, "%X/%X", (unsigned)(pos >> 32), (unsigned)pos);
    params[0] = seen ? epoch : NULL;
    params[1] = seen ? timeline : NULL;
    params[2] = seen ? lsn : NULL;
}

/* Keeps the position a check answered when it is later than the one kept,
 * or in another epoch or on another timeline (a recovery starts over; a
 * failover is the timeline rule's to judge). */
static void remember_position(store_pg_t *pg, const char *check_answer)
{
    int epoch, timeline;
    uint64_t lsn;
    if (store_pg_decode_position(check_answer, &epoch, &timeline, &lsn) != 0)
        return;
    pthread_mutex_lock(&pg->seen_lock);
    if (!pg->seen || epoch != pg->seen_epoch || timeline != pg->seen_timeline ||
        lsn > pg->seen_wal_lsn) {
        pg->seen = true;
        pg->seen_epoch = epoch;
        pg->seen_timeline = timeline;
        pg->seen_wal_lsn = lsn;
    }
    pthread_mutex_unlock(&pg->seen_lock);
}

/* Before the first lease decision of a new session: lease.check_namespace
 * with the position seen so far, so that a database restarted from an older
 * copy of itself on the same timeline is sealed before it decides anything
 * (a restore onto another cluster, a failover or a point-in-time restore is
 * refused by every deciding call itself). Returns 0, or -1 with msg: the
 * session is not used (fail closed). */
static int check_new_session(store_pg_t *pg, struct pg_conn *conn, const lease_deadline_t *deadline,
                             bool *direct, char *msg, size_t msgsz)
{
    char epoch[16], timeline[16], lsn[32];
    const char *params[3];
    seen_params(pg, epoch, timeline, lsn, params);
    store_pg_stmt_t stmt = {
        .sql = "SELECT lease.check_namespace($1::integer, $2::integer, $3::pg_lsn)::text, "
               "pg_backend_pid()",
        .nparams = 3,
        .params = params,
        .serializable = true,
    };
    store_pg_reply_t r;
    store_pg_conn_exec(conn, &stmt, deadline, &r);
    int rc = r.status == STORE_PG_EXEC_OK && r.values[0] && !r.discard ? 0 : -1;
    /* The backend that answered is the one libpq's start-up named: no
     * pooler sits between (PgBouncer and its kind give the client a key of
     * their own), so the session, and what it prepares, stays ours. */
    *direct = rc == 0 && r.nvalues == 2 && r.values[1] &&
              strtol(r.values[1], NULL, 10) == PQbackendPID((PGconn *)conn);
    if (rc == 0)
        remember_position(pg, r.values[0]);
    else
        snprintf(msg, msgsz, "checking the namespace on a new session: %.180s",
                 r.message[0] ? r.message : "no answer");
    store_pg_reply_clear(&r);
    return rc;
}

/*
 * Prepared statements. A direct session (check_new_session) makes the typed
 * calls prepared statements once (store_pg_typed_calls), so that each call
 * is a Bind and Execute the database neither parses, analyses nor plans
 * again: 3 to 5% of the database's CPU per operation (docs/benchmarks.md,
 * "Issue 20: prepared typed calls"), and pg_stat_activity shows the call
 * with $1..$N instead of the request's values. Each call still
 * runs as one implicit transaction, at SERIALIZABLE because the session's
 * default says so (set here, before anything is prepared; the functions
 * refuse any other level, LS002, so a session that lost it fails closed).
 * Through a pooler nothing is prepared and nothing is SET: the session may
 * be another client's next, and PgBouncer's support for protocol-level
 * prepared statements cannot be seen from here. Returns true when every
 * statement is prepared; false leaves the session to the text path, and
 * *broken says it cannot be used at all.
 */
static bool prepare_session(struct pg_conn *conn, const lease_deadline_t *deadline, bool *broken)
{
    /* one round trip: the setting and every Parse in one pipeline, one
     * transaction (a failed Parse rolls the setting back with it) */
    store_pg_stmt_t stmts[1 + STORE_PG_TYPED_COUNT] = {
        {.sql = "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE"},
    };
    for (int i = 0; i < STORE_PG_TYPED_COUNT; i++)
        stmts[1 + i] = (store_pg_stmt_t){.sql = store_pg_typed_calls[i].sql,
                                         .prepare_as = store_pg_typed_calls[i].name};
    store_pg_reply_t r;
    store_pg_conn_exec_pipeline(conn, stmts, 1 + STORE_PG_TYPED_COUNT, deadline, &r);
    bool ok = r.status == STORE_PG_EXEC_OK;
    *broken = r.discard;
    store_pg_reply_clear(&r);
    return ok;
}

/* A new session, checked (check_new_session) and, when direct, its typed
 * calls prepared (*prepared). On failure *out is NULL and msg says why. */
static store_pg_connect_status_t open_session(store_pg_t *pg, const call_spec_t *spec,
                                              struct pg_conn **out, bool *prepared, char *msg,
                                              size_t msgsz)
{
    *prepared = false;
    struct pg_conn *conn = NULL;
    store_pg_connect_status_t st =
        store_pg_conn_connect(&pg->params, spec->deadline, &conn, msg, msgsz);
    if (st != STORE_PG_CONNECT_OK)
        return st;
    bool direct = false, broken = false;
    if (check_new_session(pg, conn, spec->deadline, &direct, msg, msgsz) == 0) {
        if (!__atomic_exchange_n(&pg->pred_locks_checked, true, __ATOMIC_RELAXED)) {
            store_pg_pool_stats_t ps;
            store_pg_pool_stats(pg->pool, &ps);
            store_pg_check_pred_locks(conn, ps.size, spec->deadline);
        }
        *prepared = direct && !pg->no_prepared && prepare_session(conn, spec->deadline, &broken);
        /* (a call whose deadline passed while preparing leaves its session
         * to the text form too, but that is the deadline's, not a fault) */
        if (direct && !pg->no_prepared && !*prepared && !broken &&
            !lease_deadline_passed(spec->deadline))
            log_call(STORE_PG_LOG_WARN, "prepare_failed", spec, NULL, NULL,
                     "a direct session could not prepare the typed calls: it sends them as text",
                     0);
        if (!broken) {
            *out = conn;
            return STORE_PG_CONNECT_OK;
        }
        *prepared = false;
        snprintf(msg, msgsz, "preparing the typed calls on a new session");
    }
    PQfinish((PGconn *)conn);
    return lease_deadline_passed(spec->deadline) ? STORE_PG_CONNECT_DEADLINE
                                                 : STORE_PG_CONNECT_FAILED;
}

/* A slot with a usable session, connecting (at most CONNECT_ATTEMPTS
 * times) when needed. Returns 0, or the code to answer. */
static int ensure_session(store_pg_t *pg, store_pg_slot_t *slot, const call_spec_t *spec,
                          int *attempts_left, lease_code_t *code)
{
    while (!store_pg_conn_usable(slot->conn)) {
        PQfinish((PGconn *)slot->conn);
        slot->conn = NULL;
        slot->prepared = false;
        if (*attempts_left <= 0) {
            *code = LEASE_BACKEND_UNAVAILABLE;
            return -1;
        }
        (*attempts_left)--;
        char msg[256];
        store_pg_connect_status_t st =
            open_session(pg, spec, &slot->conn, &slot->prepared, msg, sizeof msg);
        if (st == STORE_PG_CONNECT_OK)
            continue;
        if (st == STORE_PG_CONNECT_DEADLINE) {
            *code = LEASE_DEADLINE_EXCEEDED;
            return -1;
        }
        count(&pg->backend_errors);
        log_call(STORE_PG_LOG_WARN, "connect_failed", spec, NULL, NULL, msg, 0);
    }
    return 0;
}

/* What one attempt on a pooled slot came to. */
typedef enum attempt_verdict {
    ATTEMPT_DONE,    /* out holds the answer: the function's value or a typed failure */
    ATTEMPT_BACKOFF, /* rolled back and retryable: again after a jittered pause */
} attempt_verdict_t;

/* The answer to a backend ERROR (out->reply), by the SQLSTATE table. Runs
 * before the slot goes back: a quarantine uses its session. */
static attempt_verdict_t judge_error(store_pg_t *pg, store_pg_slot_t *slot, const call_spec_t *spec,
                                     int attempt, bool resolvable, call_outcome_t *out,
                                     bool *discard)
{
    store_pg_reply_t *r = &out->reply;
    const store_pg_sqlstate_rule_t *rule = store_pg_sqlstate_lookup(r->sqlstate);
    *discard = r->discard || rule->discard_connection;
    if (rule->action == STORE_PG_ACT_RETRY) {
        count(&pg->serialization_retries);
        log_call(rule->severity, "retry", spec, r->sqlstate, rule->name, r->message, attempt);
        return ATTEMPT_BACKOFF;
    }
    if (rule->action == STORE_PG_ACT_QUARANTINE && !r->discard)
        quarantine(pg, (PGconn *)slot->conn, spec, r);
    else if (rule->action == STORE_PG_ACT_QUARANTINE)
        log_call(STORE_PG_LOG_ALERT, "lease_record_corrupt", spec, r->sqlstate, rule->name,
                 r->message, attempt);
    lease_code_t code = rule->code;
    bool retryable = rule->retryable;
    if (rule->action == STORE_PG_ACT_CANCELLED && r->cancel_sent) {
        code = LEASE_DEADLINE_EXCEEDED;
    } else if (rule->action == STORE_PG_ACT_CANCELLED) {
        /* cancelled by someone else (statement_timeout, an operator's
         * pg_cancel_backend): rolled back, but not our deadline */
        code = LEASE_BACKEND_UNAVAILABLE;
        retryable = true;
        count(&pg->backend_errors);
        log_call(STORE_PG_LOG_WARN, "cancelled_by_server", spec, r->sqlstate, rule->name,
                 r->message, attempt);
    } else {
        count(&pg->backend_errors);
        if (rule->action != STORE_PG_ACT_QUARANTINE)
            log_call(rule->severity, "backend_error", spec, r->sqlstate, rule->name, r->message,
                     attempt);
    }
    if (code == LEASE_OUTCOME_UNKNOWN) {
        if (!resolvable)
            code = LEASE_BACKEND_UNAVAILABLE;
        else
            count(&pg->outcome_unknown);
    }
    fail(out, code, retryable);
    return ATTEMPT_DONE;
}

/*
 * One attempt of spec on a checked-out slot: a usable session (connecting
 * when needed), the statement, and what its reply means. Sets *discard to
 * whether the slot's session must not be reused; *touched once a statement
 * reached the server. Never checks the slot in: run_call does, once.
 */
static attempt_verdict_t attempt_on_slot(store_pg_t *pg, store_pg_slot_t *slot,
                                         const call_spec_t *spec, int attempt, bool *touched,
                                         call_outcome_t *out, bool *discard)
{
    bool resolvable = store_pg_op_resolvable(spec->op);
    int connects_left = CONNECT_ATTEMPTS;
    store_pg_reply_t *r = &out->reply;
    for (;;) {
        lease_code_t code;
        if (ensure_session(pg, slot, spec, &connects_left, &code) != 0) {
            *discard = true;
            fail(out,
                 *touched && code == LEASE_DEADLINE_EXCEEDED ? LEASE_BACKEND_UNAVAILABLE : code,
                 true);
            return ATTEMPT_DONE;
        }
        store_pg_stmt_t stmt = spec->stmt;
        if (!slot->prepared)
            stmt.prepared = NULL; /* a pooled or unprepared session: the text */
        store_pg_conn_exec(slot->conn, &stmt, spec->deadline, r);
        if (r->status != STORE_PG_EXEC_SEND_FAILED)
            break;
        /* nothing was dispatched: the session died under us; reconnect */
        log_call(STORE_PG_LOG_WARN, "send_failed", spec, NULL, NULL, r->message, attempt);
        PQfinish((PGconn *)slot->conn);
        slot->conn = NULL;
        slot->prepared = false;
        store_pg_reply_clear(r);
    }

    switch (r->status) {
    case STORE_PG_EXEC_NOT_SENT:
        *discard = false;
        fail(out, *touched ? LEASE_BACKEND_UNAVAILABLE : LEASE_DEADLINE_EXCEEDED, *touched);
        return ATTEMPT_DONE;
    case STORE_PG_EXEC_OK:
        out->reached_backend = true;
        *discard = r->discard;
        out->ok = true;
        return ATTEMPT_DONE;
    case STORE_PG_EXEC_LOST:
    case STORE_PG_EXEC_SEND_FAILED:
        *discard = true;
        count(&pg->backend_errors);
        if (resolvable)
            count(&pg->outcome_unknown);
        log_call(STORE_PG_LOG_WARN, resolvable ? "outcome_unknown" : "reply_lost", spec,
                 r->sqlstate, NULL, r->message, attempt);
        fail(out, resolvable ? LEASE_OUTCOME_UNKNOWN : LEASE_BACKEND_UNAVAILABLE, true);
        return ATTEMPT_DONE;
    case STORE_PG_EXEC_ERROR:
        break;
    }
    out->reached_backend = true;
    *touched = true;
    return judge_error(pg, slot, spec, attempt, resolvable, out, discard);
}

/*
 * Runs spec until it has an answer: the function's value (out->ok) or a
 * typed failure. See the file comment for the rules. Each attempt takes a
 * slot from the pool and gives it back in one place, before any pause.
 */
static void run_call(store_pg_t *pg, const call_spec_t *spec, call_outcome_t *out)
{
    memset(out, 0, sizeof *out);
    lease_retry_t *rs = spec->retry ? spec->retry : spec->call ? spec->call->retry : NULL;
    /* a call made again after a pause its caller took goes on where it was */
    bool touched = rs && rs->touched; /* a statement reached the server before */
    int64_t backoff_ms = rs && rs->backoff_ms > 0 ? rs->backoff_ms : BACKOFF_FIRST_MS;
    if (rs)
        rs->again_after_ms = 0;
    for (int attempt = rs ? rs->attempts + 1 : 1;; attempt++) {
        /* after retries the database was touched: not "before submission" */
        store_pg_slot_t *slot = lease_deadline_passed(spec->deadline)
                                    ? NULL
                                    : store_pg_pool_checkout(pg->pool, spec->deadline);
        if (!slot) {
            fail(out, touched ? LEASE_BACKEND_UNAVAILABLE : LEASE_DEADLINE_EXCEEDED, touched);
            return;
        }
        bool discard = false;
        attempt_verdict_t verdict =
            attempt_on_slot(pg, slot, spec, attempt, &touched, out, &discard);
        store_pg_pool_checkin(pg->pool, slot, discard);
        if (verdict == ATTEMPT_DONE)
            return;
        if (verdict == ATTEMPT_BACKOFF) {
            /* full jitter: anywhere in [0, backoff] */
            int64_t sleep_ms = (int64_t)lease_jitter((uint64_t)backoff_ms + 1);
            if (sleep_ms >= lease_deadline_remaining_ms(spec->deadline)) {
                /* No time for another attempt. A lock wait the functions
                 * bound to this very deadline (lock_timeout) is a known
                 * non-commit that ran out of time, like a confirmed cancel;
                 * repeated serialization failures are contention. */
                bool lock_wait = strcmp(out->reply.sqlstate, SQLSTATE_LOCK_NOT_AVAILABLE) == 0;
                fail(out, lock_wait ? LEASE_DEADLINE_EXCEEDED : LEASE_BACKEND_UNAVAILABLE, true);
                return;
            }
            backoff_ms = backoff_ms * 2 > BACKOFF_CAP_MS ? BACKOFF_CAP_MS : backoff_ms * 2;
            if (rs && rs->yield) {
                /* the caller pauses (no thread held) and calls again */
                *rs = (lease_retry_t){.yield = true,
                                      .attempts = attempt,
                                      .backoff_ms = backoff_ms,
                                      .touched = touched,
                                      .again_after_ms = sleep_ms > 0 ? sleep_ms : 1};
                store_pg_reply_clear(&out->reply);
                fail(out, LEASE_BACKEND_UNAVAILABLE, true); /* a placeholder */
                return;
            }
            lease_sleep_ms(sleep_ms);
        }
        store_pg_reply_clear(&out->reply);
    }
}

/* ---- operations ------------------------------------------------------- */

static store_pg_t *impl(lease_store_t *s)
{
    return (store_pg_t *)s->impl;
}

/* Encoding failed: bad_field says which input, else out of memory. */
static lease_code_t encode_failed(const char *bad_field, lease_code_t *code, char *field,
                                  size_t fieldsz)
{
    if (bad_field) {
        snprintf(field, fieldsz, "%s", bad_field);
        *code = LEASE_INVALID_LEASE_REQUEST;
    } else {
        *code = LEASE_BACKEND_UNAVAILABLE;
    }
    return *code;
}

/* The SQL of each operation that takes one jsonb request. Acquire, renew
 * and release make typed calls instead (typed_call), to the functions that
 * answer briefly (docs/sql-api.md, "Result shape": the same decision, an
 * answer without what the request named, which complete_acquired and
 * complete_reference fill in); the rare administrative endings answer the
 * whole record. */
static const char *const json_op_sql[STORE_PG_OP_COUNT] = {
    [STORE_PG_OP_FORCE_RELEASE] = "SELECT lease.force_release($1::jsonb)::text",
    [STORE_PG_OP_REVOKE] = "SELECT lease.revoke($1::jsonb)::text",
    [STORE_PG_OP_INSPECT] = "SELECT lease.inspect($1::jsonb)::text",
    [STORE_PG_OP_LIST_BY_OWNER] = "SELECT lease.list_by_owner($1::jsonb)::text",
    [STORE_PG_OP_LIST_BY_TARGET] = "SELECT lease.list_by_target($1::jsonb)::text",
    [STORE_PG_OP_LIST_BY_PROGRAM] = "SELECT lease.list_by_program($1::jsonb)::text",
    [STORE_PG_OP_FENCED_COMMIT] = "SELECT lease.fenced_commit($1::jsonb)::text",
    [STORE_PG_OP_RECORD_AUDIT] = "SELECT lease.record_audit($1::jsonb)::text",
};

/* Runs sql with one parameter. call and identity (for logs and
 * quarantine) may be NULL. The caller clears out->reply. */
static void param_call(store_pg_t *pg, store_pg_op_t op, const char *sql, const char *param,
                       const lease_deadline_t *deadline, const lease_call_t *call,
                       const lease_identity_t *identity, call_outcome_t *out)
{
    const char *params[1] = {param};
    call_spec_t spec = {
        .op = op,
        .stmt = {.sql = sql, .nparams = 1, .params = params, .serializable = true},
        .deadline = deadline,
        .call = call,
        .identity = identity,
    };
    run_call(pg, &spec, out);
}

/* Calls op's function with one jsonb request; takes `json` (freed here). */
static void json_call(store_pg_t *pg, store_pg_op_t op, char *json,
                      const lease_deadline_t *deadline, const lease_call_t *call,
                      const lease_identity_t *identity, call_outcome_t *out)
{
    param_call(pg, op, json_op_sql[op], json, deadline, call, identity, out);
    free(json);
}

/* A single-lease operation's answer into res; clears out's reply. */
static lease_code_t lease_answer(store_pg_t *pg, store_pg_op_t op, call_outcome_t *out,
                                 lease_result_t *res)
{
    if (out->ok) {
        store_pg_decode_result(op, out->reply.values[0], res);
        if (strcmp(res->reason, "namespace_sealed") == 0)
            count(&pg->sealed_refusals);
    } else {
        res->code = out->code;
        res->retry_after_ms = out->retry_after_ms;
    }
    store_pg_reply_clear(&out->reply);
    return res->code;
}

/* A single-lease operation: encode, call, decode. Takes `json`. */
static lease_code_t lease_call(store_pg_t *pg, store_pg_op_t op, char *json, const char *bad_field,
                               const lease_call_t *call, const lease_identity_t *identity,
                               lease_result_t *res)
{
    memset(res, 0, sizeof *res);
    if (!json)
        return encode_failed(bad_field, &res->code, res->field, sizeof res->field);
    call_outcome_t out;
    json_call(pg, op, json, &call->deadline, call, identity, &out);
    return lease_answer(pg, op, &out, res);
}

/* The answer of a state-changing operation carries what the database
 * decided; what the request named is filled in here (only where the answer
 * left it empty: a replayed whole record keeps its own). */
static void set_if_empty(char *dst, size_t size, const char *src)
{
    if (!dst[0] && src)
        snprintf(dst, size, "%s", src);
}

#define SET_IF_EMPTY(dst, src) set_if_empty((dst), sizeof(dst), (src))

static void complete_reference(lease_result_t *res, const lease_identity_t *id,
                               const char *lease_id, int64_t fencing_token)
{
    lease_record_t *r = &res->lease;
    if (!res->has_lease)
        return;
    if (!r->identity.tenant_id[0])
        r->identity = *id;
    SET_IF_EMPTY(r->lease_id, lease_id);
    if (r->fencing_token == 0)
        r->fencing_token = fencing_token;
    SET_IF_EMPTY(r->metadata_json, "{}");
}

static void complete_acquired(lease_result_t *res, const lease_acquire_req_t *req)
{
    lease_record_t *r = &res->lease;
    if (!res->has_lease)
        return;
    if (!r->identity.tenant_id[0])
        r->identity = req->identity;
    SET_IF_EMPTY(r->owner_principal_id, req->call.principal.principal_id);
    SET_IF_EMPTY(r->owner_client_id, req->call.principal.client_id);
    SET_IF_EMPTY(r->owner_credential_id, req->call.principal.credential_id);
    SET_IF_EMPTY(r->service_instance_id, req->service_instance_id);
    SET_IF_EMPTY(r->execution_id, req->execution_id);
    SET_IF_EMPTY(r->job_id, req->job_id);
    SET_IF_EMPTY(r->trace_id, req->trace_id[0] ? req->trace_id : req->call.trace_id);
    SET_IF_EMPTY(r->request_id, req->call.request_id);
    SET_IF_EMPTY(r->metadata_json, req->metadata_json[0] ? req->metadata_json : "{}");
    SET_IF_EMPTY(r->session_id, req->session_id);
}

/* A typed call (docs/sql-api.md, "Typed calls": the jsonb request's
 * values as typed arguments, the same decision without a request document
 * for the database to parse and pick apart) and its answer into res. */
static void typed_call(store_pg_t *pg, store_pg_op_t op, const store_pg_typed_args_t *args,
                       const lease_call_t *call, const lease_identity_t *identity,
                       lease_result_t *res)
{
    call_spec_t spec = {
        .op = op,
        .stmt = {.sql = args->sql,
                 .nparams = args->nargs,
                 .params = args->values,
                 .serializable = true,
                 .prepared = args->prepared},
        .deadline = &call->deadline,
        .call = call,
        .identity = identity,
    };
    call_outcome_t out;
    run_call(pg, &spec, &out);
    lease_answer(pg, op, &out, res);
}

/* An acquisition: lease.acquire_brief_typed (its two composites: typed_call). */
static lease_code_t pg_acquire(lease_store_t *s, const lease_acquire_req_t *req,
                               lease_result_t *res)
{
    memset(res, 0, sizeof *res);
    store_pg_typed_args_t args;
    const char *bad;
    if (!store_pg_encode_acquire_typed(req, lease_mono_now_ns(), &args, &bad))
        return encode_failed(bad, &res->code, res->field, sizeof res->field);
    typed_call(impl(s), STORE_PG_OP_ACQUIRE, &args, &req->call, &req->identity, res);
    store_pg_typed_args_free(&args);
    complete_acquired(res, req);
    return res->code;
}

/* A session call: lease.session_open, session_keepalive or session_close
 * (typed arguments, sent as text). */
static lease_code_t session_call(lease_store_t *s, store_pg_op_t op,
                                 const lease_session_req_t *req, lease_result_t *res)
{
    memset(res, 0, sizeof *res);
    store_pg_typed_args_t args;
    if (!store_pg_encode_session_typed(op, req, lease_mono_now_ns(), &args))
        return encode_failed(NULL, &res->code, res->field, sizeof res->field);
    typed_call(impl(s), op, &args, &req->call, NULL, res);
    return res->code;
}

static lease_code_t pg_session_open(lease_store_t *s, const lease_session_req_t *req,
                                    lease_result_t *res)
{
    return session_call(s, STORE_PG_OP_SESSION_OPEN, req, res);
}

static lease_code_t pg_session_keepalive(lease_store_t *s, const lease_session_req_t *req,
                                         lease_result_t *res)
{
    return session_call(s, STORE_PG_OP_SESSION_KEEPALIVE, req, res);
}

static lease_code_t pg_session_close(lease_store_t *s, const lease_session_req_t *req,
                                     lease_result_t *res)
{
    return session_call(s, STORE_PG_OP_SESSION_CLOSE, req, res);
}

/* One renewal or release: lease.renew_brief_typed or release_brief_typed
 * (its two composites: typed_call). */
static lease_code_t owner_call_typed(lease_store_t *s, store_pg_op_t op,
                                     const lease_owner_req_t *req, lease_result_t *res)
{
    memset(res, 0, sizeof *res);
    store_pg_typed_args_t args;
    if (!store_pg_encode_owner_typed(op, req, lease_mono_now_ns(), &args))
        return encode_failed(NULL, &res->code, res->field, sizeof res->field);
    typed_call(impl(s), op, &args, &req->call, &req->identity, res);
    store_pg_typed_args_free(&args);
    complete_reference(res, &req->identity, req->lease_id, req->fencing_token);
    return res->code;
}

static lease_code_t pg_renew(lease_store_t *s, const lease_owner_req_t *req, lease_result_t *res)
{
    return owner_call_typed(s, STORE_PG_OP_RENEW, req, res);
}

/* Many renewals (lease.renew_many_brief_typed) or releases
 * (lease.release_many_brief_typed), one call, one transaction; each item is
 * decided (and a repeated request id answered) as a single one is. */
static lease_code_t owner_many(lease_store_t *s, store_pg_op_t many, const lease_owner_req_t *reqs,
                               size_t n, const lease_deadline_t *deadline, lease_result_t *results)
{
    bool renew = many == STORE_PG_OP_RENEW_MANY;
    store_pg_t *pg = impl(s);
    memset(results, 0, n * sizeof *results);
    lease_result_t whole;
    memset(&whole, 0, sizeof whole);
    store_pg_typed_many_t args;
    if (!store_pg_encode_owner_many_typed(many, reqs, n, lease_mono_now_ns(), &args))
        return encode_failed(NULL, &whole.code, whole.field, sizeof whole.field);
    call_spec_t spec = {
        .op = many,
        .stmt = {.sql = args.sql,
                 .nparams = args.nargs,
                 .params = args.values,
                 .serializable = true,
                 .prepared = args.prepared},
        .deadline = deadline,
        .retry = n > 0 ? reqs[0].call.retry : NULL, /* the batch's (service) */
    };
    call_outcome_t out;
    run_call(pg, &spec, &out);
    store_pg_typed_many_free(&args);
    lease_code_t decided = renew ? LEASE_RENEWED : LEASE_RELEASED;
    lease_code_t code = !out.ok ? out.code
                        : renew ? store_pg_decode_renew_many(out.reply.values[0], n, results)
                                : store_pg_decode_release_many(out.reply.values[0], n, results);
    store_pg_reply_clear(&out.reply);
    if (code != decided)
        return code;
    for (size_t i = 0; i < n; i++)
        complete_reference(&results[i], &reqs[i].identity, reqs[i].lease_id, reqs[i].fencing_token);
    return code;
}

static lease_code_t pg_renew_many(lease_store_t *s, const lease_owner_req_t *reqs, size_t n,
                                  const lease_deadline_t *deadline, lease_result_t *results)
{
    return owner_many(s, STORE_PG_OP_RENEW_MANY, reqs, n, deadline, results);
}

static lease_code_t pg_release(lease_store_t *s, const lease_owner_req_t *req, lease_result_t *res)
{
    return owner_call_typed(s, STORE_PG_OP_RELEASE, req, res);
}

static lease_code_t pg_release_many(lease_store_t *s, const lease_owner_req_t *reqs, size_t n,
                                    const lease_deadline_t *deadline, lease_result_t *results)
{
    return owner_many(s, STORE_PG_OP_RELEASE_MANY, reqs, n, deadline, results);
}

/* force-release and revoke */
static lease_code_t admin_call(lease_store_t *s, store_pg_op_t op, const lease_admin_req_t *req,
                               lease_result_t *res)
{
    const char *bad = NULL;
    char *json = store_pg_encode_admin(op, req, lease_mono_now_ns(), &bad);
    lease_call(impl(s), op, json, bad, &req->call, &req->identity, res);
    complete_reference(res, &req->identity, req->lease_id, req->fencing_token);
    if (res->has_lease) {
        SET_IF_EMPTY(res->lease.end_reason, req->reason);
        SET_IF_EMPTY(res->lease.incident_id, req->incident_id);
    }
    return res->code;
}

static lease_code_t pg_force_release(lease_store_t *s, const lease_admin_req_t *req,
                                     lease_result_t *res)
{
    return admin_call(s, STORE_PG_OP_FORCE_RELEASE, req, res);
}

static lease_code_t pg_revoke(lease_store_t *s, const lease_admin_req_t *req, lease_result_t *res)
{
    return admin_call(s, STORE_PG_OP_REVOKE, req, res);
}

static lease_code_t pg_inspect(lease_store_t *s, const lease_inspect_req_t *req,
                               lease_result_t *res)
{
    const char *bad = NULL;
    char *json = store_pg_encode_inspect(req, lease_mono_now_ns(), &bad);
    return lease_call(impl(s), STORE_PG_OP_INSPECT, json, bad, &req->call,
                      req->by_identity ? &req->identity : NULL, res);
}

static lease_code_t pg_list(lease_store_t *s, const lease_list_req_t *req, lease_list_result_t *res)
{
    memset(res, 0, sizeof *res);
    const char *bad = NULL;
    char *json = store_pg_encode_list(req, lease_mono_now_ns(), &bad);
    if (!json)
        return encode_failed(bad, &res->code, res->field, sizeof res->field);
    store_pg_op_t op = store_pg_list_op(req->by);
    call_outcome_t out;
    json_call(impl(s), op, json, &req->call.deadline, &req->call, NULL, &out);
    if (out.ok) {
        store_pg_decode_list(op, out.reply.values[0], res);
    } else {
        res->code = out.code;
    }
    store_pg_reply_clear(&out.reply);
    return res->code;
}

static lease_code_t pg_fenced_commit(lease_store_t *s, const lease_commit_req_t *req,
                                     lease_commit_result_t *res)
{
    memset(res, 0, sizeof *res);
    const char *bad = NULL;
    char *json = store_pg_encode_commit(req, lease_mono_now_ns(), &bad);
    if (!json)
        return encode_failed(bad, &res->code, res->field, sizeof res->field);
    call_outcome_t out;
    json_call(impl(s), STORE_PG_OP_FENCED_COMMIT, json, &req->call.deadline, &req->call,
              &req->identity, &out);
    if (out.ok) {
        store_pg_decode_commit(out.reply.values[0], req->n_writes, res);
    } else {
        res->code = out.code;
        res->retry_after_ms = out.retry_after_ms;
    }
    store_pg_reply_clear(&out.reply);
    return res->code;
}

static lease_code_t pg_sweep(lease_store_t *s, int batch, const lease_deadline_t *deadline,
                             lease_sweep_result_t *res)
{
    memset(res, 0, sizeof *res);
    /* the SQL functions' own bounds (sweep_expired accepts the smaller) */
    if (batch < 1 || batch > 10000)
        return LEASE_INVALID_LEASE_REQUEST;
    store_pg_t *pg = impl(s);
    char batch_text[16], epoch_text[16], timeline_text[16], lsn_text[32];
    const char *seen[3];
    snprintf(batch_text, sizeof batch_text, "%d", batch);
    seen_params(pg, epoch_text, timeline_text, lsn_text, seen);
    const char *params[4] = {batch_text, seen[0], seen[1], seen[2]};
    /* Every sweep first compares the cluster with the recorded one
     * (lease.check_namespace seals after a restore or failover, or when the
     * database is behind the position an earlier sweep saw; it writes only
     * when it seals), so readiness and acquisition follow within one sweep
     * interval, and at start. */
    call_spec_t spec = {
        .op = STORE_PG_OP_SWEEP,
        .stmt = {.sql = "SELECT lease.check_namespace($2::integer, $3::integer, $4::pg_lsn)::text, "
                        "lease.sweep_expired($1::integer)::text, "
                        "lease.purge_retention($1::integer)::text",
                 .nparams = 4,
                 .params = params,
                 .serializable = true},
        .deadline = deadline,
    };
    call_outcome_t out;
    run_call(pg, &spec, &out);
    lease_code_t code = out.code;
    if (out.ok && out.reply.nvalues == 3) {
        code = store_pg_decode_sweep(out.reply.values[1], out.reply.values[2], res);
        remember_position(pg, out.reply.values[0]);
    } else if (out.ok) {
        code = store_pg_decode_sweep(NULL, NULL, res);
    }
    store_pg_reply_clear(&out.reply);
    return code;
}

/* One housekeeping step (lease_store_housekeep). The namespace check is a
 * decision like any other, SERIALIZABLE; expiry and retention run at READ
 * COMMITTED, where they take no predicate locks: the sweep used to be one
 * SERIALIZABLE statement whose scan of lease.locks predicate-locked the
 * whole table, and under load it failed as a pivot (docs/architecture.md,
 * "Readiness and background work"). */
static lease_code_t pg_housekeep(lease_store_t *s, lease_housekeeping_step_t step, int batch,
                                 int64_t grace_ms, const lease_deadline_t *deadline,
                                 lease_housekeeping_result_t *res)
{
    memset(res, 0, sizeof *res);
    /* the SQL functions' own bounds (expire_due accepts the smaller) */
    if (batch < 1 || batch > 10000 || grace_ms < 0 || grace_ms > 3600000 ||
        (unsigned)step >= LEASE_STEP_COUNT)
        return LEASE_INVALID_LEASE_REQUEST;
    store_pg_t *pg = impl(s);
    char batch_text[16], grace_text[24], epoch_text[16], timeline_text[16], lsn_text[32];
    const char *seen[3];
    snprintf(batch_text, sizeof batch_text, "%d", batch);
    snprintf(grace_text, sizeof grace_text, "%lld", (long long)grace_ms);
    call_spec_t spec = {.op = STORE_PG_OP_HOUSEKEEPING, .deadline = deadline};
    const char *params[3];
    if (step == LEASE_STEP_NAMESPACE) {
        /* lease.check_namespace seals after a restore or failover, or when
         * the database is behind the position an earlier check saw; it
         * writes only when it seals. */
        seen_params(pg, epoch_text, timeline_text, lsn_text, seen);
        params[0] = seen[0], params[1] = seen[1], params[2] = seen[2];
        spec.stmt = (store_pg_stmt_t){
            .sql = "SELECT lease.check_namespace($1::integer, $2::integer, $3::pg_lsn)::text",
            .nparams = 3,
            .params = params,
            .serializable = true};
    } else {
        params[0] = batch_text, params[1] = grace_text;
        spec.stmt = (store_pg_stmt_t){
            .sql = step == LEASE_STEP_EXPIRE
                       ? "SELECT lease.expire_due($1::integer, $2::bigint)::text"
                       : "SELECT lease.purge_due($1::integer)::text",
            .nparams = step == LEASE_STEP_EXPIRE ? 2 : 1,
            .params = params,
            .read_committed = true};
    }
    call_outcome_t out;
    run_call(pg, &spec, &out);
    lease_code_t code = out.code;
    if (out.ok && step == LEASE_STEP_NAMESPACE) {
        code = out.reply.nvalues == 1 ? LEASE_INSPECTED : LEASE_BACKEND_UNAVAILABLE;
        if (out.reply.nvalues == 1) {
            remember_position(pg, out.reply.values[0]);
            res->ran = true;
        }
    } else if (out.ok) {
        code = store_pg_decode_housekeeping(step,
                                            out.reply.nvalues == 1 ? out.reply.values[0] : NULL,
                                            res);
    }
    store_pg_reply_clear(&out.reply);
    return code;
}

static lease_code_t pg_record_audit(lease_store_t *s, const lease_audit_event_t *events, size_t n,
                                    const lease_deadline_t *deadline)
{
    if (n == 0)
        return LEASE_INSPECTED;
    const char *bad = NULL;
    char *json = store_pg_encode_audit(events, n, &bad);
    if (!json)
        return bad ? LEASE_INVALID_LEASE_REQUEST : LEASE_BACKEND_UNAVAILABLE;
    call_outcome_t out;
    json_call(impl(s), STORE_PG_OP_RECORD_AUDIT, json, deadline, NULL, NULL, &out);
    lease_code_t code = out.ok ? store_pg_decode_audit_count(out.reply.values[0], n) : out.code;
    store_pg_reply_clear(&out.reply);
    return code;
}

static lease_code_t pg_credential_lookup(lease_store_t *s, const char *credential_id,
                                         const lease_deadline_t *deadline, lease_credential_t *cred,
                                         bool *found)
{
    memset(cred, 0, sizeof *cred);
    *found = false;
    if (!credential_id || !*credential_id || strlen(credential_id) > LEASE_ID_MAX)
        return LEASE_INVALID_LEASE_REQUEST;
    call_outcome_t out;
    param_call(impl(s), STORE_PG_OP_CREDENTIAL_LOOKUP,
               "SELECT lease.credential_lookup($1::text)::text", credential_id, deadline, NULL,
               NULL, &out);
    lease_code_t code = out.code;
    if (out.ok) {
        code = store_pg_decode_credential(out.reply.values[0], cred, found);
        if (out.reply.values[0]) /* it carries the secret's digest */
            memset(out.reply.values[0], 0, strlen(out.reply.values[0]));
    }
    store_pg_reply_clear(&out.reply);
    return code;
}

static lease_code_t pg_health(lease_store_t *s, const lease_deadline_t *deadline, lease_health_t *h)
{
    memset(h, 0, sizeof *h);
    h->expected_schema_version = -1;
    call_spec_t spec = {
        .op = STORE_PG_OP_HEALTH,
        /* read-only and weaker than the role default on purpose: it must
         * answer during a serialization storm and never conflict */
        .stmt = {.sql = "BEGIN ISOLATION LEVEL READ COMMITTED READ ONLY; "
                        "SELECT lease.health()::text; COMMIT",
                 .simple = true},
        .deadline = deadline,
    };
    call_outcome_t out;
    run_call(impl(s), &spec, &out);
    lease_code_t code = out.code;
    h->reachable = out.reached_backend;
    if (out.ok)
        code = store_pg_decode_health(out.reply.values[0], h);
    store_pg_reply_clear(&out.reply);
    return code;
}

static void pg_stats(lease_store_t *s, lease_store_stats_t *out)
{
    store_pg_t *pg = impl(s);
    store_pg_pool_stats_t ps;
    store_pg_pool_stats(pg->pool, &ps);
    out->pool_size = ps.size;
    out->pool_in_use = ps.in_use;
    out->pool_waiting = ps.waiting;
    out->serialization_retries = __atomic_load_n(&pg->serialization_retries, __ATOMIC_RELAXED);
    out->outcome_unknown = __atomic_load_n(&pg->outcome_unknown, __ATOMIC_RELAXED);
    out->backend_errors = __atomic_load_n(&pg->backend_errors, __ATOMIC_RELAXED);
    out->sealed_refusals = __atomic_load_n(&pg->sealed_refusals, __ATOMIC_RELAXED);
}

static void pg_close(lease_store_t *s)
{
    store_pg_t *pg = impl(s);
    store_pg_pool_free(pg->pool);
    pthread_mutex_destroy(&pg->seen_lock);
    store_pg_connparams_free(&pg->params);
    free(pg);
}

static const lease_store_ops_t pg_ops = {
    .acquire = pg_acquire,
    .renew = pg_renew,
    .renew_many = pg_renew_many,
    .release = pg_release,
    .release_many = pg_release_many,
    .force_release = pg_force_release,
    .revoke = pg_revoke,
    .inspect = pg_inspect,
    .list = pg_list,
    .fenced_commit = pg_fenced_commit,
    .sweep = pg_sweep,
    .housekeep = pg_housekeep,
    .record_audit = pg_record_audit,
    .credential_lookup = pg_credential_lookup,
    .health = pg_health,
    .stats = pg_stats,
    .close = pg_close,
    .session_open = pg_session_open,
    .session_keepalive = pg_session_keepalive,
    .session_close = pg_session_close,
};

int lease_store_pg_open(const lease_store_pg_config_t *cfg, lease_store_t **out, char *err,
                        size_t errsz)
{
    *out = NULL;
    if (!cfg || cfg->pool_size < 1 || cfg->pool_size > POOL_SIZE_MAX) {
        snprintf(err, errsz, "pool size must be between 1 and %d", POOL_SIZE_MAX);
        return -1;
    }
    store_pg_t *pg = calloc(1, sizeof *pg);
    if (!pg) {
        snprintf(err, errsz, "out of memory");
        return -1;
    }
    if (store_pg_connparams_init(&pg->params, cfg->conninfo, cfg->connect_timeout_ms,
                                 cfg->application_name, err, errsz) != 0) {
        free(pg);
        return -1;
    }
    pg->pool = store_pg_pool_new(cfg->pool_size);
    if (!pg->pool) {
        store_pg_connparams_free(&pg->params);
        free(pg);
        snprintf(err, errsz, "out of memory");
        return -1;
    }
    pthread_mutex_init(&pg->seen_lock, NULL);
    pg->no_prepared = cfg->no_prepared_statements;
    pg->base.ops = &pg_ops;
    pg->base.impl = pg;
    *out = &pg->base;
    return 0;
}
