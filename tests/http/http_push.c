/*
 * http_push.c - lease loss pushed to the process doing the work, across
 * leased instances: `leasectl run` holds a lease through instance A while
 * an administrator force-releases or revokes it through instance B (two
 * leased on one database). The command must get SIGTERM through the watch
 * (A hears B's transaction on LISTEN lease_ended), long before renewal
 * could tell: with --ttl-ms 60000 the first renewal is due about 20 s after
 * the acquire, and each case proves no renewal happened before the
 * cancellation (audit) and that leasectl names the watch as the cause.
 *
 * Also: the same with instance A polling only (LEASE_WATCH_LISTEN=false),
 * and an ordinary release by another process of the same holder (no
 * notification: found by A's batched poll).
 *
 * On Valkey (LEASE_TEST_STORE=valkey, docs/backends.md "Contract tests on
 * both backends") both instances run on one redis-server: A hears B's
 * PUBLISH on lease:{leased}:ended (docs/backends.md "Watch on Valkey"),
 * whose subscribers are counted (PUBSUB NUMSUB: A and B, never the polling
 * instance); the audit read for renewals is the Stream lease:{leased}:audit.
 * An ordinary release publishes there too, so the release by another
 * process is pushed on Valkey rather than found by the poll.
 *
 * Latencies (the administrator's 200 -> the command's SIGTERM handler) are
 * printed, never asserted (docs/scaling.md reports them). The deadline of
 * each wait is only a guard against hanging.
 */
#include "exec_common.h"
#include "lease/client.h"

#define WORKFLOW "default"
#define TTL_MS "60000"
#define GUARD_MS 15000 /* < the first renewal (about TTL/3 = 20 s) */
#define ROUNDS 6

static http_fx_t fx;
static const char *worker_token, *admin_token;
static leased_proc_t *other; /* instance B */

static int group_setup(void **state)
{
    http_fx_open(&fx, state, "http_push");
    worker_token = http_fx_worker(&fx, "prn_push_worker");
    admin_token = http_fx_credential(&fx, "prn_push_admin", "*",
                                     "targets:force-release,targets:revoke,targets:read", true);
    http_fx_serve(&fx, NULL); /* instance A: LISTEN (the default) */
    other = http_fx_start_leased(&fx, NULL);
    assert_non_null(other);
    return 0;
}

static int group_teardown(void **state)
{
    assert_int_equal(leased_proc_stop(other), 0);
    return http_fx_teardown(state);
}

