/*
 * race_session_close_commit.c - a session closed while one of its leases
 * is committing (issue 37): the holder's own SERIALIZABLE transaction
 * checks its fence (lease.fence_check) and writes, and the session is
 * closed in the middle. The write commits before the close or is refused,
 * never after it. Three orders, each several rounds, each on a fresh
 * session and identity:
 *
 *   A. fence checked and written, then the close commits (it skips the
 *      lease's row, which the fence holds FOR SHARE), then an observer
 *      commits having seen the session closed and the write absent: the
 *      write's COMMIT must now fail (serialization failure). Had it
 *      committed, the write would land after a state every later reader
 *      saw as closed-without-it.
 *   B. the transaction's snapshot taken before the close, its fence check
 *      after the close committed: refused (the close ended the lease's row
 *      under it, or the session reads closed).
 *   C. the transaction begun after the close: the fence check refuses
 *      (LS010, not the active lease).
 *
 * What the database holds afterwards is the judge: the application table
 * holds no row of a refused transaction.
 */
#include <libpq-fe.h>

#include "race_sessions.h"

#define APP "race_session_close_commit"
#define ROUNDS 5

static race_env_t env;

static PGconn *connect_svc(void)
{
    PGconn *c = PQconnectdb(env.svc_url);
    CHECK(PQstatus(c) == CONNECTION_OK, "connect: %s", PQerrorMessage(c));
    return c;
}

/* Runs sql; returns its SQLSTATE ("" on success) in state (6 bytes). */
static void run(PGconn *c, const char *sql, char *state)
{
    PGresult *r = PQexec(c, sql);
    ExecStatusType st = PQresultStatus(r);
    const char *code = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
        state[0] = '\0';
    else
        snprintf(state, 6, "%s", code ? code : "?????");
    PQclear(r);
}

static void run_ok(PGconn *c, const char *sql)
{
    char state[6];
    run(c, sql, state);
    CHECK(!state[0], "%s: %s", sql, state);
}

/* A session with one lease on a fresh identity. */
static lease_session_t open_with_lease(const char *target, lease_identity_t *id,
                                       lease_record_t *lease)
{
    lease_session_t s = race_session_open(env.store, "prn-holder", 30000);
    race_identity(id, target);
    *lease = race_acquire_in_session(env.store, id, "prn-holder", s.session_id);
    return s;
}

static void close_ok(const lease_session_t *s)
{
    lease_result_t res;
    lease_code_t c = race_session_close(env.store, "prn-holder", s->session_id, &res);
    CHECK(c == LEASE_RELEASED, "close: %s", CODE(c));
}

static void fence_sql(const lease_identity_t *id, const lease_record_t *l, char *out, size_t n)
{
    char ident[1024];
    race_identity_json(id, ident, sizeof ident);
    snprintf(out, n, "SELECT lease.fence_check('%s'::jsonb, '%s', %lld)", ident, l->lease_id,
             (long long)l->fencing_token);
}

static long long app_rows(const char *target)
{
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM app_writes WHERE target = '%s'", target);
    return testpg_query_int(env.db_url, sql);
}

