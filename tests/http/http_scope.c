/*
 * http_scope.c - the answers the contract names for scope on reads
 * (docs/api.md, "Authentication and scope"):
 * - a request that names an identity, tenant or program outside the
 *   credential's scope answers 403 access_denied (inspect by identity, list
 *   by program, by target, by owner with a named scope), and changes
 *   nothing;
 * - an opaque lease_id outside scope answers 404 lease_not_found, the
 *   same answer as a lease id that does not exist;
 * - {"by":"owner"} alone lists the caller's own leases in its credential's
 *   scope; an administrator credential of every program ("*") must name
 *   program_id (400 naming the field), and may then list.
 * Outcomes are observed through the API and the audit as each backend
 * keeps it, and in Postgres's tables too when it is the store.
 */
#include "http_common.h"

static http_fx_t fx;
static const char *worker, *other_worker, *other_tenant, *other_program, *crawler_only, *admin,
    *admin_other_tenant; /* owned by fx */

static const char *cred(const char *principal, const char *tenant, const char *program,
                        const char *actors, const char *caps, bool is_admin)
{
    return http_fx_credential_spec(&fx,
                                   &(leased_cred_spec_t){.principal = principal,
                                                         .tenant = tenant,
                                                         .program = program,
                                                         .actors = actors,
                                                         .capabilities = caps,
                                                         .admin = is_admin},
                                   NULL);
}

static int setup(void **state)
{
    http_fx_open(&fx, state, "http_scope");
    worker = cred("prn_scope_worker", TENANT, PROGRAM, NULL, WORKER_CAPS, false);
    other_worker = cred("prn_scope_other", TENANT, PROGRAM, NULL, WORKER_CAPS, false);
    other_tenant = cred("prn_scope_tenant_b", "tenant-other", PROGRAM, NULL, WORKER_CAPS, false);
    other_program = cred("prn_scope_program_b", TENANT, "program-b", NULL, WORKER_CAPS, false);
    crawler_only = cred("prn_scope_crawler", TENANT, PROGRAM, "crawler", WORKER_CAPS, false);
    admin = cred("prn_scope_admin", TENANT, "*", NULL,
                 "targets:lease,targets:read,targets:force-release,targets:revoke", true);
    admin_other_tenant =
        cred("prn_scope_admin_b", "tenant-other", "*", NULL, "targets:lease,targets:read", true);
    http_fx_serve(&fx, NULL);
    return 0;
}

/* A list request; NULL members are left out. */
static char *list_req(const char *by, const char *tenant, const char *program, const char *target)
{
    json_t *o = json_pack("{s:s}", "by", by);
    if (tenant)
        json_object_set_new(o, "tenant_id", json_string(tenant));
    if (program)
        json_object_set_new(o, "program_id", json_string(program));
    if (target) {
        json_object_set_new(o, "target_namespace", json_string(NAMESPACE));
        json_object_set_new(o, "target_id", json_string(target));
    }
    return dump(o);
}

static http_resp_t *list_call(const char *token, char *body)
{
    return call_owned(fx.base, "POST", "/v1/leases/list", token, body);
}

/* The lease ids of a lease_listed reply, as one sorted comma-joined text. */
static char *listed_ids(const http_resp_t *r)
{
    json_t *leases = http_resp_get(r, "leases");
    assert_true(json_is_array(leases));
    size_t n = json_array_size(leases);
    const char **ids = calloc(n + 1, sizeof *ids);
    for (size_t i = 0; i < n; i++)
        ids[i] = json_string_value(json_object_get(json_array_get(leases, i), "lease_id"));
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && strcmp(ids[j - 1], ids[j]) > 0; j--) {
            const char *t = ids[j];
            ids[j] = ids[j - 1];
            ids[j - 1] = t;
        }
    char *out = calloc(1, n * 64 + 1);
    for (size_t i = 0; i < n; i++) {
        if (i)
            strcat(out, ",");
        strcat(out, ids[i]);
    }
    free(ids);
    return out;
}

/* The live leases of PROGRAM, as the administrator's list shows them
 * (every page): their ids and tokens as one text in the list's order, so
 * that a denial that changed any of them (a new lease, an ended one, a new
 * token) is seen. Every lease of this file is in PROGRAM. */
static char *live_leases(void)
{
    char *all = strdup("");
    char *page_token = NULL;
    do {
        json_t *req = parse_owned(list_req("program", TENANT, PROGRAM, NULL));
        if (page_token)
            json_object_set_new(req, "page_token", json_string(page_token));
        free(page_token);
        page_token = NULL;
        http_resp_t *r = list_call(admin, dump(req));
        check_reply(r, 200, "lease_listed", NULL);
        json_t *leases = http_resp_get(r, "leases");
        for (size_t i = 0; i < json_array_size(leases); i++) {
            json_t *l = json_array_get(leases, i);
            char *more = NULL;
            assert_true(asprintf(&more, "%s%s:%lld,", all,
                                 json_string_value(json_object_get(l, "lease_id")),
                                 json_integer_value(json_object_get(l, "fencing_token"))) > 0);
            free(all);
            all = more;
        }
        if (http_resp_str(r, "next_page_token"))
            page_token = strdup(http_resp_str(r, "next_page_token"));
        http_resp_free(r);
    } while (page_token);
    return all;
}

