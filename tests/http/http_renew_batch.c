/*
 * http_renew_batch.c - POST /v1/leases/renew-batch against a real leased:
 * in one call one renewal renews, one is lease_lost (wrong token), one is
 * the stored answer of a repeated request id, one is an idempotency
 * conflict; each answer is typed and in request order, all in one
 * transaction. A batch beyond 100 renewals, or with a malformed renewal,
 * is a 400 naming the field and changes nothing. Outcomes are observed
 * through the API (inspect, replays by request id) and the audit as each
 * backend keeps it, and in Postgres's tables too when it is the store.
 */
#include "http_common.h"
#include "lease/client.h"

static http_fx_t fx;
static const char *worker; /* owned by fx */

static int setup(void **state)
{
    http_fx_open(&fx, state, "http_rbatch");
    worker = http_fx_worker(&fx, "prn_rbatch");
    http_fx_serve(&fx, NULL);
    return 0;
}

/* What a refused batch must leave alone, in Postgres's tables (Postgres
 * only; through the API: unchanged leases, no stored answers): idempotency
 * rows and renewals (its refusal itself is audited). */
static long long writes(void)
{
    return testpg_query_int(fx.db, "SELECT (SELECT count(*) FROM lease.idempotency)"
                                   " + (SELECT sum(extract(epoch FROM renewed_at) * 1000)::bigint"
                                   "      FROM lease.locks)");
}

/* The audit events of the renewals rb-renew-1 and rb-renew-2. */
static long long renewals_audited(void)
{
    const char *const first[] = {"request_id", "rb-renew-1", NULL};
    const char *const second[] = {"request_id", "rb-renew-2", NULL};
    return http_fx_audit_count(&fx, first) + http_fx_audit_count(&fx, second);
}

/* Sends body (a renewal) alone to /v1/leases/renew: it must renew anew,
 * not as a replay, so its request id had no stored answer. */
static void renews_anew(char *body)
{
    http_resp_t *r = call_owned(fx.base, "POST", "/v1/leases/renew", worker, body);
    check_reply(r, 200, "lease_renewed", NULL);
    assert_null(json_object_get(r->json, "replayed"));
    http_resp_free(r);
}

/* The lease of target is held as acquired: never renewed since. */
static void held_as_acquired(const char *target, json_t *acquired)
{
    json_t *held = http_active_lease(fx.base, worker, target);
    assert_non_null(held);
    assert_true(
        json_equal(json_object_get(held, "lease_id"), json_object_get(acquired, "lease_id")));
    assert_true(
        json_equal(json_object_get(held, "renewed_at"), json_object_get(held, "acquired_at")));
    assert_true(
        json_equal(json_object_get(held, "expires_at"), json_object_get(acquired, "expires_at")));
    json_decref(held);
}

static const char *item_code(const http_resp_t *r, size_t i)
{
    json_t *item = json_array_get(json_object_get(r->json, "results"), i);
    return json_string_value(json_object_get(item, "code"));
}

