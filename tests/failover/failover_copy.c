/*
 * failover_copy.c - an older copy of the same database, on the same
 * timeline, with leased running throughout: a base backup of the primary
 * is taken while workers acknowledge acquisitions; they go on acknowledging
 * after it, and leased sweeps (which keeps the WAL position it saw); the
 * primary is lost and the backup is started as it is (no recovery.signal:
 * what a disk snapshot or a base backup started by hand brings back) where
 * leased's multi-host URL finds it. Same system identifier, same timeline,
 * same schema objects: nothing in the database tells it from the original.
 * leased's new sessions check the namespace with the position leased saw
 * before their first decision (lease.check_namespace), find the database
 * behind it, and seal: no acquisition is decided on the copy until
 * `leasectl recover` raises every counter above everything acknowledged.
 */
#include "failover_drill.h"

/* leased's sweeps (which keep the WAL position) run often here. */
static const char *const copy_leased_env[] = {"LEASE_RATE_LIMIT=100000/s", "LEASE_DB_POOL_SIZE=8",
                                              "LEASE_SWEEP_INTERVAL_MS=200", NULL};

/* leased_sweep_runs_total now (0 when absent). */
static long sweep_runs(const char *base)
{
    http_resp_t *r = http_call(base, "GET", "/metrics", NULL, NULL);
    const char *m = r && r->body ? strstr(r->body, "\nleased_sweep_runs_total ") : NULL;
    long n = m ? strtol(m + strlen("\nleased_sweep_runs_total "), NULL, 10) : 0;
    http_resp_free(r);
    return n;
}

static void test_older_copy_on_the_same_timeline_is_sealed(void **state)
{
    (void)state;
    int64_t t0 = drill_now_ns();
    testpair_t *pair = testpair_new();
    char *primary = testpair_url(pair, "primary", "postgres");
    char *restored = testpair_url(pair, "restored", "postgres");
    char *token = drill_credential(primary);
    char *both = testpair_multi_url(pair, "primary,restored", "postgres");
    leased_proc_t *srv = leased_proc_start(both, copy_leased_env);
    const char *base = leased_proc_url(srv);
    pid_t pid = leased_proc_pid(srv);

    drill_t d;
    drill_start(&d, base, token);
    drill_wait_acks(&d, 50);
    /* the copy: everything acknowledged so far is in it */
    int64_t copied_ns = drill_now_ns();
    testpair_run(pair, "basebackup", NULL);
    drill_set_phase(&d, DRILL_UNREPLICATED);
    drill_wait_acks(&d, 100);
    /* leased has swept since: it saw the primary's later position */
    long runs = sweep_runs(base);
    int64_t until = drill_now_ns() + (int64_t)DRILL_WAIT_MS * 1000000;
    while (sweep_runs(base) < runs + 2 && drill_now_ns() < until)
        drill_pause_ms(20);
    assert_true(sweep_runs(base) >= runs + 2);

    testpair_run(pair, "kill", "primary");
    drill_set_phase(&d, DRILL_KILLED);
    drill_wait_connections_dropped(&d);
    d.promote_issued_ns = drill_now_ns();
    testpair_run(pair, "copy", NULL);
    drill_set_phase(&d, DRILL_PROMOTED);

    drill_wait_sealed(&d, 20);
    drill_wait_readyz(base, 503, "sealed");

    /* the copy holds what was acknowledged before it was taken, not what
     * was acknowledged after */
    assert_int_equal(
        drill_missing_tokens(&d, restored, DRILL_STREAMING, DRILL_STREAMING, copied_ns), 0);
    long lost = drill_missing_tokens(&d, restored, DRILL_UNREPLICATED, DRILL_UNREPLICATED, 0);
    assert_true(lost > 0);
    /* same cluster, same timeline: only the position told */
    assert_int_equal(testpg_query_int(restored, "SELECT count(*) FROM lease.namespace_state WHERE "
                                                "sealed AND sealed_reason LIKE '%older copy%'"),
                     1);

    char *out = drill_recover_and_settle(&d, restored, "older copy drill", base, t0);
    assert_true(leased_proc_alive(srv));
    assert_int_equal(leased_proc_pid(srv), pid);
    long violations = drill_assert_sealed_until_recovery(&d, "on the copy");

    printf("drill copy: acknowledged before the copy %ld, after it %ld (lost by the copy %ld), "
           "refused sealed %ld, copy started -> first sealed answer %.0f ms, acknowledged after "
           "recovery %ld, violations %ld, total %.1f s\n",
           d.acked[DRILL_STREAMING], d.acked[DRILL_UNREPLICATED], lost,
           drill_sum(&d, d.sealed, DRILL_STREAMING, DRILL_RECOVERED),
           drill_ms(d.promote_issued_ns, d.first_sealed_ns),
           drill_sum(&d, d.acked, DRILL_RECOVERING, DRILL_RECOVERED), violations,
           drill_ms(t0, drill_now_ns()) / 1000.0);
    fflush(stdout);

    assert_int_equal(leased_proc_stop(srv), 0);
    drill_free(&d);
    free(out);
    free(both);
    free(token);
    free(restored);
    free(primary);
    testpair_free(pair);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_older_copy_on_the_same_timeline_is_sealed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
