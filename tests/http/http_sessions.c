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
 *     token, and lease.fence_check refuses the old token.
 */
#include "http_common.h"

#include <time.h>

static http_fx_t fx;
static const char *alice; /* holds the sessions */
static const char *bob;   /* another principal of the same tenant */

/* Sessions and leases of 1.5 s: the policy's minimum is 1 s, exclusive. */
#define TTL_MS 1500

static int setup(void **state)
{
    http_fx_open(&fx, state, "http_sessions");
    alice = http_fx_worker(&fx, "prn_alice");
    bob = http_fx_worker(&fx, "prn_bob");
    http_fx_serve(&fx, NULL);
    return 0;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* Opens a session of alice; returns its id (heap). */
static char *open_session(const char *request_id)
{
    http_resp_t *r = call_owned(fx.base, "POST", "/v1/sessions", alice,
                                dump(json_pack("{s:s, s:s, s:i}", "request_id", request_id,
                                               "service_instance_id", "inst_1", "ttl_ms",
                                               TTL_MS)));
    check_reply(r, 200, "lease_acquired", NULL);
    json_t *s = json_object_get(r->json, "session");
    assert_true(json_is_object(s));
    assert_string_equal(json_string_value(json_object_get(s, "state")), "open");
    assert_string_equal(json_string_value(json_object_get(s, "owner_principal_id")), "prn_alice");
    assert_string_equal(json_string_value(json_object_get(s, "tenant_id")), TENANT);
    assert_int_equal(json_integer_value(json_object_get(s, "ttl_ms")), TTL_MS);
    char *id = strdup(json_string_value(json_object_get(s, "session_id")));
    http_resp_free(r);
    return id;
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
        json_string_value(json_object_get(json_object_get(c->json, "session"), "state")),
        "closed");
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
             "BEGIN ISOLATION LEVEL SERIALIZABLE; SELECT lease.fence_check('{\"tenant_id\":\"%s\",\"program_id\":\"%s\","
             "\"target_namespace\":\"%s\",\"target_id\":\"frozen_t1\",\"actor_name\":\"%s\","
             "\"workflow_name\":\"default\"}'::jsonb, '%s', %lld); COMMIT",
             TENANT, PROGRAM, NAMESPACE, ACTOR,
             json_string_value(json_object_get(old, "lease_id")), old_token);
    assert_false(testpg_exec(fx.db, sql));
    snprintf(sql, sizeof sql,
             "BEGIN ISOLATION LEVEL SERIALIZABLE; SELECT lease.fence_check('{\"tenant_id\":\"%s\",\"program_id\":\"%s\","
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
    http_resp_t *r =
        call_owned(fx.base, "POST", "/v1/leases/renew", alice, owner_body("req_ren_f", "frozen_t1", old));
    check_reply(r, 409, "lease_lost", NULL);
    http_resp_free(r);
    /* the session itself answers lost */
    r = session_call(alice, sid, "keepalive", "{}");
    check_reply(r, 409, "lease_lost", NULL);
    http_resp_free(r);
    json_decref(old);
    free(sid);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_session_keeps_closes),
        cmocka_unit_test(test_frozen_holder_loses_its_leases),
    };
    return cmocka_run_group_tests(tests, setup, http_fx_teardown);
}
