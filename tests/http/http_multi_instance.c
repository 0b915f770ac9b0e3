/*
 * http_multi_instance.c - two leased on one store behave as one service:
 * everything that must be shared lives in the store (or in shared
 * settings), nothing in one process. On either backend (LEASE_TEST_STORE=
 * valkey: both leased on the file's one redis-server, docs/backends.md
 * "Contract tests on both backends").
 *
 * - a list page token from A continues on B: the store signs tokens with
 *   the key both read there (lease.secrets' page_token_key on Postgres, the
 *   member page_token_key of the namespace record lease:{leased}:ns on
 *   Valkey): with that key changed in the store, B refuses A's token; with
 *   it restored, B continues the listing;
 * - a lease acquired through A conflicts through B; tokens keep increasing
 *   whichever instance grants them; a request id answered by A replays on B
 *   (outcome-unknown resolution does not depend on reaching the same
 *   instance);
 * - a policy change in the store (one SQL UPDATE of lease.policy on
 *   Postgres, one HSET of the namespace record's maximum_ttl_ms on Valkey)
 *   applies to both at once;
 * - a credential revoked once (the real leasectl credential revoke) is
 *   refused by both within the credential cache time
 *   (LEASE_CREDENTIAL_CACHE_MS), each having used it before;
 * - a watch on A wakes on a force-release through B (http_push.c covers the
 *   same for leasectl run).
 */
#include "exec_common.h"

static http_fx_t fx;
static const char *worker, *admin;
static char worker_cred[64];
static leased_proc_t *b_proc;
static const char *a, *b; /* base URLs */

#define CACHE_MS 500

static int group_setup(void **state)
{
    http_fx_open(&fx, state, "http_multi");
    worker = http_fx_credential_spec(&fx,
                                     &(leased_cred_spec_t){.principal = "prn_multi",
                                                           .tenant = TENANT,
                                                           .program = PROGRAM,
                                                           .capabilities = WORKER_CAPS},
                                     worker_cred);
    admin = http_fx_credential(&fx, "prn_multi_admin", "*",
                               "targets:force-release,targets:revoke,targets:read", true);
    const char *env[] = {"LEASE_CREDENTIAL_CACHE_MS=500", NULL};
    http_fx_serve(&fx, env);
    b_proc = http_fx_start_leased(&fx, env);
    assert_non_null(b_proc);
    a = fx.base;
    b = leased_proc_url(b_proc);
    return 0;
}

static int group_teardown(void **state)
{
    assert_int_equal(leased_proc_stop(b_proc), 0);
    return http_fx_teardown(state);
}

/* The key the store signs page tokens with, in hex (heap): lease.secrets'
 * page_token_key (Postgres), the namespace record's page_token_key member
 * (Valkey; docs/backends.md "Keys"). */
static char *page_token_key(void)
{
    if (!fx.valkey)
        return testpg_query_value(fx.db, "SELECT encode(page_token_key, 'hex') FROM lease.secrets");
    char ns[64];
    http_fx_valkey_key(ns, sizeof ns, "ns");
    const char *args[] = {"HGET", ns, "page_token_key", NULL};
    char *hex = test_store_valkey_cli(&fx.vk, args);
    assert_non_null(hex);
    hex[strcspn(hex, "\n")] = '\0';
    return hex;
}

/* Valkey: sets member of the namespace record lease:{leased}:ns, which must
 * be there already (HSET answers 0: replaced, none added). */
static void replace_ns_member(const char *member, const char *value)
{
    char ns[64];
    http_fx_valkey_key(ns, sizeof ns, "ns");
    const char *args[] = {"HSET", ns, member, value, NULL};
    assert_int_equal(test_store_valkey_cli_int(&fx.vk, args), 0);
}

/* Replaces that key in the store (64 hex digits: 32 bytes, either backend). */
static void set_page_token_key(const char *hex)
{
    assert_int_equal(strlen(hex), 64);
    if (!fx.valkey) {
        char sql[256];
        snprintf(sql, sizeof sql, "UPDATE lease.secrets SET page_token_key = decode('%s', 'hex')",
                 hex);
        assert_true(testpg_exec(fx.db, sql));
    } else {
        replace_ns_member("page_token_key", hex);
    }
    char *now = page_token_key();
    assert_non_null(now);
    assert_string_equal(now, hex);
    free(now);
}

static http_resp_t *list_page(const char *base, const char *token)
{
    json_t *f = json_pack("{s:s, s:s, s:s, s:i}", "by", "program", "tenant_id", TENANT,
                          "program_id", PROGRAM, "page_size", 2);
    if (token)
        json_object_set_new(f, "page_token", json_string(token));
    return call_owned(base, "POST", "/v1/leases/list", worker, dump(f));
}