static void order_a(int round)
{
    char target[64], sql[2400], state[6];
    snprintf(target, sizeof target, "close-a-%d", round);
    lease_identity_t id;
    lease_record_t lease;
    lease_session_t s = open_with_lease(target, &id, &lease);

    PGconn *t = connect_svc();
    run_ok(t, "BEGIN ISOLATION LEVEL SERIALIZABLE");
    fence_sql(&id, &lease, sql, sizeof sql);
    run_ok(t, sql);
    snprintf(sql, sizeof sql, "INSERT INTO app_writes VALUES ('%s', %lld)", target,
             (long long)lease.fencing_token);
    run_ok(t, sql);

    /* the close does not wait for the in-flight commit (its lease row is
     * skipped, already expired for every path by the close) */
    close_ok(&s);

    /* an observer (an operator's session: the service role may not read
     * lease.sessions) sees the session closed and the write absent */
    PGconn *o = PQconnectdb(env.db_url);
    CHECK(PQstatus(o) == CONNECTION_OK, "observer connect: %s", PQerrorMessage(o));
    run_ok(o, "BEGIN ISOLATION LEVEL SERIALIZABLE");
    snprintf(sql, sizeof sql,
             "SELECT (SELECT count(*) FROM app_writes WHERE target = '%s'), "
             "(SELECT state FROM lease.sessions WHERE session_id = '%s')",
             target, s.session_id);
    PGresult *r = PQexec(o, sql);
    CHECK(PQresultStatus(r) == PGRES_TUPLES_OK, "observer: %s", PQresultErrorMessage(r));
    CHECK(strcmp(PQgetvalue(r, 0, 0), "0") == 0 && strcmp(PQgetvalue(r, 0, 1), "closed") == 0,
          "observer saw %s rows, session %s", PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1));
    PQclear(r);
    run_ok(o, "COMMIT");
    PQfinish(o);

    /* now the write may not commit: it would come after the close */
    run(t, "COMMIT", state);
    printf("A%d: the in-flight write's COMMIT after the close and an observer: %s\n", round,
           state[0] ? state : "committed");
    CHECK(state[0], "the fenced write committed after the close (observer saw it closed without)");
    CHECK(strcmp(state, "40001") == 0, "refused with %s, not a serialization failure", state);
    PQfinish(t);
    CHECK(app_rows(target) == 0, "a refused write left %lld rows", app_rows(target));
}

static void order_b(int round)
{
    char target[64], sql[2400], state[6];
    snprintf(target, sizeof target, "close-b-%d", round);
    lease_identity_t id;
    lease_record_t lease;
    lease_session_t s = open_with_lease(target, &id, &lease);

    PGconn *t = connect_svc();
    run_ok(t, "BEGIN ISOLATION LEVEL SERIALIZABLE");
    run_ok(t, "SELECT count(*) FROM app_writes"); /* the snapshot: before the close */
    close_ok(&s);
    fence_sql(&id, &lease, sql, sizeof sql);
    run(t, sql, state);
    printf("B%d: fence check after the close, snapshot before it: %s\n", round,
           state[0] ? state : "passed");
    CHECK(state[0], "the fence passed after the session was closed");
    CHECK(strcmp(state, "40001") == 0 || strcmp(state, "LS010") == 0, "refused with %s", state);
    run_ok(t, "ROLLBACK");
    PQfinish(t);
    CHECK(app_rows(target) == 0, "rows of a refused write");
}

static void order_c(int round)
{
    char target[64], sql[2400], state[6];
    snprintf(target, sizeof target, "close-c-%d", round);
    lease_identity_t id;
    lease_record_t lease;
    lease_session_t s = open_with_lease(target, &id, &lease);
    close_ok(&s);
    PGconn *t = connect_svc();
    run_ok(t, "BEGIN ISOLATION LEVEL SERIALIZABLE");
    fence_sql(&id, &lease, sql, sizeof sql);
    run(t, sql, state);
    printf("C%d: fence check begun after the close: %s\n", round, state[0] ? state : "passed");
    CHECK(strcmp(state, "LS010") == 0, "the fence answered %s after the close",
          state[0] ? state : "passed");
    run_ok(t, "ROLLBACK");
    PQfinish(t);
}

int main(void)
{
    race_setup(&env, APP, 2, APP);
    CHECK(testpg_exec(env.db_url, "CREATE TABLE app_writes (target text, token bigint);"
                                  "GRANT SELECT, INSERT ON app_writes TO leased_app"),
          "app table");
    for (int r = 0; r < ROUNDS; r++) {
        order_a(r);
        order_b(r);
        order_c(r);
    }
    race_teardown(&env);
    return 0;
}
