/*
 * relay_two.c - two relays on one outbox:
 *  1. running freely side by side: every row published exactly once (no
 *     failure, so no duplicate at all), order per identity kept;
 *  2. the identities one relay holds mid-batch wait for it: the other
 *     relay delivers every other identity and none of the held ones (not
 *     even their rows the holder did not claim); both end up publishing;
 *  3. a relay frozen mid-batch (SIGSTOP) loses its claim when Postgres
 *     ends its idle transaction; the other relay delivers everything; the
 *     frozen one, thawed, records nothing it did not deliver.
 * To catch a relay mid-batch for certain the broker is frozen for a moment:
 * no other relay test runs meanwhile (RESOURCE_LOCK rabbit_broker,
 * tests/CMakeLists.txt).
 */
#include "relay_common.h"

static relay_fx_t fx;

static int setup_free(void **state)
{
    (void)state;
    relay_fx_open(&fx, "relay_two_free");
    return 0;
}

static int setup_held(void **state)
{
    (void)state;
    relay_fx_open(&fx, "relay_two_held");
    return 0;
}

static int setup_frozen(void **state)
{
    (void)state;
    relay_fx_open(&fx, "relay_two_frozen");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    /* a test that failed with the broker frozen must not leave it so */
    (void)testbroker_thaw();
    relay_fx_close(&fx);
    return 0;
}

static relay_proc_t *start_relay(const char *instance, const char *batch,
                                 const char *confirm_timeout)
{
    char inst[96], b[64], ct[80];
    snprintf(inst, sizeof inst, "LEASE_RELAY_INSTANCE_ID=%s", instance);
    snprintf(b, sizeof b, "LEASE_RELAY_BATCH_SIZE=%s", batch);
    snprintf(ct, sizeof ct, "LEASE_RELAY_CONFIRM_TIMEOUT_MS=%s", confirm_timeout);
    return relay_proc_start(fx.http.db, (const char *[]){fx.exchange_env, inst, b, ct, NULL});
}

static long long published_by(const char *instance)
{
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM lease.outbox WHERE published_by = '%s'",
             instance);
    return testpg_query_int(fx.http.db, sql);
}

static void collect_all(collector_t *col, int rows)
{
    assert_true(relay_wait_sql(
        fx.http.db, "SELECT count(*) FROM lease.outbox WHERE published_at IS NULL", 0, 120000));
    assert_true(collector_until(col, fx.consumer, (size_t)rows, 60000));
    collector_drain(col, fx.consumer, 300);
    collector_check_exact(col, &fx);
    collector_check_order(col);
    assert_int_equal(col->n_stale, 0);
}

static void two_relays_side_by_side(void **state)
{
    (void)state;
    int rows = relay_fill(&fx, "free", 20, 2, 3, 25);
    collector_t col;
    collector_init(&col);
    relay_proc_t *a = start_relay("relay-a", "50", "60000");
    relay_proc_t *b = start_relay("relay-b", "50", "60000");
    collect_all(&col, rows);
    assert_int_equal(col.n_duplicate, 0); /* nothing failed: no row published twice */
    long long by_a = published_by("relay-a"), by_b = published_by("relay-b");
    assert_int_equal(by_a + by_b, rows);
    fprintf(stderr, "side by side: %d rows, relay-a published %lld, relay-b %lld\n", rows, by_a,
            by_b);
    assert_int_equal(relay_proc_stop(a), 0);
    assert_int_equal(relay_proc_stop(b), 0);
    collector_free(&col);
}

/* Stops relay p (SIGSTOP) while it holds identities mid-batch (caught there
 * by freezing the broker a moment); returns its backend pid. */
static long long stop_mid_batch(relay_proc_t *p, const char *instance, int *rows)
{
    long long pid = relay_freeze_mid_batch(&fx, p, instance, rows);
    relay_proc_signal(p, SIGSTOP);
    assert_true(testbroker_thaw());
    return pid;
}