static void test_page_token_crosses_instances(void **state)
{
    (void)state;
    char target[32], rid[32];
    for (int i = 0; i < 5; i++) {
        snprintf(target, sizeof target, "multi-page-%d", i);
        snprintf(rid, sizeof rid, "mp-%d", i);
        json_decref(acquire_lease(i % 2 ? b : a, worker, rid, target));
    }
    /* pages of 2, alternating instances: A, B, A */
    char *token = NULL;
    int seen = 0, pages = 0;
    do {
        if (pages == 1) {
            /* A's token is signed by the key in the store: changed there, B
             * refuses it; restored, B takes it (below) */
            char *key = page_token_key();
            assert_non_null(key);
            assert_int_equal(strlen(key), 64);
            set_page_token_key(strcmp(key, "00000000000000000000000000000000"
                                           "00000000000000000000000000000000") == 0
                                   ? "11111111111111111111111111111111"
                                     "11111111111111111111111111111111"
                                   : "00000000000000000000000000000000"
                                     "00000000000000000000000000000000");
            http_resp_t *r = list_page(b, token);
            check_reply(r, 400, "invalid_lease_request", NULL);
            assert_string_equal(http_resp_str(r, "field"), "page_token");
            http_resp_free(r);
            set_page_token_key(key);
            free(key);
        }
        http_resp_t *r = list_page(pages % 2 ? b : a, token);
        check_reply(r, 200, "lease_listed", NULL);
        seen += (int)json_array_size(http_resp_get(r, "leases"));
        free(token);
        const char *next = http_resp_str(r, "next_page_token");
        token = next ? strdup(next) : NULL;
        http_resp_free(r);
        pages++;
    } while (token && pages < 10);
    assert_int_equal(seen, 5);
    assert_int_equal(pages, 3);
}

static void test_leases_tokens_and_replays_are_shared(void **state)
{
    (void)state;
    json_t *first = acquire_lease(a, worker, "mx-1", "multi-shared");
    http_resp_t *r = acquire_call(b, worker, "mx-2", "multi-shared");
    check_reply(r, 409, "lease_conflict", NULL);
    http_resp_free(r);
    /* the request A answered, repeated on B: the same lease, replayed */
    r = acquire_call(b, worker, "mx-1", "multi-shared");
    check_reply(r, 200, "lease_acquired", NULL);
    assert_true(json_is_true(http_resp_get(r, "replayed")));
    assert_string_equal(json_string_value(http_resp_get(r, "lease.lease_id")),
                        json_string_value(json_object_get(first, "lease_id")));
    http_resp_free(r);
    r = call_owned(b, "POST", "/v1/leases/release", worker,
                   owner_body("mx-rel", "multi-shared", first));
    check_reply(r, 200, "lease_released", NULL);
    http_resp_free(r);
    json_t *second = acquire_lease(b, worker, "mx-3", "multi-shared");
    assert_true(json_integer_value(json_object_get(second, "fencing_token")) >
                json_integer_value(json_object_get(first, "fencing_token")));
    json_decref(first);
    json_decref(second);
}

/* The policy's maximum TTL as the store holds it: lease.policy (Postgres),
 * the namespace record's member maximum_ttl_ms (Valkey; docs/backends.md
 * "Keys"). */
static long long policy_maximum_ttl_ms(void)
{
    if (!fx.valkey)
        return testpg_query_int(fx.db, "SELECT maximum_ttl_ms FROM lease.policy");
    char ns[64];
    http_fx_valkey_key(ns, sizeof ns, "ns");
    const char *args[] = {"HGET", ns, "maximum_ttl_ms", NULL};
    return test_store_valkey_cli_int(&fx.vk, args);
}

/* Changes it in the store, as an operator does: one SQL UPDATE (Postgres),
 * one HSET of the member (Valkey), read back. */
static void set_policy_maximum_ttl_ms(long long ms)
{
    char value[32];
    snprintf(value, sizeof value, "%lld", ms);
    if (!fx.valkey) {
        char sql[128];
        snprintf(sql, sizeof sql, "UPDATE lease.policy SET maximum_ttl_ms = %s", value);
        assert_true(testpg_exec(fx.db, sql));
    } else {
        replace_ns_member("maximum_ttl_ms", value);
    }
    assert_int_equal(policy_maximum_ttl_ms(), ms);
}

