/*
 * http_idempotency.c - a retry of each mutation with the same request id and
 * body answers the original result (replayed) without doing the work again;
 * the same request id with another body answers idempotency_conflict and
 * changes nothing. Each outcome is observed through the API (inspect, the
 * next token, a commit's revision) on either backend, and in Postgres's
 * tables too when it is the store.
 */
#include "http_common.h"

static http_fx_t fx;
static const char *worker, *admin; /* owned by fx */

static int setup(void **state)
{
    http_fx_open(&fx, state, "http_idem");
    worker = http_fx_worker(&fx, "prn_idem");
    admin = http_fx_credential(&fx, "prn_idem_admin", "*", "targets:force-release,targets:revoke",
                               true);
    http_fx_serve(&fx, NULL);
    return 0;
}

/* The identity's durable token counter, in Postgres's table (Postgres
 * only: on both backends the next acquire's token says the same). */
static long long counter_of(const char *target)
{
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT fencing_counter FROM lease.locks WHERE target_id = '%s'",
             target);
    return testpg_query_int(fx.db, sql);
}

/* Sends body twice; both must carry code; the second is a replay with the
 * same lease. Returns the first reply's lease (new reference). */
static json_t *twice(const char *path, const char *token, const char *body, const char *code)
{
    http_resp_t *first = call(fx.base, "POST", path, token, body);
    check_reply(first, 200, code, NULL);
    assert_null(json_object_get(first->json, "replayed"));
    http_resp_t *again = call(fx.base, "POST", path, token, body);
    check_reply(again, 200, code, NULL);
    assert_true(json_is_true(json_object_get(again->json, "replayed")));
    assert_true(
        json_equal(http_resp_get(first, "lease.lease_id"), http_resp_get(again, "lease.lease_id")));
    assert_true(json_equal(http_resp_get(first, "lease.fencing_token"),
                           http_resp_get(again, "lease.fencing_token")));
    assert_true(json_equal(http_resp_get(first, "lease.expires_at"),
                           http_resp_get(again, "lease.expires_at")));
    /* the whole lease as first answered, member for member */
    if (!json_equal(lease_of(first), lease_of(again)))
        fprintf(stderr, "replay differs:\n%s\n%s\n", first->body, again->body);
    assert_true(json_equal(lease_of(first), lease_of(again)));
    json_t *lease = json_deep_copy(lease_of(first));
    http_resp_free(first);
    http_resp_free(again);
    return lease;
}

static void expect_idem_conflict(const char *path, const char *token, json_t *body_obj,
                                 const char *key, json_t *new_value)
{
    json_object_set_new(body_obj, key, new_value);
    http_resp_t *r = call_owned(fx.base, "POST", path, token, dump(body_obj));
    check_reply(r, 409, "idempotency_conflict", NULL);
    http_resp_free(r);
}

