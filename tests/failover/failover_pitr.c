/*
 * failover_pitr.c - point-in-time recovery to an earlier moment, with
 * leased running throughout: a base backup and a WAL archive of the
 * primary; workers acknowledge acquisitions; the restore target is taken
 * while they run, and they go on acknowledging after it; the primary is
 * lost and the backup restored up to the target (recovery.signal,
 * recovery_target_lsn, recovery_target_action = promote) where leased's
 * multi-host URL finds it. The restored database knows every acquisition
 * acknowledged before the target and none of many after it, so it answers
 * sealed (the restore ends on a new timeline) until `leasectl recover`
 * raises every counter above everything acknowledged.
 */
#include "failover_drill.h"

static void test_point_in_time_restore_is_sealed_until_recovery(void **state)
{
    (void)state;
    int64_t t0 = drill_now_ns();
    testpair_t *pair = testpair_new();
    char *primary = testpair_url(pair, "primary", "postgres");
    char *restored = testpair_url(pair, "restored", "postgres");
    char *token = drill_credential(primary);
    testpair_run(pair, "basebackup", NULL);
    char *both = testpair_multi_url(pair, "primary,restored", "postgres");
    leased_proc_t *srv = leased_proc_start(both, drill_leased_env);
    const char *base = leased_proc_url(srv);
    pid_t pid = leased_proc_pid(srv);

    drill_t d;
    drill_start(&d, base, token);
    drill_wait_acks(&d, 100);

    /* the moment to restore to: every acquisition acknowledged before it
     * committed before this WAL position */
    int64_t target_ns = drill_now_ns();
    char *lsn = testpg_query_value(primary, "SELECT pg_current_wal_lsn()");
    assert_non_null(lsn);
    drill_set_phase(&d, DRILL_UNREPLICATED);
    drill_wait_acks(&d, 100);
    testpair_run(pair, "archive", NULL);

    testpair_run(pair, "kill", "primary");
    drill_set_phase(&d, DRILL_KILLED);
    drill_wait_connections_dropped(&d);
    d.promote_issued_ns = drill_now_ns();
    testpair_run(pair, "restore", lsn);
    drill_set_phase(&d, DRILL_PROMOTED);

    drill_wait_sealed(&d, 20);
    drill_wait_readyz(base, 503, "sealed");

    /* restored to that moment: everything acknowledged before it is there,
     * and acquisitions acknowledged after it are not */
    assert_int_equal(
        drill_missing_tokens(&d, restored, DRILL_STREAMING, DRILL_STREAMING, target_ns), 0);
    long lost = drill_missing_tokens(&d, restored, DRILL_UNREPLICATED, DRILL_UNREPLICATED, 0);
    assert_true(lost > 0);
    char *why = testpg_query_value(restored, "SELECT sealed_reason FROM lease.namespace_state "
                                             "WHERE sealed AND sealed_reason LIKE "
                                             "'timeline changed from 1 to 2%'");
    assert_non_null(why);
    free(why);
    assert_true(testpg_query_int(restored, "SELECT count(*) FROM lease.audit_events WHERE "
                                           "event_type = 'target_lease_alert' AND priority = "
                                           "'high' AND reason LIKE 'namespace sealed:%'") == 1);

    char *out = drill_recover_and_settle(&d, restored, "point-in-time restore drill", base, t0);
    assert_true(leased_proc_alive(srv));
    assert_int_equal(leased_proc_pid(srv), pid);
    long violations = drill_assert_sealed_until_recovery(&d, "after the restore");

    printf("drill pitr: acknowledged before the target %ld, after it %ld (lost by the restore "
           "%ld), refused sealed %ld, restore issued -> first sealed answer "
           "%.0f ms, acknowledged after recovery %ld, violations %ld, total %.1f s\n",
           d.acked[DRILL_STREAMING], d.acked[DRILL_UNREPLICATED], lost,
           drill_sum(&d, d.sealed, DRILL_STREAMING, DRILL_RECOVERED),
           drill_ms(d.promote_issued_ns, d.first_sealed_ns),
           drill_sum(&d, d.acked, DRILL_RECOVERING, DRILL_RECOVERED), violations,
           drill_ms(t0, drill_now_ns()) / 1000.0);
    fflush(stdout);

    assert_int_equal(leased_proc_stop(srv), 0);
    drill_free(&d);
    free(out);
    free(lsn);
    free(both);
    free(token);
    free(restored);
    free(primary);
    testpair_free(pair);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_point_in_time_restore_is_sealed_until_recovery),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
