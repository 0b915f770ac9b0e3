/*
 * valkey_ctl.c - the real leasectl binary against a real redis-server of the
 * test's own (docs/backends.md): `leasectl migrate` loads or checks the
 * function library and binds the namespace (and refuses a server without the
 * durability settings, a different library, a sealed namespace); `leasectl
 * credential create|list|revoke` on the same URL, by --database-url and by
 * LEASE_STORE_URL. A credential leasectl created authenticates against
 * leased on that server; one it revoked is refused within the cache window.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "child_proc.h"
#include "http_client.h"
#include "leased_proc.h"
#include "lease/clock.h"
#include "lease/result.h"
#include "lease/token.h"
#include "valkey_service.h"

/* Runs leasectl (ctl) and requires exit status want; *out as ctl's. */
static void expect(const char *const *args, const char *const *env, int want, char **out)
{
    int status = vk_leasectl(args, env, out);
    if (status != want)
        fail_msg("leasectl %s exited %d, expected %d: %s", args[0], status, want, *out);
}

static void migrate_loads_checks_and_binds(void **state)
{
    (void)state;
    vk_server_t s;
    memset(&s, 0, sizeof s);
    assert_true(vk_start(&s));
    char url[128], env_url[160];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", s.port);
    snprintf(env_url, sizeof env_url, "LEASE_STORE_URL=%s", url);
    const char *by_env[] = {env_url, NULL};
    char *out = NULL;

    /* a fresh server: --status finds the library missing, loads nothing */
    const char *status_args[] = {"migrate", "--status", "--database-url", url, NULL};
    expect(status_args, NULL, LEASE_EXIT_FAILURE, &out);
    assert_non_null(strstr(out, "not loaded"));
    free(out);
    redisReply *r = vk_cmd(&s, "FUNCTION LIST LIBRARYNAME leased_v1");
    assert_int_equal(r->elements, 0);
    freeReplyObject(r);

    /* migrate (LEASE_STORE_URL): loads and binds */
    const char *migrate_args[] = {"migrate", NULL};
    expect(migrate_args, by_env, LEASE_EXIT_OK, &out);
    json_t *o = vk_printed(out);
    assert_non_null(o);
    assert_string_equal(json_string_value(json_object_get(o, "backend")), "valkey");
    assert_string_equal(json_string_value(json_object_get(o, "library")), "leased_v1");
    assert_string_equal(json_string_value(json_object_get(o, "namespace")), "leased");
    assert_true(json_is_true(json_object_get(o, "bound")));
    assert_true(json_is_false(json_object_get(o, "sealed")));
    assert_int_equal(json_integer_value(json_object_get(o, "epoch")), 0);
    json_decref(o);
    free(out);
    r = vk_cmd(&s, "FUNCTION LIST LIBRARYNAME leased_v1");
    assert_int_equal(r->elements, 1);
    freeReplyObject(r);
    r = vk_cmd(&s, "HGET lease:{leased}:ns epoch");
    assert_string_equal(r->str, "0");
    freeReplyObject(r);

    /* repeatable; --status now current */
    expect(migrate_args, by_env, LEASE_EXIT_OK, &out);
    free(out);
    expect(status_args, NULL, LEASE_EXIT_OK, &out);
    o = vk_printed(out);
    assert_non_null(o);
    assert_true(json_is_true(json_object_get(o, "bound")));
    json_decref(o);
    free(out);

    /* another namespace of the same server (?namespace=) is bound on its own */
    char other[200];
    snprintf(other, sizeof other, "%s?namespace=team-b", url);
    const char *other_args[] = {"migrate", "--database-url", other, NULL};
    expect(other_args, NULL, LEASE_EXIT_OK, &out);
    free(out);
    r = vk_cmd(&s, "EXISTS lease:{team-b}:ns");
    assert_int_equal(r->integer, 1);
    freeReplyObject(r);

    /* a server that could lose or evict acknowledged answers is refused */
    const struct {
        const char *set, *restore, *named;
    } weak[] = {
        {"CONFIG SET appendfsync everysec", "CONFIG SET appendfsync always", "appendfsync always"},
        {"CONFIG SET maxmemory-policy allkeys-lru", "CONFIG SET maxmemory-policy noeviction",
         "maxmemory-policy noeviction"},
        {"CONFIG SET appendonly no", "CONFIG SET appendonly yes", "appendonly yes"},
    };
    for (size_t i = 0; i < sizeof weak / sizeof weak[0]; i++) {
        freeReplyObject(vk_cmd(&s, weak[i].set));
        expect(migrate_args, by_env, LEASE_EXIT_UNAVAILABLE, &out);
        assert_non_null(strstr(out, weak[i].named));
        free(out);
        freeReplyObject(vk_cmd(&s, weak[i].restore));
    }
    /* appendonly back on rewrites the AOF in the background: let it finish */
    for (int i = 0; i < 100; i++) {
        r = vk_cmd(&s, "INFO persistence");
        bool busy = strstr(r->str, "aof_rewrite_in_progress:1") != NULL;
        freeReplyObject(r);
        if (!busy)
            break;
        lease_sleep_ms(50);
    }

    /* both URLs: an error, as for leased; a PostgreSQL-only command says so */
    const char *both[] = {env_url, "LEASE_DATABASE_URL=postgresql:///x", NULL};
    expect(migrate_args, both, LEASE_EXIT_USAGE, &out);
    assert_non_null(strstr(out, "set one"));
    free(out);
    const char *verify_args[] = {"verify", NULL};
    expect(verify_args, by_env, LEASE_EXIT_USAGE, &out);
    assert_non_null(strstr(out, "PostgreSQL"));
    free(out);

    /* a restart seals: migrate does not bind again (that is a rebind) */
    assert_true(vk_restart(&s, NULL));
    expect(migrate_args, by_env, LEASE_EXIT_FAILURE, &out);
    assert_non_null(strstr(out, "rebind"));
    free(out);

    /* a different library under this version's name is refused, not replaced */
    freeReplyObject(vk_cmd(&s, "FUNCTION DELETE leased_v1"));
    r = vk_cmd(&s, "FUNCTION LOAD %s",
               "#!lua name=leased_v1\n"
               "redis.register_function('leased_v1_health', function() return 1 end)");
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    freeReplyObject(r);
    expect(migrate_args, by_env, LEASE_EXIT_UNAVAILABLE, &out);
    assert_non_null(strstr(out, "different leased_v1"));
    free(out);
    expect(status_args, NULL, LEASE_EXIT_UNAVAILABLE, &out);
    assert_non_null(strstr(out, "different leased_v1"));
    free(out);
    vk_stop(&s);
}

