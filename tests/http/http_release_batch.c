/*
 * http_release_batch.c - POST /v1/leases/release-batch against a real
 * leased: in one call one release releases, one is lease_lost (wrong
 * token), one is the stored answer of a repeated request id, one is an
 * idempotency conflict; each answer is typed and in request order, all in
 * one transaction. A batch beyond 100 releases, or with a malformed
 * release, is a 400 naming the field and changes nothing. The C client's
 * lease_client_release_many gives each its typed result. Outcomes are
 * observed through the API (inspect, replays by request id), and in
 * Postgres's tables too when it is the store.
 */
#include "http_common.h"
#include "lease/client.h"

static http_fx_t fx;
static const char *worker; /* owned by fx */

static int setup(void **state)
{
    http_fx_open(&fx, state, "http_relbatch");
    worker = http_fx_worker(&fx, "prn_relbatch");
    http_fx_serve(&fx, NULL);
    return 0;
}

/* What a refused batch must leave alone, in Postgres's tables (Postgres
 * only; through the API: the lease still held, no stored answers):
 * idempotency rows and the active leases. */
static long long writes(void)
{
    return testpg_query_int(fx.db, "SELECT (SELECT count(*) FROM lease.idempotency)"
                                   " + (SELECT count(*) FROM lease.active_leases)");
}

static json_t *result_of(const http_resp_t *r, size_t i)
{
    return json_array_get(json_object_get(r->json, "results"), i);
}

static const char *item_code(const http_resp_t *r, size_t i)
{
    return json_string_value(json_object_get(result_of(r, i), "code"));
}

/* Whether target has an active lease: 1 or 0, through the API (inspect)
 * on either backend, and the same count in Postgres's table when it is the
 * store. */
static long long active_of(const char *target)
{
    json_t *held = http_active_lease(fx.base, worker, target);
    long long active = held != NULL;
    json_decref(held);
    if (!fx.valkey) {
        char sql[256];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM lease.active_leases WHERE target_id = '%s'",
                 target);
        assert_int_equal(testpg_query_int(fx.db, sql), active);
    }
    return active;
}

/* Sends body (a release) alone to /v1/leases/release with the answer
 * code expected; a success must be new, not a replay: its request id had
 * no stored answer. */
static void release_alone(char *body, long status, const char *code)
{
    http_resp_t *r = call_owned(fx.base, "POST", "/v1/leases/release", worker, body);
    check_reply(r, status, code, NULL);
    if (status == 200)
        assert_null(json_object_get(r->json, "replayed"));
    http_resp_free(r);
}

