/*
 * test_auth_scope.c - the pure decisions of src/server/auth.c: capability
 * checks, canonical scope (tenant, program or "*", actor names or "*"), and
 * the Authorization header rules that reject a request before any credential
 * lookup. Lookups against a real database are tests/race/race_auth_cache.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "lease/token.h"
#include "server/auth.h"

static lease_caller_t worker(void)
{
    lease_caller_t c;
    memset(&c, 0, sizeof c);
    snprintf(c.principal.principal_id, sizeof c.principal.principal_id, "prn_worker");
    snprintf(c.principal.principal_class, sizeof c.principal.principal_class, "worker");
    snprintf(c.scope.tenant_id, sizeof c.scope.tenant_id, "tenant-main");
    snprintf(c.scope.program_id, sizeof c.scope.program_id, "program-a");
    c.scope.n_actors = 2;
    snprintf(c.scope.actor_names[0], sizeof c.scope.actor_names[0], "usernamegen");
    snprintf(c.scope.actor_names[1], sizeof c.scope.actor_names[1], "collector");
    c.capabilities = LEASE_CAP_LEASE | LEASE_CAP_READ;
    return c;
}

static lease_caller_t admin(void)
{
    lease_caller_t c = worker();
    c.admin = true;
    snprintf(c.principal.principal_class, sizeof c.principal.principal_class, "admin");
    snprintf(c.scope.program_id, sizeof c.scope.program_id, "*");
    c.scope.all_actors = true;
    c.scope.n_actors = 0;
    c.capabilities = LEASE_CAP_LEASE | LEASE_CAP_READ | LEASE_CAP_FORCE_RELEASE | LEASE_CAP_REVOKE |
                     LEASE_CAP_AUDIT_READ;
    return c;
}

static lease_identity_t ident(const char *tenant, const char *program, const char *actor)
{
    lease_identity_t id;
    memset(&id, 0, sizeof id);
    snprintf(id.tenant_id, sizeof id.tenant_id, "%s", tenant);
    snprintf(id.program_id, sizeof id.program_id, "%s", program);
    snprintf(id.target_namespace, sizeof id.target_namespace, "starintel-target");
    snprintf(id.target_id, sizeof id.target_id, "target_01");
    snprintf(id.actor_name, sizeof id.actor_name, "%s", actor);
    snprintf(id.workflow_name, sizeof id.workflow_name, "default");
    snprintf(id.operation_class, sizeof id.operation_class, "default");
    return id;
}

static void test_capabilities(void **state)
{
    (void)state;
    lease_caller_t w = worker();
    assert_true(lease_auth_has(&w, LEASE_CAP_LEASE));
    assert_true(lease_auth_has(&w, LEASE_CAP_READ));
    assert_true(lease_auth_has(&w, LEASE_CAP_LEASE | LEASE_CAP_READ));
    assert_false(lease_auth_has(&w, LEASE_CAP_AUDIT_READ));
    assert_false(lease_auth_has(&w, LEASE_CAP_LEASE | LEASE_CAP_AUDIT_READ));
    assert_false(lease_auth_has(&w, LEASE_CAP_FORCE_RELEASE));
    assert_false(lease_auth_has(&w, LEASE_CAP_REVOKE));
    assert_false(lease_auth_has(NULL, LEASE_CAP_LEASE));

    w.capabilities = LEASE_CAP_READ;
    assert_false(lease_auth_has(&w, LEASE_CAP_LEASE));
    assert_true(lease_auth_has(&w, LEASE_CAP_READ));

    lease_caller_t a = admin();
    assert_true(lease_auth_has(&a, LEASE_CAP_FORCE_RELEASE));
    assert_true(lease_auth_has(&a, LEASE_CAP_REVOKE));
    assert_true(
        lease_auth_has(&a, LEASE_CAP_FORCE_RELEASE | LEASE_CAP_REVOKE | LEASE_CAP_AUDIT_READ));
    a.capabilities &= ~(unsigned)LEASE_CAP_REVOKE;
    assert_false(lease_auth_has(&a, LEASE_CAP_REVOKE));
    assert_true(lease_auth_has(&a, LEASE_CAP_FORCE_RELEASE));
}

/* Administrative capabilities need an administrator credential even when a
 * worker's bits somehow carry them. */