static void test_policy_applies_to_both(void **state)
{
    (void)state;
    assert_int_equal(policy_maximum_ttl_ms(), 300000);
    set_policy_maximum_ttl_ms(40000);
    for (int i = 0; i < 2; i++) {
        char rid[32];
        snprintf(rid, sizeof rid, "mpol-%d", i);
        http_resp_t *r = call_owned(
            i ? b : a, "POST", "/v1/leases/acquire", worker,
            dump(json_pack("{s:s, s:o, s:s, s:s, s:s, s:i}", "request_id", rid, "lock_identity",
                           identity_json("multi-policy"), "service_instance_id", "inst_1",
                           "execution_id", "exec_1", "job_id", "job_1", "ttl_ms", 50000)));
        check_reply(r, 400, "invalid_lease_request", NULL);
        assert_string_equal(http_resp_str(r, "field"), "ttl_ms");
        http_resp_free(r);
    }
    set_policy_maximum_ttl_ms(300000);
}

/* Whether base still accepts the worker credential. */
static long inspect_status(const char *base)
{
    http_resp_t *r =
        call_owned(base, "POST", "/v1/leases/inspect", worker, inspect_body("multi-nothing"));
    long st = r->status;
    http_resp_free(r);
    return st;
}

static void test_revocation_reaches_both(void **state)
{
    (void)state;
    /* both have the credential cached */
    assert_int_equal(inspect_status(a), 404);
    assert_int_equal(inspect_status(b), 404);
    const char *args[] = {"credential", "revoke", worker_cred, "--database-url", fx.db, NULL};
    assert_int_equal(ctl(args, a, NULL, NULL, NULL), 0);
    int64_t revoked = lease_mono_now_ns();
    int64_t refused_ms[2] = {-1, -1};
    /* guard: ten cache times; each instance must refuse by then */
    while ((refused_ms[0] < 0 || refused_ms[1] < 0) &&
           lease_mono_now_ns() - revoked < 10LL * CACHE_MS * 1000000) {
        for (int i = 0; i < 2; i++)
            if (refused_ms[i] < 0 && inspect_status(i ? b : a) == 401)
                refused_ms[i] = (lease_mono_now_ns() - revoked) / 1000000;
        lease_sleep_ms(20);
    }
    printf("revocation refused by A after %lld ms, by B after %lld ms (cache %d ms)\n",
           (long long)refused_ms[0], (long long)refused_ms[1], CACHE_MS);
    assert_true(refused_ms[0] >= 0);
    assert_true(refused_ms[1] >= 0);
}

/* A GET from a thread of its own (a watch that blocks). */
typedef struct pending_get {
    const char *base;
    char path[256];
    const char *token;
    http_resp_t *resp;
    pthread_t thread;
} pending_get_t;

static void *pending_get_main(void *arg)
{
    pending_get_t *g = arg;
    http_client_t *c = http_client_new(g->base, 120000);
    g->resp = http_client_call(c, "GET", g->path, g->token, NULL, NULL, NULL);
    http_client_free(c);
    return NULL;
}

static void test_watch_on_a_woken_through_b(void **state)
{
    (void)state;
    json_t *lease = acquire_lease(a, worker, "mw-1", "multi-watch");
    pending_get_t g = {.base = a, .token = worker};
    snprintf(g.path, sizeof g.path, "/v1/leases/%s/watch?wait_ms=60000",
             json_string_value(json_object_get(lease, "lease_id")));
    assert_int_equal(pthread_create(&g.thread, NULL, pending_get_main, &g), 0);
    /* parked on A (its metrics say so) before B acts */
    bool parked = false;
    for (int i = 0; i < 1000 && !parked; i++) {
        http_resp_t *m = call(a, "GET", "/metrics", NULL, NULL);
        parked = strstr(m->body, "\nleased_watches_waiting 1\n") != NULL;
        http_resp_free(m);
        if (!parked)
            lease_sleep_ms(10);
    }
    assert_true(parked);
    http_resp_t *r = call_owned(b, "POST", "/v1/leases/force-release", admin,
                                admin_body("mw-admin", "multi-watch", lease, "via B"));
    check_reply(r, 200, "lease_released", NULL);
    http_resp_free(r);
    pthread_join(g.thread, NULL);
    assert_non_null(g.resp);
    check_reply(g.resp, 200, "lease_inspected", NULL);
    assert_string_equal(json_string_value(http_resp_get(g.resp, "lease.state")), "released");
    http_resp_free(g.resp);
    json_decref(lease);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_page_token_crosses_instances),
        cmocka_unit_test(test_leases_tokens_and_replays_are_shared),
        cmocka_unit_test(test_policy_applies_to_both),
        cmocka_unit_test(test_watch_on_a_woken_through_b),
        cmocka_unit_test(test_revocation_reaches_both),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
