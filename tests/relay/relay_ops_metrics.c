/*
 * relay_ops_metrics.c - every metric the operator pack names (the alert
 * rules of contrib/prometheus, the panels of contrib/grafana) is exposed by
 * a running leased and leased-relay.
 *
 * leased gets the traffic that makes its per-code series appear (an
 * acquire, a conflict, a renewal, a bad credential, a commit with a
 * publication, a release); the relay delivers the publication and measures
 * its lag. Both /metrics texts are written to files and checked by
 * tests/ops_metric_names, which reads the names out of the rules and the
 * dashboard.
 */
#include "relay_common.h"

static relay_fx_t fx;

static int setup(void **state)
{
    (void)state;
    relay_fx_open(&fx, "relay_ops_metrics");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    relay_fx_close(&fx);
    return 0;
}

/* GET base/metrics into a temporary file; returns its path (heap). */
static char *scrape_to_file(const char *base, const char *name)
{
    http_resp_t *r = http_call(base, "GET", "/metrics", NULL, NULL);
    assert_non_null(r);
    assert_int_equal(r->status, 200);
    char *path = NULL;
    assert_true(asprintf(&path, "/tmp/relay_ops_metrics.%d.%s", (int)getpid(), name) > 0);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(r->body, 1, r->body_len, f), r->body_len);
    assert_int_equal(fclose(f), 0);
    http_resp_free(r);
    return path;
}

static void test_every_named_metric_is_exposed(void **state)
{
    (void)state;
    const char *base = fx.http.base;
    json_t *lease = relay_acquire(&fx, "ops-a");
    /* a conflict: the same target, another request */
    http_resp_t *r = acquire_call(base, fx.worker, "ops-conflict", "ops-a");
    check_reply(r, 409, "lease_conflict", NULL);
    http_resp_free(r);
    /* a renewal */
    r = call_owned(base, "POST", "/v1/leases/renew", fx.worker, owner_body("ops-renew", "ops-a", lease));
    check_reply(r, 200, "lease_renewed", NULL);
    http_resp_free(r);
    /* a credential that does not exist */
    r = call_owned(base, "POST", "/v1/leases/inspect", "lsk_key_aaaaaaaaaaaaaaaaaaaaaaaaaa_bogus",
                   inspect_body("ops-a"));
    check_reply(r, 401, "invalid_credential", NULL);
    http_resp_free(r);
    /* a publication for the relay */
    assert_int_equal(relay_commit_ok(&fx, "ops-a", lease, 1, "ops.metrics"), 1);
    relay_release(&fx, "ops-a", lease);
    json_decref(lease);

    relay_proc_t *relay = relay_proc_start(fx.http.db, (const char *[]){fx.exchange_env, NULL});
    if (!relay_wait_metric(relay, "leased_relay_published_total{destination=\"amqp\"}", 1, 30000))
        relay_proc_dump_log(relay);
    /* the lag gauges appear once the loop has measured it */
    assert_true(relay_wait_metric(relay, "leased_relay_lag_seconds", 0, 30000));

    char *leased_file = scrape_to_file(base, "leased");
    char *relay_file = scrape_to_file(relay_proc_url(relay), "relay");
    char *cmd = NULL;
    assert_true(asprintf(&cmd, "%s/tests/ops_metric_names %s %s %s", LEASE_TEST_SOURCE_DIR,
                         LEASE_TEST_SOURCE_DIR, leased_file, relay_file) > 0);
    int status = system(cmd);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    free(cmd);
    unlink(leased_file);
    unlink(relay_file);
    free(leased_file);
    free(relay_file);
    assert_int_equal(relay_proc_stop(relay), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_every_named_metric_is_exposed, setup, teardown)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