static void test_admin_capabilities_need_admin(void **state)
{
    (void)state;
    lease_caller_t w = worker();
    w.capabilities |= LEASE_CAP_FORCE_RELEASE | LEASE_CAP_REVOKE;
    assert_false(lease_auth_has(&w, LEASE_CAP_FORCE_RELEASE));
    assert_false(lease_auth_has(&w, LEASE_CAP_REVOKE));
    assert_true(lease_auth_has(&w, LEASE_CAP_LEASE));
    w.admin = true;
    assert_true(lease_auth_has(&w, LEASE_CAP_FORCE_RELEASE));
}

static void test_worker_scope(void **state)
{
    (void)state;
    lease_caller_t w = worker();
    lease_identity_t id = ident("tenant-main", "program-a", "usernamegen");
    assert_true(lease_auth_in_scope(&w, &id));
    id = ident("tenant-main", "program-a", "collector");
    assert_true(lease_auth_in_scope(&w, &id));

    id = ident("tenant-other", "program-a", "usernamegen");
    assert_false(lease_auth_in_scope(&w, &id));
    id = ident("tenant-main", "program-b", "usernamegen");
    assert_false(lease_auth_in_scope(&w, &id));
    id = ident("tenant-main", "program-a", "enricher");
    assert_false(lease_auth_in_scope(&w, &id));
    /* no prefix or suffix matching */
    id = ident("tenant-main", "program-a", "usernamege");
    assert_false(lease_auth_in_scope(&w, &id));
    id = ident("tenant-main", "program-a", "usernamegen2");
    assert_false(lease_auth_in_scope(&w, &id));
    id = ident("tenant-mai", "program-a", "usernamegen");
    assert_false(lease_auth_in_scope(&w, &id));
    id = ident("tenant-main", "program-ab", "usernamegen");
    assert_false(lease_auth_in_scope(&w, &id));
    /* a "*" in a request never acts as a wildcard */
    id = ident("tenant-main", "*", "usernamegen");
    assert_false(lease_auth_in_scope(&w, &id));
    id = ident("tenant-main", "program-a", "*");
    assert_false(lease_auth_in_scope(&w, &id));

    assert_false(lease_auth_in_scope(NULL, &id));
    assert_false(lease_auth_in_scope(&w, NULL));
}

static void test_all_actors(void **state)
{
    (void)state;
    lease_caller_t w = worker();
    w.scope.all_actors = true;
    w.scope.n_actors = 0;
    lease_identity_t id = ident("tenant-main", "program-a", "anything-at-all");
    assert_true(lease_auth_in_scope(&w, &id));
    id = ident("tenant-main", "program-b", "anything-at-all");
    assert_false(lease_auth_in_scope(&w, &id));
}

static void test_admin_program_wildcard(void **state)
{
    (void)state;
    lease_caller_t a = admin();
    lease_identity_t id = ident("tenant-main", "program-a", "usernamegen");
    assert_true(lease_auth_in_scope(&a, &id));
    id = ident("tenant-main", "program-zzz", "other");
    assert_true(lease_auth_in_scope(&a, &id));
    /* the tenant is never a wildcard */
    id = ident("tenant-other", "program-a", "usernamegen");
    assert_false(lease_auth_in_scope(&a, &id));

    /* a worker whose scope says "*" gets nothing from it */
    lease_caller_t w = worker();
    snprintf(w.scope.program_id, sizeof w.scope.program_id, "*");
    id = ident("tenant-main", "program-a", "usernamegen");
    assert_false(lease_auth_in_scope(&w, &id));
    assert_false(lease_auth_program_in_scope(&w, "tenant-main", "program-a"));
}

static void test_empty_scope_grants_nothing(void **state)
{
    (void)state;
    lease_caller_t none;
    memset(&none, 0, sizeof none);
    lease_identity_t id = ident("tenant-main", "program-a", "usernamegen");
    assert_false(lease_auth_in_scope(&none, &id));
    assert_false(lease_auth_program_in_scope(&none, "tenant-main", "program-a"));
    assert_false(lease_auth_program_in_scope(&none, "", ""));

    lease_caller_t w = worker();
    w.scope.n_actors = 0; /* no actors and no wildcard: no identity fits */
    assert_false(lease_auth_in_scope(&w, &id));
}