static void test_mixed_batch(void **state)
{
    (void)state;
    json_t *l1 = acquire_lease(fx.base, worker, "rb-acq-1", "t-rb-1");
    json_t *l2 = acquire_lease(fx.base, worker, "rb-acq-2", "t-rb-2");
    json_t *l3 = acquire_lease(fx.base, worker, "rb-acq-3", "t-rb-3");
    /* l3 renewed once on its own: the batch repeats that request */
    char *r3 = owner_body("rb-renew-3", "t-rb-3", l3);
    http_resp_t *r = call(fx.base, "POST", "/v1/leases/renew", worker, r3);
    check_reply(r, 200, "lease_renewed", NULL);
    json_t *r3_expires = json_deep_copy(http_resp_get(r, "lease.expires_at"));
    http_resp_free(r);

    json_t *items = json_array();
    json_array_append_new(items, parse_owned(owner_body("rb-renew-1", "t-rb-1", l1)));
    json_t *wrong = parse_owned(owner_body("rb-renew-2", "t-rb-2", l2));
    json_object_set_new(wrong, "fencing_token", json_integer(99));
    json_array_append_new(items, wrong);
    json_array_append_new(items, json_loads(r3, 0, NULL));
    json_t *other = json_loads(r3, 0, NULL);
    json_object_set_new(other, "ttl_ms", json_integer(45000));
    json_array_append_new(items, other);
    char *body = dump(json_pack("{s:o}", "renewals", items));

    long long audit_before = renewals_audited();
    r = call(fx.base, "POST", "/v1/leases/renew-batch", worker, body);
    if (r->status != 200)
        fprintf(stderr, "unexpected reply %ld: %s\n", r->status, r->body);
    assert_int_equal(r->status, 200);
    check_reply(r, 200, "lease_renewed", NULL); /* the batch was decided */
    assert_int_equal(json_array_size(json_object_get(r->json, "results")), 4);

    /* 1: renewed, the same lease and token */
    assert_string_equal(item_code(r, 0), "lease_renewed");
    json_t *i0 = json_array_get(json_object_get(r->json, "results"), 0);
    json_t *renewed_expires =
        json_deep_copy(json_object_get(json_object_get(i0, "lease"), "expires_at"));
    assert_true(json_equal(json_object_get(json_object_get(i0, "lease"), "lease_id"),
                           json_object_get(l1, "lease_id")));
    assert_true(json_equal(json_object_get(json_object_get(i0, "lease"), "fencing_token"),
                           json_object_get(l1, "fencing_token")));
    assert_null(json_object_get(i0, "replayed"));
    /* 2: lost, typed as a renewal's own error */
    assert_string_equal(item_code(r, 1), "lease_lost");
    json_t *i1 = json_array_get(json_object_get(r->json, "results"), 1);
    assert_string_equal(json_string_value(json_object_get(i1, "status")), "error");
    assert_false(json_is_true(json_object_get(i1, "retryable")));
    /* 3: the stored answer of the repeated request */
    assert_string_equal(item_code(r, 2), "lease_renewed");
    json_t *i2 = json_array_get(json_object_get(r->json, "results"), 2);
    assert_true(json_is_true(json_object_get(i2, "replayed")));
    assert_true(
        json_equal(json_object_get(json_object_get(i2, "lease"), "expires_at"), r3_expires));
    /* 4: the same request id with another body */
    assert_string_equal(item_code(r, 3), "idempotency_conflict");
    http_resp_free(r);

    /* each renewal has its own evidence: one audit event for the renewal,
     * one for the loss (audited by the service), the lease 2 untouched */
    held_as_acquired("t-rb-2", l2);
    if (!fx.valkey) {
        assert_int_equal(testpg_query_int(fx.db, "SELECT count(*) FROM lease.idempotency"
                                                 " WHERE request_id = 'rb-renew-1'"),
                         1);
        assert_int_equal(testpg_query_int(fx.db, "SELECT count(*) FROM lease.idempotency"
                                                 " WHERE request_id = 'rb-renew-2'"),
                         0);
        assert_int_equal(testpg_query_int(fx.db, "SELECT count(*) FROM lease.locks"
                                                 " WHERE target_id = 't-rb-2'"
                                                 "   AND renewed_at = acquired_at"),
                         1);
    }
    for (int tries = 0; tries < 100; tries++) { /* the service's audit is queued */
        if (renewals_audited() == audit_before + 2)
            break;
        usleep(50000);
    }
    assert_int_equal(renewals_audited(), audit_before + 2);
    /* the renewal's event (by the store) and the loss's (by the service) */
    char granted_ttl[32]; /* the TTL the renewal granted: the lease's */
    snprintf(granted_ttl, sizeof granted_ttl, "%lld",
             (long long)json_integer_value(json_object_get(l1, "ttl_ms")));
    const char *const renewed_event[] = {
        "request_id",    "rb-renew-1",     "event_type",       "target_lease_renew", "result_code",
        "lease_renewed", "previous_state", "active",           "resulting_state",    "active",
        "principal_id",  "prn_rbatch",     "effective_ttl_ms", granted_ttl,          NULL};
    assert_int_equal(http_fx_audit_count(&fx, renewed_event), 1);
    const char *const lost_event[] = {
        "request_id",  "rb-renew-2", "event_type", "target_lease_renew",
        "result_code", "lease_lost", NULL};
    assert_int_equal(http_fx_audit_count(&fx, lost_event), 1);

    /* rb-renew-1's answer is stored: alone, the same renewal replays it */
    r = call_owned(fx.base, "POST", "/v1/leases/renew", worker,
                   owner_body("rb-renew-1", "t-rb-1", l1));
    check_reply(r, 200, "lease_renewed", NULL);
    assert_true(json_is_true(json_object_get(r->json, "replayed")));
    assert_true(json_equal(http_resp_get(r, "lease.expires_at"), renewed_expires));
    http_resp_free(r);
    /* the loss stored nothing: rb-renew-2 with the right token renews */
    renews_anew(owner_body("rb-renew-2", "t-rb-2", l2));

    json_decref(renewed_expires);
    free(body);
    free(r3);
    json_decref(r3_expires);
    json_decref(l1);
    json_decref(l2);
    json_decref(l3);
}

