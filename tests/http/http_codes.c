/*
 * http_codes.c - every code of the error table (except the two 503s, see
 * http_outage.c) reached by a real request against a real leased and
 * Postgres, each reply checked for shape and forbidden content.
 */
#include "http_common.h"

static http_fx_t fx;
static const char *worker_a, *worker_b, *reader, *admin; /* owned by fx */

static const char *const not_a[] = {"prn_worker_a", "inst_1", "exec_1", "job_1", NULL};

static int setup(void **state)
{
    http_fx_open(&fx, state, "http_codes");
    worker_a = http_fx_worker(&fx, "prn_worker_a");
    worker_b = http_fx_worker(&fx, "prn_worker_b");
    reader = http_fx_credential(&fx, "prn_reader", PROGRAM, "targets:read", false);
    admin = http_fx_credential(&fx, "prn_admin", "*",
                               "targets:force-release,targets:revoke,targets:read", true);
    http_fx_serve(&fx, NULL);
    return 0;
}

static char *commit_body(const char *request_id, const char *target, json_t *lease,
                         long long expected_revision)
{
    return dump(json_pack("{s:s, s:o, s:O, s:O, s:s, s:s, s:[{s:s, s:s, s:I, s:{s:i}}]}",
                          "request_id", request_id, "lock_identity", identity_json(target),
                          "lease_id", json_object_get(lease, "lease_id"), "fencing_token",
                          json_object_get(lease, "fencing_token"), "execution_id", "exec_1",
                          "trace_id", "trace_1", "writes", "kind", "document", "key", "doc-1",
                          "expected_revision", (json_int_t)expected_revision, "body", "x", 1));
}

/* Every 200 code, in the order a lease lives through them. */
static void test_success_codes(void **state)
{
    (void)state;
    json_t *lease = acquire_lease(fx.base, worker_a, "s-acq-1", "t-success");
    assert_string_equal(json_string_value(json_object_get(lease, "state")), "active");
    assert_true(json_integer_value(json_object_get(lease, "fencing_token")) >= 1);
    /* the owner sees owner-private fields, never the owner principal */
    assert_string_equal(json_string_value(json_object_get(lease, "service_instance_id")), "inst_1");
    assert_null(json_object_get(lease, "owner_principal_id"));

    http_resp_t *r = call_owned(fx.base, "POST", "/v1/leases/renew", worker_a,
                                owner_body("s-renew-1", "t-success", lease));
    check_reply(r, 200, "lease_renewed", NULL);
    assert_true(json_equal(http_resp_get(r, "lease.fencing_token"),
                           json_object_get(lease, "fencing_token")));
    http_resp_free(r);

    char path[256];
    snprintf(path, sizeof path, "/v1/leases/%s",
             json_string_value(json_object_get(lease, "lease_id")));
    r = call(fx.base, "GET", path, reader, NULL);
    check_reply(r, 200, "lease_inspected", not_a);
    /* a reader without audit:read sees no owner-private fields */
    assert_null(http_resp_get(r, "lease.service_instance_id"));
    assert_null(http_resp_get(r, "lease.metadata"));
    http_resp_free(r);

    r = call_owned(fx.base, "POST", "/v1/leases/inspect", worker_a, inspect_body("t-success"));
    check_reply(r, 200, "lease_inspected", NULL);
    assert_true(json_equal(http_resp_get(r, "lease.lease_id"), json_object_get(lease, "lease_id")));
    http_resp_free(r);

    r = call_owned(fx.base, "POST", "/v1/leases/list", worker_a, list_body("owner"));
    check_reply(r, 200, "lease_listed", NULL);
    assert_true(json_array_size(http_resp_get(r, "leases")) >= 1);
    http_resp_free(r);

    r = call_owned(fx.base, "POST", "/v1/commits", worker_a,
                   commit_body("s-commit-1", "t-success", lease, 0));
    check_reply(r, 200, "commit_accepted", NULL);
    json_t *results = http_resp_get(r, "commit.results");
    assert_int_equal(json_array_size(results), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(results, 0), "revision")),
                     1);
    http_resp_free(r);

    r = call_owned(fx.base, "POST", "/v1/leases/release", worker_a,
                   owner_body("s-release-1", "t-success", lease));
    check_reply(r, 200, "lease_released", NULL);
    assert_string_equal(json_string_value(http_resp_get(r, "lease.state")), "released");
    http_resp_free(r);
    json_decref(lease);

    /* administrator paths: revoke and force-release of fresh leases */
    lease = acquire_lease(fx.base, worker_a, "s-acq-2", "t-success");
    r = call_owned(fx.base, "POST", "/v1/leases/revoke", admin,
                   admin_body("s-revoke-1", "t-success", lease, "incident 17: key leaked"));
    check_reply(r, 200, "lease_revoked", NULL);
    assert_string_equal(json_string_value(http_resp_get(r, "lease.state")), "revoked");
    http_resp_free(r);
    json_decref(lease);

    lease = acquire_lease(fx.base, worker_a, "s-acq-3", "t-success");
    r = call_owned(fx.base, "POST", "/v1/leases/force-release", admin,
                   admin_body("s-force-1", "t-success", lease, "worker host decommissioned"));
    check_reply(r, 200, "lease_released", NULL);
    /* audit:read is not held by this admin: no owner identity either */
    assert_null(http_resp_get(r, "lease.owner_principal_id"));
    http_resp_free(r);
    json_decref(lease);
}