static void test_mixed_batch(void **state)
{
    (void)state;
    json_t *l1 = acquire_lease(fx.base, worker, "relb-acq-1", "t-relb-1");
    json_t *l2 = acquire_lease(fx.base, worker, "relb-acq-2", "t-relb-2");
    json_t *l3 = acquire_lease(fx.base, worker, "relb-acq-3", "t-relb-3");
    /* l3 released once on its own: the batch repeats that request */
    char *r3 = owner_body("relb-rel-3", "t-relb-3", l3);
    http_resp_t *r = call(fx.base, "POST", "/v1/leases/release", worker, r3);
    check_reply(r, 200, "lease_released", NULL);
    http_resp_free(r);

    json_t *items = json_array();
    json_array_append_new(items, parse_owned(owner_body("relb-rel-1", "t-relb-1", l1)));
    json_t *wrong = parse_owned(owner_body("relb-rel-2", "t-relb-2", l2));
    json_object_set_new(wrong, "fencing_token", json_integer(99));
    json_array_append_new(items, wrong);
    json_array_append_new(items, json_loads(r3, 0, NULL));
    json_t *other = json_loads(r3, 0, NULL);
    json_object_set_new(other, "service_instance_id", json_string("inst_other"));
    json_array_append_new(items, other);
    char *body = dump(json_pack("{s:o}", "releases", items));

    r = call(fx.base, "POST", "/v1/leases/release-batch", worker, body);
    if (r->status != 200)
        fprintf(stderr, "unexpected reply %ld: %s\n", r->status, r->body);
    check_reply(r, 200, "lease_released", NULL); /* the batch was decided */
    assert_int_equal(json_array_size(json_object_get(r->json, "results")), 4);

    /* 1: released, its lease in the answer */
    assert_string_equal(item_code(r, 0), "lease_released");
    json_t *lease0 = json_object_get(result_of(r, 0), "lease");
    assert_true(json_equal(json_object_get(lease0, "lease_id"), json_object_get(l1, "lease_id")));
    assert_string_equal(json_string_value(json_object_get(lease0, "state")), "released");
    assert_int_equal(active_of("t-relb-1"), 0);
    /* 2: lost, typed as a release's own error; the lease still held */
    assert_string_equal(item_code(r, 1), "lease_lost");
    assert_string_equal(json_string_value(json_object_get(result_of(r, 1), "status")), "error");
    assert_int_equal(active_of("t-relb-2"), 1);
    /* 3: the stored answer of the repeated request */
    assert_string_equal(item_code(r, 2), "lease_released");
    assert_true(json_is_true(json_object_get(result_of(r, 2), "replayed")));
    /* 4: the same request id with another body */
    assert_string_equal(item_code(r, 3), "idempotency_conflict");
    http_resp_free(r);

    if (!fx.valkey) {
        assert_int_equal(testpg_query_int(fx.db, "SELECT count(*) FROM lease.idempotency"
                                                 " WHERE request_id = 'relb-rel-1'"),
                         1);
        assert_int_equal(testpg_query_int(fx.db, "SELECT count(*) FROM lease.idempotency"
                                                 " WHERE request_id = 'relb-rel-2'"),
                         0);
    }
    /* the release's own event, in the same store call */
    const char *const released_event[] = {"request_id",
                                          "relb-rel-1",
                                          "event_type",
                                          "target_lease_release",
                                          "result_code",
                                          "lease_released",
                                          "previous_state",
                                          "active",
                                          "resulting_state",
                                          "released",
                                          "service_instance_id",
                                          "inst_1",
                                          NULL};
    assert_int_equal(http_fx_audit_count(&fx, released_event), 1);
    /* through the API: relb-rel-1's answer is stored (alone, the same
     * release replays it), the loss stored nothing (relb-rel-2 with the
     * right token releases) */
    r = call_owned(fx.base, "POST", "/v1/leases/release", worker,
                   owner_body("relb-rel-1", "t-relb-1", l1));
    check_reply(r, 200, "lease_released", NULL);
    assert_true(json_is_true(json_object_get(r->json, "replayed")));
    assert_true(json_equal(http_resp_get(r, "lease.lease_id"), json_object_get(l1, "lease_id")));
    http_resp_free(r);
    release_alone(owner_body("relb-rel-2", "t-relb-2", l2), 200, "lease_released");
    assert_int_equal(active_of("t-relb-2"), 0);
    free(body);
    free(r3);
    json_decref(l1);
    json_decref(l2);
    json_decref(l3);
}

