/*
 * http_run_wait.c - `leasectl run --wait-ms` end to end: the real leased,
 * the real leasectl binary (holder and waiter both), real commands.
 *
 *  (a) a waited acquire granted late in its wait holds and runs: another
 *      `run` holds the target for 2,000 ms, `run --ttl-ms 2000 --wait-ms
 *      3000` waits for it and runs its command past its own TTL, and exits
 *      with the command's status. Anchoring local authority at the first
 *      send (without the answer's waited_ms) started such a grant already
 *      expired: "renewal failed (lease_outcome_unknown) ... -517 ms of local
 *      authority left", the fresh lease released, exit 69.
 *  (b) the same at a larger scale: held 4,800 ms, --ttl-ms 5000 --wait-ms
 *      9000, and a command exiting 3 makes run exit 3.
 *  (c) --wait-ms beyond the service's maximum wait (LEASE_MAX_WAIT_MS) keeps
 *      acquiring until the wait is used up instead of being refused (400).
 *  (d) `run --request-id X` whose acquire an earlier process made (a replay)
 *      does not anchor its authority at its own send: the grant happened
 *      earlier by an unknown amount. Anchored at its send, run believed a
 *      lease granted 3 s before (TTL 4 s) had a full TTL left, renewed only
 *      after the service had expired it, and cancelled its command (76).
 */
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "exec_common.h"
#include "http_common.h"
#include "lease/clock.h"

#define PATIENCE_MS 30000

static http_fx_t fx;
static const char *worker_token; /* owned by fx */

/* The command: records its LEASE_* environment, works `seconds`, exits
 * with `status`. */
static void script(char *out, size_t n, const char *seconds, int status)
{
    snprintf(out, n,
             "env | grep '^LEASE_' > \"$TEST_DIR/env.tmp\" && mv \"$TEST_DIR/env.tmp\" "
             "\"$TEST_DIR/env\"\nsleep %s\nexit %d\n",
             seconds, status);
}

/* `leasectl run` on target of a command (script) against url. */
static proc_t run_start(const char *url, const char *target, const char *ttl_ms,
                        const char *wait_ms, const char *cmd)
{
    const char *args[] = {"run",     "--tenant", TENANT, "--program", PROGRAM, "--namespace",
                          NAMESPACE, "--target", target, "--actor",   ACTOR,   "--workflow",
                          "default", "--ttl-ms", ttl_ms, "--wait-ms", wait_ms, "--",
                          "sh",      "-c",       cmd,    NULL};
    return ctl_start(args, url, worker_token, NULL);
}

