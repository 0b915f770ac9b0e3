/*
 * relay_volume.c - a larger backlog through one relay with publisher
 * confirms: every row arrives exactly once, in order per identity; the
 * throughput is printed (never asserted: the machine is shared).
 *
 * LEASE_TEST_RELAY_VOLUME_ROWS (default 12000, rounded to whole commits) and
 * LEASE_TEST_RELAY_VOLUME_BATCH (default: the relay's default, 500) vary the
 * run for measurements (docs/relay.md has the figures).
 */
#include "relay_common.h"

static relay_fx_t fx;

static int setup(void **state)
{
    (void)state;
    relay_fx_open(&fx, "relay_volume");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    relay_fx_close(&fx);
    return 0;
}

static void backlog_through_one_relay(void **state)
{
    (void)state;
    const char *want = getenv("LEASE_TEST_RELAY_VOLUME_ROWS");
    const char *batch = getenv("LEASE_TEST_RELAY_VOLUME_BATCH");
    int target_rows = want ? atoi(want) : 12000;
    int commits = target_rows / (20 * 2 * 30);
    if (commits < 1)
        commits = 1;
    long t0 = child_proc_now_ms();
    int rows = relay_fill(&fx, "vol", 20, 2, commits, 30);
    long t1 = child_proc_now_ms();
    char batch_env[64] = "LEASE_RELAY_BATCH_SIZE=500";
    if (batch)
        snprintf(batch_env, sizeof batch_env, "LEASE_RELAY_BATCH_SIZE=%s", batch);
    collector_t col;
    collector_init(&col);
    relay_proc_t *relay = relay_proc_start(
        fx.http.db, (const char *[]){fx.exchange_env, batch_env, "LEASE_LOG_LEVEL=info", NULL});
    long t2 = child_proc_now_ms();
    if (!relay_wait_sql(fx.http.db, "SELECT count(*) FROM lease.outbox WHERE published_at IS NULL",
                        0, 300000))
        relay_proc_dump_log(relay);
    long t3 = child_proc_now_ms();
    assert_true(collector_until(&col, fx.consumer, (size_t)rows, 120000));
    long t4 = child_proc_now_ms();
    collector_drain(&col, fx.consumer, 300);
    collector_check_exact(&col, &fx);
    collector_check_order(&col);
    assert_int_equal(col.n_duplicate, 0);
    double secs = (double)(t3 - t2) / 1000.0;
    fprintf(stderr,
            "volume: %d rows committed in %.1f s (%d fenced commits); relay (batch %s) marked "
            "them all published with confirms in %.2f s = %.0f messages/s; the consumer had "
            "them all %.2f s after the relay started; %.0f batches\n",
            rows, (double)(t1 - t0) / 1000.0, rows / 30, batch ? batch : "500", secs,
            secs > 0 ? rows / secs : 0.0, (double)(t4 - t2) / 1000.0,
            relay_proc_metric(relay, "leased_relay_batches_total"));
    assert_int_equal(relay_proc_stop(relay), 0);
    collector_free(&col);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(backlog_through_one_relay),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