/* Targets whose identity lock the backend pid holds, as an SQL list. */
static char *held_targets(long long pid)
{
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT string_agg(quote_literal(l.target_id), ',') FROM lease.locks l JOIN pg_locks "
             "k ON k.locktype = 'advisory' AND k.classid = 1819042146 AND "
             "k.objid = hashtext(l.lock_key)::oid AND k.objsubid = 2 WHERE k.pid = %lld",
             pid);
    char *list = testpg_query_value(fx.http.db, sql);
    assert_non_null(list);
    return list;
}

static void held_identities_wait_for_their_holder(void **state)
{
    (void)state;
    int rows = relay_fill(&fx, "held", 12, 2, 3, 25);
    collector_t col;
    collector_init(&col);
    relay_proc_t *a = start_relay("relay-a", "40", "120000");
    long long pid = stop_mid_batch(a, "relay-a", &rows);
    char *held = held_targets(pid);
    char sql[1024];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM lease.outbox o JOIN lease.locks l USING (lock_key) WHERE "
             "l.target_id NOT IN (%s) AND o.published_at IS NULL",
             held);
    relay_proc_t *b = start_relay("relay-b", "40", "60000");
    /* b delivers every identity a does not hold ... */
    if (!relay_wait_sql(fx.http.db, sql, 0, 60000))
        relay_proc_dump_log(b);
    assert_int_equal(testpg_query_int(fx.http.db, sql), 0);
    /* ... and none that a holds, not even rows a did not claim */
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM lease.outbox o JOIN lease.locks l USING (lock_key) WHERE "
             "l.target_id IN (%s) AND o.published_by = 'relay-b'",
             held);
    assert_int_equal(testpg_query_int(fx.http.db, sql), 0);
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM lease.outbox o JOIN lease.locks l USING (lock_key) WHERE "
             "l.target_id IN (%s) AND o.published_at IS NULL",
             held);
    assert_true(testpg_query_int(fx.http.db, sql) > 0);
    relay_proc_signal(a, SIGCONT);
    collect_all(&col, rows);
    assert_int_equal(col.n_duplicate, 0);
    assert_true(published_by("relay-a") > 0);
    assert_true(published_by("relay-b") > 0);
    fprintf(stderr, "held: %d rows, relay-a published %lld, relay-b %lld\n", rows,
            published_by("relay-a"), published_by("relay-b"));
    assert_int_equal(relay_proc_stop(a), 0);
    assert_int_equal(relay_proc_stop(b), 0);
    free(held);
    collector_free(&col);
}

static void a_frozen_relay_loses_its_claim(void **state)
{
    (void)state;
    int rows = relay_fill(&fx, "frozen", 6, 2, 2, 25);
    collector_t col;
    collector_init(&col);
    /* confirm timeout 500 ms: Postgres ends an idle claim after 3 x 500 + 5000 ms */
    relay_proc_t *a = start_relay("relay-a", "40", "500");
    long long pid = stop_mid_batch(a, "relay-a", &rows);
    long long before = published_by("relay-a");
    relay_proc_t *b = start_relay("relay-b", "40", "60000");
    /* a's session is ended by the server; b delivers everything */
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM pg_stat_activity WHERE pid = %lld", pid);
    assert_true(relay_wait_sql(fx.http.db, sql, 0, 60000));
    collect_all(&col, rows);
    /* thawed, a finds its transaction gone: it recorded nothing more */
    relay_proc_signal(a, SIGCONT);
    assert_true(relay_wait_metric(a, "leased_relay_batch_failures_total", 1, 30000));
    assert_int_equal(published_by("relay-a"), before);
    assert_int_equal(published_by("relay-a") + published_by("relay-b"), rows);
    collector_drain(&col, fx.consumer, 300);
    collector_check_exact(&col, &fx);
    fprintf(stderr, "frozen relay: %d rows, %zu duplicates dropped\n", rows, col.n_duplicate);
    assert_int_equal(relay_proc_stop(a), 0);
    assert_int_equal(relay_proc_stop(b), 0);
    collector_free(&col);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(two_relays_side_by_side, setup_free, teardown),
        cmocka_unit_test_setup_teardown(held_identities_wait_for_their_holder, setup_held,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_frozen_relay_loses_its_claim, setup_frozen, teardown),
    };
    if (!testbroker_owned()) {
        fprintf(stderr, "relay_two: needs a broker the tests own (LEASE_TEST_AMQP_URL is set)\n");
        return 77;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
