/*
 * pg_sqlstate.c - the one table from backend SQLSTATE to adapter action and
 * typed result (see pg_sqlstate.h). Exact codes come first, then classes,
 * then the default; docs/architecture.md mirrors this table row for row.
 *
 * Why these choices:
 * - 40001/40P01/55P03 (and 23505 from concurrent inserts SSI cannot
 *   attribute) roll the transaction back, so the whole call can be repeated
 *   with the same request id and digest.
 * - 57014 ends the statement with an ERROR before commit (commit holds
 *   interrupts), so it is a known non-commit: deadline_exceeded.
 * - Everything that ends the session (class 08, class 57 FATALs) leaves a
 *   mutation's commit unknowable from here: outcome unknown, resolved by
 *   repeating the request id.
 * - Project codes (class LS) are bugs, misconfiguration or corruption: the
 *   backend cannot give a safe answer and repeating will not change that.
 * - The last column is for leasectl's one-shot administrative calls
 *   (pg_oneshot.c), where the input comes from an operator: classes 22 and
 *   23 and LS003/LS005 are that input refused, 42501 a role that may not,
 *   connection trouble is "unavailable", and only 40001/40P01 are repeated.
 */
#include "pg_sqlstate.h"

#include <string.h>

#define RULE(pat, nm, act, cd, retry, discard, sev, adm)                                           \
    {                                                                                              \
        pat, nm, STORE_PG_ACT_##act, cd, retry, discard, STORE_PG_LOG_##sev, STORE_PG_ADMIN_##adm  \
    }

static const store_pg_sqlstate_rule_t rules[] = {
    /* exact codes */
    RULE(SQLSTATE_SERIALIZATION_FAILURE, "serialization_failure", RETRY, LEASE_BACKEND_UNAVAILABLE,
         true, false, DEBUG, RETRY),
    RULE(SQLSTATE_DEADLOCK_DETECTED, "deadlock_detected", RETRY, LEASE_BACKEND_UNAVAILABLE, true,
         false, DEBUG, RETRY),
    RULE(SQLSTATE_LOCK_NOT_AVAILABLE, "lock_not_available", RETRY, LEASE_BACKEND_UNAVAILABLE, true,
         false, DEBUG, FAILED),
    /* two transactions inserting the same key (history of one expired
     * lease) where SSI cannot see the read that led to it: effectively a
     * serialization failure (Postgres manual, "Serialization Failure
     * Handling"); the deadline bounds the retries if it were persistent.
     * For an administrator it is the input's duplicate (a credential id). */
    RULE(SQLSTATE_UNIQUE_VIOLATION, "unique_violation", RETRY, LEASE_BACKEND_UNAVAILABLE, true,
         false, WARN, INVALID),
    RULE(SQLSTATE_STATEMENT_COMPLETION_UNKNOWN, "statement_completion_unknown", FAIL,
         LEASE_OUTCOME_UNKNOWN, true, true, WARN, FAILED),
    RULE(SQLSTATE_QUERY_CANCELED, "query_canceled", CANCELLED, LEASE_DEADLINE_EXCEEDED, true, false,
         WARN, UNAVAILABLE),
    RULE(SQLSTATE_ADMIN_SHUTDOWN, "admin_shutdown", CONN_LOST, LEASE_OUTCOME_UNKNOWN, true, true,
         WARN, UNAVAILABLE),
    RULE(SQLSTATE_CRASH_SHUTDOWN, "crash_shutdown", CONN_LOST, LEASE_OUTCOME_UNKNOWN, true, true,
         WARN, UNAVAILABLE),
    RULE(SQLSTATE_CANNOT_CONNECT_NOW, "cannot_connect_now", CONN_LOST, LEASE_OUTCOME_UNKNOWN, true,
         true, WARN, UNAVAILABLE),
    RULE(SQLSTATE_IDLE_SESSION_TIMEOUT, "idle_session_timeout", CONN_LOST, LEASE_OUTCOME_UNKNOWN,
         true, true, WARN, UNAVAILABLE),
    RULE(SQLSTATE_READ_ONLY_SQL_TRANSACTION, "read_only_sql_transaction", FAIL,
         LEASE_BACKEND_UNAVAILABLE, true, true, WARN, FAILED),
    RULE(SQLSTATE_INSUFFICIENT_PRIVILEGE, "insufficient_privilege", FAIL, LEASE_BACKEND_UNAVAILABLE,
         false, false, ERROR, DENIED),
    RULE(SQLSTATE_UNDEFINED_FUNCTION, "undefined_function", FAIL, LEASE_BACKEND_UNAVAILABLE, false,
         false, ERROR, FAILED),
    RULE(SQLSTATE_INVALID_SCHEMA_NAME, "invalid_schema_name", FAIL, LEASE_BACKEND_UNAVAILABLE,
         false, false, ERROR, FAILED),
    RULE(SQLSTATE_LEASE_RECORD_CORRUPT, "lease_record_corrupt", QUARANTINE,
         LEASE_BACKEND_UNAVAILABLE, false, false, ALERT, FAILED),
    RULE(SQLSTATE_LEASE_ISOLATION_REQUIRED, "lease_isolation_required", FAIL,
         LEASE_BACKEND_UNAVAILABLE, false, false, ERROR, FAILED),
    RULE(SQLSTATE_LEASE_MALFORMED_CALL, "lease_malformed_call", FAIL, LEASE_BACKEND_UNAVAILABLE,
         false, false, ERROR, INVALID),
    /* recover_epoch: raising counters would pass the token limit */
    RULE(SQLSTATE_LEASE_TOKEN_LIMIT, "lease_token_limit", FAIL, LEASE_BACKEND_UNAVAILABLE, false,
         false, ERROR, INVALID),
    /* classes */
    RULE(SQLSTATE_CLASS_CONNECTION, "connection_exception", CONN_LOST, LEASE_OUTCOME_UNKNOWN, true,
         true, WARN, UNAVAILABLE),
    RULE(SQLSTATE_CLASS_TRANSACTION_ROLLBACK, "transaction_rollback", FAIL,
         LEASE_BACKEND_UNAVAILABLE, true, false, WARN, FAILED),
    RULE(SQLSTATE_CLASS_INSUFFICIENT_RESOURCES, "insufficient_resources", FAIL,
         LEASE_BACKEND_UNAVAILABLE, true, false, WARN, UNAVAILABLE),
    RULE(SQLSTATE_CLASS_OPERATOR_INTERVENTION, "operator_intervention", CONN_LOST,
         LEASE_OUTCOME_UNKNOWN, true, true, WARN, UNAVAILABLE),
    RULE("58", "system_error", FAIL, LEASE_BACKEND_UNAVAILABLE, true, true, WARN, FAILED),
    RULE("XX", "internal_error", FAIL, LEASE_BACKEND_UNAVAILABLE, true, true, ERROR, FAILED),
    RULE(SQLSTATE_CLASS_DATA_EXCEPTION, "data_exception", FAIL, LEASE_BACKEND_UNAVAILABLE, false,
         false, ERROR, INVALID),
    /* the service's own calls never violate a constraint by the caller's
     * input; for an administrator it is the input (like class 22) */
    RULE(SQLSTATE_CLASS_INTEGRITY_VIOLATION, "integrity_constraint_violation", FAIL,
         LEASE_BACKEND_UNAVAILABLE, true, false, ERROR, INVALID),
    RULE("42", "syntax_error_or_access_rule_violation", FAIL, LEASE_BACKEND_UNAVAILABLE, false,
         false, ERROR, FAILED),
    RULE(SQLSTATE_CLASS_PROJECT, "lease_project_error", FAIL, LEASE_BACKEND_UNAVAILABLE, false,
         false, ERROR, FAILED),
    /* default: anything else the backend raised */
    RULE("", "unexpected_error", FAIL, LEASE_BACKEND_UNAVAILABLE, true, false, ERROR, FAILED),
};