static void test_invalid_request(void **state)
{
    (void)state;
    char *body = dump(json_pack("{s:s, s:{s:s, s:s, s:s, s:s, s:s, s:s}, s:s, s:s, s:s}",
                                "request_id", "inv-1", "lock_identity", "tenant_id", TENANT,
                                "program_id", PROGRAM, "target_namespace", NAMESPACE, "target_id",
                                "bad/target", "actor_name", ACTOR, "workflow_name", "default",
                                "service_instance_id", "i", "execution_id", "e", "job_id", "j"));
    http_resp_t *r = call_owned(fx.base, "POST", "/v1/leases/acquire", worker_a, body);
    check_reply(r, 400, "invalid_lease_request", NULL);
    assert_string_equal(http_resp_str(r, "field"), "lock_identity.target_id");
    assert_false(json_is_true(json_object_get(r->json, "retryable")));
    http_resp_free(r);

    /* a TTL outside the policy names its bounds (and nothing else) */
    body = dump(json_pack("{s:s, s:{s:s, s:s, s:s, s:s, s:s, s:s}, s:s, s:s, s:s, s:i}",
                          "request_id", "inv-2", "lock_identity", "tenant_id", TENANT,
                          "program_id", PROGRAM, "target_namespace", NAMESPACE, "target_id",
                          "t-ttl", "actor_name", ACTOR, "workflow_name", "default",
                          "service_instance_id", "i", "execution_id", "e", "job_id", "j",
                          "ttl_ms", 1000));
    r = call_owned(fx.base, "POST", "/v1/leases/acquire", worker_a, body);
    check_reply(r, 400, "invalid_lease_request", NULL);
    assert_string_equal(http_resp_str(r, "field"), "ttl_ms");
    assert_string_equal(http_resp_str(r, "msg"),
                        "ttl_ms must be greater than 1000 and at most 300000");
    http_resp_free(r);
}

static void test_invalid_credential(void **state)
{
    (void)state;
    http_resp_t *r = acquire_call(fx.base, NULL, "cred-1", "t-401");
    check_reply(r, 401, "invalid_credential", NULL);
    http_resp_free(r);
}

static void test_access_denied(void **state)
{
    (void)state;
    /* a reader may not acquire */
    http_resp_t *r = acquire_call(fx.base, reader, "deny-1", "t-403");
    check_reply(r, 403, "access_denied", NULL);
    http_resp_free(r);
    /* an identity outside the credential's program */
    json_t *id = identity_json("t-403");
    json_object_set_new(id, "program_id", json_string("program-b"));
    r = call_owned(
        fx.base, "POST", "/v1/leases/acquire", worker_a,
        dump(json_pack("{s:s, s:o, s:s, s:s, s:s}", "request_id", "deny-2", "lock_identity", id,
                       "service_instance_id", "i", "execution_id", "e", "job_id", "j")));
    check_reply(r, 403, "access_denied", NULL);
    http_resp_free(r);
}

static void test_not_found(void **state)
{
    (void)state;
    http_resp_t *r =
        call(fx.base, "GET", "/v1/leases/lease_00000000000000000000000000000000", reader, NULL);
    check_reply(r, 404, "lease_not_found", NULL);
    http_resp_free(r);
}

/* A deadline already in the past answers 408 and never reaches the
 * database: no lock row, no audit row of the store for that request. */
static void test_deadline_exceeded(void **state)
{
    (void)state;
    json_t *body = parse_owned(acquire_body("late-1", "t-408"));
    json_object_set_new(body, "deadline_at", json_string("2020-01-01T00:00:00.000Z"));
    http_resp_t *r = call_owned(fx.base, "POST", "/v1/leases/acquire", worker_a, dump(body));
    check_reply(r, 408, "deadline_exceeded", NULL);
    assert_true(json_is_true(json_object_get(r->json, "retryable")));
    http_resp_free(r);
    /* through the API, on either backend: no lease on the target, and the
     * request id has no stored answer (the same request without the past
     * deadline is granted, not replayed as 408) */
    r = call_owned(fx.base, "POST", "/v1/leases/inspect", worker_a, inspect_body("t-408"));
    check_reply(r, 404, "lease_not_found", NULL);
    http_resp_free(r);
    if (!fx.valkey) {
        /* and in Postgres's tables: not even a lock row */
        assert_int_equal(
            testpg_query_int(fx.db, "SELECT count(*) FROM lease.locks WHERE target_id = 't-408'"),
            0);
        assert_int_equal(testpg_query_int(fx.db, "SELECT count(*) FROM lease.idempotency i "
                                                 "WHERE i.request_id = 'late-1'"),
                         0);
    }
    json_decref(acquire_lease(fx.base, worker_a, "late-1", "t-408"));
}

