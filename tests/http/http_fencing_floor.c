/*
 * http_fencing_floor.c - the recovery floor that lives outside the
 * database (docs/operators.md, "Recovery" and "Under Patroni"):
 *
 *   - leased remembers the highest fencing token it has answered since it
 *     started and shows it on /metrics as leased_fencing_token_max;
 *   - after a promotion picks a member that never received the last
 *     recovery and the tokens handed out after it (simulated here on one
 *     database: the identity's counter lowered below them), a plain
 *     `leasectl recover` hands out a token at or below one already handed
 *     out (the hazard), while `leasectl recover --floor-from <leased>`
 *     raises the counter above everything that leased answered;
 *   - an unreachable --floor-from refuses before changing anything.
 *
 * Real parts: the harness's Postgres (or redis-server), leased over
 * loopback, leasectl as a child process.
 */
#include "http_common.h"

#include <sys/wait.h>

#include "free_port.h"

static http_fx_t fx;
static const char *worker; /* owned by fx */

static int setup(void **state)
{
    http_fx_open(&fx, state, "http_fencing_floor");
    worker = http_fx_worker(&fx, "prn_floor");
    http_fx_serve(&fx, NULL);
    return 0;
}

/* leased_fencing_token_max on base's /metrics; fails the test when absent. */
static long long token_max(const char *base)
{
    http_resp_t *r = call(base, "GET", "/metrics", NULL, NULL);
    assert_int_equal(r->status, 200);
    const char *m = strstr(r->body, "\nleased_fencing_token_max ");
    assert_non_null(m);
    long long v = strtoll(m + strlen("\nleased_fencing_token_max "), NULL, 10);
    http_resp_free(r);
    return v;
}

/* Acquires target and releases it at once; returns the token it had. */
static long long acquire_release(const char *target, int n)
{
    char rid[64];
    snprintf(rid, sizeof rid, "fl-a-%s-%d", target, n);
    json_t *held = acquire_lease(fx.base, worker, rid, target);
    long long token = json_integer_value(json_object_get(held, "fencing_token"));
    snprintf(rid, sizeof rid, "fl-r-%s-%d", target, n);
    http_resp_t *r = call_owned(fx.base, "POST", "/v1/leases/release", worker,
                                owner_body(rid, target, held));
    check_reply(r, 200, "lease_released", NULL);
    http_resp_free(r);
    json_decref(held);
    return token;
}

/* Runs leasectl recover with extra arguments (shell words) against the
 * store as its owner; returns the exit status and its stdout (heap). */
static int recover(const char *extra, char **out)
{
    char *url = fx.valkey ? strdup(fx.db) : testpg_url_as(fx.db, "postgres");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' recover --reason 'promotion lost writes (test)' %s "
                              "--database-url '%s'",
             LEASE_TEST_LEASECTL, extra, url);
    free(url);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, p);
    buf[n] = '\0';
    int st = pclose(p);
    *out = strdup(buf);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static void test_metrics_show_the_highest_token_answered(void **state)
{
    (void)state;
    /* nothing answered yet */
    assert_int_equal(token_max(fx.base), 0);
    long long max = 0;
    const char *targets[] = {"fl-m-1", "fl-m-2", "fl-m-3"};
    for (int round = 0; round < 3; round++)
        for (size_t i = 0; i <= (size_t)round; i++) {
            long long t = acquire_release(targets[i], round);
            if (t > max)
                max = t;
        }
    assert_true(max >= 3);
    assert_int_equal(token_max(fx.base), max);
    /* an inspect of an older, lower lease does not lower it */
    json_t *held = acquire_lease(fx.base, worker, "fl-m-held", "fl-m-3");
    long long held_token = json_integer_value(json_object_get(held, "fencing_token"));
    json_decref(held);
    assert_int_equal(token_max(fx.base), held_token > max ? held_token : max);
    json_decref(http_active_lease(fx.base, worker, "fl-m-3"));
    assert_int_equal(token_max(fx.base), held_token > max ? held_token : max);
}

/* Answers that carry leases without granting them count too: a second
 * leased on the same store that only lists, and a third that only renews
 * in a batch, each remembers the tokens its answers carried. */
static void test_list_and_batch_answers_count(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++)
        (void)acquire_release("fl-lb-2", i); /* its token will be 4 */
    json_t *a = acquire_lease(fx.base, worker, "fl-lb-a", "fl-lb-1");
    json_t *b = acquire_lease(fx.base, worker, "fl-lb-b", "fl-lb-2");
    long long top = json_integer_value(json_object_get(b, "fencing_token"));
    long long ta = json_integer_value(json_object_get(a, "fencing_token"));
    if (ta > top)
        top = ta;

    leased_proc_t *lister = http_fx_start_leased(&fx, NULL);
    assert_non_null(lister);
    assert_int_equal(token_max(leased_proc_url(lister)), 0);
    http_resp_t *r = call_owned(leased_proc_url(lister), "POST", "/v1/leases/list", worker,
                                list_body("owner"));
    check_reply(r, 200, "lease_listed", NULL);
    http_resp_free(r);
    /* at least the two held here (the list may carry other held leases) */
    assert_true(token_max(leased_proc_url(lister)) >= top);
    assert_int_equal(leased_proc_stop(lister), 0);

    leased_proc_t *renewer = http_fx_start_leased(&fx, NULL);
    assert_non_null(renewer);
    assert_int_equal(token_max(leased_proc_url(renewer)), 0);
    json_t *items = json_array();
    json_array_append_new(items, parse_owned(owner_body("fl-lb-ra", "fl-lb-1", a)));
    json_array_append_new(items, parse_owned(owner_body("fl-lb-rb", "fl-lb-2", b)));
    r = call_owned(leased_proc_url(renewer), "POST", "/v1/leases/renew-batch", worker,
                   dump(json_pack("{s:o}", "renewals", items)));
    assert_int_equal(r->status, 200);
    http_resp_free(r);
    assert_true(top >= 4);
    assert_int_equal(token_max(leased_proc_url(renewer)), top);
    assert_int_equal(leased_proc_stop(renewer), 0);
    json_decref(a);
    json_decref(b);
}

