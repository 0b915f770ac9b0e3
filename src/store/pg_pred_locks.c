/*
 * pg_pred_locks.c - the predicate-lock settings check (pg_pred_locks.h).
 */
#include "pg_pred_locks.h"

#include <stdio.h>
#include <stdlib.h>

#include "lease/store.h"
#include "pg_conn.h"
#include "pg_log.h"

/* Shared predicate-lock table entries a pooled connection sending batches
 * of LEASE_RENEW_BATCH_MAX may keep: a row lock on lease.locks and a leaf
 * page of its primary key per item, twice (a committed SERIALIZABLE
 * transaction keeps its locks while transactions that overlapped it run). */
#define ENTRIES_PER_CONNECTION (4 * LEASE_RENEW_BATCH_MAX)

void store_pg_check_pred_locks(struct pg_conn *conn, int pool_size,
                               const lease_deadline_t *deadline)
{
    /* max_pred_locks_per_relation <= 0 means max_pred_locks_per_transaction
     * / -value - 1 (PostgreSQL's predicate.c); the shared table holds about
     * max_pred_locks_per_transaction x max_connections entries */
    static const char sql[] = "SELECT current_setting('max_pred_locks_per_page'),"
                              " CASE WHEN current_setting('max_pred_locks_per_relation')::int > 0"
                              "  THEN current_setting('max_pred_locks_per_relation')::int"
                              "  ELSE current_setting('max_pred_locks_per_transaction')::int"
                              "   / -current_setting('max_pred_locks_per_relation')::int - 1 END,"
                              " current_setting('max_pred_locks_per_transaction')::bigint"
                              "  * current_setting('max_connections')::int";
    store_pg_stmt_t stmt = {.sql = sql};
    store_pg_reply_t r;
    store_pg_conn_exec(conn, &stmt, deadline, &r);
    if (r.status != STORE_PG_EXEC_OK || r.nvalues != 3 || !r.values[0] || !r.values[1] ||
        !r.values[2]) {
        store_pg_reply_clear(&r);
        return;
    }
    long per_page = strtol(r.values[0], NULL, 10);
    long per_relation = strtol(r.values[1], NULL, 10);
    long long table = strtoll(r.values[2], NULL, 10);
    store_pg_reply_clear(&r);
    char msg[400];
    if (per_page < LEASE_RENEW_BATCH_MAX || per_relation < LEASE_RENEW_BATCH_MAX)
        snprintf(msg, sizeof msg,
                 "max_pred_locks_per_page=%ld and max_pred_locks_per_relation (in effect %ld) "
                 "turn a renew-batch's row locks into page or table locks, and batches of "
                 "disjoint leases then fail each other: set them to at least %d "
                 "(docs/operators.md, \"Predicate locks for batch renewals\", suggests 1000 "
                 "and 256; both apply on reload)",
                 per_page, per_relation, LEASE_RENEW_BATCH_MAX);
    else if (table < (long long)pool_size * ENTRIES_PER_CONNECTION)
        snprintf(msg, sizeof msg,
                 "max_pred_locks_per_transaction x max_connections = %lld shared predicate "
                 "locks, fewer than the %d a pool of %d connections sending renew-batches may "
                 "hold; raise max_pred_locks_per_transaction (restart; docs/operators.md, "
                 "\"Predicate locks for batch renewals\")",
                 table, pool_size * ENTRIES_PER_CONNECTION, pool_size);
    else
        return;
    store_pg_log_rec_t rec = {.event = "predicate_lock_settings", .message = msg};
    store_pg_log(STORE_PG_LOG_WARN, &rec);
}
