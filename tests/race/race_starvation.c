/*
 * race_starvation.c - one credential cannot take the service from others
 * (issue 10, defect 4).
 *
 * A worker of tenant-main sends 300 acquires with wait_ms at once against
 * an identity another worker holds: before the fix they filled the global
 * in-flight bound for their whole wait and every acquire of any other
 * tenant got 429. Now a credential holds at most its share of requests in
 * flight (LEASE_MAX_INFLIGHT_PER_CREDENTIAL) and of waiting acquires
 * (LEASE_MAX_WAITING_PER_CREDENTIAL): the rest are refused 429 at once,
 * changing nothing, and a worker of another tenant is served every time.
 *
 * Both backends (issue 38): "changing nothing" is read from the store
 * itself, lease.locks and lease.idempotency on PostgreSQL, the identity's
 * record and the stored-result keys on Valkey (LEASE_TEST_STORE=valkey).
 */
#include <time.h>

#include "../http/http_common.h"
#include "raw_http.h"

#define FLOOD 300
#define WAITING_SHARE 16 /* LEASE_MAX_WAITING_PER_CREDENTIAL's default */

static http_fx_t fx;
static const char *hog, *holder, *other; /* owned by fx */

static int setup(void **state)
{
    http_fx_open(&fx, state, "race_starvation");
    hog = http_fx_worker(&fx, "prn_hog");
    holder = http_fx_worker(&fx, "prn_holder");
    other = http_fx_worker_of(&fx, "prn_other", "tenant-other");
    /* every one of the 300 connections reaches leased (the per-source cap
     * is not what this test is about) */
    const char *env[] = {"LEASE_MAX_CONNECTIONS_PER_SOURCE=1024", NULL};
    http_fx_serve(&fx, env);
    return 0;
}

/* t-held's durable fencing counter, as the token its last acquisition was
 * given: lease.locks' fencing_counter on PostgreSQL; on Valkey its
 * identity record's epoch and seq (token = epoch * 2^32 + seq;
 * docs/backends.md "Keys", "Fencing tokens"). */
static long long held_counter(void)
{
    if (!fx.valkey)
        return testpg_query_int(fx.db, "SELECT fencing_counter FROM lease.locks "
                                       "WHERE target_id = 't-held'");
    char key[256], suffix[200];
    snprintf(suffix, sizeof suffix,
             "id:[\"v1\",\"%s\",\"%s\",\"%s\",\"t-held\",\"%s\",\"default\",\"default\"]", TENANT,
             PROGRAM, NAMESPACE, ACTOR);
    http_fx_valkey_key(key, sizeof key, suffix);
    const char *args[] = {"HMGET", key, "epoch", "seq", NULL};
    char *out = test_store_valkey_cli(&fx.vk, args);
    assert_non_null(out);
    char *nl = strchr(out, '\n');
    assert_true(nl && nl != out); /* an absent record prints two empty lines */
    long long token = atoll(out) * 4294967296LL + atoll(nl + 1);
    free(out);
    return token;
}

static char *request(const char *path, const char *token, const char *body)
{
    char *req = NULL;
    assert_true(asprintf(&req,
                         "POST %s HTTP/1.1\r\nHost: leased\r\nAuthorization: Bearer %s\r\n"
                         "Content-Length: %zu\r\n\r\n%s",
                         path, token, strlen(body), body) > 0);
    return req;
}

static char *other_tenant_acquire(const char *request_id, const char *target)
{
    json_t *id = identity_json(target);
    json_object_set_new(id, "tenant_id", json_string("tenant-other"));
    return dump(json_pack("{s:s, s:o, s:s, s:s, s:s}", "request_id", request_id, "lock_identity",
                          id, "service_instance_id", "inst_o", "execution_id", "exec_o", "job_id",
                          "job_o"));
}

