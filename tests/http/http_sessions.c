/*
 * http_sessions.c - sessions over HTTP against the real service and
 * PostgreSQL (docs/api.md, "Sessions"; docs/sql-api.md, "Sessions"):
 *
 *   - a session opened, three leases acquired in it, kept alive by the
 *     session's keep-alive alone past their own TTL;
 *   - another principal's keep-alive and close refused (409 lease_lost),
 *     nothing changed;
 *   - close ends every lease in it: each released (GET answers it
 *     released), each with its history row;
 *   - a frozen holder (no keep-alive) loses every lease of its session at
 *     the session's TTL: another client takes one over with a greater
 *     token, and lease.fence_check refuses the old token;
 *   - a revoked credential's session stops as its leases do: within the
 *     credential cache window (LEASE_CREDENTIAL_CACHE_MS, 2 s by default)
 *     its keep-alive is refused 401 invalid_credential, so the session
 *     runs out at its TTL and its lease is taken over with a greater token.
 */
#include "http_common.h"

#include <time.h>

static http_fx_t fx;
static const char *alice; /* holds the sessions */
static const char *bob;   /* another principal of the same tenant */
static const char *carol; /* a credential revoked while its session is open */
static char carol_id[64];

/* Sessions and leases of 1.5 s: the policy's minimum is 1 s, exclusive. */
#define TTL_MS 1500

static int setup(void **state)
{
    http_fx_open(&fx, state, "http_sessions");
    alice = http_fx_worker(&fx, "prn_alice");
    bob = http_fx_worker(&fx, "prn_bob");
    carol = http_fx_credential_spec(&fx,
                                    &(leased_cred_spec_t){.principal = "prn_carol",
                                                          .tenant = TENANT,
                                                          .program = PROGRAM,
                                                          .capabilities = WORKER_CAPS},
                                    carol_id);
    http_fx_serve(&fx, NULL);
    return 0;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* Opens a session of token's; returns its id (heap). */
static char *open_session_of(const char *token, const char *principal, const char *request_id)
{
    http_resp_t *r = call_owned(fx.base, "POST", "/v1/sessions", token,
                                dump(json_pack("{s:s, s:s, s:i}", "request_id", request_id,
                                               "service_instance_id", "inst_1", "ttl_ms", TTL_MS)));
    check_reply(r, 200, "lease_acquired", NULL);
    json_t *s = json_object_get(r->json, "session");
    assert_true(json_is_object(s));
    assert_string_equal(json_string_value(json_object_get(s, "state")), "open");
    assert_string_equal(json_string_value(json_object_get(s, "owner_principal_id")), principal);
    assert_string_equal(json_string_value(json_object_get(s, "tenant_id")), TENANT);
    assert_int_equal(json_integer_value(json_object_get(s, "ttl_ms")), TTL_MS);
    char *id = strdup(json_string_value(json_object_get(s, "session_id")));
    http_resp_free(r);
    return id;
}

/* Opens a session of alice; returns its id (heap). */
static char *open_session(const char *request_id)
{
    return open_session_of(alice, "prn_alice", request_id);
}

/* An acquire of target by token in session (NULL: none); the reply. */
static http_resp_t *acquire_in(const char *token, const char *request_id, const char *target,
                               const char *session)
{
    json_t *o = parse_owned(acquire_body(request_id, target));
    json_object_set_new(o, "ttl_ms", json_integer(TTL_MS));
    if (session)
        json_object_set_new(o, "session_id", json_string(session));
    return call_owned(fx.base, "POST", "/v1/leases/acquire", token, dump(o));
}

/* A session call on /v1/sessions/{id}/{verb}. */
static http_resp_t *session_call(const char *token, const char *id, const char *verb,
                                 const char *body)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/sessions/%s/%s", id, verb);
    return call(fx.base, "POST", path, token, body);
}

/* The state GET /v1/leases/{lease_id} answers for lease (heap). */
static char *state_of(json_t *lease)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/leases/%s",
             json_string_value(json_object_get(lease, "lease_id")));
    http_resp_t *r = call(fx.base, "GET", path, alice, NULL);
    check_reply(r, 200, "lease_inspected", NULL);
    char *state = strdup(json_string_value(json_object_get(lease_of(r), "state")));
    http_resp_free(r);
    return state;
}

