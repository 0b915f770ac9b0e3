/*
 * failover_async.c - the failover drill of issue 8 on asynchronous
 * replication: a primary streaming to a replica made with pg_basebackup -R,
 * leased on one multi-host URL (target_session_attrs=read-write), workers
 * acquiring and releasing hot identities and recording every acknowledged
 * fencing token. The replica is stopped (it falls behind while the primary
 * keeps acknowledging), the primary killed (immediate shutdown), the
 * replica started and promoted: it lacks acquisitions that were
 * acknowledged, so it must never decide one. Asserted: no acknowledged
 * token reused or lowered; every acquisition answered after the promotion
 * and before recovery is 503 namespace_sealed; /readyz says
 * database_unreachable while no read-write database answers, then sealed; a
 * high-priority audit row and the metrics record it; leased never
 * restarts; `leasectl recover` on the promoted database unseals and every
 * identity's next token is greater than every token acknowledged before.
 */
#include "failover_drill.h"

static void test_async_failover_never_regresses_a_token(void **state)
{
    (void)state;
    int64_t t0 = drill_now_ns();
    testpair_t *pair = testpair_new();
    char *primary = testpair_url(pair, "primary", "postgres");
    char *replica = testpair_url(pair, "replica", "postgres");
    char *token = drill_credential(primary);
    testpair_run(pair, "replica", "async");
    char *both = testpair_multi_url(pair, "primary,replica", "postgres");
    leased_proc_t *srv = leased_proc_start(both, drill_leased_env);
    const char *base = leased_proc_url(srv);
    pid_t pid = leased_proc_pid(srv);

    drill_t d;
    drill_start(&d, base, token);
    drill_wait_acks(&d, 100);

    /* the replica stops: the primary acknowledges what it will never see */
    testpair_run(pair, "stop", "replica");
    drill_set_phase(&d, DRILL_UNREPLICATED);
    drill_wait_acks(&d, 100);

    testpair_run(pair, "kill", "primary");
    drill_set_phase(&d, DRILL_KILLED);
    /* readiness follows each phase: no read-write database now */
    drill_wait_readyz(base, 503, "database_unreachable");
    drill_wait_connections_dropped(&d);
    testpair_run(pair, "start", "replica");
    d.promote_issued_ns = drill_now_ns();
    testpair_run(pair, "promote", "replica");
    drill_set_phase(&d, DRILL_PROMOTED);

    /* sealed: refusals, readiness, metrics */
    drill_wait_sealed(&d, 20);
    drill_wait_readyz(base, 503, "sealed");
    assert_true(drill_wait_metric(base, "leased_namespace_sealed", 1) == 1);
    assert_true(drill_wait_metric(base, "leased_namespace_sealed_refusals_total", 20) >= 20);

    /* the promoted database really lacks acknowledged acquisitions (the
     * drill tested the dangerous case), and it records why it is sealed */
    long lost = drill_missing_tokens(&d, replica, DRILL_STREAMING, DRILL_UNREPLICATED, 0);
    int behind = 0; /* identities whose counter is below an acknowledged token */
    for (int id = 0; id < DRILL_IDENTITIES; id++)
        behind += drill_counter(replica, d.ids[id].target) <
                  drill_token_between(&d, id, DRILL_STREAMING, DRILL_UNREPLICATED, false);
    assert_true(lost > 0);
    assert_true(behind > 0);
    char *why = testpg_query_value(replica, "SELECT sealed_reason FROM lease.namespace_state "
                                            "WHERE sealed AND sealed_reason LIKE "
                                            "'timeline changed from 1 to 2%'");
    assert_non_null(why);
    free(why);
    assert_true(testpg_query_int(replica,
                                 "SELECT count(*) FROM lease.audit_events WHERE "
                                 "event_type = 'target_lease_alert' AND priority = "
                                 "'high' AND reason LIKE 'namespace sealed: timeline%'") == 1);

    /* recovery on the promoted database, leased still running */
    char *out = drill_recover_and_settle(
        &d, replica, "failover drill: replica promoted after primary loss", base, t0);
    assert_non_null(strstr(out, "\"epoch\""));
    /* leased carried all of it without a restart */
    assert_true(leased_proc_alive(srv));
    assert_int_equal(leased_proc_pid(srv), pid);
    long violations = drill_assert_sealed_until_recovery(&d, "after promotion");

    printf(
        "drill async: acknowledged before the kill %ld (streaming %ld, unreplicated %ld), "
        "lost by the replica %ld (identities behind %d), refused sealed %ld, other refusals %ld, "
        "promote issued -> first sealed answer %.0f ms, acknowledged after recovery %ld, "
        "violations %ld, conflicts %ld, released %ld, total %.1f s\n",
        d.acked[DRILL_STREAMING] + d.acked[DRILL_UNREPLICATED], d.acked[DRILL_STREAMING],
        d.acked[DRILL_UNREPLICATED], lost, behind,
        drill_sum(&d, d.sealed, DRILL_STREAMING, DRILL_RECOVERED),
        drill_sum(&d, d.other, DRILL_KILLED, DRILL_PROMOTED),
        drill_ms(d.promote_issued_ns, d.first_sealed_ns),
        drill_sum(&d, d.acked, DRILL_RECOVERING, DRILL_RECOVERED), violations, d.conflicts,
        d.released, drill_ms(t0, drill_now_ns()) / 1000.0);
    fflush(stdout);

    assert_int_equal(leased_proc_stop(srv), 0);
    drill_free(&d);
    free(out);
    free(both);
    free(token);
    free(replica);
    free(primary);
    testpair_free(pair);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_async_failover_never_regresses_a_token),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
