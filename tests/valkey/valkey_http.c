/*
 * valkey_http.c - leased on Valkey over real HTTP: a redis-server of the
 * test's own (tests/harness/valkeyserver), its namespace bound and two
 * worker credentials created through the adapter (digests only), leased
 * started with LEASE_STORE_URL=redis://... and no database. Acquire, renew,
 * inspect, list, release, their batches, a conflict, a takeover after
 * expiry with a greater token, a revoked credential refused, a watch that
 * waits, and the typed refusal of what needs PostgreSQL (a fenced commit's
 * publication); then a server without the durability settings, which
 * leased refuses to start on, and both stores set (TLS: valkey_tls.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http_client.h"
#include "leased_proc.h"
#include "lease/clock.h"
#include "lease/store_valkey.h"
#include "lease/token.h"
#include "valkey_service.h"

static void leases_over_http(void **state)
{
    (void)state;
    vk_server_t s;
    memset(&s, 0, sizeof s);
    assert_true(vk_start(&s));
    char err[256] = "";
    lease_valkey_t *v = vk_open_bound(&s, "leased");
    assert_non_null(v);
    char alice_id[LEASE_CREDENTIAL_ID_LEN + 1], bob_id[LEASE_CREDENTIAL_ID_LEN + 1];
    char *alice = vk_make_credential(v, "alice", alice_id);
    char *bob = vk_make_credential(v, "bob", bob_id);

    const char *extra[] = {"LEASE_CREDENTIAL_CACHE_MS=100", NULL};
    leased_proc_t *srv = vk_leased_start(&s, extra);
    const char *base = leased_proc_url(srv);

    /* an unknown token is refused before any lease access */
    http_resp_t *r = vk_post_expect(
        base, "/v1/leases/acquire",
        "lsk_key_aaaaaaaaaaaaaaaaaaaaaaaaaa_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        vk_http_acquire("r0", "t1", "inst_a", 30000), 401, "invalid_credential");
    http_resp_free(r);

    http_resp_t *a =
        vk_post_expect(base, "/v1/leases/acquire", alice,
                       vk_http_acquire("r1", "t1", "inst_a", 30000), 200, "lease_acquired");
    long long first = vk_token_of(a);
    assert_int_equal(first, 1);
    assert_string_equal(json_string_value(http_resp_get(a, "lease.state")), "active");

    /* the same request id again: the stored answer */
    r = vk_post_expect(base, "/v1/leases/acquire", alice,
                       vk_http_acquire("r1", "t1", "inst_a", 30000), 200, "lease_acquired");
    assert_int_equal(vk_token_of(r), first);
    assert_true(json_is_true(http_resp_get(r, "replayed")));
    http_resp_free(r);

    r = vk_post_expect(base, "/v1/leases/acquire", bob,
                       vk_http_acquire("b1", "t1", "inst_b", 30000), 409, "lease_conflict");
    http_resp_free(r);

    json_t *renew = vk_http_owner("r2", "t1", a, "inst_a");
    json_object_set_new(renew, "ttl_ms", json_integer(45000));
    r = vk_post_expect(base, "/v1/leases/renew", alice, renew, 200, "lease_renewed");
    assert_int_equal(vk_token_of(r), first);
    assert_int_equal(json_integer_value(http_resp_get(r, "lease.ttl_ms")), 45000);
    http_resp_free(r);

    r = vk_post_expect(base, "/v1/leases/inspect", alice,
                       json_pack("{s:o}", "lock_identity", vk_identity("t1")), 200,
                       "lease_inspected");
    assert_string_equal(json_string_value(http_resp_get(r, "lease.lease_id")),
                        json_string_value(http_resp_get(a, "lease.lease_id")));
    http_resp_free(r);

    http_resp_t *a2 =
        vk_post_expect(base, "/v1/leases/acquire", alice,
                       vk_http_acquire("r3", "t2", "inst_a", 30000), 200, "lease_acquired");
    r = vk_post_expect(base, "/v1/leases/list", bob,
                       json_pack("{s:s, s:s, s:s, s:i}", "by", "program", "tenant_id", VK_TENANT,
                                 "program_id", VK_PROGRAM, "page_size", 1),
                       200, "lease_listed");
    json_t *leases = http_resp_get(r, "leases");
    assert_int_equal(json_array_size(leases), 1);
    assert_string_equal(
        json_string_value(json_object_get(
            json_object_get(json_array_get(leases, 0), "lock_identity"), "target_id")),
        "t1");
    const char *next = http_resp_str(r, "next_page_token");
    assert_non_null(next);
    http_resp_t *r2 = vk_post_expect(base, "/v1/leases/list", bob,
                                     json_pack("{s:s, s:s, s:s, s:i, s:s}", "by", "program",
                                               "tenant_id", VK_TENANT, "program_id", VK_PROGRAM,
                                               "page_size", 1, "page_token", next),
                                     200, "lease_listed");
    leases = http_resp_get(r2, "leases");
    assert_int_equal(json_array_size(leases), 1);
    assert_string_equal(
        json_string_value(json_object_get(
            json_object_get(json_array_get(leases, 0), "lock_identity"), "target_id")),
        "t2");
    assert_null(http_resp_str(r2, "next_page_token"));
    http_resp_free(r2);
    http_resp_free(r);
    /* by owner: bob holds nothing */
    r = vk_post_expect(base, "/v1/leases/list", bob,
                       json_pack("{s:s, s:s, s:s}", "by", "owner", "tenant_id", VK_TENANT,
                                 "program_id", VK_PROGRAM),
                       200, "lease_listed");
    assert_int_equal(json_array_size(http_resp_get(r, "leases")), 0);
    http_resp_free(r);

    r = vk_post_expect(base, "/v1/leases/release", alice, vk_http_owner("r4", "t1", a, "inst_a"),
                       200, "lease_released");
    assert_string_equal(json_string_value(http_resp_get(r, "lease.state")), "released");
    http_resp_free(r);
    /* a release of a lease no longer held */
    r = vk_post_expect(base, "/v1/leases/renew", alice, vk_http_owner("r5", "t1", a, "inst_a"), 409,
                       "lease_lost");
    http_resp_free(r);

    /* takeover: bob after the release, alice after bob's lease expired */
    http_resp_t *b =
        vk_post_expect(base, "/v1/leases/acquire", bob, vk_http_acquire("b2", "t1", "inst_b", 1500),
                       200, "lease_acquired");
    assert_true(vk_token_of(b) > first);
    lease_sleep_ms(1700);
    r = vk_post_expect(base, "/v1/leases/renew", bob, vk_http_owner("b3", "t1", b, "inst_b"), 409,
                       "lease_lost");
    http_resp_free(r);
    http_resp_t *c =
        vk_post_expect(base, "/v1/leases/acquire", alice,
                       vk_http_acquire("r6", "t1", "inst_a", 30000), 200, "lease_acquired");
    assert_true(vk_token_of(c) > vk_token_of(b));

    /* an acquire that waits: bob's wait outlasts alice's short lease */
    http_resp_t *short_lease =
        vk_post_expect(base, "/v1/leases/acquire", alice,
                       vk_http_acquire("w1", "t5", "inst_a", 1500), 200, "lease_acquired");
    json_t *waiting = vk_http_acquire("w2", "t5", "inst_b", 30000);
    json_object_set_new(waiting, "wait_ms", json_integer(5000));
    int64_t began = lease_mono_now_ns();
    r = vk_post_expect(base, "/v1/leases/acquire", bob, waiting, 200, "lease_acquired");
    int64_t waited_ms = (lease_mono_now_ns() - began) / 1000000;
    assert_true(waited_ms >= 800); /* it waited for the expiry */
    assert_true(vk_token_of(r) > vk_token_of(short_lease));
    http_resp_free(r);
    http_resp_free(short_lease);

    /* a watch of a lease that stays active: the lease as it is once the
     * wait is over (ends waking it: http_watch_valkey, valkey_watch) */
    char path[160];
    snprintf(path, sizeof path, "/v1/leases/%s/watch?wait_ms=300",
             json_string_value(http_resp_get(c, "lease.lease_id")));
    began = lease_mono_now_ns();
    r = http_call(base, "GET", path, alice, NULL);
    assert_non_null(r);
    vk_expect_code(r, 200, "lease_inspected");
    assert_string_equal(json_string_value(http_resp_get(r, "lease.state")), "active");
    assert_true(lease_mono_now_ns() - began >= 300 * 1000000LL); /* it waited */
    http_resp_free(r);

    /* what needs PostgreSQL says so */

    json_t *commit = json_pack("{s:s, s:o, s:O, s:O, s:s, s:s, s:[{s:s, s:s, s:{s:i}}]}",
                               "request_id", "r7", "lock_identity", vk_identity("t1"), "lease_id",
                               http_resp_get(c, "lease.lease_id"), "fencing_token",
                               http_resp_get(c, "lease.fencing_token"), "execution_id", "exec_1",
                               "trace_id", "trace_1", "writes", "kind", "publication", "topic",
                               "results", "payload", "x", 1);
    /* a publication: the outbox is PostgreSQL's (documents: valkey_commits) */
    r = vk_post_expect(base, "/v1/commits", alice, commit, 503, "lease_backend_unavailable");
    http_resp_free(r);

    /* batches: each item decided as alone */
    json_t *items = json_array();
    json_array_append_new(items, vk_http_owner("r8", "t1", c, "inst_a"));
    json_array_append_new(items, vk_http_owner("r9", "t1", b, "inst_b")); /* bob's, ended */
    r = vk_post_expect(base, "/v1/leases/renew-batch", alice, json_pack("{s:o}", "renewals", items),
                       200, "lease_renewed");
    json_t *results = http_resp_get(r, "results");
    assert_int_equal(json_array_size(results), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(results, 0), "code")),
                        "lease_renewed");
    assert_string_equal(json_string_value(json_object_get(json_array_get(results, 1), "code")),
                        "lease_lost");
    http_resp_free(r);
    items = json_array();
    json_array_append_new(items, vk_http_owner("r10", "t1", c, "inst_a"));
    json_array_append_new(items, vk_http_owner("r11", "t2", a2, "inst_a"));
    r = vk_post_expect(base, "/v1/leases/release-batch", alice,
                       json_pack("{s:o}", "releases", items), 200, "lease_released");
    results = http_resp_get(r, "results");
    assert_int_equal(json_array_size(results), 2);
    for (size_t i = 0; i < 2; i++)
        assert_string_equal(json_string_value(json_object_get(json_array_get(results, i), "code")),
                            "lease_released");
    http_resp_free(r);
    r = vk_post_expect(base, "/v1/leases/list", alice,
                       json_pack("{s:s, s:s, s:s}", "by", "program", "tenant_id", VK_TENANT,
                                 "program_id", VK_PROGRAM),
                       200, "lease_listed");
    json_t *left = http_resp_get(r, "leases"); /* bob's waited-for lease only */
    assert_int_equal(json_array_size(left), 1);
    json_t *li = json_object_get(json_array_get(left, 0), "lock_identity");
    assert_non_null(li);
    assert_string_equal(json_string_value(json_object_get(li, "target_id")), "t5");
    http_resp_free(r);

    /* a revoked credential is refused once the cache (100 ms) has passed */
    bool revoked = false;
    assert_int_equal(lease_valkey_credential_revoke(v, bob_id, &revoked, err, sizeof err),
                     LEASE_INSPECTED);
    assert_true(revoked);
    lease_sleep_ms(300);
    r = vk_post_expect(base, "/v1/leases/acquire", bob,
                       vk_http_acquire("b4", "t9", "inst_b", 30000), 401, "invalid_credential");
    http_resp_free(r);
    r = vk_post_expect(base, "/v1/leases/acquire", alice,
                       vk_http_acquire("r12", "t9", "inst_a", 30000), 200, "lease_acquired");
    http_resp_free(r);
    lease_valkey_close(v);

    http_resp_free(c);
    http_resp_free(b);
    http_resp_free(a2);
    http_resp_free(a);
    assert_int_equal(leased_proc_stop(srv), 0);
    free(alice);
    free(bob);
    vk_stop(&s);
}