static void test_acquire_renew_release(void **state)
{
    (void)state;
    char *body = acquire_body("idem-acq", "t-idem");
    json_t *lease = twice("/v1/leases/acquire", worker, body, "lease_acquired");
    assert_int_equal(json_integer_value(json_object_get(lease, "fencing_token")), 1);
    if (!fx.valkey)
        assert_int_equal(counter_of("t-idem"), 1); /* one token, not two */
    expect_idem_conflict("/v1/leases/acquire", worker, json_loads(body, 0, NULL), "job_id",
                         json_string("job_other"));
    /* the conflict changed nothing: the same lease, job_1 still its job */
    json_t *held = http_active_lease(fx.base, worker, "t-idem");
    assert_non_null(held);
    assert_true(json_equal(json_object_get(held, "lease_id"), json_object_get(lease, "lease_id")));
    assert_true(json_equal(json_object_get(held, "fencing_token"),
                           json_object_get(lease, "fencing_token")));
    assert_string_equal(json_string_value(json_object_get(held, "job_id")), "job_1");
    json_decref(held);
    if (!fx.valkey)
        assert_int_equal(counter_of("t-idem"), 1);

    char *renew = owner_body("idem-renew", "t-idem", lease);
    json_t *renewed = twice("/v1/leases/renew", worker, renew, "lease_renewed");
    expect_idem_conflict("/v1/leases/renew", worker, json_loads(renew, 0, NULL), "ttl_ms",
                         json_integer(12345));
    /* the conflict renewed nothing: the lease as the renewal left it */
    held = http_active_lease(fx.base, worker, "t-idem");
    assert_non_null(held);
    assert_true(
        json_equal(json_object_get(held, "expires_at"), json_object_get(renewed, "expires_at")));
    assert_true(json_equal(json_object_get(held, "ttl_ms"), json_object_get(renewed, "ttl_ms")));
    assert_int_not_equal(json_integer_value(json_object_get(held, "ttl_ms")), 12345);
    json_decref(held);

    char *release = owner_body("idem-release", "t-idem", lease);
    json_t *released = twice("/v1/leases/release", worker, release, "lease_released");
    assert_string_equal(json_string_value(json_object_get(released, "state")), "released");
    expect_idem_conflict("/v1/leases/release", worker, json_loads(release, 0, NULL),
                         "service_instance_id", json_string("inst_2"));

    /* the acquire replayed after release: the original lease, state now */
    http_resp_t *r = call(fx.base, "POST", "/v1/leases/acquire", worker, body);
    check_reply(r, 200, "lease_acquired", NULL);
    assert_true(json_is_true(json_object_get(r->json, "replayed")));
    assert_string_equal(http_resp_str(r, "current_state"), "released");
    assert_true(json_equal(http_resp_get(r, "lease.lease_id"), json_object_get(lease, "lease_id")));
    http_resp_free(r);
    if (!fx.valkey)
        assert_int_equal(counter_of("t-idem"), 1);
    /* a new request id acquires anew with the next token: no replay, no
     * conflict took one (the counter was 1, observed through the API) */
    r = acquire_call(fx.base, worker, "idem-acq-2", "t-idem");
    check_reply(r, 200, "lease_acquired", NULL);
    assert_int_equal(json_integer_value(http_resp_get(r, "lease.fencing_token")), 2);
    http_resp_free(r);

    json_decref(lease);
    json_decref(renewed);
    json_decref(released);
    free(body);
    free(renew);
    free(release);
}

static void test_admin_replays(void **state)
{
    (void)state;
    const char *ops[] = {"/v1/leases/force-release", "/v1/leases/revoke"};
    const char *codes[] = {"lease_released", "lease_revoked"};
    for (int i = 0; i < 2; i++) {
        char target[32], rid[32];
        snprintf(target, sizeof target, "t-idem-admin-%d", i);
        snprintf(rid, sizeof rid, "idem-admin-acq-%d", i);
        json_t *lease = acquire_lease(fx.base, worker, rid, target);
        snprintf(rid, sizeof rid, "idem-admin-%d", i);
        char *body = admin_body(rid, target, lease, "planned maintenance window");
        json_t *done = twice(ops[i], admin, body, codes[i]);
        expect_idem_conflict(ops[i], admin, json_loads(body, 0, NULL), "reason",
                             json_string("another reason"));
        json_decref(done);
        json_decref(lease);
        free(body);
    }
}

/* A commit's write of result/N at expected_revision rev, by lease, as a
 * new request (rid): the document's revision observed through the API. */
static http_resp_t *commit_document(const char *rid, json_t *lease, int rev)
{
    return call_owned(
        fx.base, "POST", "/v1/commits", worker,
        dump(json_pack("{s:s, s:o, s:O, s:O, s:s, s:s, s:[{s:s, s:s, s:i, s:{s:s}}]}", "request_id",
                       rid, "lock_identity", identity_json("t-idem-commit"), "lease_id",
                       json_object_get(lease, "lease_id"), "fencing_token",
                       json_object_get(lease, "fencing_token"), "execution_id", "exec_1",
                       "trace_id", "trace_1", "writes", "kind", "document", "key", "result/1",
                       "expected_revision", rev, "body", "status", "probe")));
}

