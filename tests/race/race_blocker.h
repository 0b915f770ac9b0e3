/*
 * race_blocker.h - holds an identity's row lock from a second, ordinary
 * connection (an open transaction with SELECT ... FOR UPDATE), so a store
 * call on that identity blocks inside the backend; and waits until it does.
 * Used by the outcome-unknown and deadline race tests.
 */
#ifndef LEASE_RACE_BLOCKER_H
#define LEASE_RACE_BLOCKER_H

#include <libpq-fe.h>

#include "race_util.h"

typedef struct race_blocker {
    PGconn *conn;
} race_blocker_t;

static inline void race_block(race_blocker_t *b, const char *db_url, const lease_identity_t *id)
{
    b->conn = PQconnectdb(db_url);
    CHECK(PQstatus(b->conn) == CONNECTION_OK, "blocker connect: %s", PQerrorMessage(b->conn));
    PGresult *r = PQexec(b->conn, "BEGIN");
    CHECK(PQresultStatus(r) == PGRES_COMMAND_OK, "BEGIN");
    PQclear(r);
    char key[512], sql[1024];
    race_key_sql(id, key, sizeof key);
    snprintf(sql, sizeof sql, "SELECT 1 FROM lease.locks WHERE lock_key = %s FOR UPDATE", key);
    r = PQexec(b->conn, sql);
    CHECK(PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1,
          "blocker lock (the identity row must exist): %s", PQresultErrorMessage(r));
    PQclear(r);
}

static inline void race_unblock(race_blocker_t *b)
{
    PGresult *r = PQexec(b->conn, "ROLLBACK");
    PQclear(r);
    PQfinish(b->conn);
    b->conn = NULL;
}

/* Waits until `n` sessions of application_name wait on a lock. */
static inline void race_wait_for_lock_waiters(const char *db_url, const char *app, int n)
{
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM pg_stat_activity WHERE application_name = '%s' "
             "AND wait_event_type = 'Lock'",
             app);
    for (int i = 0; i < 500; i++) {
        if (testpg_query_int(db_url, sql) >= n)
            return;
        lease_sleep_ms(10);
    }
    CHECK(false, "no session of %s started waiting on the row lock", app);
}

/* Waits until no session of application_name is left (terminated ones
 * have exited and closed their sockets). */
static inline void race_wait_for_no_sessions(const char *db_url, const char *app)
{
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM pg_stat_activity WHERE application_name = '%s'",
             app);
    for (int i = 0; i < 500; i++) {
        if (testpg_query_int(db_url, sql) == 0)
            return;
        lease_sleep_ms(10);
    }
    CHECK(false, "sessions of %s did not go away", app);
}

#endif
