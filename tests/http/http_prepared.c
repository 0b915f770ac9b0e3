/*
 * http_prepared.c - leased's prepared statements (docs/operators.md,
 * "Prepared statements"), seen from the database as an operator sees them:
 * pg_stat_activity shows the statement a session is running, so an acquire
 * held inside the database (its lock row locked by a session of the test's
 * own) shows how leased sent it.
 *
 * - connected straight to PostgreSQL (the default), the acquire is the
 *   prepared statement: its text with $1 and $2, no literal of the request,
 *   and SERIALIZABLE by the session's setting (a login role without a
 *   default of its own);
 * - with LEASE_DB_PREPARED_STATEMENTS=false, the text form as before:
 *   "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE; SELECT ...('literal', ...";
 * - the prepared acquire outlives the function's redefinition (dropped and
 *   created again, as a migration may: the server plans it again), and a
 *   session the server ended is replaced by one that prepares again;
 * - a database where one typed call cannot be prepared (missing): the text
 *   form, and a warning in the log.
 *
 * Through PgBouncer nothing is prepared and nothing is SET: http_pgbouncer
 * runs leased behind PgBouncer 1.18 in transaction mode, which cannot carry
 * a named statement, and checks that no setting reaches the pool's other
 * clients.
 */
#include "http_common.h"

#define ACQUIRE_PREPARED                                                                           \
    "SELECT lease.acquire_brief_typed($1::lease.identity, $2::lease.acquire_request, true)"
#define ACQUIRE_TEXT                                                                               \
    "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE; SELECT lease.acquire_brief_typed('"

/* The statement text of the acquire leased runs while target's row is held
 * (heap), after acquiring and releasing target once so the row exists. */
static char *held_acquire_text(http_fx_t *fx, const char *token, const char *target)
{
    char rid[96];
    snprintf(rid, sizeof rid, "%s-first", target);
    json_t *lease = acquire_lease(fx->base, token, rid, target);
    snprintf(rid, sizeof rid, "%s-release", target);
    http_resp_t *r =
        call_owned(fx->base, "POST", "/v1/leases/release", token, owner_body(rid, target, lease));
    check_reply(r, 200, "lease_released", NULL);
    http_resp_free(r);
    json_decref(lease);

    PGconn *blocker = http_block_target(fx->db, target);
    snprintf(rid, sizeof rid, "%s-held", target);
    char *body = acquire_body(rid, target);
    http_pending_t p = {
        .base = fx->base, .path = "/v1/leases/acquire", .token = token, .body = body};
    http_pending_start(&p);
    assert_int_equal(http_wait_lock_waiter(fx->db), 1);
    char *text = testpg_query_value(fx->db, "SELECT query FROM pg_stat_activity WHERE datname = "
                                            "current_database() AND application_name = 'leased' "
                                            "AND wait_event_type = 'Lock'");
    http_unblock(blocker);
    http_pending_join(&p);
    check_reply(p.resp, 200, "lease_acquired", NULL);
    http_resp_free(p.resp);
    free(body);
    assert_non_null(text);
    return text;
}

static void assert_prefix(const char *text, const char *prefix)
{
    if (strncmp(text, prefix, strlen(prefix)) != 0)
        fail_msg("leased's statement:\n  %.200s\nwant it to start with:\n  %s", text, prefix);
}

static void test_direct_session_prepares(void **state)
{
    (void)state;
    http_fx_t fx;
    http_fx_open(&fx, NULL, "http_prep_direct");
    const char *worker = http_fx_worker(&fx, "prn_prep");
    /* a login role without a default isolation of its own: the prepared
     * calls are SERIALIZABLE only by the session's setting (the functions
     * refuse anything weaker, and the acquires below must succeed) */
    assert_true(testpg_exec(fx.db, "DO $$ BEGIN "
                                   "IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = "
                                   "'leased_prep') THEN CREATE ROLE leased_prep LOGIN IN ROLE "
                                   "lease_service; END IF; END $$; "
                                   "ALTER ROLE leased_prep RESET ALL"));
    char *url = testpg_url_as(fx.db, "leased_prep");
    char setting[600];
    snprintf(setting, sizeof setting, "LEASE_DATABASE_URL=%s", url);
    const char *env[] = {setting, NULL};
    http_fx_serve(&fx, env);
    char *text = held_acquire_text(&fx, worker, "prep-direct");
    assert_prefix(text, ACQUIRE_PREPARED);
    assert_null(strstr(text, "prep-direct")); /* no value of the request in the text */
    free(text);
    free(url);
    http_fx_close(&fx);
}

static void test_text_when_turned_off(void **state)
{
    (void)state;
    http_fx_t fx;
    http_fx_open(&fx, NULL, "http_prep_off");
    const char *worker = http_fx_worker(&fx, "prn_prep");
    const char *env[] = {"LEASE_DB_PREPARED_STATEMENTS=false", NULL};
    http_fx_serve(&fx, env);
    char *text = held_acquire_text(&fx, worker, "prep-off");
    assert_prefix(text, ACQUIRE_TEXT);
    /* the target's value, a field of the identity's composite literal */
    assert_non_null(strstr(text, "\"prep-off\""));
    free(text);
    http_fx_close(&fx);
}

static void test_redefined_function_and_new_sessions(void **state)
{
    (void)state;
    http_fx_t fx;
    http_fx_open(&fx, NULL, "http_prep_redefine");
    const char *worker = http_fx_worker(&fx, "prn_prep");
    const char *env[] = {"LEASE_DB_POOL_SIZE=2", NULL};
    http_fx_serve(&fx, env);
    json_t *lease = acquire_lease(fx.base, worker, "prep-r-1", "prep-r-1");
    json_decref(lease);
    /* dropped and created again (a new function, a new oid), as a migration
     * that changes a function may: the prepared statement is planned again */
    assert_true(testpg_exec(
        fx.db,
        "DO $$ DECLARE def text := pg_get_functiondef('lease.acquire_brief_typed'::regproc); "
        "BEGIN DROP FUNCTION lease.acquire_brief_typed; EXECUTE def; "
        "GRANT EXECUTE ON FUNCTION lease.acquire_brief_typed TO lease_service; END $$"));
    lease = acquire_lease(fx.base, worker, "prep-r-2", "prep-r-2");
    json_decref(lease);
    /* every session ended by the server: new ones prepare again */
    assert_true(testpg_terminate_backends(fx.db, "leased") > 0);
    char *text = held_acquire_text(&fx, worker, "prep-r-3");
    assert_prefix(text, ACQUIRE_PREPARED);
    free(text);
    http_fx_close(&fx);
}

static void test_text_when_a_call_cannot_be_prepared(void **state)
{
    (void)state;
    http_fx_t fx;
    http_fx_open(&fx, NULL, "http_prep_missing");
    const char *worker = http_fx_worker(&fx, "prn_prep");
    /* one of the typed calls missing (a database behind leased's version):
     * sessions fall back to the text form, and the log says why */
    assert_true(testpg_exec(fx.db, "DROP FUNCTION lease.release_many_brief_typed"));
    http_fx_serve(&fx, NULL);
    char *text = held_acquire_text(&fx, worker, "prep-missing");
    assert_prefix(text, ACQUIRE_TEXT);
    free(text);
    assert_true(leased_proc_log_count(fx.srv, "prepare_failed") > 0);
    http_fx_close(&fx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_direct_session_prepares),
        cmocka_unit_test(test_text_when_turned_off),
        cmocka_unit_test(test_redefined_function_and_new_sessions),
        cmocka_unit_test(test_text_when_a_call_cannot_be_prepared),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
