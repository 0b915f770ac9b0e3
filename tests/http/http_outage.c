/*
 * http_outage.c - lease_backend_unavailable reached for real: the Postgres
 * cluster is stopped under a running leased, then started again. Stopping
 * the cluster affects every database of it, so ctest runs this file alone
 * (RUN_SERIAL); with an external server (LEASE_TEST_DATABASE_URL) it cannot
 * be stopped and the file exits 77 (skipped) saying so.
 */
#include "http_common.h"

static http_fx_t fx;
static const char *worker; /* owned by fx */
static bool paused;        /* teardown restarts the cluster if a failed test left it down */

static int setup(void **state)
{
    http_fx_open(&fx, state, "http_outage");
    worker = http_fx_worker(&fx, "prn_outage");
    const char *env[] = {"LEASE_DB_CONNECT_TIMEOUT_MS=500", "LEASE_DB_POOL_SIZE=2", NULL};
    http_fx_serve(&fx, env);
    return 0;
}

static int teardown(void **state)
{
    if (paused)
        assert_true(testpg_resume());
    return http_fx_teardown(state);
}

static void test_backend_unavailable(void **state)
{
    (void)state;
    /* a lease taken before the outage, to renew during it */
    json_t *lease = acquire_lease(fx.base, worker, "out-acq", "t-outage");

    /* acknowledged, so durable: the test cluster keeps synchronous_commit
     * on (tests/harness/pgcluster), and the immediate shutdown below
     * cannot lose it */
    paused = true;
    assert_true(testpg_pause());
    /* A mutation sent on a pooled session that died with the server may
     * already have been submitted: outcome unknown, and the session is
     * dropped. Once no session is left, nothing can be submitted:
     * backend unavailable. Nothing else may appear. */
    http_resp_t *r = NULL;
    for (int i = 0; i < 4; i++) {
        char rid[32];
        snprintf(rid, sizeof rid, "out-acq-%d", i);
        http_resp_free(r);
        r = acquire_call(fx.base, worker, rid, "t-outage-2");
        assert_int_equal(r->status, 503);
        if (strcmp(http_resp_str(r, "code"), "lease_backend_unavailable") == 0)
            break;
        check_reply(r, 503, "lease_outcome_unknown", NULL);
    }
    check_reply(r, 503, "lease_backend_unavailable", NULL);
    assert_true(json_is_true(json_object_get(r->json, "retryable")));
    http_resp_free(r);
    r = call_owned(fx.base, "POST", "/v1/leases/inspect", worker, inspect_body("t-outage"));
    check_reply(r, 503, "lease_backend_unavailable", NULL);
    http_resp_free(r);
    /* readiness follows within a few probe intervals */
    char reason[64];
    assert_int_equal(http_wait_ready(fx.base, 503, reason, sizeof reason, 100, false), 503);
    assert_string_equal(reason, "database_unreachable");
    /* the audit events of those refusals cannot reach the database: they
     * go to the log instead, without tokens */
    bool fallback = false;
    for (int i = 0; i < 100 && !fallback; i++) {
        char *log = leased_proc_log(fx.srv);
        fallback = strstr(log, "\"msg\":\"audit_fallback\"") != NULL &&
                   strstr(log, "\"code\":\"lease_backend_unavailable\"") != NULL;
        assert_null(strstr(log, "lsk_"));
        free(log);
        if (!fallback)
            usleep(100000);
    }
    assert_true(fallback);
    /* the process itself stays alive */
    r = call(fx.base, "GET", "/healthz", NULL, NULL);
    assert_int_equal(r->status, 200);
    http_resp_free(r);

    assert_true(testpg_resume());
    paused = false;
    assert_int_equal(http_wait_ready(fx.base, 200, reason, sizeof reason, 200, false), 200);
    /* the lease from before the outage is still ours */
    r = call_owned(fx.base, "POST", "/v1/leases/renew", worker,
                   owner_body("out-renew", "t-outage", lease));
    check_reply(r, 200, "lease_renewed", NULL);
    http_resp_free(r);
    json_decref(lease);
}

int main(void)
{
    if (!testpg_owned()) {
        printf("skipped: the database server is not owned by the tests "
               "(LEASE_TEST_DATABASE_URL), so it cannot be stopped\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backend_unavailable),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