static long acquire(const char *base, const char *token, const char *rid, const char *target)
{
    http_resp_t *r =
        vk_post(base, "/v1/leases/acquire", token, vk_http_acquire(rid, target, "inst", 30000));
    long status = r->status;
    if (status == 200)
        assert_string_equal(http_resp_str(r, "code"), "lease_acquired");
    else if (status == 401)
        assert_string_equal(http_resp_str(r, "code"), "invalid_credential");
    http_resp_free(r);
    return status;
}

/* The one audit event of type with reason: by "leasectl:<user>", high
 * priority, appended by the function. */
static void credential_event_by_leasectl(vk_server_t *s, const char *type, const char *reason)
{
    assert_int_equal(
        vk_audit_count(s, "lease:{leased}:audit", "event_type", type, "reason", reason), 1);
    redisReply *x = vk_audit(s, "lease:{leased}:audit", false);
    for (size_t i = 0; i < x->elements; i++) {
        const redisReply *f = x->element[i]->element[1];
        const char *t = vk_str(f, "event_type"), *r = vk_str(f, "reason");
        if (!t || strcmp(t, type) != 0 || !r || strcmp(r, reason) != 0)
            continue;
        assert_string_equal(vk_str(f, "priority"), "high");
        assert_string_equal(vk_str(f, "source"), "function");
        assert_string_equal(vk_str(f, "tenant_id"), "tenant-main");
        assert_non_null(vk_str(f, "principal_id"));
        assert_true(strncmp(vk_str(f, "principal_id"), "leasectl:", 9) == 0);
    }
    freeReplyObject(x);
}

