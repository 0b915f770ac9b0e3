/*
 * failover_frozen.c - the primary hangs instead of dying: its host freezes
 * (a stopped VM, a host behind a route that drops packets), so connecting
 * to it neither succeeds nor fails: the kernel queues the connection and
 * nobody answers. leased is on the multi-host URL of the primary and its
 * synchronous standby (target_session_attrs=read-write); the standby is
 * promoted (seal_on_timeline_change = false, an operator who guarantees
 * synchronous replication), the frozen primary stays first in the URL.
 *
 * Asserted: every request, before and after the promotion, is answered
 * within its deadline (plus the cancel grace once a statement was sent, and
 * a margin), never left hanging; leased reaches the promoted standby (every
 * identity is acquired again) although the first host of its URL never
 * answers; no acknowledged token reused or lowered, nothing acknowledged
 * lost. Before the fix (a connection attempt gave up on the whole URL when
 * its first host did not answer within the connect timeout) leased never
 * tried the second host: every request after the promotion failed.
 */
/* Waiting until leased has used every session it held to the frozen
 * primary takes 20 answers that each wait out a 5 s deadline, 4 at a time:
 * 31 s measured. */
#define DRILL_WAIT_MS 90000
#include "failover_drill.h"


/* The threads of process pid now (/proc), -1 when unreadable. */
static long threads_of(pid_t pid)
{
    char path[64], line[128];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long n = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %ld", &n) == 1)
            break;
    if (f)
        fclose(f);
    return n;
}

static void test_frozen_primary_fails_over_to_the_standby(void **state)
{
    (void)state;
    int64_t t0 = drill_now_ns();
    testpair_t *pair = testpair_new();
    char *primary = testpair_url(pair, "primary", "postgres");
    char *replica = testpair_url(pair, "replica", "postgres");
    char *token = drill_credential(primary);
    assert_true(testpg_exec(primary, "UPDATE lease.policy SET seal_on_timeline_change = false"));
    testpair_run(pair, "replica", "sync");
    char *both = testpair_multi_url(pair, "primary,replica", "postgres");
    leased_proc_t *srv = leased_proc_start(both, drill_leased_env);
    const char *base = leased_proc_url(srv);
    pid_t pid = leased_proc_pid(srv);

    drill_t d;
    drill_start(&d, base, token);
    drill_wait_acks(&d, 100);

    long threads_before = threads_of(pid);
    testpair_run(pair, "freeze", "primary");
    drill_set_phase(&d, DRILL_KILLED);
    /* a failover manager promotes only after its own timeout; meanwhile
     * every session leased held to the frozen primary meets the silence */
    drill_wait_connections_dropped(&d);
    d.promote_issued_ns = drill_now_ns();
    testpair_run(pair, "promote", "replica");
    drill_set_phase(&d, DRILL_PROMOTED);

    /* nothing acknowledged was lost (synchronous standby) */
    assert_int_equal(drill_missing_tokens(&d, replica, DRILL_STREAMING, DRILL_STREAMING, 0), 0);

    drill_wait_each_identity(&d, DRILL_PROMOTED, 5);
    drill_stop(&d);

    assert_true(leased_proc_alive(srv));
    assert_int_equal(leased_proc_pid(srv), pid);
    /* Every statement that met the silence asked for a cancel, on a
     * thread that waits on the frozen server for as long as it stays
     * frozen (it still is). Only statements already sent meet it: a
     * session given up is connected again to the next host, so there are
     * at most as many such threads as pooled sessions, never one per
     * request that timed out. */
    long threads_after = threads_of(pid);
    printf("leased threads: %ld before the freeze, %ld with the primary frozen\n", threads_before,
           threads_after);
    assert_true(threads_before > 0);
    assert_true(threads_after <= threads_before + DRILL_POOL_SIZE + 2);
    long violations = drill_violations(&d);
    assert_int_equal(violations, 0);
    for (int id = 0; id < DRILL_IDENTITIES; id++) {
        json_int_t before = drill_token_between(&d, id, DRILL_STREAMING, DRILL_STREAMING, false);
        json_int_t after = drill_token_between(&d, id, DRILL_PROMOTED, DRILL_PHASES - 1, true);
        assert_true(before > 0);
        assert_true(after > before);
    }

    drill_print_phases(&d, t0);
    drill_print_answer_times(&d);
    printf("drill frozen primary: acknowledged before the freeze %ld, lost 0, acknowledged after "
           "promotion %ld, standby accepts writes -> first acknowledged acquisition %.0f ms, "
           "violations %ld, total %.1f s\n",
           d.acked[DRILL_STREAMING], drill_sum(&d, d.acked, DRILL_PROMOTED, DRILL_PHASES - 1),
           drill_ms(d.phase_ns[DRILL_PROMOTED], d.first_ack_after_promotion_ns), violations,
           drill_ms(t0, drill_now_ns()) / 1000.0);
    fflush(stdout);

    assert_int_equal(leased_proc_stop(srv), 0);
    testpair_run(pair, "kill", "primary");
    drill_free(&d);
    free(both);
    free(token);
    free(replica);
    free(primary);
    testpair_free(pair);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frozen_primary_fails_over_to_the_standby),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