static void test_refused_batches(void **state)
{
    (void)state;
    json_t *l = acquire_lease(fx.base, worker, "relb-acq-9", "t-relb-9");
    long long before = fx.valkey ? 0 : writes();

    json_t *many = json_array();
    for (int i = 0; i < 101; i++) {
        char rid[32];
        snprintf(rid, sizeof rid, "relb-many-%d", i);
        json_array_append_new(many, parse_owned(owner_body(rid, "t-relb-9", l)));
    }
    http_resp_t *r = call_owned(fx.base, "POST", "/v1/leases/release-batch", worker,
                                dump(json_pack("{s:o}", "releases", many)));
    check_reply(r, 400, "invalid_lease_request", NULL);
    assert_string_equal(http_resp_str(r, "field"), "releases");
    http_resp_free(r);

    r = call(fx.base, "POST", "/v1/leases/release-batch", worker, "{\"releases\": []}");
    check_reply(r, 400, "invalid_lease_request", NULL);
    assert_string_equal(http_resp_str(r, "field"), "releases");
    http_resp_free(r);

    /* a renewal's ttl_ms has no place in a release */
    json_t *ttl = parse_owned(owner_body("relb-bad-0", "t-relb-9", l));
    json_object_set_new(ttl, "ttl_ms", json_integer(30000));
    r = call_owned(fx.base, "POST", "/v1/leases/release-batch", worker,
                   dump(json_pack("{s:[o]}", "releases", ttl)));
    check_reply(r, 400, "invalid_lease_request", NULL);
    assert_string_equal(http_resp_str(r, "field"), "releases[0].ttl_ms");
    http_resp_free(r);

    /* the second release lacks its lease id: the whole batch is refused */
    json_t *bad = parse_owned(owner_body("relb-bad-2", "t-relb-9", l));
    json_object_del(bad, "lease_id");
    r = call_owned(fx.base, "POST", "/v1/leases/release-batch", worker,
                   dump(json_pack("{s:[o,o]}", "releases",
                                  parse_owned(owner_body("relb-bad-1", "t-relb-9", l)), bad)));
    check_reply(r, 400, "invalid_lease_request", NULL);
    assert_string_equal(http_resp_str(r, "field"), "releases[1].lease_id");
    http_resp_free(r);

    if (!fx.valkey)
        assert_int_equal(writes(), before);
    assert_int_equal(active_of("t-relb-9"), 1);
    /* none of the refused batches' request ids has a stored answer: each
     * alone is decided anew (the first releases, the next find it gone) */
    release_alone(owner_body("relb-bad-1", "t-relb-9", l), 200, "lease_released");
    release_alone(owner_body("relb-many-0", "t-relb-9", l), 409, "lease_lost");
    release_alone(owner_body("relb-bad-0", "t-relb-9", l), 409, "lease_lost");
    json_decref(l);
}

/* lease_client_release_many: typed results in order, and a repeat with the
 * same request ids answers the stored results. */
static void test_client_release_many(void **state)
{
    (void)state;
    lease_client_t *c = lease_client_new(fx.base, worker);
    assert_non_null(c);
    json_t *l1 = acquire_lease(fx.base, worker, "relb-cl-acq-1", "t-relb-cl-1");
    json_t *l2 = acquire_lease(fx.base, worker, "relb-cl-acq-2", "t-relb-cl-2");
    lease_identity_input_t id1 = {TENANT, PROGRAM,   NAMESPACE, "t-relb-cl-1",
                                  ACTOR,  "default", NULL};
    lease_identity_input_t id2 = {TENANT, PROGRAM,   NAMESPACE, "t-relb-cl-2",
                                  ACTOR,  "default", NULL};
    lease_client_owner_t own[2] = {
        {id1, json_string_value(json_object_get(l1, "lease_id")), 1, "inst_1", 0},
        {id2, json_string_value(json_object_get(l2, "lease_id")), 5, "inst_1", 0}, /* wrong */
    };
    const char *ids[2] = {"relb-cl-rel-1", "relb-cl-rel-2"};
    lease_result_t res[2];
    assert_int_equal(lease_client_release_many(c, own, 2, ids, NULL, res), LEASE_RELEASED);
    assert_int_equal(res[0].code, LEASE_RELEASED);
    assert_true(res[0].has_lease);
    assert_string_equal(res[0].lease.lease_id, own[0].lease_id);
    assert_int_equal(res[0].lease.state, LEASE_STATE_RELEASED);
    assert_false(res[0].replayed);
    assert_int_equal(res[1].code, LEASE_LOST);
    assert_int_equal(active_of("t-relb-cl-1"), 0);
    assert_int_equal(active_of("t-relb-cl-2"), 1);
    /* the same ids again: the first is its stored answer */
    assert_int_equal(lease_client_release_many(c, own, 2, ids, NULL, res), LEASE_RELEASED);
    assert_int_equal(res[0].code, LEASE_RELEASED);
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
        cmocka_unit_test(test_client_release_many),
    };
    return cmocka_run_group_tests(tests, setup, http_fx_teardown);
}