static void credentials_made_by_leasectl(void **state)
{
    (void)state;
    vk_server_t s;
    memset(&s, 0, sizeof s);
    assert_true(vk_start(&s));
    char url[128], env_url[160];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", s.port);
    snprintf(env_url, sizeof env_url, "LEASE_STORE_URL=%s", url);
    const char *by_env[] = {env_url, NULL};
    char *out = NULL;
    const char *migrate_args[] = {"migrate", NULL};
    expect(migrate_args, by_env, LEASE_EXIT_OK, &out);
    free(out);

    /* alice by --database-url (the harness's helper), bob by LEASE_STORE_URL */
    char alice_id[32];
    char *alice = leased_proc_credential(url,
                                         &(leased_cred_spec_t){.principal = "alice",
                                                               .tenant = VK_TENANT,
                                                               .program = VK_PROGRAM,
                                                               .capabilities = "targets:lease"},
                                         alice_id);
    const char *create_bob[] = {"credential",
                                "create",
                                "--principal",
                                "bob",
                                "--client",
                                "cl_bob",
                                "--tenant",
                                "Tenant-Main",
                                "--program",
                                VK_PROGRAM,
                                "--capability",
                                "targets:lease",
                                "--expires-in",
                                "1d",
                                "--description",
                                "bob's",
                                NULL};
    expect(create_bob, by_env, LEASE_EXIT_OK, &out);
    json_t *o = vk_printed(out);
    assert_non_null(o);
    char *bob = strdup(json_string_value(json_object_get(o, "token")));
    char *bob_id = strdup(json_string_value(json_object_get(o, "credential_id")));
    assert_string_equal(json_string_value(json_object_get(o, "tenant_id")), "tenant-main");
    assert_true(json_is_string(json_object_get(o, "expires_at")));
    assert_null(json_object_get(o, "secret_digest"));
    json_decref(o);
    free(out);
    /* audited in the same call, by leasectl's user, high priority */
    char reason[96];
    snprintf(reason, sizeof reason, "credential %s for bob", bob_id);
    credential_event_by_leasectl(&s, "credential_create", reason);
    /* only the digest is stored */
    redisReply *r = vk_cmd(&s, "HGET lease:{leased}:cred:%s secret_digest", bob_id);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_int_equal(strlen(r->str), 64);
    assert_null(strstr(bob, r->str));
    freeReplyObject(r);
    r = vk_cmd(&s, "KEYS *");
    /* The secret is the token's last 43 characters. Its base64url alphabet
     * holds '_', so the text after the last '_' can be one character long,
     * which a dump holds by chance. */
    assert_int_equal(strlen(bob), LEASE_TOKEN_MAX);
    const char *secret = bob + strlen(bob) - LEASE_SECRET_B64_LEN;
    for (size_t i = 0; i < r->elements; i++) {
        redisReply *dump = vk_cmd(&s, "DUMP %s", r->element[i]->str);
        /* the secret part of the token is nowhere */
        assert_true(dump->type != REDIS_REPLY_STRING ||
                    memmem(dump->str, dump->len, secret, LEASE_SECRET_B64_LEN) == NULL);
        freeReplyObject(dump);
    }
    freeReplyObject(r);

    /* list: both, without digests or tokens */
    const char *list_args[] = {"credential", "list", NULL};
    expect(list_args, by_env, LEASE_EXIT_OK, &out);
    assert_null(strstr(out, "secret_digest"));
    assert_null(strstr(out, "lsk_"));
    o = vk_printed(out);
    assert_non_null(o);
    json_t *creds = json_object_get(o, "credentials");
    assert_int_equal(json_array_size(creds), 2);
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(creds, 0), "credential_id")), alice_id);
    assert_string_equal(json_string_value(json_object_get(json_array_get(creds, 1), "description")),
                        "bob's");
    json_decref(o);
    free(out);

    char store[160];
    snprintf(store, sizeof store, "LEASE_STORE_URL=%s", url);
    const char *env[] = {store, "LEASE_CREDENTIAL_CACHE_MS=200", NULL};
    leased_proc_t *srv = leased_proc_start(NULL, env);
    const char *base = leased_proc_url(srv);
    assert_int_equal(acquire(base, alice, "a1", "t1"), 200);
    assert_int_equal(acquire(base, bob, "b1", "t2"), 200);

    /* revoke bob with leasectl: refused within the cache window (200 ms) */
    const char *revoke_args[] = {"credential", "revoke", bob_id, "--database-url", url, NULL};
    int64_t revoked_at = lease_mono_now_ns();
    expect(revoke_args, NULL, LEASE_EXIT_OK, &out);
    o = vk_printed(out);
    assert_non_null(o);
    assert_true(json_is_true(json_object_get(o, "revoked")));
    json_decref(o);
    free(out);
    snprintf(reason, sizeof reason, "credential %s", bob_id);
    credential_event_by_leasectl(&s, "credential_revoke", reason);
    long status = 200;
    int n = 0;
    while (status == 200 && (lease_mono_now_ns() - revoked_at) / 1000000 < 3000) {
        char rid[32], target[32];
        snprintf(rid, sizeof rid, "b%d", 2 + n);
        snprintf(target, sizeof target, "t3-%d", n++);
        status = acquire(base, bob, rid, target);
        if (status == 200)
            lease_sleep_ms(20);
    }
    int64_t refused_after_ms = (lease_mono_now_ns() - revoked_at) / 1000000;
    assert_int_equal(status, 401);
    /* the cache window plus the time leasectl took, not more */
    if (refused_after_ms > 200 + 1000)
        fail_msg("refused only %lld ms after the revocation", (long long)refused_after_ms);
    assert_int_equal(acquire(base, alice, "a2", "t4"), 200);

    /* revoking again: unknown or already revoked, exit 1 */
    expect(revoke_args, NULL, LEASE_EXIT_FAILURE, &out);
    assert_non_null(strstr(out, "already revoked"));
    free(out);
    expect(list_args, by_env, LEASE_EXIT_OK, &out);
    o = vk_printed(out);
    creds = json_object_get(o, "credentials");
    assert_true(json_is_null(json_object_get(json_array_get(creds, 0), "revoked_at")));
    assert_true(json_is_string(json_object_get(json_array_get(creds, 1), "revoked_at")));
    json_decref(o);
    free(out);

    assert_int_equal(leased_proc_stop(srv), 0);
    free(alice);
    free(bob);
    free(bob_id);
    vk_stop(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(migrate_loads_checks_and_binds),
        cmocka_unit_test(credentials_made_by_leasectl),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