/* When the command wrote its env file (wall ms), or -1 if it never did. */
static int64_t command_started_at_ms(const proc_t *p)
{
    char path[128];
    snprintf(path, sizeof path, "%s/env", p->dir);
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    return (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
}

static void print_stderr(const proc_t *p, const char *who)
{
    char *err = proc_file(p, "err");
    printf("%s stderr:\n%s", who, err ? err : "");
    free(err);
}

/*
 * A holder runs `hold_s` seconds on target; a waiter (ttl_ms, wait_ms)
 * starts as soon as the holder holds, is granted late, runs its command
 * for `work_s` seconds (past its TTL) and must exit `status`.
 */
static void late_grant_runs(const char *url, const char *target, const char *hold_s,
                            const char *ttl_ms, const char *wait_ms, const char *work_s, int status,
                            int64_t min_late_ms)
{
    char hold_cmd[512], work_cmd[512];
    script(hold_cmd, sizeof hold_cmd, hold_s, 0);
    script(work_cmd, sizeof work_cmd, work_s, status);
    proc_t holder = run_start(url, target, "10000", "0", hold_cmd);
    if (!wait_file(&holder, "env", PATIENCE_MS)) {
        print_stderr(&holder, "holder");
        fail_msg("the holder's command never started");
    }
    int64_t t0 = lease_wall_now_ms();
    proc_t waiter = run_start(url, target, ttl_ms, wait_ms, work_cmd);
    int waiter_status = proc_wait(&waiter, PATIENCE_MS);
    int holder_status = proc_wait(&holder, PATIENCE_MS);
    int64_t started = command_started_at_ms(&waiter);
    bool ran = started >= 0;
    int64_t late_ms = ran ? started - t0 : -1;
    printf("late grant (held %s s; --ttl-ms %s --wait-ms %s): command started %lld ms after "
           "run (-1: never), run exited %d (command's status %d), holder exited %d\n",
           hold_s, ttl_ms, wait_ms, (long long)late_ms, waiter_status, status, holder_status);
    if (!ran || waiter_status != status)
        print_stderr(&waiter, "waiter");
    assert_int_equal(holder_status, 0);
    assert_true(ran);
    /* the grant really came late in the wait: after the holder's command */
    assert_true(late_ms >= min_late_ms);
    assert_int_equal(waiter_status, status);
    char *err = proc_file(&waiter, "err");
    assert_non_null(err);
    assert_null(strstr(err, "cannot hold lease"));
    assert_null(strstr(err, "command cancelled"));
    free(err);
    proc_cleanup(&holder);
    proc_cleanup(&waiter);
}

static void late_grant_in_a_short_wait_holds_and_runs(void **state)
{
    (void)state;
    late_grant_runs(fx.base, "wait-a", "2", "2000", "3000", "3", 0, 1500);
}

static void late_grant_in_a_long_wait_holds_and_runs(void **state)
{
    (void)state;
    late_grant_runs(fx.base, "wait-b", "4.8", "5000", "9000", "6", 3, 4300);
}

static void wait_beyond_the_service_maximum_keeps_acquiring(void **state)
{
    (void)state;
    /* a second leased on the same store whose maximum wait is 1 s */
    const char *env[] = {"LEASE_MAX_WAIT_MS=1000", NULL};
    leased_proc_t *short_wait = http_fx_start_leased(&fx, env);
    assert_non_null(short_wait);
    late_grant_runs(leased_proc_url(short_wait), "wait-c", "3", "2000", "6000", "1", 0, 2500);

    /* nobody frees the target within the wait: run gives up with the
     * conflict (75) once the wait is used up, not earlier */
    char hold_cmd[512], work_cmd[512];
    script(hold_cmd, sizeof hold_cmd, "6", 0);
    script(work_cmd, sizeof work_cmd, "0", 0);
    proc_t holder = run_start(fx.base, "wait-d", "10000", "0", hold_cmd);
    assert_true(wait_file(&holder, "env", PATIENCE_MS));
    int64_t t0 = lease_mono_now_ns();
    proc_t waiter = run_start(leased_proc_url(short_wait), "wait-d", "2000", "2500", work_cmd);
    int waiter_status = proc_wait(&waiter, PATIENCE_MS);
    int64_t waited_ms = (lease_mono_now_ns() - t0) / 1000000;
    printf("wait beyond the maximum, never freed: run exited %d after %lld ms\n", waiter_status,
           (long long)waited_ms);
    if (waiter_status != 75)
        print_stderr(&waiter, "waiter");
    assert_int_equal(waiter_status, 75);
    assert_true(waited_ms >= 2400);
    assert_false(wait_file(&waiter, "env", 0));
    assert_int_equal(proc_wait(&holder, PATIENCE_MS), 0);
    proc_cleanup(&holder);
    proc_cleanup(&waiter);
    assert_int_equal(leased_proc_stop(short_wait), 0);
}

static void replayed_request_id_of_an_earlier_process_is_renewed_first(void **state)
{
    (void)state;
    char first_cmd[512], work_cmd[512];
    script(first_cmd, sizeof first_cmd, "5", 0);
    script(work_cmd, sizeof work_cmd, "3", 0);
    const char *first_args[] = {"run",          "--tenant",
                                TENANT,         "--program",
                                PROGRAM,        "--namespace",
                                NAMESPACE,      "--target",
                                "replay-a",     "--actor",
                                ACTOR,          "--workflow",
                                "default",      "--ttl-ms",
                                "6000",         "--request-id",
                                "run-replay-1", "--service-instance",
                                "replay-host",  "--execution-id",
                                "replay-exec",  "--job-id",
                                "replay-job",   "--",
                                "sh",           "-c",
                                first_cmd,      NULL};
    /* the earlier process acquires, starts its command and dies (kill -9)
     * before its first renewal: the lease stays active until its TTL ends */
    proc_t first = ctl_start(first_args, fx.base, worker_token, NULL);
    assert_true(wait_file(&first, "env", PATIENCE_MS));
    int64_t granted = lease_mono_now_ns();
    kill(first.pid, SIGKILL);
    proc_wait(&first, PATIENCE_MS);
    lease_sleep_ms(3000 - (lease_mono_now_ns() - granted) /
                              1000000); /* 3 s of it left: a busy CI took more than 1 s to replay */

    const char *args[] = {"run",          "--tenant",
                          TENANT,         "--program",
                          PROGRAM,        "--namespace",
                          NAMESPACE,      "--target",
                          "replay-a",     "--actor",
                          ACTOR,          "--workflow",
                          "default",      "--ttl-ms",
                          "6000",         "--request-id",
                          "run-replay-1", "--service-instance",
                          "replay-host",  "--execution-id",
                          "replay-exec",  "--job-id",
                          "replay-job",   "--",
                          "sh",           "-c",
                          work_cmd,       NULL};
    proc_t p = ctl_start(args, fx.base, worker_token, NULL);
    int status = proc_wait(&p, PATIENCE_MS);
    printf("replayed --request-id of a process killed 3 s into a 6 s lease: run exited %d\n",
           status);
    if (status != 0)
        print_stderr(&p, "run");
    assert_int_equal(status, 0);
    proc_cleanup(&first);
    proc_cleanup(&p);
}

static int group_setup(void **state)
{
    http_fx_open(&fx, state, "run_wait");
    http_fx_serve(&fx, NULL);
    worker_token = http_fx_worker(&fx, "prn_run_wait");
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(late_grant_in_a_short_wait_holds_and_runs),
        cmocka_unit_test(late_grant_in_a_long_wait_holds_and_runs),
        cmocka_unit_test(wait_beyond_the_service_maximum_keeps_acquiring),
        cmocka_unit_test(replayed_request_id_of_an_earlier_process_is_renewed_first),
    };
    return cmocka_run_group_tests(tests, group_setup, http_fx_teardown);
}