static proc_t run_on(const char *target, const char *url)
{
    const char *args[] = {"run",     "--tenant", TENANT,       "--program",  PROGRAM, "--namespace",
                          NAMESPACE, "--target", target,       "--actor",    ACTOR,   "--workflow",
                          WORKFLOW,  "--ttl-ms", TTL_MS,       "--grace-ms", "2000",  "--",
                          "sh",      "-c",       child_script, NULL};
    proc_t p = ctl_start(args, url, worker_token, NULL);
    if (!wait_file(&p, "env", 10000)) {
        char *err = proc_file(&p, "err");
        fail_msg("the command never started under run; stderr:\n%s", err ? err : "");
    }
    return p;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void report(const char *what, int64_t *ms, int n)
{
    qsort(ms, (size_t)n, sizeof *ms, cmp_i64);
    printf("%s: %d rounds, administrator's 200 -> SIGTERM: min %lld ms, median %lld ms, "
           "max %lld ms (",
           what, n, (long long)ms[0], (long long)ms[n / 2], (long long)ms[n - 1]);
    for (int i = 0; i < n; i++)
        printf("%s%lld", i ? " " : "", (long long)ms[i]);
    printf(")\n");
}

/* Waits for the command's SIGTERM; returns the wall time it recorded. */
static int64_t term_time(proc_t *run)
{
    if (!wait_file(run, "term", GUARD_MS)) {
        char *err = proc_file(run, "err");
        fail_msg("no SIGTERM within %d ms; leasectl said:\n%s", GUARD_MS, err ? err : "");
    }
    char *text = proc_file(run, "term");
    int64_t t = strtoll(text, NULL, 10);
    free(text);
    return t;
}

/* The command was cancelled because of the watch (exit 76, the cause in
 * leasectl's log) and no renewal happened before it. */
static void assert_cancelled_by_watch(proc_t *run, const char *lease_id, const char *state_name)
{
    assert_int_equal(proc_wait(run, 30000), 76);
    char *err = proc_file(run, "err");
    char want[160];
    snprintf(want, sizeof want, "watch: lease %s is %s", lease_id, state_name);
    if (!strstr(err, want))
        fail_msg("leasectl's stderr does not name the watch (%s):\n%s", want, err);
    free(err);
    /* lease.audit_events on Postgres, the audit Stream's entries on Valkey */
    assert_int_equal(http_fx_audit_count(&fx, (const char *[]){"lease_id", lease_id, "event_type",
                                                               "target_lease_renew", NULL}),
                     0);
    proc_cleanup(run);
}

/* On Valkey: how many connections subscribe to the channel the functions
 * publish ended leases on (each leased listening has one); -1 on
 * Postgres. */
static long long ended_subscribers(void)
{
    if (!fx.valkey)
        return -1;
    char channel[128];
    http_fx_valkey_key(channel, sizeof channel, "ended");
    const char *args[] = {"PUBSUB", "NUMSUB", channel, NULL};
    char *out = test_store_valkey_cli(&fx.vk, args); /* "<channel>\n<count>\n" */
    assert_non_null(out);
    char *nl = strchr(out, '\n');
    assert_non_null(nl);
    long long n = strtoll(nl + 1, NULL, 10);
    free(out);
    return n;
}

/* ROUNDS rounds: run through holder_url, force-release (even) or revoke
 * (odd) through admin_url; returns the latencies in ms. */
static void admin_rounds(const char *label, const char *holder_url, const char *admin_url,
                         int64_t *ms)
{
    lease_client_t *admin = lease_client_new(admin_url, admin_token);
    assert_non_null(admin);
    for (int i = 0; i < ROUNDS; i++) {
        char target[64];
        snprintf(target, sizeof target, "push-%s-%d", label, i);
        proc_t run = run_on(target, holder_url);
        char *lease_id = env_value(&run, "LEASE_ID");
        char *token = env_value(&run, "LEASE_FENCING_TOKEN");
        lease_identity_input_t id = {TENANT, PROGRAM, NAMESPACE, target, ACTOR, WORKFLOW, NULL};
        bool revoke = i % 2 == 1;
        lease_client_admin_t req = {id, lease_id, strtoll(token, NULL, 10), "push test",
                                    revoke ? "INC-PUSH" : NULL};
        lease_client_call_t call = {0};
        lease_result_t res;
        lease_code_t code = revoke ? lease_client_revoke(admin, &req, &call, &res)
                                   : lease_client_force_release(admin, &req, &call, &res);
        int64_t answered = lease_wall_now_ms();
        assert_int_equal(code, revoke ? LEASE_REVOKED : LEASE_RELEASED);
        ms[i] = term_time(&run) - answered;
        assert_cancelled_by_watch(&run, lease_id, revoke ? "revoked" : "released");
        free(lease_id);
        free(token);
    }
    lease_client_free(admin);
}

static void test_push_crosses_instances(void **state)
{
    (void)state;
    int64_t ms[ROUNDS];
    if (fx.valkey) /* A and B each subscribed to lease:{leased}:ended */
        assert_true(test_wait_until(10000, ended_subscribers() == 2));
    admin_rounds("listen", fx.base, leased_proc_url(other), ms);
    report("push across instances (LISTEN)", ms, ROUNDS);
}

static void test_polling_only_instance(void **state)
{
    (void)state;
    const char *env[] = {"LEASE_WATCH_LISTEN=false", NULL}; /* default poll: 1000 ms */
    leased_proc_t *polling = http_fx_start_leased(&fx, env);
    assert_non_null(polling);
    int64_t ms[ROUNDS];
    admin_rounds("poll", leased_proc_url(polling), leased_proc_url(other), ms);
    report("push across instances (polling only, LEASE_WATCH_POLL_MS=1000)", ms, ROUNDS);
    if (fx.valkey) /* the polling instance never subscribed: still A and B */
        assert_int_equal(ended_subscribers(), 2);
    assert_int_equal(leased_proc_stop(polling), 0);
}

/* Another process of the same holder (same credential and service
 * instance) releases the lease through B: on Postgres no notification is
 * sent for an ordinary release, A's batched poll finds it; on Valkey the
 * release publishes (docs/backends.md "Watch on Valkey"). */
static void test_release_by_another_process(void **state)
{
    (void)state;
    proc_t run = run_on("push-release", fx.base);
    char *lease_id = env_value(&run, "LEASE_ID");
    char *token = env_value(&run, "LEASE_FENCING_TOKEN");
    char *instance = env_value(&run, "LEASE_SERVICE_INSTANCE_ID");
    const char *args[] = {
        "release", "--tenant",   TENANT,         "--program",       PROGRAM, "--namespace",
        NAMESPACE, "--target",   "push-release", "--actor",         ACTOR,   "--workflow",
        WORKFLOW,  "--lease-id", lease_id,       "--fencing-token", token,   "--service-instance",
        instance,  NULL};
    json_t *answer = NULL;
    assert_int_equal(ctl(args, leased_proc_url(other), worker_token, NULL, &answer), 0);
    int64_t answered = lease_wall_now_ms();
    assert_string_equal(json_string_value(json_object_get(answer, "code")), "lease_released");
    json_decref(answer);
    int64_t ms = term_time(&run) - answered;
    printf("release by another process of the holder (%s): released -> SIGTERM %lld ms\n",
           fx.valkey ? "push" : "poll", (long long)ms);
    assert_cancelled_by_watch(&run, lease_id, "released");
    free(lease_id);
    free(token);
    free(instance);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_push_crosses_instances),
        cmocka_unit_test(test_polling_only_instance),
        cmocka_unit_test(test_release_by_another_process),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
