/*
 * http_outage.c - lease_backend_unavailable reached for real: the Postgres
 * cluster is stopped under a running leased, then started again. Stopping
 * the cluster affects every database of it, so ctest runs this file alone
 * (RUN_SERIAL); with an external server (LEASE_TEST_DATABASE_URL) it cannot
 * be stopped and the file exits 77 (skipped) saying so.
 */
#include "http_common.h"

static struct {
    bool paused; /* teardown restarts the cluster if a failed test left it down */
    char *db;
    leased_proc_t *srv;
    const char *base;
    char *token;
} fx;

static int setup(void **state)
{
    (void)state;
    fx.db = testpg_create_db("http_outage");
    fx.token =
        leased_proc_credential(fx.db,
                               &(leased_cred_spec_t){.principal = "prn_outage",
                                                     .tenant = TENANT,
                                                     .program = PROGRAM,
                                                     .capabilities = "targets:lease,targets:read"},
                               NULL);
    const char *env[] = {"LEASE_DB_CONNECT_TIMEOUT_MS=500", "LEASE_DB_POOL_SIZE=2", NULL};
    fx.srv = leased_proc_start(fx.db, env);
    fx.base = leased_proc_url(fx.srv);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (fx.paused)
        assert_true(testpg_resume());
    assert_int_equal(leased_proc_stop(fx.srv), 0);
    testpg_drop_db(fx.db);
    free(fx.db);
    free(fx.token);
    return 0;
}

static long readyz_status(const char **reason_out, char *reason, size_t n)
{
    http_resp_t *r = call(fx.base, "GET", "/readyz", NULL, NULL);
    long st = r->status;
    snprintf(reason, n, "%s", http_resp_str(r, "reason") ? http_resp_str(r, "reason") : "");
    *reason_out = reason;
    http_resp_free(r);
    return st;
}

static void test_backend_unavailable(void **state)
{
    (void)state;
    /* a lease taken before the outage, to renew during it */
    http_resp_t *a = call_owned(fx.base, "POST", "/v1/leases/acquire", fx.token,
                                acquire_body("out-acq", "t-outage"));
    check_reply(a, 200, "lease_acquired", NULL);
    json_t *lease = json_deep_copy(lease_of(a));
    http_resp_free(a);

    /* the test cluster runs with synchronous_commit off: make the lease
     * durable before the immediate shutdown */
    assert_true(testpg_exec(fx.db, "CHECKPOINT"));
    fx.paused = true;
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
        r = call_owned(fx.base, "POST", "/v1/leases/acquire", fx.token,
                       acquire_body(rid, "t-outage-2"));
        assert_int_equal(r->status, 503);
        if (strcmp(http_resp_str(r, "code"), "lease_backend_unavailable") == 0)
            break;
        check_reply(r, 503, "lease_outcome_unknown", NULL);
    }
    check_reply(r, 503, "lease_backend_unavailable", NULL);
    assert_true(json_is_true(json_object_get(r->json, "retryable")));
    http_resp_free(r);
    r = call_owned(fx.base, "POST", "/v1/leases/inspect", fx.token,
                   dump(json_pack("{s:o}", "lock_identity", identity_json("t-outage"))));
    check_reply(r, 503, "lease_backend_unavailable", NULL);
    http_resp_free(r);
    /* readiness follows within a few probe intervals */
    const char *reason = NULL;
    char buf[64];
    long st = 0;
    for (int i = 0; i < 100; i++) {
        st = readyz_status(&reason, buf, sizeof buf);
        if (st == 503)
            break;
        usleep(50000);
    }
    assert_int_equal(st, 503);
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
    fx.paused = false;
    for (int i = 0; i < 200; i++) {
        st = readyz_status(&reason, buf, sizeof buf);
        if (st == 200)
            break;
        usleep(50000);
    }
    assert_int_equal(st, 200);
    /* the lease from before the outage is still ours */
    r = call_owned(fx.base, "POST", "/v1/leases/renew", fx.token,
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