/* The number of live leases in Postgres's table (Postgres only; on both
 * backends live_leases says the same through the API). */
static long long lease_rows(void)
{
    return testpg_query_int(fx.db, "SELECT count(*) FROM lease.locks WHERE state = 'active'");
}

static void test_named_scope_outside_is_forbidden(void **state)
{
    (void)state;
    json_t *lease = acquire_lease(fx.base, worker, "sc-acq-1", "t-scope-a");
    char *live_before = live_leases();
    assert_non_null(strstr(live_before, json_string_value(json_object_get(lease, "lease_id"))));
    long long before = fx.valkey ? 0 : lease_rows();

    /* inspect by identity: other tenant, other program, actor outside the set */
    const char *const outsiders[] = {other_tenant, other_program, crawler_only, admin_other_tenant};
    for (size_t i = 0; i < sizeof outsiders / sizeof outsiders[0]; i++) {
        http_resp_t *r = call_owned(fx.base, "POST", "/v1/leases/inspect", outsiders[i],
                                    inspect_body("t-scope-a"));
        check_reply(r, 403, "access_denied", NULL);
        assert_null(http_resp_get(r, "lease"));
        http_resp_free(r);
    }
    /* the same identity with no lease at all answers the same 403: the
     * answer depends on the scope named, never on what exists */
    http_resp_t *r = call_owned(fx.base, "POST", "/v1/leases/inspect", other_tenant,
                                inspect_body("t-scope-never-held"));
    check_reply(r, 403, "access_denied", NULL);
    http_resp_free(r);

    /* lists naming another tenant or program */
    r = list_call(other_tenant, list_req("program", TENANT, PROGRAM, NULL));
    check_reply(r, 403, "access_denied", NULL);
    http_resp_free(r);
    r = list_call(other_program, list_req("target", TENANT, PROGRAM, "t-scope-a"));
    check_reply(r, 403, "access_denied", NULL);
    http_resp_free(r);
    r = list_call(worker, list_req("program", TENANT, "program-b", NULL));
    check_reply(r, 403, "access_denied", NULL);
    http_resp_free(r);
    r = list_call(worker, list_req("owner", "tenant-other", NULL, NULL));
    check_reply(r, 403, "access_denied", NULL);
    http_resp_free(r);
    r = list_call(worker, list_req("owner", NULL, "program-b", NULL));
    check_reply(r, 403, "access_denied", NULL);
    http_resp_free(r);
    /* an administrator of every program, but of another tenant */
    r = list_call(admin_other_tenant, list_req("program", TENANT, PROGRAM, NULL));
    check_reply(r, 403, "access_denied", NULL);
    http_resp_free(r);

    /* the same requests in scope are answered */
    r = call_owned(fx.base, "POST", "/v1/leases/inspect", worker, inspect_body("t-scope-a"));
    check_reply(r, 200, "lease_inspected", NULL);
    assert_true(json_equal(http_resp_get(r, "lease.lease_id"), json_object_get(lease, "lease_id")));
    http_resp_free(r);
    r = list_call(admin, list_req("target", TENANT, PROGRAM, "t-scope-a"));
    check_reply(r, 200, "lease_listed", NULL);
    assert_int_equal(json_array_size(http_resp_get(r, "leases")), 1);
    http_resp_free(r);

    char *live_after = live_leases();
    assert_string_equal(live_after, live_before);
    free(live_after);
    free(live_before);
    if (!fx.valkey)
        assert_int_equal(lease_rows(), before);
    json_decref(lease);
}

static void test_lease_id_outside_scope_is_not_found(void **state)
{
    (void)state;
    json_t *lease = acquire_lease(fx.base, worker, "sc-acq-2", "t-scope-b");
    char path[256];
    snprintf(path, sizeof path, "/v1/leases/%s",
             json_string_value(json_object_get(lease, "lease_id")));

    /* one answer for "outside your scope" and "does not exist" */
    http_resp_t *missing = call(fx.base, "GET", "/v1/leases/lease_00000000000000000000000000000000",
                                other_tenant, NULL);
    check_reply(missing, 404, "lease_not_found", NULL);
    const char *const outsiders[] = {other_tenant, other_program, crawler_only, admin_other_tenant};
    for (size_t i = 0; i < sizeof outsiders / sizeof outsiders[0]; i++) {
        http_resp_t *r = call(fx.base, "GET", path, outsiders[i], NULL);
        check_reply(r, 404, "lease_not_found", NULL);
        assert_null(http_resp_get(r, "lease"));
        assert_string_equal(http_resp_str(r, "msg"), http_resp_str(missing, "msg"));
        assert_true(json_equal(json_object_get(r->json, "retryable"),
                               json_object_get(missing->json, "retryable")));
        assert_null(json_object_get(r->json, "field"));
        http_resp_free(r);
    }
    http_resp_free(missing);

    /* in scope, the same id is found */
    http_resp_t *r = call(fx.base, "GET", path, admin, NULL);
    check_reply(r, 200, "lease_inspected", NULL);
    http_resp_free(r);
    json_decref(lease);
}

