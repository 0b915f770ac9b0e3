/*
 * http_pred_lock_settings.c - leased checks the server's predicate-lock
 * settings once, on its pool's first session (src/store/pg_pred_locks.c;
 * docs/operators.md, "Predicate locks for batch renewals"):
 *  - on the test cluster, which runs with the settings, it says nothing;
 *  - with a pool larger than the server's shared predicate-lock table can
 *    serve with renew-batches (max_pred_locks_per_transaction x
 *    max_connections below 400 per pooled connection) it logs one warning
 *    naming the setting, once however many sessions and requests follow.
 * (The per-page and per-relation branch needs a server without the
 * settings; the shared cluster must keep them for the other tests.)
 */
#include "http_common.h"

#define NEEDLE "predicate_lock_settings"

static http_fx_t fx;
/* set when a case could not be shown on this server: main then exits 77,
 * which ctest reports as skipped (never counted as passed) */
static bool skipped_case;

static int setup(void **state)
{
    http_fx_open(&fx, state, "http_predlock");
    return 0;
}

static void some_requests(const leased_proc_t *srv)
{
    for (int i = 0; i < 5; i++) {
        http_resp_t *r = http_call(leased_proc_url(srv), "GET", "/readyz", NULL, NULL);
        assert_non_null(r);
        assert_int_equal(r->status, 200);
        http_resp_free(r);
    }
}

static void silent_with_the_settings(void **state)
{
    (void)state;
    assert_true(testpg_query_int(fx.db, "SELECT current_setting('max_pred_locks_per_page')::int") >=
                100);
    leased_proc_t *srv = leased_proc_start(fx.db, NULL);
    some_requests(srv);
    assert_int_equal(leased_proc_log_count(srv, NEEDLE), 0);
    assert_int_equal(leased_proc_stop(srv), 0);
}

static void one_warning_for_a_pool_the_table_cannot_serve(void **state)
{
    (void)state;
    long long table = testpg_query_int(fx.db, "SELECT current_setting("
                                              "'max_pred_locks_per_transaction')::bigint * "
                                              "current_setting('max_connections')::int");
    long long pool = table / 400 + 1;
    if (pool > 1024) {
        printf("skipped: this server's predicate-lock table serves the largest pool\n");
        skipped_case = true;
        skip();
    }
    char env[64];
    snprintf(env, sizeof env, "LEASE_DB_POOL_SIZE=%lld", pool);
    const char *extra[] = {env, NULL};
    leased_proc_t *srv = leased_proc_start(fx.db, extra);
    some_requests(srv);
    assert_true(test_wait_until(5000, leased_proc_log_count(srv, NEEDLE) >= 1));
    some_requests(srv);
    assert_int_equal(leased_proc_log_count(srv, NEEDLE), 1);
    char *log = leased_proc_log(srv);
    assert_non_null(strstr(log, "raise max_pred_locks_per_transaction"));
    assert_non_null(strstr(log, "docs/operators.md"));
    free(log);
    assert_int_equal(leased_proc_stop(srv), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(silent_with_the_settings),
        cmocka_unit_test(one_warning_for_a_pool_the_table_cannot_serve),
    };
    int failed = cmocka_run_group_tests(tests, setup, http_fx_teardown);
    return failed ? failed : skipped_case ? 77 : 0;
}