/* A restart of the server (kill -9) is a new incarnation: leased answers
 * 503 namespace_sealed and is not ready, never tokens from the old epoch;
 * after a rebind, tokens are above every token given before. */
static void sealed_after_restart_over_http(void **state)
{
    (void)state;
    vk_server_t s;
    memset(&s, 0, sizeof s);
    assert_true(vk_start(&s));
    char err[256] = "";
    char *alice = vk_worker(&s, "alice");
    leased_proc_t *srv = vk_leased_start(&s, NULL);
    const char *base = leased_proc_url(srv);
    http_resp_t *a =
        vk_post_expect(base, "/v1/leases/acquire", alice,
                       vk_http_acquire("s1", "t1", "inst_a", 30000), 200, "lease_acquired");
    assert_int_equal(vk_token_of(a), 1);

    assert_true(vk_restart(&s, NULL));
    /* the first call on the connection the restart cut may have been sent:
     * lease_outcome_unknown, resolved by repeating its request id */
    json_t *again = vk_http_acquire("s2", "t2", "inst_a", 30000);
    char *body = json_dumps(again, JSON_COMPACT);
    json_decref(again);
    http_resp_t *r = http_call(base, "POST", "/v1/leases/acquire", alice, body);
    assert_non_null(r);
    if (strcmp(http_resp_str(r, "code"), "lease_outcome_unknown") == 0) {
        http_resp_free(r);
        r = http_call(base, "POST", "/v1/leases/acquire", alice, body);
        assert_non_null(r);
    }
    free(body);
    assert_int_equal(r->status, 503);
    assert_string_equal(http_resp_str(r, "code"), "lease_backend_unavailable");
    assert_non_null(strstr(r->body, "namespace_sealed"));
    http_resp_free(r);
    r = vk_post_expect(base, "/v1/leases/renew", alice, vk_http_owner("s3", "t1", a, "inst_a"), 503,
                       "lease_backend_unavailable");
    http_resp_free(r);
    /* readiness follows the health probe (200 ms here) */
    long status = 0;
    for (int i = 0; i < 50 && status != 503; i++) {
        lease_sleep_ms(100);
        r = http_call(base, "GET", "/readyz", NULL, NULL);
        status = r ? r->status : 0;
        http_resp_free(r);
    }
    assert_int_equal(status, 503);

    lease_valkey_t *v = vk_open(&s, "leased");
    assert_non_null(v);
    int64_t epoch = -1, revoked = -1;
    assert_int_equal(lease_valkey_rebind(v, "test restart", 0, &epoch, &revoked, err, sizeof err),
                     LEASE_INSPECTED);
    assert_int_equal(epoch, 1);
    assert_int_equal(revoked, 1);
    lease_valkey_close(v);
    http_resp_t *b =
        vk_post_expect(base, "/v1/leases/acquire", alice,
                       vk_http_acquire("s4", "t1", "inst_a", 30000), 200, "lease_acquired");
    assert_true(vk_token_of(b) > vk_token_of(a));
    assert_int_equal(vk_token_of(b), 4294967297LL); /* 2^32 + 1: epoch 1, seq 1 */
    http_resp_free(b);
    http_resp_free(a);
    assert_int_equal(leased_proc_stop(srv), 0);
    free(alice);
    vk_stop(&s);
}