static void test_list_by_owner_alone(void **state)
{
    (void)state;
    json_t *mine1 = acquire_lease(fx.base, worker, "sc-own-1", "t-owner-1");
    json_t *mine2 = acquire_lease(fx.base, worker, "sc-own-2", "t-owner-2");
    json_t *theirs = acquire_lease(fx.base, other_worker, "sc-own-3", "t-owner-3");
    /* and one of the administrator, another principal */
    json_t *elsewhere = acquire_lease(fx.base, admin, "sc-own-4", "t-owner-4");

    /* other tests of this file hold leases of this worker too: only the
     * t-owner-* ones are counted */
    http_resp_t *r = list_call(worker, dump(json_pack("{s:s}", "by", "owner")));
    check_reply(r, 200, "lease_listed", NULL);
    json_t *leases = http_resp_get(r, "leases");
    size_t owned = 0;
    for (size_t i = 0; i < json_array_size(leases); i++) {
        json_t *l = json_array_get(leases, i);
        const char *target =
            json_string_value(json_object_get(json_object_get(l, "lock_identity"), "target_id"));
        assert_non_null(target);
        assert_false(strcmp(target, "t-owner-3") == 0); /* another principal's */
        assert_false(strcmp(target, "t-owner-4") == 0);
        if (strncmp(target, "t-owner-", 8) == 0)
            owned++;
    }
    assert_int_equal(owned, 2);
    http_resp_free(r);

    /* the other worker sees exactly its own one */
    r = list_call(other_worker, dump(json_pack("{s:s}", "by", "owner")));
    check_reply(r, 200, "lease_listed", NULL);
    char *ids = listed_ids(r);
    assert_string_equal(ids, json_string_value(json_object_get(theirs, "lease_id")));
    free(ids);
    http_resp_free(r);

    /* naming the credential's own scope is the same list */
    r = list_call(other_worker, list_req("owner", TENANT, PROGRAM, NULL));
    check_reply(r, 200, "lease_listed", NULL);
    ids = listed_ids(r);
    assert_string_equal(ids, json_string_value(json_object_get(theirs, "lease_id")));
    free(ids);
    http_resp_free(r);

    /* the administrator of every program must name the program */
    r = list_call(admin, dump(json_pack("{s:s}", "by", "owner")));
    check_reply(r, 400, "invalid_lease_request", NULL);
    assert_string_equal(http_resp_str(r, "field"), "program_id");
    http_resp_free(r);
    r = list_call(admin, list_req("owner", TENANT, NULL, NULL));
    check_reply(r, 400, "invalid_lease_request", NULL);
    assert_string_equal(http_resp_str(r, "field"), "program_id");
    http_resp_free(r);
    /* and then lists its own leases there (the tenant defaults to its own) */
    r = list_call(admin, list_req("owner", NULL, PROGRAM, NULL));
    check_reply(r, 200, "lease_listed", NULL);
    ids = listed_ids(r);
    assert_string_equal(ids, json_string_value(json_object_get(elsewhere, "lease_id")));
    free(ids);
    http_resp_free(r);

    json_decref(mine1);
    json_decref(mine2);
    json_decref(theirs);
    json_decref(elsewhere);
}

/* Denials of reads are audited like every other request. */
static void test_read_denials_audited(void **state)
{
    (void)state;
    http_resp_t *r = call_owned(fx.base, "POST", "/v1/leases/inspect", other_program,
                                inspect_body("t-scope-audit"));
    check_reply(r, 403, "access_denied", NULL);
    http_resp_free(r);
    const char *const denied[] = {"result_code",
                                  "access_denied",
                                  "principal_id",
                                  "prn_scope_program_b",
                                  "event_type",
                                  "target_lease_inspect",
                                  NULL};
    long long n = 0;
    for (int i = 0; i < 100 && n == 0; i++) {
        n = http_fx_audit_count(&fx, denied);
        if (n == 0)
            usleep(50000);
    }
    assert_true(n >= 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_named_scope_outside_is_forbidden),
        cmocka_unit_test(test_lease_id_outside_scope_is_not_found),
        cmocka_unit_test(test_list_by_owner_alone),
        cmocka_unit_test(test_read_denials_audited),
    };
    return cmocka_run_group_tests(tests, setup, http_fx_teardown);
}
