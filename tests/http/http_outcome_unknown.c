/*
 * http_outcome_unknown.c - lease_outcome_unknown reached for real: leased's
 * database sessions are terminated while a renew it sent waits inside the
 * database on a row lock; the reply is 503 lease_outcome_unknown, and
 * repeating the request id resolves it (the renew happens once).
 */
#include "http_common.h"

static http_fx_t fx;
static const char *worker; /* owned by fx */

static int setup(void **state)
{
    http_fx_open(&fx, state, "http_unknown");
    worker = http_fx_worker(&fx, "prn_outage");
    const char *env[] = {"LEASE_DB_CONNECT_TIMEOUT_MS=500", NULL};
    http_fx_serve(&fx, env);
    return 0;
}

static void test_outcome_unknown(void **state)
{
    (void)state;
    json_t *lease = acquire_lease(fx.base, worker, "unk-acq", "t-unknown");
    PGconn *blocker = http_block_target(fx.db, "t-unknown");

    json_t *b = parse_owned(owner_body("unk-renew", "t-unknown", lease));
    json_object_set_new(b, "deadline_ms", json_integer(15000));
    http_pending_t p = {
        .base = fx.base, .path = "/v1/leases/renew", .token = worker, .body = dump(b)};
    http_pending_start(&p);
    assert_int_equal(http_wait_lock_waiter(fx.db), 1);
    /* the renew was sent and is inside the database: end leased's sessions */
    assert_true(testpg_terminate_backends(fx.db, "leased") >= 1);
    http_pending_join(&p);
    check_reply(p.resp, 503, "lease_outcome_unknown", NULL);
    assert_true(json_is_true(json_object_get(p.resp->json, "retryable")));
    http_resp_free(p.resp);
    http_unblock(blocker);

    /* resolving by the same request id: the renew never committed, so it
     * happens now, once */
    http_resp_t *r = call(fx.base, "POST", "/v1/leases/renew", worker, p.body);
    check_reply(r, 200, "lease_renewed", NULL);
    assert_null(json_object_get(r->json, "replayed"));
    http_resp_free(r);
    r = call(fx.base, "POST", "/v1/leases/renew", worker, p.body);
    check_reply(r, 200, "lease_renewed", NULL);
    assert_true(json_is_true(json_object_get(r->json, "replayed")));
    http_resp_free(r);
    free(p.body);
    json_decref(lease);
    /* the metric counts it, once: the audit queue's write of the 503 may
     * meet a session killed with the renew's, but an internal write is
     * not an outcome a caller resolves (race_backend_terminated.c, case 4) */
    r = call(fx.base, "GET", "/metrics", NULL, NULL);
    assert_non_null(strstr(r->body, "\nleased_db_outcome_unknown_total 1\n"));
    assert_non_null(strstr(
        r->body, "leased_http_requests_total{route=\"renew\",code=\"lease_outcome_unknown\"} 1"));
    http_resp_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_outcome_unknown),
    };
    return cmocka_run_group_tests(tests, setup, http_fx_teardown);
}
