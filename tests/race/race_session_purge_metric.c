/*
 * race_session_purge_metric.c - /metrics counts the ended sessions the
 * sweeper's purge step deleted (issue 37; docs/operators.md,
 * "Housekeeping"): leased_housekeeping_purged_rows_total{table="sessions"},
 * beside the other retention tables. Two sessions are closed and dated
 * back past the idempotency retention, one is left open: the counter
 * reaches exactly 2, the two rows are gone and the open one stays.
 */
#include "../http/http_common.h"

static http_fx_t fx;
static const char *alice;

static int setup(void **state)
{
    http_fx_open(&fx, state, "race_session_purge_metric");
    alice = http_fx_worker(&fx, "prn_alice");
    const char *env[] = {"LEASE_SWEEP_INTERVAL_MS=300", NULL};
    http_fx_serve(&fx, env);
    return 0;
}

static char *open_session(const char *rid)
{
    http_resp_t *r = call_owned(
        fx.base, "POST", "/v1/sessions", alice,
        dump(json_pack("{s:s, s:s}", "request_id", rid, "service_instance_id", "inst_1")));
    check_reply(r, 200, "lease_acquired", NULL);
    char *sid = strdup(
        json_string_value(json_object_get(json_object_get(r->json, "session"), "session_id")));
    http_resp_free(r);
    return sid;
}

/* The counter's value in /metrics, -1 when the line is missing. */
static long long sessions_purged(void)
{
    http_resp_t *r = call(fx.base, "GET", "/metrics", NULL, NULL);
    assert_int_equal(r->status, 200);
    const char *line =
        strstr(r->body, "leased_housekeeping_purged_rows_total{table=\"sessions\"} ");
    long long v = line ? atoll(strchr(line, '}') + 2) : -1;
    http_resp_free(r);
    return v;
}

static void test_purged_sessions_counted(void **state)
{
    (void)state;
    assert_int_equal(sessions_purged(), 0);
    char *ended[2];
    for (int i = 0; i < 2; i++) {
        char rid[32], path[256], body[64];
        snprintf(rid, sizeof rid, "req_pm_open_%d", i);
        ended[i] = open_session(rid);
        snprintf(path, sizeof path, "/v1/sessions/%s/close", ended[i]);
        snprintf(body, sizeof body, "{\"request_id\":\"req_pm_close_%d\"}", i);
        http_resp_t *r = call(fx.base, "POST", path, alice, body);
        check_reply(r, 200, "lease_released", NULL);
        http_resp_free(r);
    }
    char *open = open_session("req_pm_open_live");
    /* closed two days ago: past the idempotency retention (a day), so
     * the purge step may delete them */
    char sql[512];
    snprintf(sql, sizeof sql,
             "UPDATE lease.sessions SET closed_at = now() - interval '2 days', "
             "created_at = now() - interval '2 days' WHERE session_id IN ('%s', '%s')",
             ended[0], ended[1]);
    assert_true(testpg_exec(fx.db, sql));
    assert_true(test_wait_until(20000, sessions_purged() == 2));
    assert_int_equal(testpg_query_int(fx.db, "SELECT count(*) FROM lease.sessions"), 1);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM lease.sessions WHERE session_id = '%s'", open);
    assert_int_equal(testpg_query_int(fx.db, sql), 1);
    assert_int_equal(sessions_purged(), 2);
    free(ended[0]);
    free(ended[1]);
    free(open);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_purged_sessions_counted),
    };
    return cmocka_run_group_tests(tests, setup, http_fx_teardown);
}