static void test_program_filters(void **state)
{
    (void)state;
    lease_caller_t w = worker();
    assert_true(lease_auth_program_in_scope(&w, "tenant-main", "program-a"));
    assert_false(lease_auth_program_in_scope(&w, "tenant-main", "program-b"));
    assert_false(lease_auth_program_in_scope(&w, "tenant-other", "program-a"));
    assert_false(lease_auth_program_in_scope(&w, "tenant-main", "*"));
    assert_false(lease_auth_program_in_scope(&w, NULL, "program-a"));
    assert_false(lease_auth_program_in_scope(&w, "tenant-main", NULL));
    assert_false(lease_auth_program_in_scope(&w, "tenant-main", ""));
    assert_false(lease_auth_program_in_scope(NULL, "tenant-main", "program-a"));

    lease_caller_t a = admin();
    assert_true(lease_auth_program_in_scope(&a, "tenant-main", "program-b"));
    /* a filter of "*" is not a request for everything */
    assert_false(lease_auth_program_in_scope(&a, "tenant-main", "*"));
    assert_false(lease_auth_program_in_scope(&a, "tenant-other", "program-b"));
}

/* A store whose every operation is a test failure: headers that are not a
 * well-formed bearer token must be refused before any lookup. */
static int lookups;
static lease_code_t refusing_lookup(lease_store_t *s, const char *id, const lease_deadline_t *d,
                                    lease_credential_t *out, bool *found)
{
    (void)s, (void)id, (void)d, (void)out;
    lookups++;
    *found = false;
    return LEASE_BACKEND_UNAVAILABLE;
}

static void test_malformed_headers_never_reach_the_store(void **state)
{
    (void)state;
    static const lease_store_ops_t ops = {.credential_lookup = refusing_lookup};
    lease_store_t store = {.ops = &ops, .impl = NULL};
    lease_auth_config_t cfg = {.cache_ttl_ms = 1000, .pepper = NULL};
    lease_auth_t *auth = lease_auth_new(&store, &cfg);
    assert_non_null(auth);

    const char *tok =
        "lsk_key_abcdefghijklmnopqrstuvwxyz_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8";
    char buf[256];
    const char *bad[] = {
        NULL,
        "",
        "Bearer",
        "Bearer ",
        "Bearer    ",
        "Basic dXNlcjpwYXNz",
        "Token lsk_key_abcdefghijklmnopqrstuvwxyz_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8",
        "Bearerlsk_key_abcdefghijklmnopqrstuvwxyz_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8",
        "lsk_key_abcdefghijklmnopqrstuvwxyz_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8",
        "Bearer lsk_key_abcdefghijklmnopqrstuvwxyz_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8 ",
        "Bearer lsk_key_abcdefghijklmnopqrstuvwxyz_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh",
        "Bearer lsk_key_ABCDEFGHIJKLMNOPQRSTUVWXYZ_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8",
        "Bearer\tlsk_key_abcdefghijklmnopqrstuvwxyz_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        lease_caller_t caller;
        memset(&caller, 0xab, sizeof caller);
        lease_code_t code = LEASE_ACQUIRED;
        assert_false(lease_auth_authenticate(auth, bad[i], NULL, &caller, &code));
        assert_int_equal(code, LEASE_INVALID_CREDENTIAL);
        /* nothing of a failed attempt is left in the caller */
        assert_string_equal(caller.principal.principal_id, "");
        assert_int_equal(caller.capabilities, 0);
    }
    assert_int_equal(lookups, 0);

    /* the well-formed token (any scheme case) does reach the store, whose
     * failure is reported as such and not as a bad credential */
    const char *schemes[] = {"Bearer ", "bearer ", "BEARER  "};
    for (size_t i = 0; i < 3; i++) {
        snprintf(buf, sizeof buf, "%s%s", schemes[i], tok);
        lease_caller_t caller;
        lease_code_t code = LEASE_ACQUIRED;
        assert_false(lease_auth_authenticate(auth, buf, NULL, &caller, &code));
        assert_int_equal(code, LEASE_BACKEND_UNAVAILABLE);
    }
    /* backend failures are not cached: each attempt asked again */
    assert_int_equal(lookups, 3);
    lease_auth_free(auth);
    lease_auth_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capabilities),
        cmocka_unit_test(test_admin_capabilities_need_admin),
        cmocka_unit_test(test_worker_scope),
        cmocka_unit_test(test_all_actors),
        cmocka_unit_test(test_admin_program_wildcard),
        cmocka_unit_test(test_empty_scope_grants_nothing),
        cmocka_unit_test(test_program_filters),
        cmocka_unit_test(test_malformed_headers_never_reach_the_store),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