static void test_session_keeps_closes(void **state)
{
    (void)state;
    char *sid = open_session("req_open_1");
    const char *targets[] = {"sess_t1", "sess_t2", "sess_t3"};
    json_t *leases[3];
    for (int i = 0; i < 3; i++) {
        char rid[32];
        snprintf(rid, sizeof rid, "req_acq_s%d", i);
        http_resp_t *a = acquire_in(alice, rid, targets[i], sid);
        check_reply(a, 200, "lease_acquired", NULL);
        leases[i] = json_deep_copy(lease_of(a));
        assert_string_equal(json_string_value(json_object_get(leases[i], "session_id")), sid);
        http_resp_free(a);
    }

    /* the keep-alive alone keeps them: twice their TTL, no renewal */
    for (int i = 0; i < 10; i++) {
        sleep_ms(300);
        http_resp_t *k = session_call(alice, sid, "keepalive", "{}");
        check_reply(k, 200, "lease_renewed", NULL);
        http_resp_free(k);
    }
    for (int i = 0; i < 3; i++) {
        char *st = state_of(leases[i]);
        assert_string_equal(st, "active");
        free(st);
    }

    /* another principal may neither keep it alive nor close it */
    http_resp_t *k = session_call(bob, sid, "keepalive", "{}");
    check_reply(k, 409, "lease_lost", NULL);
    http_resp_free(k);
    http_resp_t *c = session_call(bob, sid, "close", "{\"request_id\":\"req_close_bob\"}");
    check_reply(c, 409, "lease_lost", NULL);
    http_resp_free(c);
    /* nor acquire in it */
    http_resp_t *a = acquire_in(bob, "req_acq_bob", "sess_t9", sid);
    check_reply(a, 409, "lease_lost", NULL);
    http_resp_free(a);

    /* close ends every lease in it, each with its history row */
    c = session_call(alice, sid, "close", "{\"request_id\":\"req_close_1\"}");
    check_reply(c, 200, "lease_released", NULL);
    assert_int_equal(http_resp_int(c, "leases_ended"), 3);
    assert_true(json_is_false(json_object_get(c->json, "more")));
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(c->json, "session"), "state")), "closed");
    http_resp_free(c);
    /* repeated: the same answer, replayed */
    c = session_call(alice, sid, "close", "{\"request_id\":\"req_close_1\"}");
    check_reply(c, 200, "lease_released", NULL);
    assert_true(json_is_true(json_object_get(c->json, "replayed")));
    http_resp_free(c);
    for (int i = 0; i < 3; i++) {
        char *st = state_of(leases[i]);
        assert_string_equal(st, "released");
        free(st);
        char sql[256];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM lease.history WHERE lease_id = '%s'",
                 json_string_value(json_object_get(leases[i], "lease_id")));
        assert_int_equal(testpg_query_int(fx.db, sql), 1);
        json_decref(leases[i]);
    }
    /* a closed session keeps nothing alive */
    k = session_call(alice, sid, "keepalive", "{}");
    check_reply(k, 409, "lease_lost", NULL);
    http_resp_free(k);
    free(sid);
}

