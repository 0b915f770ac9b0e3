/*
 * relay_broker_restart.c - the broker goes away and comes back:
 *  1. while the relay is idle: it notices (leased_relay_broker_up 0), keeps
 *     measuring the lag (rows and seconds grow), marks nothing, and once
 *     the broker is back delivers everything, exactly once;
 *  2. in the middle of a flow of batches: the batch in flight fails, its
 *     rows stay unpublished and are delivered after the restart; what the
 *     broker had already routed comes twice and is dropped by the consumer
 *     helper.
 * The figures (lag during the outage, time to catch up) are printed.
 * The broker is stopped: no other relay test runs meanwhile (RESOURCE_LOCK
 * rabbit_broker, tests/CMakeLists.txt).
 */
#include "relay_common.h"

static relay_fx_t fx;

static int setup_idle(void **state)
{
    (void)state;
    relay_fx_open(&fx, "relay_restart_idle");
    return 0;
}

static int setup_busy(void **state)
{
    (void)state;
    relay_fx_open(&fx, "relay_restart_busy");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    /* a test that failed with the broker frozen or stopped must not leave it so */
    (void)testbroker_thaw();
    (void)testbroker_resume();
    relay_fx_close(&fx);
    return 0;
}

static bool wait_metric_eq(relay_proc_t *r, const char *series, double want, int timeout_ms)
{
    long end = child_proc_now_ms() + timeout_ms;
    while (relay_proc_metric(r, series) != want) {
        if (child_proc_now_ms() > end)
            return false;
        usleep(20000);
    }
    return true;
}

static void restart_while_idle(void **state)
{
    (void)state;
    int rows = relay_fill(&fx, "idle", 5, 1, 4, 25);
    collector_t col;
    collector_init(&col);
    relay_proc_t *relay = relay_proc_start(
        fx.http.db, (const char *[]){fx.exchange_env, "LEASE_RELAY_BACKOFF_MAX_MS=500", NULL});
    assert_true(collector_until(&col, fx.consumer, (size_t)rows, 30000));
    assert_true(relay_wait_sql(
        fx.http.db, "SELECT count(*) FROM lease.outbox WHERE published_at IS NULL", 0, 10000));

    assert_true(testbroker_pause());
    long down_at = child_proc_now_ms();
    if (!wait_metric_eq(relay, "leased_relay_broker_up", 0, 60000))
        relay_proc_dump_log(relay);
    assert_true(relay_proc_metric(relay, "leased_relay_broker_up") == 0);
    /* commits go on while the broker is down (leased does not need it) */
    int more = relay_fill(&fx, "down", 5, 1, 2, 30);
    /* the relay waits: it measures the lag, it marks nothing */
    assert_true(wait_metric_eq(relay, "leased_relay_lag_rows", more, 30000));
    long end = child_proc_now_ms() + 30000;
    while (relay_proc_metric(relay, "leased_relay_lag_seconds") < 1.0 && child_proc_now_ms() < end)
        usleep(50000);
    double lag_s = relay_proc_metric(relay, "leased_relay_lag_seconds");
    assert_true(lag_s >= 1.0);
    assert_int_equal(relay_unpublished(&fx), more);
    http_resp_t *r = http_call(relay_proc_url(relay), "GET", "/readyz", NULL, NULL);
    assert_int_equal(r->status, 503);
    assert_string_equal(http_resp_str(r, "reason"), "broker_unreachable");
    http_resp_free(r);

    assert_true(testbroker_resume());
    long up_at = child_proc_now_ms();
    assert_true(relay_wait_sql(
        fx.http.db, "SELECT count(*) FROM lease.outbox WHERE published_at IS NULL", 0, 60000));
    long caught_up = child_proc_now_ms();
    assert_true(wait_metric_eq(relay, "leased_relay_broker_up", 1, 10000));
    assert_true(relay_proc_metric(relay, "leased_relay_broker_connects_total") >= 2);
    assert_true(collector_until(&col, fx.consumer, (size_t)(rows + more), 60000));
    collector_drain(&col, fx.consumer, 300);
    collector_check_exact(&col, &fx);
    collector_check_order(&col);
    assert_int_equal(col.n_duplicate, 0);
    fprintf(stderr,
            "broker restart while idle: down %ld ms, %d rows waited (lag %.1f s when measured), "
            "delivered %ld ms after the broker accepted connections again\n",
            up_at - down_at, more, lag_s, caught_up - up_at);
    assert_int_equal(relay_proc_stop(relay), 0);
    collector_free(&col);
}

static void restart_in_the_middle_of_a_flow(void **state)
{
    (void)state;
    int rows = relay_fill(&fx, "busy", 10, 2, 5, 30);
    collector_t col;
    collector_init(&col);
    relay_proc_t *relay =
        relay_proc_start(fx.http.db, (const char *[]){fx.exchange_env, "LEASE_RELAY_BATCH_SIZE=50",
                                                      "LEASE_RELAY_INSTANCE_ID=relay-busy",
                                                      "LEASE_RELAY_BACKOFF_MAX_MS=500", NULL});
    /* catch it mid-batch for certain: freeze the broker once messages
     * flow, wait until the relay sits in its delivery transaction waiting
     * for confirms, then stop the broker */
    assert_true(collector_until(&col, fx.consumer, 1, 30000));
    (void)relay_freeze_mid_batch(&fx, relay, "relay-busy", &rows);
    assert_true(testbroker_pause());
    assert_true(wait_metric_eq(relay, "leased_relay_broker_up", 0, 60000));
    long long waiting = relay_unpublished(&fx);
    assert_true(waiting > 0);
    assert_true(testbroker_resume());
    assert_true(relay_wait_sql(
        fx.http.db, "SELECT count(*) FROM lease.outbox WHERE published_at IS NULL", 0, 60000));
    assert_true(collector_until(&col, fx.consumer, (size_t)rows, 60000));
    collector_drain(&col, fx.consumer, 300);
    collector_check_exact(&col, &fx);
    collector_check_order(&col);
    assert_int_equal(col.n_stale, 0);
    fprintf(stderr,
            "broker restart mid-flow: %d rows, %lld waited for the broker, %zu duplicates "
            "dropped, %.0f batches failed\n",
            rows, waiting, col.n_duplicate, relay_proc_metric(relay, "leased_relay_batch_failures_total"));
    assert_int_equal(relay_proc_stop(relay), 0);
    collector_free(&col);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(restart_while_idle, setup_idle, teardown),
        cmocka_unit_test_setup_teardown(restart_in_the_middle_of_a_flow, setup_busy, teardown),
    };
    if (!testbroker_owned()) {
        fprintf(stderr, "relay_broker_restart: needs a broker the tests own "
                        "(LEASE_TEST_AMQP_URL is set)\n");
        return 77;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
