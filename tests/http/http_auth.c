/*
 * http_auth.c - authentication and authorisation over HTTP: every way a
 * credential fails answers the same 401; scope (tenant, program, actor set)
 * and capabilities answer 403 wherever the request names the scope, and a
 * lease id outside scope answers 404;
 * administrative operations need an administrator credential and a reason;
 * owner-private fields follow ownership and audit:read. Outcomes are
 * observed through the API and the audit as each backend keeps it, and in
 * Postgres's tables too when it is the store.
 */
#include <time.h>

#include "http_common.h"

static http_fx_t fx;
static const char *worker, *lease_only, *other_tenant, *other_program, *crawler_only, *reader,
    *admin, *auditor, *admin_other_tenant; /* owned by fx */
static char worker_id[32];

static const char *cred(const char *principal, const char *tenant, const char *program,
                        const char *actors, const char *caps, bool is_admin, char *id_out)
{
    return http_fx_credential_spec(&fx,
                                   &(leased_cred_spec_t){.principal = principal,
                                                         .tenant = tenant,
                                                         .program = program,
                                                         .actors = actors,
                                                         .capabilities = caps,
                                                         .admin = is_admin},
                                   id_out);
}

static int setup(void **state)
{
    http_fx_open(&fx, state, "http_auth");
    worker = cred("prn_worker", TENANT, PROGRAM, NULL, WORKER_CAPS, false, worker_id);
    lease_only = cred("prn_lease_only", TENANT, PROGRAM, NULL, "targets:lease", false, NULL);
    other_tenant =
        cred("prn_other_tenant", "tenant-other", PROGRAM, NULL, WORKER_CAPS, false, NULL);
    other_program = cred("prn_other_program", TENANT, "program-b", NULL, WORKER_CAPS, false, NULL);
    crawler_only = cred("prn_crawler", TENANT, PROGRAM, "crawler", WORKER_CAPS, false, NULL);
    reader = cred("prn_reader", TENANT, PROGRAM, NULL, "targets:read", false, NULL);
    admin = cred("prn_admin", TENANT, "*", NULL,
                 "targets:force-release,targets:revoke,targets:read", true, NULL);
    auditor = cred("prn_auditor", TENANT, "*", NULL, "targets:read,audit:read", true, NULL);
    admin_other_tenant = cred("prn_admin_b", "tenant-other", "*", NULL,
                              "targets:force-release,targets:revoke", true, NULL);
    /* a 1 ms credential cache: revocation and expiry are seen at once */
    const char *env[] = {"LEASE_CREDENTIAL_CACHE_MS=1", NULL};
    http_fx_serve(&fx, env);
    return 0;
}

/* Moves the worker credential's expiry into the past (expired) or removes
 * it, in the store itself as an operator's tool would: lease.credentials
 * on Postgres, the credential's hash on Valkey (docs/backends.md "Keys"). */
static void set_worker_expired(bool expired)
{
    if (!fx.valkey) {
        char sql[256];
        snprintf(sql, sizeof sql,
                 "UPDATE lease.credentials SET expires_at = %s "
                 "WHERE credential_id = '%s'",
                 expired ? "now() - interval '1 minute'" : "NULL", worker_id);
        assert_true(testpg_exec(fx.db, sql));
        return;
    }
    char key[128], suffix[64], when[32] = "";
    snprintf(suffix, sizeof suffix, "cred:%s", worker_id);
    http_fx_valkey_key(key, sizeof key, suffix);
    if (expired) /* the server's clock, as the lookup compares with */
        snprintf(when, sizeof when, "%lld", (long long)time(NULL) * 1000 - 60000);
    const char *args[] = {"HSET", key, "expires_at", when, NULL};
    char *out = test_store_valkey_cli(&fx.vk, args);
    assert_non_null(out);
    free(out);
}

