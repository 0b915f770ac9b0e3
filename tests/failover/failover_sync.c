/*
 * failover_sync.c - the failover drill on synchronous replication
 * (synchronous_standby_names names the replica, synchronous_commit = on):
 * a commit is acknowledged only after the standby has flushed it, so when
 * the primary is killed and the replica promoted, no acknowledged
 * acquisition is lost -- every token acknowledged before the kill is a
 * lease the promoted database knows, and every counter is at least the
 * highest acknowledged token.
 *   - By default the namespace is still sealed on the new timeline
 *     (policy seal_on_timeline_change = true): leased cannot tell a
 *     synchronous standby from an asynchronous one, so it refuses until an
 *     operator runs `leasectl recover`, and the tokens after it are greater
 *     than everything acknowledged.
 *   - With seal_on_timeline_change = false (an operator who guarantees
 *     synchronous replication), the promoted database goes on deciding at
 *     once, and its tokens are greater than every acknowledged one.
 */
#include "failover_drill.h"

typedef struct sync_run {
    int64_t t0;
    drill_sync_pair_t p;
    leased_proc_t *srv;
    pid_t pid;
    drill_t d;
} sync_run_t;

/* Primary and synchronous standby, leased on both, workers acknowledging
 * acquisitions; then the primary killed and the replica promoted. */
static void run_until_promoted(sync_run_t *s, bool seal_on_timeline_change)
{
    s->t0 = drill_now_ns();
    drill_sync_pair_start(&s->p, seal_on_timeline_change);
    s->srv = leased_proc_start(s->p.both, drill_leased_env);
    s->pid = leased_proc_pid(s->srv);

    drill_start(&s->d, leased_proc_url(s->srv), s->p.token);
    drill_wait_acks(&s->d, 150);

    testpair_run(s->p.pair, "kill", "primary");
    drill_set_phase(&s->d, DRILL_KILLED);
    drill_wait_connections_dropped(&s->d);
    s->d.promote_issued_ns = drill_now_ns();
    testpair_run(s->p.pair, "promote", "replica");
    drill_set_phase(&s->d, DRILL_PROMOTED);

    /* nothing acknowledged was lost: the promoted database knows every
     * acknowledged lease, and no counter is below an acknowledged token */
    assert_int_equal(drill_missing_tokens(&s->d, s->p.replica, DRILL_STREAMING, DRILL_STREAMING, 0),
                     0);
    for (int id = 0; id < DRILL_IDENTITIES; id++)
        assert_true(drill_counter(s->p.replica, s->d.ids[id].target) >=
                    drill_token_between(&s->d, id, DRILL_STREAMING, DRILL_STREAMING, false));
}

/* After the workers stopped: no token reused or lowered, and every
 * identity's tokens acknowledged from phase `from` on are greater than
 * everything acknowledged before the kill. */
static void check_after(sync_run_t *s, drill_phase_t from)
{
    assert_true(leased_proc_alive(s->srv));
    assert_int_equal(leased_proc_pid(s->srv), s->pid);
    assert_int_equal(drill_violations(&s->d), 0);
    for (int id = 0; id < DRILL_IDENTITIES; id++) {
        json_int_t before = drill_token_between(&s->d, id, DRILL_STREAMING, DRILL_STREAMING, false);
        json_int_t after = drill_token_between(&s->d, id, from, DRILL_PHASES - 1, true);
        assert_true(before > 0);
        assert_true(after > before);
    }
}

static void run_free(sync_run_t *s)
{
    assert_int_equal(leased_proc_stop(s->srv), 0);
    drill_free(&s->d);
    drill_sync_pair_free(&s->p);
}

static void test_sync_standby_loses_nothing_and_seals_by_default(void **state)
{
    (void)state;
    sync_run_t s = {0};
    run_until_promoted(&s, true);
    const char *base = leased_proc_url(s.srv);

    drill_wait_sealed(&s.d, 20);
    drill_wait_readyz(base, 503, "sealed");
    char *why = testpg_query_value(s.p.replica, "SELECT sealed_reason FROM lease.namespace_state "
                                                "WHERE sealed AND sealed_reason LIKE "
                                                "'timeline changed from 1 to 2%'");
    assert_non_null(why);
    free(why);

    free(drill_recover_and_settle(&s.d, s.p.replica, "failover drill: synchronous standby promoted",
                                  base, s.t0));

    check_after(&s, DRILL_RECOVERED);
    assert_int_equal(drill_sum(&s.d, s.d.acked, DRILL_KILLED, DRILL_PROMOTED), 0);
    if (s.d.promoted_not_sealed)
        fprintf(stderr, "drill: %ld answers after promotion were not namespace_sealed, e.g. %s\n",
                s.d.promoted_not_sealed, s.d.promoted_not_sealed_example);
    assert_int_equal(s.d.promoted_not_sealed, 0);

    printf("drill sync (sealed): acknowledged before the kill %ld, lost 0, refused sealed "
           "%ld, promote issued -> first sealed answer %.0f ms, acknowledged after "
           "recovery %ld, total %.1f s\n",
           s.d.acked[DRILL_STREAMING],
           drill_sum(&s.d, s.d.sealed, DRILL_STREAMING, DRILL_RECOVERED),
           drill_ms(s.d.promote_issued_ns, s.d.first_sealed_ns),
           drill_sum(&s.d, s.d.acked, DRILL_RECOVERING, DRILL_RECOVERED),
           drill_ms(s.t0, drill_now_ns()) / 1000.0);
    fflush(stdout);
    run_free(&s);
}

static void test_sync_standby_without_timeline_seal_goes_on(void **state)
{
    (void)state;
    sync_run_t s = {0};
    run_until_promoted(&s, false);
    const char *base = leased_proc_url(s.srv);

    /* the promoted database decides at once, above everything acknowledged */
    drill_wait_readyz(base, 200, NULL);
    drill_wait_each_identity(&s.d, DRILL_KILLED, 5);
    drill_stop(&s.d);

    check_after(&s, DRILL_KILLED);
    assert_int_equal(drill_sum(&s.d, s.d.sealed, DRILL_STREAMING, DRILL_PHASES - 1), 0);
    assert_int_equal(testpg_query_int(s.p.replica, "SELECT sealed::int FROM lease.namespace_state"),
                     0);

    drill_print_phases(&s.d, s.t0);
    drill_print_answer_times(&s.d);
    printf("drill sync (seal_on_timeline_change = false): acknowledged before the kill %ld, "
           "lost 0, acknowledged after promotion %ld, sealed 0, kill -> replica accepts writes "
           "%.0f ms, replica accepts writes -> first acknowledged acquisition %.0f ms, total "
           "%.1f s\n",
           s.d.acked[DRILL_STREAMING], drill_sum(&s.d, s.d.acked, DRILL_KILLED, DRILL_PROMOTED),
           drill_ms(s.d.phase_ns[DRILL_KILLED], s.d.phase_ns[DRILL_PROMOTED]),
           drill_ms(s.d.phase_ns[DRILL_PROMOTED], s.d.first_ack_after_promotion_ns),
           drill_ms(s.t0, drill_now_ns()) / 1000.0);
    fflush(stdout);
    run_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sync_standby_loses_nothing_and_seals_by_default),
        cmocka_unit_test(test_sync_standby_without_timeline_seal_goes_on),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
