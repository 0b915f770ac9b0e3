/*
 * http_recovery.c - restore and failover end to end: a running leased
 * notices (through its sweeper's lease.check_namespace) that the database
 * now runs on another cluster, seals the namespace (readiness false,
 * acquisition, renewal and commits refused), and `leasectl recover` raises
 * every fencing counter past anything handed out before, revokes the
 * restored lease and unseals: the fencing high-water mark never regresses.
 */
#include "http_common.h"

#include <sys/wait.h>

static http_fx_t fx;
static const char *worker; /* owned by fx */

static int setup(void **state)
{
    http_fx_open(&fx, state, "http_recovery");
    worker = http_fx_worker(&fx, "prn_recovery");
    const char *env[] = {"LEASE_SWEEP_INTERVAL_MS=200", NULL};
    http_fx_serve(&fx, env);
    return 0;
}

/* /readyz answering want within about 10 s. */
static long wait_ready(long want, char *reason, size_t n)
{
    return http_wait_ready(fx.base, want, reason, n, 200, false);
}

/* Polls /readyz until it says "sealed" (at most 10 s): on a loaded machine a
 * late sweeper probe can make it answer 503 "database_unreachable" first,
 * which is readiness telling the truth about the probe, not the seal. */
static bool wait_sealed(void)
{
    char reason[64];
    for (int i = 0; i < 200; i++) {
        if (i)
            usleep(50000);
        if (http_wait_ready(fx.base, 503, reason, sizeof reason, 1, false) == 503 &&
            strcmp(reason, "sealed") == 0)
            return true;
    }
    return false;
}

static void test_restore_is_sealed_until_recovery(void **state)
{
    (void)state;
    char reason[64];
    /* the first sweep recorded the cluster this database runs on */
    assert_int_equal(wait_ready(200, reason, sizeof reason), 200);
    for (int i = 0; i < 100 && testpg_query_int(fx.db, "SELECT (system_identifier IS NULL)::int "
                                                       "FROM lease.namespace_state");
         i++)
        usleep(50000);
    assert_int_equal(testpg_query_int(fx.db, "SELECT (system_identifier IS NOT NULL AND "
                                             "timeline_id IS NOT NULL)::int "
                                             "FROM lease.namespace_state"),
                     1);

    json_t *held = acquire_lease(fx.base, worker, "rec-1", "t-restored");
    assert_int_equal(json_integer_value(json_object_get(held, "fencing_token")), 1);

    /* the database now looks restored onto another cluster */
    assert_true(testpg_exec(fx.db, "UPDATE lease.namespace_state "
                                   "SET system_identifier = system_identifier + 1"));
    assert_true(wait_sealed());
    /* Readiness says "sealed" from lease.health(), which computes the
     * mismatch on every probe (docs/operators.md: before any call recorded
     * it); the row is written by the sweeper's next lease.check_namespace,
     * which on a loaded machine can come a sweep interval or more after
     * that probe. Wait for the sweeper to record it, then read why. */
    assert_true(
        test_wait_until(10000, testpg_query_int(fx.db, "SELECT count(*) FROM "
                                                       "lease.namespace_state WHERE sealed") == 1));
    char *why = testpg_query_value(fx.db, "SELECT sealed_reason FROM lease.namespace_state "
                                          "WHERE sealed AND sealed_reason LIKE '%restored%'");
    assert_non_null(why);
    free(why);

    /* sealed: no acquisition, no renewal of the restored lease */
    http_resp_t *r = acquire_call(fx.base, worker, "rec-2", "t-other");
    check_reply(r, 503, "lease_backend_unavailable", NULL);
    assert_string_equal(json_string_value(json_object_get(r->json, "reason")), "namespace_sealed");
    /* the database's account of why stays in the database (operators) */
    assert_null(strstr(r->body, "system identifier"));
    http_resp_free(r);
    r = call_owned(fx.base, "POST", "/v1/leases/renew", worker,
                   owner_body("rec-3", "t-restored", held));
    check_reply(r, 503, "lease_backend_unavailable", NULL);
    assert_string_equal(json_string_value(json_object_get(r->json, "reason")), "namespace_sealed");
    http_resp_free(r);
    /* a metric counts the refusals (both of them; a refusal repeated after a
     * serialization failure counts once) */
    r = call(fx.base, "GET", "/metrics", NULL, NULL);
    const char *m = strstr(r->body, "\nleased_namespace_sealed_refusals_total ");
    assert_non_null(m);
    assert_int_equal(strtol(m + strlen("\nleased_namespace_sealed_refusals_total "), NULL, 10), 2);
    http_resp_free(r);

    /* recovery: every counter raised by the epoch stride, leases revoked */
    char cmd[4096];
    char *owner_url = testpg_url_as(fx.db, "postgres");
    snprintf(cmd, sizeof cmd,
             "'%s' recover --reason 'restored from backup (test)' --database-url '%s' >/dev/null",
             LEASE_TEST_LEASECTL, owner_url);
    free(owner_url);
    int st = system(cmd);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(wait_ready(200, reason, sizeof reason), 200);

    /* the restored lease is gone for good */
    r = call_owned(fx.base, "POST", "/v1/leases/renew", worker,
                   owner_body("rec-4", "t-restored", held));
    check_reply(r, 409, "lease_lost", NULL);
    http_resp_free(r);
    assert_int_equal(testpg_query_int(fx.db, "SELECT count(*) FROM lease.history WHERE "
                                             "state = 'revoked' AND end_reason LIKE "
                                             "'epoch recovery:%'"),
                     1);

    /* the next token is above everything issued before the restore */
    r = acquire_call(fx.base, worker, "rec-5", "t-restored");
    check_reply(r, 200, "lease_acquired", NULL);
    json_int_t token = json_integer_value(json_object_get(lease_of(r), "fencing_token"));
    assert_true(token > 1000000000);
    http_resp_free(r);
    json_decref(held);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_restore_is_sealed_until_recovery),
    };
    return cmocka_run_group_tests(tests, setup, http_fx_teardown);
}