static void test_commit_replay(void **state)
{
    (void)state;
    json_t *lease = acquire_lease(fx.base, worker, "idem-c-acq", "t-idem-commit");
    json_t *writes = json_pack("[{s:s, s:s, s:i, s:{s:s}}]", "kind", "document", "key", "result/1",
                               "expected_revision", 0, "body", "status", "done");
    /* and a publication where the store has an outbox (Postgres; Valkey
     * refuses publications, tests/valkey/valkey_commits.c) */
    if (!fx.valkey)
        json_array_append_new(writes, json_pack("{s:s, s:s, s:{s:i}}", "kind", "publication",
                                                "topic", "results", "payload", "n", 1));
    char *body = dump(json_pack("{s:s, s:o, s:O, s:O, s:s, s:s, s:o}", "request_id", "idem-commit",
                                "lock_identity", identity_json("t-idem-commit"), "lease_id",
                                json_object_get(lease, "lease_id"), "fencing_token",
                                json_object_get(lease, "fencing_token"), "execution_id", "exec_1",
                                "trace_id", "trace_1", "writes", writes));
    http_resp_t *first = call(fx.base, "POST", "/v1/commits", worker, body);
    check_reply(first, 200, "commit_accepted", NULL);
    http_resp_t *again = call(fx.base, "POST", "/v1/commits", worker, body);
    check_reply(again, 200, "commit_accepted", NULL);
    assert_true(json_is_true(json_object_get(again->json, "replayed")));
    assert_true(
        json_equal(http_resp_get(first, "commit.results"), http_resp_get(again, "commit.results")));
    json_t *written = json_array_get(http_resp_get(first, "commit.results"), 0);
    assert_string_equal(json_string_value(json_object_get(written, "key")), "result/1");
    assert_int_equal(json_integer_value(json_object_get(written, "revision")), 1);
    http_resp_free(first);
    http_resp_free(again);
    /* written once: revision 1 (a write expecting revision 0 finds 1) */
    http_resp_t *r = commit_document("idem-commit-probe-0", lease, 0);
    check_reply(r, 409, "write_conflict", NULL);
    assert_int_equal(http_resp_int(r, "current_revision"), 1);
    http_resp_free(r);
    if (!fx.valkey) { /* and in Postgres's tables: revision 1, one outbox row */
        assert_int_equal(testpg_query_int(fx.db, "SELECT revision FROM lease.fenced_documents "
                                                 "WHERE document_key = 'result/1'"),
                         1);
        assert_int_equal(testpg_query_int(fx.db, "SELECT count(*) FROM lease.outbox"), 1);
    }
    json_t *changed = json_loads(body, 0, NULL);
    json_object_set_new(changed, "execution_id", json_string("exec_other"));
    r = call_owned(fx.base, "POST", "/v1/commits", worker, dump(changed));
    check_reply(r, 409, "idempotency_conflict", NULL);
    http_resp_free(r);
    /* the conflict wrote nothing: still revision 1 */
    r = commit_document("idem-commit-probe-1", lease, 0);
    check_reply(r, 409, "write_conflict", NULL);
    assert_int_equal(http_resp_int(r, "current_revision"), 1);
    http_resp_free(r);
    if (!fx.valkey)
        assert_int_equal(testpg_query_int(fx.db, "SELECT count(*) FROM lease.outbox"), 1);
    free(body);
    json_decref(lease);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_acquire_renew_release),
        cmocka_unit_test(test_admin_replays),
        cmocka_unit_test(test_commit_replay),
    };
    return cmocka_run_group_tests(tests, setup, http_fx_teardown);
}