static void test_frozen_holder_loses_its_leases(void **state)
{
    (void)state;
    char *sid = open_session("req_open_2");
    http_resp_t *a = acquire_in(alice, "req_acq_f1", "frozen_t1", sid);
    check_reply(a, 200, "lease_acquired", NULL);
    json_t *old = json_deep_copy(lease_of(a));
    http_resp_free(a);
    a = acquire_in(alice, "req_acq_f2", "frozen_t2", sid);
    check_reply(a, 200, "lease_acquired", NULL);
    http_resp_free(a);

    /* held, then frozen: no keep-alive; bob waits out the session's TTL */
    a = acquire_in(bob, "req_acq_bob_early", "frozen_t1", NULL);
    check_reply(a, 409, "lease_conflict", NULL);
    http_resp_free(a);
    sleep_ms(TTL_MS + 300);
    a = acquire_in(bob, "req_acq_bob_late", "frozen_t1", NULL);
    check_reply(a, 200, "lease_acquired", NULL);
    json_t *taken = lease_of(a);
    long long old_token = json_integer_value(json_object_get(old, "fencing_token"));
    long long new_token = json_integer_value(json_object_get(taken, "fencing_token"));
    assert_true(new_token > old_token);

    /* the fence refuses the frozen holder's token, accepts the new one */
    char sql[512];
    snprintf(sql, sizeof sql,
             "BEGIN ISOLATION LEVEL SERIALIZABLE; SELECT "
             "lease.fence_check('{\"tenant_id\":\"%s\",\"program_id\":\"%s\","
             "\"target_namespace\":\"%s\",\"target_id\":\"frozen_t1\",\"actor_name\":\"%s\","
             "\"workflow_name\":\"default\"}'::jsonb, '%s', %lld); COMMIT",
             TENANT, PROGRAM, NAMESPACE, ACTOR, json_string_value(json_object_get(old, "lease_id")),
             old_token);
    assert_false(testpg_exec(fx.db, sql));
    snprintf(sql, sizeof sql,
             "BEGIN ISOLATION LEVEL SERIALIZABLE; SELECT "
             "lease.fence_check('{\"tenant_id\":\"%s\",\"program_id\":\"%s\","
             "\"target_namespace\":\"%s\",\"target_id\":\"frozen_t1\",\"actor_name\":\"%s\","
             "\"workflow_name\":\"default\"}'::jsonb, '%s', %lld); COMMIT",
             TENANT, PROGRAM, NAMESPACE, ACTOR,
             json_string_value(json_object_get(taken, "lease_id")), new_token);
    assert_true(testpg_exec(fx.db, sql));
    http_resp_free(a);

    /* the frozen holder's other lease is expired too, and its renewal lost */
    char *st = state_of(old);
    assert_true(strcmp(st, "expired") == 0 || strcmp(st, "released") == 0);
    free(st);
    http_resp_t *r = call_owned(fx.base, "POST", "/v1/leases/renew", alice,
                                owner_body("req_ren_f", "frozen_t1", old));
    check_reply(r, 409, "lease_lost", NULL);
    http_resp_free(r);
    /* the session itself answers lost */
    r = session_call(alice, sid, "keepalive", "{}");
    check_reply(r, 409, "lease_lost", NULL);
    http_resp_free(r);
    json_decref(old);
    free(sid);
}

static void test_revoked_credential_stops_its_session(void **state)
{
    (void)state;
    char *sid = open_session_of(carol, "prn_carol", "req_open_3");
    http_resp_t *a = acquire_in(carol, "req_acq_c1", "revoked_t1", sid);
    check_reply(a, 200, "lease_acquired", NULL);
    json_t *old = json_deep_copy(lease_of(a));
    http_resp_free(a);
    http_resp_t *r = session_call(carol, sid, "keepalive", "{}");
    check_reply(r, 200, "lease_renewed", NULL);
    http_resp_free(r);

    char sql[256];
    snprintf(sql, sizeof sql,
             "BEGIN ISOLATION LEVEL SERIALIZABLE; SELECT lease.credential_revoke('%s'); COMMIT",
             carol_id);
    assert_true(testpg_exec(fx.db, sql));
    /* refused once the cache window has passed (2 s by default; polled for
     * at most 10 s: a bound on the rule, not a timing) */
    long refused_after = -1;
    for (long waited = 0; waited <= 10000; waited += 100) {
        r = session_call(carol, sid, "keepalive", "{}");
        if (r->status == 401) {
            check_reply(r, 401, "invalid_credential", NULL);
            refused_after = waited;
            http_resp_free(r);
            break;
        }
        check_reply(r, 200, "lease_renewed", NULL);
        http_resp_free(r);
        sleep_ms(100);
    }
    printf("keep-alive of a revoked credential refused after about %ld ms (information only)\n",
           refused_after);
    assert_true(refused_after >= 0);

    /* nothing keeps the session alive any more: at its TTL its lease is
     * taken over, with a greater token */
    sleep_ms(TTL_MS + 300);
    a = acquire_in(bob, "req_acq_bob_rev", "revoked_t1", NULL);
    check_reply(a, 200, "lease_acquired", NULL);
    assert_true(json_integer_value(json_object_get(lease_of(a), "fencing_token")) >
                json_integer_value(json_object_get(old, "fencing_token")));
    http_resp_free(a);
    json_decref(old);
    free(sid);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_session_keeps_closes),
        cmocka_unit_test(test_frozen_holder_loses_its_leases),
        cmocka_unit_test(test_revoked_credential_stops_its_session),
    };
    return cmocka_run_group_tests(tests, setup, http_fx_teardown);
}