/* leased's sweeper on Valkey: a lease nobody takes goes to history once
 * expired (leased_v1_expire_due), counted in leased_sweep_expired_total. */
static void expired_leases_are_swept(void **state)
{
    (void)state;
    vk_server_t s;
    memset(&s, 0, sizeof s);
    assert_true(vk_start(&s));
    char *alice = vk_worker(&s, "alice");
    const char *extra[] = {"LEASE_SWEEP_INTERVAL_MS=200", NULL};
    leased_proc_t *srv = vk_leased_start(&s, extra);
    const char *base = leased_proc_url(srv);
    http_resp_t *a =
        vk_post_expect(base, "/v1/leases/acquire", alice,
                       vk_http_acquire("x1", "t1", "inst_a", 1500), 200, "lease_acquired");
    const char *lease_id = json_string_value(http_resp_get(a, "lease.lease_id"));
    long long swept = 0;
    for (int i = 0; i < 100 && swept < 1; i++) {
        lease_sleep_ms(100);
        swept = vk_metric(base, "leased_sweep_expired_total");
    }
    assert_int_equal(swept, 1);
    redisReply *r = vk_cmd(&s, "HGET lease:{leased}:h:%s state", lease_id);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_string_equal(r->str, "expired");
    freeReplyObject(r);
    r = vk_cmd(&s, "SCARD lease:{leased}:act");
    assert_int_equal(r->integer, 0);
    freeReplyObject(r);
    char path[160];
    snprintf(path, sizeof path, "/v1/leases/%s", lease_id);
    http_resp_t *g = http_call(base, "GET", path, alice, NULL);
    assert_non_null(g);
    vk_expect_code(g, 200, "lease_inspected");
    assert_string_equal(json_string_value(http_resp_get(g, "lease.state")), "expired");
    http_resp_free(g);
    http_resp_free(a);
    assert_int_equal(leased_proc_stop(srv), 0);
    free(alice);
    vk_stop(&s);
}