static void test_refused_batches(void **state)
{
    (void)state;
    json_t *l = acquire_lease(fx.base, worker, "rb-acq-9", "t-rb-9");
    long long before = fx.valkey ? 0 : writes();

    json_t *many = json_array();
    for (int i = 0; i < 101; i++) {
        char rid[32];
        snprintf(rid, sizeof rid, "rb-many-%d", i);
        json_array_append_new(many, parse_owned(owner_body(rid, "t-rb-9", l)));
    }
    http_resp_t *r = call_owned(fx.base, "POST", "/v1/leases/renew-batch", worker,
                                dump(json_pack("{s:o}", "renewals", many)));
    check_reply(r, 400, "invalid_lease_request", NULL);
    assert_string_equal(http_resp_str(r, "field"), "renewals");
    http_resp_free(r);

    r = call(fx.base, "POST", "/v1/leases/renew-batch", worker, "{\"renewals\": []}");
    check_reply(r, 400, "invalid_lease_request", NULL);
    assert_string_equal(http_resp_str(r, "field"), "renewals");
    http_resp_free(r);

    /* the second renewal lacks its lease id: the whole batch is refused */
    json_t *bad = parse_owned(owner_body("rb-bad-2", "t-rb-9", l));
    json_object_del(bad, "lease_id");
    r = call_owned(fx.base, "POST", "/v1/leases/renew-batch", worker,
                   dump(json_pack("{s:[o,o]}", "renewals",
                                  parse_owned(owner_body("rb-bad-1", "t-rb-9", l)), bad)));
    check_reply(r, 400, "invalid_lease_request", NULL);
    assert_string_equal(http_resp_str(r, "field"), "renewals[1].lease_id");
    http_resp_free(r);

    if (!fx.valkey)
        assert_int_equal(writes(), before);
    /* through the API: the lease never renewed, and none of the refused
     * batches' request ids has a stored answer (each renews anew alone) */
    held_as_acquired("t-rb-9", l);
    renews_anew(owner_body("rb-many-0", "t-rb-9", l));
    renews_anew(owner_body("rb-many-100", "t-rb-9", l));
    renews_anew(owner_body("rb-bad-1", "t-rb-9", l));
    json_decref(l);
}

/* The C client's lease_client_renew_many: typed results in order, and a
 * repeat with the same request ids answers the stored results. */
static void test_client_renew_many(void **state)
{
    (void)state;
    lease_client_t *c = lease_client_new(fx.base, worker);
    assert_non_null(c);
    json_t *l1 = acquire_lease(fx.base, worker, "rb-cl-acq-1", "t-rb-cl-1");
    json_t *l2 = acquire_lease(fx.base, worker, "rb-cl-acq-2", "t-rb-cl-2");
    lease_identity_input_t id1 = {TENANT, PROGRAM, NAMESPACE, "t-rb-cl-1", ACTOR, "default", NULL};
    lease_identity_input_t id2 = {TENANT, PROGRAM, NAMESPACE, "t-rb-cl-2", ACTOR, "default", NULL};
    lease_client_owner_t own[2] = {
        {id1, json_string_value(json_object_get(l1, "lease_id")), 1, "inst_1", 0},
        {id2, json_string_value(json_object_get(l2, "lease_id")), 5, "inst_1", 0}, /* wrong */
    };
    const char *ids[2] = {"rb-cl-renew-1", "rb-cl-renew-2"};
    lease_result_t res[2];
    assert_int_equal(lease_client_renew_many(c, own, 2, ids, NULL, res), LEASE_RENEWED);
    assert_int_equal(res[0].code, LEASE_RENEWED);
    assert_true(res[0].has_lease);
    assert_string_equal(res[0].lease.lease_id, own[0].lease_id);
    assert_false(res[0].replayed);
    assert_int_equal(res[1].code, LEASE_LOST);
    assert_false(res[1].has_lease);
    /* the same ids again: the first is its stored answer */
    assert_int_equal(lease_client_renew_many(c, own, 2, ids, NULL, res), LEASE_RENEWED);
    assert_int_equal(res[0].code, LEASE_RENEWED);
    assert_true(res[0].replayed);
    assert_int_equal(res[1].code, LEASE_LOST);
    json_decref(l1);
    json_decref(l2);
    lease_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mixed_batch),
        cmocka_unit_test(test_refused_batches),
        cmocka_unit_test(test_client_renew_many),
    };
    return cmocka_run_group_tests(tests, setup, http_fx_teardown);
}
