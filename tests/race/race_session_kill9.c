/*
 * race_session_kill9.c - the leased a session was kept alive through is
 * killed -9 while the session holds leases (issue 37). The session lives in
 * PostgreSQL, not in the process: it stays alive until its TTL runs out
 * (another holder is refused until then), then every lease in it is expired
 * for every path. Another principal takes each over through a second leased
 * with a greater fencing token; the fence refuses the old token; the dead
 * holder's keep-alive is lease_lost; the sweeper of the second leased
 * records the session expired and moves its leases' history.
 */
#include <signal.h>
#include <time.h>

#include "../http/http_common.h"

#define TTL_MS 2000
#define LEASES 3

static http_fx_t fx;
static const char *alice; /* holds the session */
static const char *bob;   /* takes over */

static int setup(void **state)
{
    http_fx_open(&fx, state, "race_session_kill9");
    alice = http_fx_worker(&fx, "prn_alice");
    bob = http_fx_worker(&fx, "prn_bob");
    return 0;
}

static http_resp_t *acquire_in(const char *base, const char *token, const char *rid,
                               const char *target, const char *session)
{
    json_t *o = parse_owned(acquire_body(rid, target));
    json_object_set_new(o, "ttl_ms", json_integer(TTL_MS));
    if (session)
        json_object_set_new(o, "session_id", json_string(session));
    return call_owned(base, "POST", "/v1/leases/acquire", token, dump(o));
}

static bool session_expired_by_db(const char *sid)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM lease.sessions WHERE session_id = '%s' AND expires_at <= now()",
             sid);
    return testpg_query_int(fx.db, sql) == 1;
}

static void test_killed_holder_loses_by_ttl(void **state)
{
    (void)state;
    leased_proc_t *doomed = leased_proc_start(fx.db, NULL);
    const char *base1 = leased_proc_url(doomed);
    http_resp_t *r = call_owned(base1, "POST", "/v1/sessions", alice,
                                dump(json_pack("{s:s, s:s, s:i}", "request_id", "req_k9_open",
                                               "service_instance_id", "inst_1", "ttl_ms", TTL_MS)));
    check_reply(r, 200, "lease_acquired", NULL);
    char *sid = strdup(
        json_string_value(json_object_get(json_object_get(r->json, "session"), "session_id")));
    http_resp_free(r);
    json_t *held[LEASES];
    for (int i = 0; i < LEASES; i++) {
        char rid[32], target[32];
        snprintf(rid, sizeof rid, "req_k9_a%d", i);
        snprintf(target, sizeof target, "k9_t%d", i);
        r = acquire_in(base1, alice, rid, target, sid);
        check_reply(r, 200, "lease_acquired", NULL);
        held[i] = json_deep_copy(lease_of(r));
        http_resp_free(r);
    }
    r = acquire_in(base1, alice, "req_k9_a_early", "k9_early", sid);
    check_reply(r, 200, "lease_acquired", NULL);
    http_resp_free(r);
    /* one keep-alive, then the process dies without a word */
    char path[256];
    snprintf(path, sizeof path, "/v1/sessions/%s/keepalive", sid);
    r = call(base1, "POST", path, alice, "{}");
    check_reply(r, 200, "lease_renewed", NULL);
    http_resp_free(r);
    leased_proc_signal(doomed, SIGKILL);
    assert_int_equal(leased_proc_wait(doomed, 10000), 128 + SIGKILL);
    leased_proc_free(doomed);

    /* another instance, sweeping often */
    const char *env[] = {"LEASE_SWEEP_INTERVAL_MS=300", NULL};
    http_fx_serve(&fx, env);
    /* the session outlives the process until its TTL: still held. The
     * answer is judged by the database's times, whichever the new
     * instance's start-up took: refused, or granted only at or after the
     * session's expiry */
    r = acquire_in(fx.base, bob, "req_k9_early", "k9_early", NULL);
    if (r->status == 200) {
        check_reply(r, 200, "lease_acquired", NULL);
        char q[512];
        snprintf(q, sizeof q,
                 "SELECT count(*) FROM lease.locks l, lease.sessions s WHERE l.target_id = "
                 "'k9_early' AND s.session_id = '%s' AND l.acquired_at >= s.expires_at",
                 sid);
        assert_int_equal(testpg_query_int(fx.db, q), 1);
    } else {
        check_reply(r, 409, "lease_conflict", NULL);
    }
    printf("an acquire right after the kill: %ld %s\n", r->status, http_resp_str(r, "code"));
    http_resp_free(r);
    assert_true(test_wait_until(TTL_MS + 10000, session_expired_by_db(sid)));

    /* expired by time: each lease is bob's with a greater token */
    for (int i = 0; i < LEASES; i++) {
        char rid[32], target[32];
        snprintf(rid, sizeof rid, "req_k9_b%d", i);
        snprintf(target, sizeof target, "k9_t%d", i);
        r = acquire_in(fx.base, bob, rid, target, NULL);
        check_reply(r, 200, "lease_acquired", NULL);
        long long old_token = json_integer_value(json_object_get(held[i], "fencing_token"));
        long long new_token = json_integer_value(json_object_get(lease_of(r), "fencing_token"));
        printf("k9_t%d: token %lld (killed holder) -> %lld (bob)\n", i, old_token, new_token);
        assert_true(new_token > old_token);
        http_resp_free(r);
        /* the old token is fenced off */
        char sql[768];
        snprintf(
            sql, sizeof sql,
            "BEGIN ISOLATION LEVEL SERIALIZABLE; SELECT lease.fence_check('{\"tenant_id\":\"%s\","
            "\"program_id\":\"%s\",\"target_namespace\":\"%s\",\"target_id\":\"%s\","
            "\"actor_name\":\"%s\",\"workflow_name\":\"default\"}'::jsonb, '%s', %lld); COMMIT",
            TENANT, PROGRAM, NAMESPACE, target, ACTOR,
            json_string_value(json_object_get(held[i], "lease_id")), old_token);
        assert_false(testpg_exec(fx.db, sql));
        /* the killed holder's lease ended expired, in history */
        snprintf(sql, sizeof sql,
                 "SELECT count(*) FROM lease.history WHERE lease_id = '%s' AND state = 'expired'",
                 json_string_value(json_object_get(held[i], "lease_id")));
        assert_int_equal(testpg_query_int(fx.db, sql), 1);
        json_decref(held[i]);
    }
    /* the dead holder's session cannot be revived */
    r = call(fx.base, "POST", path, alice, "{}");
    check_reply(r, 409, "lease_lost", NULL);
    http_resp_free(r);
    /* the sweeper records the session's end */
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM lease.sessions WHERE session_id = '%s' AND state = 'expired'",
             sid);
    assert_true(test_wait_until(10000, testpg_query_int(fx.db, sql) == 1));
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM lease.audit_events WHERE session_id = '%s' AND event_type = "
             "'session_expire'",
             sid);
    assert_int_equal(testpg_query_int(fx.db, sql), 1);
    free(sid);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_killed_holder_loses_by_ttl),
    };
    return cmocka_run_group_tests(tests, setup, http_fx_teardown);
}