static void refuses_weak_server(void **state)
{
    (void)state;
    vk_server_t s;
    memset(&s, 0, sizeof s);
    assert_true(vk_start(&s));
    freeReplyObject(vk_cmd(&s, "CONFIG SET appendfsync everysec"));
    char url[128];
    snprintf(url, sizeof url, "LEASE_STORE_URL=redis://127.0.0.1:%d", s.port);
    const char *env[] = {url, "LEASE_LISTEN=127.0.0.1:0", NULL};
    const char *args[] = {NULL};
    char *out = NULL;
    assert_int_equal(leased_proc_run_cli(args, env, &out), LEASE_EXIT_FAILURE);
    assert_non_null(strstr(out, "appendfsync always"));
    free(out);
    freeReplyObject(vk_cmd(&s, "CONFIG SET appendfsync always"));
    freeReplyObject(vk_cmd(&s, "CONFIG SET maxmemory-policy allkeys-lru"));
    assert_int_equal(leased_proc_run_cli(args, env, &out), LEASE_EXIT_FAILURE);
    assert_non_null(strstr(out, "maxmemory-policy noeviction"));
    free(out);
    vk_stop(&s);
    /* the server gone: leased does not start without its store */
    assert_int_equal(leased_proc_run_cli(args, env, &out), LEASE_EXIT_FAILURE);
    assert_non_null(strstr(out, "cannot connect"));
    free(out);

    /* both stores: a bad setting (exit 2), said why (TLS: valkey_tls.c) */
    const char *both[] = {"LEASE_STORE_URL=redis://127.0.0.1:6380",
                          "LEASE_DATABASE_URL=postgresql:///x", NULL};
    assert_int_equal(leased_proc_run_cli(args, both, &out), LEASE_EXIT_USAGE);
    assert_non_null(strstr(out, "set one"));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(leases_over_http),
        cmocka_unit_test(sealed_after_restart_over_http),
        cmocka_unit_test(expired_leases_are_swept),
        cmocka_unit_test(refuses_weak_server),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