static void test_conflicts(void **state)
{
    (void)state;
    json_t *lease = acquire_lease(fx.base, worker_a, "c-acq-1", "t-409");

    /* another worker: conflict, without a trace of the holder */
    http_resp_t *r = acquire_call(fx.base, worker_b, "c-acq-2", "t-409");
    check_reply(r, 409, "lease_conflict", not_a);
    assert_null(strstr(r->body, json_string_value(json_object_get(lease, "lease_id"))));
    assert_true(json_is_true(json_object_get(r->json, "retryable")));
    assert_true(http_resp_int(r, "retry_after_ms") > 0);
    http_resp_free(r);

    /* a stale token: lease_lost */
    json_t *stale = json_deep_copy(lease);
    json_object_set_new(
        stale, "fencing_token",
        json_integer(json_integer_value(json_object_get(lease, "fencing_token")) + 7));
    r = call_owned(fx.base, "POST", "/v1/leases/renew", worker_a,
                   owner_body("c-renew-1", "t-409", stale));
    check_reply(r, 409, "lease_lost", NULL);
    http_resp_free(r);
    /* someone else's lease: lease_lost too, never "not found" */
    r = call_owned(fx.base, "POST", "/v1/leases/release", worker_b,
                   owner_body("c-release-b", "t-409", lease));
    check_reply(r, 409, "lease_lost", not_a);
    http_resp_free(r);
    json_decref(stale);

    /* the same request id with another body */
    r = call_owned(fx.base, "POST", "/v1/leases/renew", worker_a,
                   owner_body("c-renew-2", "t-409", lease));
    check_reply(r, 200, "lease_renewed", NULL);
    http_resp_free(r);
    json_t *changed = parse_owned(owner_body("c-renew-2", "t-409", lease));
    json_object_set_new(changed, "ttl_ms", json_integer(20000));
    r = call_owned(fx.base, "POST", "/v1/leases/renew", worker_a, dump(changed));
    check_reply(r, 409, "idempotency_conflict", NULL);
    http_resp_free(r);

    /* a document revision that does not match */
    r = call_owned(fx.base, "POST", "/v1/commits", worker_a,
                   commit_body("c-commit-1", "t-409", lease, 5));
    check_reply(r, 409, "write_conflict", NULL);
    assert_string_equal(http_resp_str(r, "field"), "writes[0].expected_revision");
    assert_int_equal(http_resp_int(r, "current_revision"), 0);
    http_resp_free(r);
    json_decref(lease);
}

/* A rate limit of 1/s: the second request within the second answers 429. */
static void test_rate_limited(void **state)
{
    (void)state;
    const char *env[] = {"LEASE_RATE_LIMIT=1/s", NULL};
    leased_proc_t *srv = http_fx_start_leased(&fx, env);
    http_resp_t *r1 = call_owned(leased_proc_url(srv), "POST", "/v1/leases/inspect", reader,
                                 inspect_body("t-429"));
    http_resp_t *r2 = call_owned(leased_proc_url(srv), "POST", "/v1/leases/inspect", reader,
                                 inspect_body("t-429"));
    check_reply(r1, 404, "lease_not_found", NULL);
    check_reply(r2, 429, "lease_rate_limited", NULL);
    assert_true(json_is_true(json_object_get(r2->json, "retryable")));
    assert_true(http_resp_int(r2, "retry_after_ms") <= 1001);
    http_resp_free(r1);
    http_resp_free(r2);
    /* another credential has its own bucket */
    http_resp_t *r3 = call_owned(leased_proc_url(srv), "POST", "/v1/leases/inspect", worker_a,
                                 inspect_body("t-429"));
    check_reply(r3, 404, "lease_not_found", NULL);
    http_resp_free(r3);
    assert_int_equal(leased_proc_stop(srv), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_success_codes),      cmocka_unit_test(test_invalid_request),
        cmocka_unit_test(test_invalid_credential), cmocka_unit_test(test_access_denied),
        cmocka_unit_test(test_not_found),          cmocka_unit_test(test_deadline_exceeded),
        cmocka_unit_test(test_conflicts),          cmocka_unit_test(test_rate_limited),
    };
    return cmocka_run_group_tests(tests, setup, http_fx_teardown);
}