/* The body of a 401 without its correlation id: all failures must match. */
static char *canonical_401(const http_resp_t *r)
{
    json_t *copy = json_deep_copy(r->json);
    json_object_del(copy, "correlation_id");
    char *s = json_dumps(copy, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(copy);
    return s;
}

static void expect_401(const char *authorization_token, char **first)
{
    http_resp_t *r = acquire_call(fx.base, authorization_token, "auth-x", "t-auth");
    check_reply(r, 401, "invalid_credential", NULL);
    char *c = canonical_401(r);
    if (!*first)
        *first = c;
    else {
        assert_string_equal(c, *first);
        free(c);
    }
    http_resp_free(r);
}

static void test_credential_failures(void **state)
{
    (void)state;
    char *first = NULL;
    expect_401(NULL, &first);                                  /* no token */
    expect_401("garbage", &first);                             /* not a token */
    expect_401("lsk_key_aaaaaaaaaaaaaaaaaaaaaaaaaa_", &first); /* malformed */
    expect_401("lsk_key_aaaaaaaaaaaaaaaaaaaaaaaaaa_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
               &first); /* unknown id */
    char *tampered = strdup(worker);
    size_t n = strlen(tampered);
    tampered[n - 1] = tampered[n - 1] == 'A' ? 'B' : 'A'; /* one secret character off */
    expect_401(tampered, &first);
    free(tampered);

    /* a non-Bearer scheme carrying a valid token */
    char basic[256];
    snprintf(basic, sizeof basic, "Authorization: Basic %s", worker);
    const char *hdrs[] = {basic, NULL};
    http_client_t *c = http_client_new(fx.base, 0);
    char *body = acquire_body("auth-basic", "t-auth");
    http_resp_t *r = http_client_call(c, "POST", "/v1/leases/acquire", NULL, body, hdrs, NULL);
    check_reply(r, 401, "invalid_credential", NULL);
    http_resp_free(r);
    free(body);
    http_client_free(c);

    /* the valid token works, then expires, then (restored) is revoked */
    r = acquire_call(fx.base, worker, "auth-ok", "t-auth");
    check_reply(r, 200, "lease_acquired", NULL);
    http_resp_free(r);
    set_worker_expired(true);
    expect_401(worker, &first);
    set_worker_expired(false);
    r = call_owned(fx.base, "POST", "/v1/leases/inspect", worker, inspect_body("t-auth"));
    check_reply(r, 200, "lease_inspected", NULL);
    http_resp_free(r);
    http_fx_revoke_credential(&fx, worker_id);
    expect_401(worker, &first);
    free(first);
}

static void test_scope(void **state)
{
    (void)state;
    http_resp_t *r = acquire_call(fx.base, other_tenant, "scope-1", "t-scope");
    check_reply(r, 403, "access_denied", NULL);
    http_resp_free(r);
    r = acquire_call(fx.base, other_program, "scope-2", "t-scope");
    check_reply(r, 403, "access_denied", NULL);
    http_resp_free(r);
    r = acquire_call(fx.base, crawler_only, "scope-3", "t-scope"); /* actor usernamegen */
    check_reply(r, 403, "access_denied", NULL);
    http_resp_free(r);
    /* none of them created anything: no lease (through the API), and on
     * Postgres not even a lock row */
    json_t *none = http_active_lease(fx.base, reader, "t-scope");
    assert_null(none);
    if (!fx.valkey)
        assert_int_equal(
            testpg_query_int(fx.db, "SELECT count(*) FROM lease.locks WHERE target_id = 't-scope'"),
            0);

    /* a lease id outside scope is invisible (404); a named scope outside
     * it is forbidden (403; http_scope.c has the full table) */
    r = acquire_call(fx.base, lease_only, "scope-4", "t-scope");
    check_reply(r, 200, "lease_acquired", NULL);
    char path[256];
    snprintf(path, sizeof path, "/v1/leases/%s",
             json_string_value(http_resp_get(r, "lease.lease_id")));
    http_resp_free(r);
    r = call(fx.base, "GET", path, other_tenant, NULL);
    check_reply(r, 404, "lease_not_found", NULL);
    http_resp_free(r);
    r = call_owned(fx.base, "POST", "/v1/leases/inspect", other_program, inspect_body("t-scope"));
    check_reply(r, 403, "access_denied", NULL);
    http_resp_free(r);
    r = call_owned(fx.base, "POST", "/v1/leases/list", other_tenant, list_body("program"));
    check_reply(r, 403, "access_denied", NULL);
    http_resp_free(r);

    /* list: by owner with targets:lease only; by target/program needs read */
    r = call_owned(fx.base, "POST", "/v1/leases/list", lease_only, list_body("owner"));
    check_reply(r, 200, "lease_listed", NULL);
    assert_int_equal(json_array_size(http_resp_get(r, "leases")), 1);
    http_resp_free(r);
    r = call_owned(fx.base, "POST", "/v1/leases/list", lease_only, list_body("program"));
    check_reply(r, 403, "access_denied", NULL);
    http_resp_free(r);
    /* inspect needs targets:read */
    r = call_owned(fx.base, "POST", "/v1/leases/inspect", lease_only, inspect_body("t-scope"));
    check_reply(r, 403, "access_denied", NULL);
    http_resp_free(r);
}

static void test_admin_operations(void **state)
{
    (void)state;
    json_t *lease = acquire_lease(fx.base, lease_only, "adm-acq", "t-admin");
    static const char *const owner[] = {"prn_lease_only", "inst_1", "exec_1", NULL};

    /* a worker cannot force-release or revoke, even its own lease */
    http_resp_t *r = call_owned(fx.base, "POST", "/v1/leases/force-release", lease_only,
                                admin_body("adm-1", "t-admin", lease, "mine"));
    check_reply(r, 403, "access_denied", NULL);
    http_resp_free(r);
    r = call_owned(fx.base, "POST", "/v1/leases/revoke", crawler_only,
                   admin_body("adm-2", "t-admin", lease, "not mine"));
    check_reply(r, 403, "access_denied", NULL);
    http_resp_free(r);
    /* an administrator of another tenant */
    r = call_owned(fx.base, "POST", "/v1/leases/force-release", admin_other_tenant,
                   admin_body("adm-3", "t-admin", lease, "wrong tenant"));
    check_reply(r, 403, "access_denied", owner);
    http_resp_free(r);
    /* an administrator without a reason, or with an empty one */
    r = call_owned(fx.base, "POST", "/v1/leases/force-release", admin,
                   admin_body("adm-4", "t-admin", lease, NULL));
    check_reply(r, 400, "invalid_lease_request", NULL);
    assert_string_equal(http_resp_str(r, "field"), "reason");
    http_resp_free(r);
    r = call_owned(fx.base, "POST", "/v1/leases/revoke", admin,
                   admin_body("adm-5", "t-admin", lease, ""));
    check_reply(r, 400, "invalid_lease_request", NULL);
    assert_string_equal(http_resp_str(r, "field"), "reason");
    http_resp_free(r);
    /* the lease is untouched by all of the above: the same lease, token
     * and expiry, active (through the API), and its row on Postgres */
    json_t *still = http_active_lease(fx.base, admin, "t-admin");
    assert_non_null(still);
    assert_true(json_equal(json_object_get(still, "lease_id"), json_object_get(lease, "lease_id")));
    assert_true(json_equal(json_object_get(still, "fencing_token"),
                           json_object_get(lease, "fencing_token")));
    assert_true(
        json_equal(json_object_get(still, "expires_at"), json_object_get(lease, "expires_at")));
    json_decref(still);
    if (!fx.valkey) {
        char sql[256];
        snprintf(sql, sizeof sql,
                 "SELECT count(*) FROM lease.locks WHERE lease_id = '%s' AND state = 'active'",
                 json_string_value(json_object_get(lease, "lease_id")));
        assert_int_equal(testpg_query_int(fx.db, sql), 1);
    }

    /* audit:read sees the owner; a plain reader does not */
    char path[256];
    snprintf(path, sizeof path, "/v1/leases/%s",
             json_string_value(json_object_get(lease, "lease_id")));
    r = call(fx.base, "GET", path, auditor, NULL);
    check_reply(r, 200, "lease_inspected", NULL);
    assert_string_equal(json_string_value(http_resp_get(r, "lease.owner_principal_id")),
                        "prn_lease_only");
    assert_string_equal(json_string_value(http_resp_get(r, "lease.execution_id")), "exec_1");
    http_resp_free(r);
    r = call(fx.base, "GET", path, reader, NULL);
    check_reply(r, 200, "lease_inspected", owner);
    http_resp_free(r);

    /* with a reason it works, and the reason is recorded */
    r = call_owned(fx.base, "POST", "/v1/leases/force-release", admin,
                   admin_body("adm-6", "t-admin", lease, "host drained for maintenance"));
    check_reply(r, 200, "lease_released", NULL);
    http_resp_free(r);
    /* the lease ended (through the API), and the audit holds the reason */
    assert_null(http_active_lease(fx.base, admin, "t-admin"));
    const char *const forced[] = {"event_type", "target_lease_force_release", "reason",
                                  "host drained for maintenance", NULL};
    assert_int_equal(http_fx_audit_count(&fx, forced), 1);
    /* the event names who, what and the lease's owner as it was (its
     * service instance and execution, which the request does not carry),
     * the change of state, and an administrator's high priority */
    const char *const forced_whole[] = {"event_type",
                                        "target_lease_force_release",
                                        "request_id",
                                        "adm-6",
                                        "principal_id",
                                        "prn_admin",
                                        "lease_id",
                                        json_string_value(json_object_get(lease, "lease_id")),
                                        "service_instance_id",
                                        "inst_1",
                                        "execution_id",
                                        "exec_1",
                                        "job_id",
                                        "job_1",
                                        "previous_state",
                                        "active",
                                        "resulting_state",
                                        "released",
                                        "priority",
                                        "high",
                                        NULL};
    assert_int_equal(http_fx_audit_count(&fx, forced_whole), 1);
    json_decref(lease);
}

/* Denials are audited (through the queue, within a second or so). */
static void test_denials_audited(void **state)
{
    (void)state;
    http_resp_t *r = acquire_call(fx.base, other_tenant, "audit-deny-1", "t-audit");
    check_reply(r, 403, "access_denied", NULL);
    http_resp_free(r);
    const char *const denied[] = {"result_code", "access_denied", "principal_id",
                                  "prn_other_tenant", NULL};
    long long n = 0;
    for (int i = 0; i < 50 && n == 0; i++) {
        n = http_fx_audit_count(&fx, denied);
        if (n == 0)
            usleep(100000);
    }
    assert_true(n >= 1);
    /* and never hold a token */
    const char *const token_text[] = {"*", "lsk_", NULL};
    assert_int_equal(http_fx_audit_count(&fx, token_text), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_credential_failures),
        cmocka_unit_test(test_scope),
        cmocka_unit_test(test_admin_operations),
        cmocka_unit_test(test_denials_audited),
    };
    return cmocka_run_group_tests(tests, setup, http_fx_teardown);
}