/* The fencing counter of target's lock (PostgreSQL). */
static long long counter_of(const char *target)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT fencing_counter FROM lease.locks WHERE target_id = '%s'", target);
    return testpg_query_int(fx.db, sql);
}

/* The member promoted lacks the writes: target's counter is back at 0. */
static void lose_writes(const char *target)
{
    char sql[1024];
    snprintf(sql, sizeof sql,
             "UPDATE lease.locks SET fencing_counter = 0, lease_id = NULL, "
             "fencing_token = NULL, owner_principal_id = NULL, owner_client_id = NULL, "
             "owner_credential_id = NULL, service_instance_id = NULL, acquired_at = NULL, "
             "renewed_at = NULL, expires_at = NULL, ttl_ms = NULL, maximum_lifetime_ms = NULL, "
             "execution_id = NULL, job_id = NULL, trace_id = NULL, request_id = NULL, "
             "metadata = NULL WHERE target_id = '%s' AND state = 'free'",
             target);
    assert_true(testpg_exec(fx.db, sql));
    assert_int_equal(counter_of(target), 0);
}

static void test_floor_from_keeps_tokens_above_what_leased_answered(void **state)
{
    (void)state;
    char *out = NULL;
    /* the identity exists before leader A's recovery (which raises the
     * counters there are), then tokens are handed out after it */
    (void)acquire_release("fl-x", 0);
    assert_int_equal(recover("", &out), 0);
    free(out);
    long long t = 0;
    for (int i = 0; i < 3; i++)
        t = acquire_release("fl-x", 10 + i);
    assert_true(t > 1000000000LL);

    /* the hazard: B lacks A's recovery; a plain recover hands out T again */
    lose_writes("fl-x");
    assert_int_equal(recover("", &out), 0);
    free(out);
    long long again = acquire_release("fl-x", 20);
    assert_true(again <= t);

    /* an unreachable instance refuses the recovery; nothing changes */
    lose_writes("fl-x");
    long long epoch = testpg_query_int(fx.db, "SELECT epoch FROM lease.namespace_state");
    long long recoveries = testpg_query_int(fx.db, "SELECT count(*) FROM lease.recoveries");
    char extra[512];
    snprintf(extra, sizeof extra, "--floor-from '%s' --floor-from 'http://127.0.0.1:%d'",
             fx.base, test_free_port());
    assert_int_equal(recover(extra, &out), LEASE_EXIT_UNAVAILABLE);
    assert_string_equal(out, "");
    free(out);
    /* a URL whose /metrics is not leased's (answered 400): refused too */
    snprintf(extra, sizeof extra, "--floor-from '%s/not-leased'", fx.base);
    assert_int_equal(recover(extra, &out), LEASE_EXIT_UNAVAILABLE);
    assert_string_equal(out, "");
    free(out);
    assert_int_equal(counter_of("fl-x"), 0);
    assert_int_equal(testpg_query_int(fx.db, "SELECT epoch FROM lease.namespace_state"), epoch);
    assert_int_equal(testpg_query_int(fx.db, "SELECT count(*) FROM lease.recoveries"),
                     recoveries);

    /* the floor from the leased that served: above everything it answered */
    long long seen = token_max(fx.base);
    assert_true(seen >= t);
    snprintf(extra, sizeof extra, "--floor-from '%s'", fx.base);
    assert_int_equal(recover(extra, &out), 0);
    char want[64];
    snprintf(want, sizeof want, "\"floor\":%lld", seen + 1);
    assert_non_null(strstr(out, want));
    free(out);
    long long next = acquire_release("fl-x", 30);
    assert_true(next > t);
    assert_true(next > seen);
}

/* On either backend: --floor-from with --floor takes the greater, and the
 * recovery's first token is above it. */
static void test_floor_from_and_floor_take_the_greater(void **state)
{
    (void)state;
    long long t = acquire_release("fl-y", 1);
    long long seen = token_max(fx.base);
    assert_true(seen >= t);
    char extra[512];
    /* past 2^32: on Valkey the rebind must choose an epoch above it */
    long long floor = seen + 10000000000LL;
    snprintf(extra, sizeof extra, "--floor-from '%s' --floor %lld", fx.base, floor);
    char *out = NULL;
    assert_int_equal(recover(extra, &out), 0);
    free(out);
    long long next = acquire_release("fl-y", 2);
    assert_true(next > floor);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metrics_show_the_highest_token_answered),
        cmocka_unit_test(test_list_and_batch_answers_count),
        cmocka_unit_test(test_floor_from_keeps_tokens_above_what_leased_answered),
        cmocka_unit_test(test_floor_from_and_floor_take_the_greater),
    };
    static const http_pg_only_t pg_only[] = {
        {"test_floor_from_keeps_tokens_above_what_leased_answered",
         "lowers a counter in lease.locks to simulate a member that lacks the writes"},
        {NULL, NULL},
    };
    return http_fx_run_group("http_fencing_floor", tests, sizeof tests / sizeof tests[0], setup,
                             http_fx_teardown, pg_only);
}