#define N_RULES (sizeof rules / sizeof rules[0])

static bool sqlstate_wellformed(const char *s)
{
    if (!s || strlen(s) != 5)
        return false;
    for (int i = 0; i < 5; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'A' && s[i] <= 'Z')))
            return false;
    return true;
}

const store_pg_sqlstate_rule_t *store_pg_sqlstate_lookup(const char *sqlstate)
{
    const store_pg_sqlstate_rule_t *def = &rules[N_RULES - 1];
    if (!sqlstate_wellformed(sqlstate))
        return def;
    for (size_t i = 0; i + 1 < N_RULES; i++)
        if (strlen(rules[i].pattern) == 5 && strcmp(rules[i].pattern, sqlstate) == 0)
            return &rules[i];
    for (size_t i = 0; i + 1 < N_RULES; i++)
        if (strlen(rules[i].pattern) == 2 && strncmp(rules[i].pattern, sqlstate, 2) == 0)
            return &rules[i];
    return def;
}

const store_pg_sqlstate_rule_t *store_pg_sqlstate_table(size_t *n)
{
    *n = N_RULES;
    return rules;
}

const char *store_pg_action_name(store_pg_action_t a)
{
    switch (a) {
    case STORE_PG_ACT_FAIL:
        return "fail";
    case STORE_PG_ACT_RETRY:
        return "retry";
    case STORE_PG_ACT_CANCELLED:
        return "cancelled";
    case STORE_PG_ACT_CONN_LOST:
        return "conn_lost";
    case STORE_PG_ACT_QUARANTINE:
        return "quarantine";
    }
    return "unknown";
}

const char *store_pg_admin_action_name(store_pg_admin_action_t a)
{
    switch (a) {
    case STORE_PG_ADMIN_FAILED:
        return "failed";
    case STORE_PG_ADMIN_RETRY:
        return "retry";
    case STORE_PG_ADMIN_INVALID:
        return "invalid";
    case STORE_PG_ADMIN_DENIED:
        return "denied";
    case STORE_PG_ADMIN_UNAVAILABLE:
        return "unavailable";
    }
    return "unknown";
}