static void test_flood_of_waiting_acquires(void **state)
{
    (void)state;
    int port = leased_proc_port(fx.srv);
    json_decref(acquire_lease(fx.base, holder, "held-1", "t-held"));

    /* 300 acquires of the held identity, each willing to wait 5 s */
    raw_conn_t *conns[FLOOD];
    for (int i = 0; i < FLOOD; i++) {
        char rid[32];
        snprintf(rid, sizeof rid, "hog-%d", i);
        json_t *b = parse_owned(acquire_body(rid, "t-held"));
        json_object_set_new(b, "wait_ms", json_integer(5000));
        json_object_set_new(b, "deadline_ms", json_integer(10000));
        char *body = dump(b);
        char *req = request("/v1/leases/acquire", hog, body);
        conns[i] = raw_connect(port, "127.0.0.1");
        assert_non_null(conns[i]);
        assert_true(raw_send(conns[i], req));
        free(req);
        free(body);
    }

    /* meanwhile a worker of another tenant, from another address */
    raw_conn_t *c = raw_connect(port, "127.0.0.2");
    assert_non_null(c);
    for (int i = 0; i < 20; i++) {
        char rid[32], target[32];
        snprintf(rid, sizeof rid, "other-%d", i);
        snprintf(target, sizeof target, "t-other-%d", i);
        char *body = other_tenant_acquire(rid, target);
        char *req = request("/v1/leases/acquire", other, body);
        assert_true(raw_send(c, req));
        raw_resp_t *r = raw_read(c, 20000);
        assert_non_null(r);
        if (r->status != 200)
            fprintf(stderr, "other tenant's acquire %d: %d %s\n", i, r->status, r->body);
        assert_int_equal(r->status, 200);
        assert_string_equal(raw_str(r, "code"), "lease_acquired");
        raw_resp_free(r);
        free(req);
        free(body);
    }
    raw_close(c);

    /* the hog got at most its waiting share of conflicts, the rest 429 */
    int conflicts = 0, limited = 0;
    for (int i = 0; i < FLOOD; i++) {
        raw_resp_t *r = raw_read(conns[i], 30000);
        assert_non_null(r);
        if (r->status == 409 || r->status == 408) {
            /* it waited: its last attempt conflicted, or (on a machine
             * slow enough) began after its deadline */
            assert_string_equal(raw_str(r, "code"),
                                r->status == 409 ? "lease_conflict" : "deadline_exceeded");
            conflicts++;
        } else if (r->status == 429) {
            assert_string_equal(raw_str(r, "code"), "lease_rate_limited");
            assert_non_null(raw_header(r, "Retry-After"));
            limited++;
        } else {
            fprintf(stderr, "hog acquire %d: %d %s\n", i, r->status, r->body);
            fail();
        }
        raw_resp_free(r);
        raw_close(conns[i]);
    }
    fprintf(stderr,
            "starvation: %d waiting acquires of one credential: %d waited (409/408), %d "
            "refused (429); another tenant's 20 acquires all 200\n",
            FLOOD, conflicts, limited);
    assert_true(conflicts >= 1 && conflicts <= WAITING_SHARE);
    assert_int_equal(conflicts + limited, FLOOD);

    /* none of the hog's requests changed anything: the holder's token is
     * the last one given, and the holder's acquire is the only stored
     * result (which shows the probe finds one) */
    assert_int_equal(held_counter(), 1);
    assert_int_equal(http_fx_stored_results(&fx, "held-"), 1);
    assert_int_equal(http_fx_stored_results(&fx, "hog-"), 0);

    /* the shares came back: the hog may wait again */
    json_t *b = parse_owned(acquire_body("hog-again", "t-held"));
    json_object_set_new(b, "wait_ms", json_integer(200));
    http_resp_t *r = call_owned(fx.base, "POST", "/v1/leases/acquire", hog, dump(b));
    check_reply(r, 409, "lease_conflict", NULL);
    http_resp_free(r);
    r = call(fx.base, "GET", "/metrics", NULL, NULL);
    assert_null(strstr(r->body, "leased_admission_share_rejected_total 0\n"));
    http_resp_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flood_of_waiting_acquires),
    };
    return cmocka_run_group_tests(tests, setup, http_fx_teardown);
}
