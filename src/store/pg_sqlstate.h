/*
 * pg_sqlstate.h - the named SQLSTATEs the Postgres adapter reacts to, and
 * the one table that maps a backend error to what the adapter does and which
 * lease_code_t the caller sees.
 *
 * Lookup order: the exact five-character code, then its class (first two
 * characters), then the default row. The same table tells leasectl's
 * one-shot administrative calls (pg_oneshot.c) what to report. docs/architecture.md mirrors the table
 * and tests/unit/test_sqlstate_map.c asserts every row.
 */
#ifndef LEASE_STORE_PG_SQLSTATE_H
#define LEASE_STORE_PG_SQLSTATE_H

#include <stdbool.h>
#include <stddef.h>

#include "lease/result.h"

/* Postgres's own codes (Appendix A of the Postgres manual). */
#define SQLSTATE_SERIALIZATION_FAILURE "40001"
#define SQLSTATE_DEADLOCK_DETECTED "40P01"
#define SQLSTATE_STATEMENT_COMPLETION_UNKNOWN "40003"
#define SQLSTATE_LOCK_NOT_AVAILABLE "55P03"
#define SQLSTATE_UNIQUE_VIOLATION "23505"
#define SQLSTATE_QUERY_CANCELED "57014"
#define SQLSTATE_ADMIN_SHUTDOWN "57P01"
#define SQLSTATE_CRASH_SHUTDOWN "57P02"
#define SQLSTATE_CANNOT_CONNECT_NOW "57P03"
#define SQLSTATE_IDLE_SESSION_TIMEOUT "57P05"
#define SQLSTATE_READ_ONLY_SQL_TRANSACTION "25006"
#define SQLSTATE_INSUFFICIENT_PRIVILEGE "42501"
#define SQLSTATE_UNDEFINED_FUNCTION "42883"
#define SQLSTATE_INVALID_SCHEMA_NAME "3F000"
#define SQLSTATE_TOO_MANY_CONNECTIONS "53300"
/* Classes. */
#define SQLSTATE_CLASS_CONNECTION "08"
#define SQLSTATE_CLASS_TRANSACTION_ROLLBACK "40"
#define SQLSTATE_CLASS_INSUFFICIENT_RESOURCES "53"
#define SQLSTATE_CLASS_OPERATOR_INTERVENTION "57"
#define SQLSTATE_CLASS_PROJECT "LS"
#define SQLSTATE_CLASS_DATA_EXCEPTION "22"
#define SQLSTATE_CLASS_INTEGRITY_VIOLATION "23"

/* The project's own codes (docs/sql-api.md, class LS). */
#define SQLSTATE_LEASE_RECORD_CORRUPT "LS001"
#define SQLSTATE_LEASE_ISOLATION_REQUIRED "LS002"
#define SQLSTATE_LEASE_MALFORMED_CALL "LS003"
#define SQLSTATE_LEASE_TOKEN_LIMIT "LS005"

/* What the adapter does with a backend error. */
typedef enum store_pg_action {
    STORE_PG_ACT_FAIL = 0,   /* answer `code`; the transaction rolled back */
    STORE_PG_ACT_RETRY,      /* the transaction rolled back; retry the whole call */
    STORE_PG_ACT_CANCELLED,  /* a confirmed cancel: known non-commit */
    STORE_PG_ACT_CONN_LOST,  /* the session ended: a mutation's outcome is unknown */
    STORE_PG_ACT_QUARANTINE, /* corrupt record: answer `code`, quarantine, alert */
} store_pg_action_t;

/* How loudly to log it. */
typedef enum store_pg_severity {
    STORE_PG_LOG_DEBUG = 0, /* expected under load (serialization retries) */
    STORE_PG_LOG_WARN,      /* transient backend trouble */
    STORE_PG_LOG_ERROR,     /* a bug or a misconfiguration to fix */
    STORE_PG_LOG_ALERT,     /* data integrity: page a human */
} store_pg_severity_t;

/* What one of leasectl's administrative calls (lease/store_admin.h) does
 * with a backend error: repeat the transaction, or report a status. */
typedef enum store_pg_admin_action {
    STORE_PG_ADMIN_FAILED = 0,  /* LEASE_ADMIN_FAILED */
    STORE_PG_ADMIN_RETRY,       /* again; after the last try LEASE_ADMIN_UNAVAILABLE */
    STORE_PG_ADMIN_INVALID,     /* LEASE_ADMIN_INVALID: the operator's input was refused */
    STORE_PG_ADMIN_DENIED,      /* LEASE_ADMIN_DENIED */
    STORE_PG_ADMIN_UNAVAILABLE, /* LEASE_ADMIN_UNAVAILABLE */
} store_pg_admin_action_t;

typedef struct store_pg_sqlstate_rule {
    const char *pattern; /* 5 chars exact, 2 chars class, "" default */
    const char *name;    /* condition name, for logs and docs */
    store_pg_action_t action;
    lease_code_t code;       /* what the caller sees (when not retried) */
    bool retryable;          /* whether repeating the request may help */
    bool discard_connection; /* the session is unusable afterwards */
    store_pg_severity_t severity;
    store_pg_admin_action_t admin; /* leasectl's one-shot calls */
} store_pg_sqlstate_rule_t;

/* The rule for a SQLSTATE (NULL or malformed: the default row). Never NULL. */
const store_pg_sqlstate_rule_t *store_pg_sqlstate_lookup(const char *sqlstate);

/* The whole table, for docs and tests; *n receives its length. The last row
 * is the default (pattern ""). */
const store_pg_sqlstate_rule_t *store_pg_sqlstate_table(size_t *n);

const char *store_pg_action_name(store_pg_action_t a);
/* "failed", "retry", "invalid", "denied", "unavailable" */
const char *store_pg_admin_action_name(store_pg_admin_action_t a);

#endif
