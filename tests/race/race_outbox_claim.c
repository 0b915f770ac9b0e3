/*
 * race_outbox_claim.c - lease.outbox_claim between concurrent relay sessions
 * (two libpq sessions as the relay role, each in its own transaction, as two
 * leased-relay processes would be):
 *  1. an identity belongs to one claimer at a time, with every unpublished
 *     row of it, including rows the holder did not claim; others get the
 *     other identities (SKIP LOCKED, never waiting);
 *  2. a claim never takes a row behind one it could not take (a row locked
 *     by someone else, a row deferred for retry): per-identity order;
 *  3. what a claimer marks is published; what it did not mark is claimed
 *     again, in outbox_id order, by the next claimer; a session that ends
 *     without committing frees everything at once;
 *  4. published rows are never claimed again;
 *  5. a claim outside READ COMMITTED is refused (LS020).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testpg.h"

static char *db;
static char *relay_url;

static PGconn *relay_session(void)
{
    PGconn *c = PQconnectdb(relay_url);
    assert_int_equal(PQstatus(c), CONNECTION_OK);
    return c;
}

static void exec_ok(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQresultErrorMessage(r));
    PQclear(r);
}

/* BEGIN and claim; returns "id:target,id:target,..." (heap). */
static char *claim(PGconn *c, int batch)
{
    exec_ok(c, "BEGIN ISOLATION LEVEL READ COMMITTED");
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT coalesce(string_agg(outbox_id || ':' || (lock_identity ->> 'target_id'), ',' "
             "ORDER BY outbox_id), '') FROM lease.outbox_claim(%d)",
             batch);
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        fail_msg("claim: %s", PQresultErrorMessage(r));
    char *s = strdup(PQgetvalue(r, 0, 0));
    PQclear(r);
    return s;
}

static void check_claim(PGconn *c, int batch, const char *want)
{
    char *got = claim(c, batch);
    if (strcmp(got, want) != 0)
        fail_msg("claim(%d) = '%s', want '%s'", batch, got, want);
    free(got);
}

/* Fresh outbox rows: spec is "X,Y,X,..." (one row per letter, target t-X,
 * token 1), ids from 1 in that order. */
static void fill(const char *spec)
{
    assert_true(testpg_exec(db, "TRUNCATE lease.outbox RESTART IDENTITY"));
    char sql[4096];
    size_t len = 0;
    len +=
        (size_t)snprintf(sql + len, sizeof sql - len,
                         "INSERT INTO lease.locks (lock_key, tenant_id, program_id, "
                         "target_namespace, target_id, actor_name, workflow_name, "
                         "operation_class, fencing_counter, created_at, state) "
                         "SELECT lease.lock_key('t','p','ns', x,'a','w','default'), 't','p','ns', "
                         "x, 'a','w','default', 1, now(), 'free' FROM unnest(ARRAY['t-X','t-Y',"
                         "'t-Z']) x ON CONFLICT DO NOTHING; ");
    for (const char *p = spec; *p; p++) {
        if (*p == ',')
            continue;
        len += (size_t)snprintf(sql + len, sizeof sql - len,
                                "INSERT INTO lease.outbox (lock_key, topic, payload, "
                                "fencing_token, lease_id, execution_id, created_at) VALUES "
                                "(lease.lock_key('t','p','ns','t-%c','a','w','default'), "
                                "'topic', '{}', 1, 'lease_x', 'exec', now()); ",
                                *p);
    }
    assert_true(testpg_exec(db, sql));
}

static void identity_belongs_to_one_claimer(void **state)
{
    (void)state;
    fill("X,Y,X,Y,X,Z");
    PGconn *a = relay_session(), *b = relay_session();
    check_claim(a, 2, "1:t-X,2:t-Y");
    /* X and Y are a's, even rows 3..5 it did not claim; b takes Z, at once */
    check_claim(b, 100, "6:t-Z");
    exec_ok(b, "SELECT lease.outbox_mark_published(ARRAY[6]::bigint[], 'b')");
    exec_ok(b, "COMMIT");
    /* a marks only X's row and commits: Y's row 2 stays unpublished */
    exec_ok(a, "SELECT lease.outbox_mark_published(ARRAY[1]::bigint[], 'a')");
    exec_ok(a, "COMMIT");
    check_claim(b, 100, "2:t-Y,3:t-X,4:t-Y,5:t-X");
    /* while b holds them, a gets nothing */
    check_claim(a, 100, "");
    exec_ok(a, "COMMIT");
    exec_ok(b, "ROLLBACK");
    assert_int_equal(testpg_query_int(db, "SELECT count(*) FROM lease.outbox WHERE "
                                          "published_at IS NOT NULL"),
                     2);
    assert_int_equal(testpg_query_int(db, "SELECT count(*) FROM lease.outbox WHERE "
                                          "outbox_id = 1 AND published_by = 'a'"),
                     1);
    PQfinish(a);
    PQfinish(b);
}

static void claim_stops_at_a_row_it_cannot_take(void **state)
{
    (void)state;
    fill("X,X,X,Y");
    /* someone (not a relay) holds row 2 locked */
    PGconn *other = PQconnectdb(db);
    assert_int_equal(PQstatus(other), CONNECTION_OK);
    exec_ok(other, "BEGIN; SELECT 1 FROM lease.outbox WHERE outbox_id = 2 FOR UPDATE");
    PGconn *a = relay_session();
    check_claim(a, 100, "1:t-X,4:t-Y"); /* never row 3 ahead of row 2 */
    exec_ok(a, "ROLLBACK");
    exec_ok(other, "ROLLBACK");
    /* a deferred row holds back its identity until its time comes */
    exec_ok(a, "BEGIN ISOLATION LEVEL READ COMMITTED");
    /* only a row this transaction claimed may be deferred (0016) */
    exec_ok(a, "SELECT count(*) FROM lease.outbox_claim(1)");
    exec_ok(a, "SELECT lease.outbox_defer(1, 3600000, 'broker returned it')");
    exec_ok(a, "COMMIT");
    check_claim(a, 100, "4:t-Y");
    exec_ok(a, "ROLLBACK");
    assert_true(testpg_exec(db, "UPDATE lease.outbox SET next_attempt_at = now() - interval '1s' "
                                "WHERE outbox_id = 1"));
    check_claim(a, 100, "1:t-X,2:t-X,3:t-X,4:t-Y");
    exec_ok(a, "ROLLBACK");
    assert_int_equal(testpg_query_int(db, "SELECT attempts FROM lease.outbox WHERE outbox_id = 1"),
                     1);
    PQfinish(a);
    PQfinish(other);
}

static void a_session_that_ends_frees_its_claim(void **state)
{
    (void)state;
    fill("X,Y");
    PGconn *a = relay_session(), *b = relay_session();
    check_claim(a, 100, "1:t-X,2:t-Y");
    check_claim(b, 100, "");
    exec_ok(b, "ROLLBACK");
    PQfinish(a); /* gone without COMMIT: nothing marked, everything free */
    char *got = NULL;
    for (int i = 0; i < 200; i++) {
        free(got);
        got = claim(b, 100);
        if (strcmp(got, "1:t-X,2:t-Y") == 0)
            break;
        exec_ok(b, "ROLLBACK");
        usleep(10000);
    }
    assert_string_equal(got, "1:t-X,2:t-Y");
    free(got);
    exec_ok(b, "ROLLBACK");
    PQfinish(b);
}

static void published_rows_are_not_claimed_again(void **state)
{
    (void)state;
    fill("X,X,Y");
    PGconn *a = relay_session(), *b = relay_session();
    check_claim(a, 100, "1:t-X,2:t-X,3:t-Y");
    exec_ok(a, "SELECT lease.outbox_mark_published(ARRAY[1,2,3]::bigint[], 'a')");
    exec_ok(a, "COMMIT");
    check_claim(b, 100, "");
    exec_ok(b, "ROLLBACK");
    PQfinish(a);
    PQfinish(b);
}

static void claim_refuses_other_isolation_levels(void **state)
{
    (void)state;
    fill("X");
    PGconn *a = relay_session();
    exec_ok(a, "BEGIN ISOLATION LEVEL SERIALIZABLE");
    PGresult *r = PQexec(a, "SELECT * FROM lease.outbox_claim(10)");
    assert_int_equal(PQresultStatus(r), PGRES_FATAL_ERROR);
    assert_string_equal(PQresultErrorField(r, PG_DIAG_SQLSTATE), "LS020");
    PQclear(r);
    exec_ok(a, "ROLLBACK");
    PQfinish(a);
}

static int setup(void **state)
{
    (void)state;
    db = testpg_create_db("race_outbox_claim");
    relay_url = testpg_url_as(db, "leased_relay_app");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    testpg_drop_db(db);
    free(db);
    free(relay_url);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(identity_belongs_to_one_claimer),
        cmocka_unit_test(claim_stops_at_a_row_it_cannot_take),
        cmocka_unit_test(a_session_that_ends_frees_its_claim),
        cmocka_unit_test(published_rows_are_not_claimed_again),
        cmocka_unit_test(claim_refuses_other_isolation_levels),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
