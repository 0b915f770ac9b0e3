/*
 * http_numbers.c - numbers and times a client controls (issue 10, defects
 * 1 and 2): a metadata number is accepted only when it comes back from
 * jsonb exactly (magnitude <= 2^53-1, reals in their shortest form), every
 * other one is invalid_lease_request naming it and changes nothing; a
 * stored value the decoder cannot hold never makes a read fail (it reads as
 * null); an answer that cannot be read after a mutation was sent is
 * outcome_unknown; deadlines anywhere in years 0000..9999 neither overflow
 * nor crash (this suite also runs under UBSan) and far past ones answer 408.
 */
#include "http_common.h"

static http_fx_t fx;
static const char *worker; /* owned by fx */

static int setup(void **state)
{
    http_fx_open(&fx, state, "http_numbers");
    worker = http_fx_worker(&fx, "prn_numbers");
    http_fx_serve(&fx, NULL);
    return 0;
}

/* An acquire body of target whose metadata is the raw JSON text given. */
static char *acquire_with_metadata(const char *request_id, const char *target, const char *metadata)
{
    char *base = acquire_body(request_id, target);
    size_t n = strlen(base) + strlen(metadata) + 32;
    char *body = malloc(n);
    assert_non_null(body);
    /* base ends with "}": splice the raw text in, numbers untouched */
    snprintf(body, n, "%.*s,\"metadata\":%s}", (int)strlen(base) - 1, base, metadata);
    free(base);
    return body;
}

/* Runs a script on the test's redis-server with the key of lease_id's
 * live lease (KEYS[1], holding its identity's canonical tuple), the prefix
 * of identity records (KEYS[2]) and args (NULL-terminated, at most 4):
 * what it answered (heap). */
static char *valkey_eval_on_lease(const char *script, const char *lease_id, const char *const *args)
{
    char live[256], ident[128];
    snprintf(live, sizeof live, "lease:{leased}:l:%s", lease_id);
    http_fx_valkey_key(ident, sizeof ident, "id:");
    const char *argv[12] = {"EVAL", script, "2", live, ident};
    size_t n = 5;
    for (const char *const *a = args; a && *a && n < 11; a++)
        argv[n++] = *a;
    argv[n] = NULL;
    char *out = test_store_valkey_cli(&fx.vk, argv);
    assert_non_null(out);
    return out;
}

/* The metadata text the identity record of lease_id's live lease holds
 * (heap; docs/backends.md "Keys": stored as sent, byte for byte). */
static char *valkey_stored_metadata(const char *lease_id)
{
    char *out = valkey_eval_on_lease("local t = redis.call('GET', KEYS[1]) "
                                     "if not t then return 'no live lease' end "
                                     "return redis.call('HGET', KEYS[2] .. t, 'metadata')",
                                     lease_id, NULL);
    size_t n = strlen(out);
    while (n && out[n - 1] == '\n')
        out[--n] = '\0';
    return out;
}

static void test_metadata_numbers_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "1e19",
        "9.3e18",
        "12345678901234567890.5",
        "1e300",
        "12345678901234567890",
        "9007199254740992",
        "-9007199254740992",
        "-1e400",
        "1e400",
        "NaN",
        "Infinity",
        "-0.1e17",
    };
    char *before = http_fx_state_digest(&fx);
    assert_non_null(before);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char meta[128], rid[32];
        snprintf(meta, sizeof meta, "{\"ok\":1,\"n\":%s}", bad[i]);
        snprintf(rid, sizeof rid, "num-bad-%zu", i);
        http_resp_t *r = call_owned(fx.base, "POST", "/v1/leases/acquire", worker,
                                    acquire_with_metadata(rid, "t-num-bad", meta));
        check_reply(r, 400, "invalid_lease_request", NULL);
        if (!http_resp_str(r, "field") || strcmp(http_resp_str(r, "field"), "metadata.n") != 0)
            fail_msg("%s: field %s", bad[i], r->body);
        http_resp_free(r);
    }
    /* nothing was acquired, remembered or counted */
    char *after = http_fx_state_digest(&fx);
    assert_string_equal(before, after);
    free(before);
    free(after);
    assert_int_equal(http_fx_lock_records(&fx, "t-num-bad"), 0);
}

static void test_metadata_numbers_round_trip(void **state)
{
    (void)state;
    const char *meta = "{\"r\":0.1,\"i\":9007199254740991,\"neg\":-2.5,\"small\":-9007199254740991,"
                       "\"third\":0.3333333333333333,\"big\":9007199254740991.0}";
    http_resp_t *r = call_owned(fx.base, "POST", "/v1/leases/acquire", worker,
                                acquire_with_metadata("num-ok", "t-num-ok", meta));
    check_reply(r, 200, "lease_acquired", NULL);
    /* the answer carries the numbers as sent, not 0.10000000000000001 */
    assert_non_null(strstr(r->body, "\"r\":0.1,") ? strstr(r->body, "\"r\":0.1,")
                                                  : strstr(r->body, "\"r\":0.1}"));
    assert_non_null(strstr(r->body, "\"i\":9007199254740991"));
    assert_non_null(strstr(r->body, "\"third\":0.3333333333333333"));
    char lease_id[160];
    snprintf(lease_id, sizeof lease_id, "%s",
             json_string_value(http_resp_get(r, "lease.lease_id")));
    http_resp_free(r);

    /* and so does the store */
    static const struct {
        const char *key, *value;
    } stored[] = {
        {"r", "0.1"},
        {"i", "9007199254740991"},
        {"neg", "-2.5"},
        {"small", "-9007199254740991"},
        {"third", "0.3333333333333333"},
    };
    /* on Valkey the metadata's text (sent in its shortest form, kept byte
     * for byte) holds each as "key":value */
    char *text = fx.valkey ? valkey_stored_metadata(lease_id) : NULL;
    for (size_t i = 0; fx.valkey && i < sizeof stored / sizeof stored[0]; i++) {
        char member[64];
        int n = snprintf(member, sizeof member, "\"%s\":%s", stored[i].key, stored[i].value);
        const char *at = strstr(text, member);
        if (!at || (at[n] != ',' && at[n] != '}'))
            fail_msg("stored metadata %s, want %s in it", text, member);
    }
    free(text);
    for (size_t i = 0; !fx.valkey && i < sizeof stored / sizeof stored[0]; i++) {
        char sql[256];
        snprintf(sql, sizeof sql,
                 "SELECT metadata ->> '%s' FROM lease.locks WHERE target_id = 't-num-ok'",
                 stored[i].key);
        char *v = testpg_query_value(fx.db, sql);
        assert_non_null(v);
        if (strcmp(v, stored[i].value) != 0)
            fail_msg("stored %s = %s, want %s", stored[i].key, v, stored[i].value);
        free(v);
    }

    /* read back: the same values */
    char path[200];
    snprintf(path, sizeof path, "/v1/leases/%s", lease_id);
    r = call(fx.base, "GET", path, worker, NULL);
    check_reply(r, 200, "lease_inspected", NULL);
    json_t *md = http_resp_get(r, "lease.metadata");
    assert_true(json_real_value(json_object_get(md, "r")) == 0.1);
    assert_int_equal(json_integer_value(json_object_get(md, "i")), 9007199254740991LL);
    assert_true(json_real_value(json_object_get(md, "neg")) == -2.5);
    http_resp_free(r);
}

/* Writes text as target's stored metadata behind leased's back: the
 * identity record's member on Valkey (HSET of a member it has: 0 new
 * fields), lease.locks on PostgreSQL. */
static void store_metadata(json_t *lease, const char *target, const char *text)
{
    if (fx.valkey) {
        const char *args[] = {text, NULL};
        char *out = valkey_eval_on_lease(
            "local t = redis.call('GET', KEYS[1]) "
            "if not t or redis.call('HEXISTS', KEYS[2] .. t, 'metadata') == 0 then return -1 end "
            "return redis.call('HSET', KEYS[2] .. t, 'metadata', ARGV[1])",
            json_string_value(json_object_get(lease, "lease_id")), args);
        assert_string_equal(out, "0\n");
        free(out);
        return;
    }
    char sql[256];
    snprintf(sql, sizeof sql, "UPDATE lease.locks SET metadata = '%s' WHERE target_id = '%s'", text,
             target);
    assert_true(testpg_exec(fx.db, sql));
}

/* A value written before the bound existed (or by SQL) reads as null, and
 * metadata that is not an object as null as a whole; the lease, its list,
 * its renewal and its history stay readable. */
static void test_stored_unreadable_number(void **state)
{
    (void)state;
    json_t *lease = acquire_lease(fx.base, worker, "num-legacy", "t-num-legacy");
    json_t *neighbour_lease = acquire_lease(fx.base, worker, "num-neighbour", "t-num-neighbour");
    store_metadata(lease, "t-num-legacy",
                   "{\"n\": 10000000000000000000, \"m\": 1e400, \"k\": \"v\"}");
    /* not an object: the metadata as a whole reads as null */
    store_metadata(neighbour_lease, "t-num-neighbour", "[1, 2]");
    char path[200];
    snprintf(path, sizeof path, "/v1/leases/%s",
             json_string_value(json_object_get(lease, "lease_id")));
    http_resp_t *r = call(fx.base, "GET", path, worker, NULL);
    check_reply(r, 200, "lease_inspected", NULL);
    json_t *md = http_resp_get(r, "lease.metadata");
    assert_true(json_is_null(json_object_get(md, "n")));
    assert_true(json_is_null(json_object_get(md, "m")));
    assert_string_equal(json_string_value(json_object_get(md, "k")), "v");
    http_resp_free(r);
    snprintf(path, sizeof path, "/v1/leases/%s",
             json_string_value(json_object_get(neighbour_lease, "lease_id")));
    r = call(fx.base, "GET", path, worker, NULL);
    check_reply(r, 200, "lease_inspected", NULL);
    assert_non_null(http_resp_get(r, "lease.lock_identity"));
    assert_true(json_is_null(http_resp_get(r, "lease.metadata")));
    http_resp_free(r);
    json_decref(neighbour_lease);
    snprintf(path, sizeof path, "/v1/leases/%s",
             json_string_value(json_object_get(lease, "lease_id")));

    /* the program's list holds both leases */
    r = call_owned(fx.base, "POST", "/v1/leases/list", worker, list_body("program"));
    check_reply(r, 200, "lease_listed", NULL);
    json_t *leases = http_resp_get(r, "leases");
    bool legacy = false, neighbour = false;
    size_t i;
    json_t *l;
    json_array_foreach(leases, i, l)
    {
        const char *t =
            json_string_value(json_object_get(json_object_get(l, "lock_identity"), "target_id"));
        legacy |= strcmp(t, "t-num-legacy") == 0;
        neighbour |= strcmp(t, "t-num-neighbour") == 0;
    }
    assert_true(legacy && neighbour);
    http_resp_free(r);

    /* renewal answers (its record carries the stored metadata) */
    r = call_owned(fx.base, "POST", "/v1/leases/renew", worker,
                   owner_body("num-legacy-renew", "t-num-legacy", lease));
    check_reply(r, 200, "lease_renewed", NULL);
    http_resp_free(r);
    r = call_owned(fx.base, "POST", "/v1/leases/release", worker,
                   owner_body("num-legacy-release", "t-num-legacy", lease));
    check_reply(r, 200, "lease_released", NULL);
    http_resp_free(r);
    r = call(fx.base, "GET", path, worker, NULL);
    check_reply(r, 200, "lease_inspected", NULL);
    assert_string_equal(json_string_value(http_resp_get(r, "lease.state")), "released");
    http_resp_free(r);
    json_decref(lease);
}

/* The function ran; its answer cannot be read: outcome_unknown (resolve by
 * request id), never "backend unavailable, nothing submitted". */
static void test_unreadable_mutation_answer(void **state)
{
    (void)state;
    json_decref(acquire_lease(fx.base, worker, "num-unreadable", "t-num-unreadable"));
    /* the stored answer (kept whole in the record's answer column: the
     * rebuilt one would come from the lease) made unreadable */
    if (fx.valkey) {
        /* on Valkey the idempotency record's stored answer (the text
         * after the digest's 64 characters, the lease id and a NUL;
         * docs/backends.md "Keys"), its lease id made 300 x */
        char pattern[128];
        http_fx_valkey_key(pattern, sizeof pattern, "i:acquire:prn_numbers:num-unreadable:*");
        const char *args[] = {"EVAL",
                              "local ks = redis.call('KEYS', ARGV[1]) "
                              "if #ks ~= 1 then return -1 end "
                              "local v = redis.call('GET', ks[1]) "
                              "local nul = string.find(v, '\\0', 65, true) "
                              "local lid = v:sub(65, nul - 1) "
                              "local i, j = string.find(v, lid, nul + 1, true) "
                              "if not i then return -2 end "
                              "redis.call('SET', ks[1], v:sub(1, i - 1) .. string.rep('x', "
                              "300) .. v:sub(j + 1), 'KEEPTTL') "
                              "return 1",
                              "0", pattern, NULL};
        char *out = test_store_valkey_cli(&fx.vk, args);
        assert_non_null(out);
        assert_string_equal(out, "1\n");
        free(out);
    } else {
        assert_true(testpg_exec(fx.db,
                                "UPDATE lease.idempotency_keys x SET answer = jsonb_set("
                                "i.result, '{lease,lease_id}', to_jsonb(repeat('x', 300))) "
                                "FROM lease.idempotency i WHERE i.request_key = x.request_key "
                                "AND i.request_id = 'num-unreadable'"));
    }
    http_resp_t *r = acquire_call(fx.base, worker, "num-unreadable", "t-num-unreadable");
    check_reply(r, 503, "lease_outcome_unknown", NULL);
    assert_true(json_is_true(json_object_get(r->json, "retryable")));
    http_resp_free(r);
    /* the lease the function committed is there: "nothing happened" would
     * have been a lie */
    if (fx.valkey) {
        json_t *held = http_active_lease(fx.base, worker, "t-num-unreadable");
        assert_non_null(held);
        json_decref(held);
    } else {
        assert_int_equal(testpg_query_int(fx.db,
                                          "SELECT count(*) FROM lease.locks WHERE target_id = "
                                          "'t-num-unreadable' AND state = 'active'"),
                         1);
    }
}

/* Client deadlines anywhere in years 0000..9999: no overflow, no crash. */
static void test_deadlines_out_of_range(void **state)
{
    (void)state;
    static const struct {
        const char *deadline_at;
        long status;
        const char *code;
    } cases[] = {
        {"1700-01-01T00:00:00Z", 408, "deadline_exceeded"},
        {"0001-01-01T00:00:00Z", 408, "deadline_exceeded"},
        {"0000-01-01T00:00:00.000+23:59", 408, "deadline_exceeded"},
        {"1969-12-31T23:59:59.999Z", 408, "deadline_exceeded"},
        {"10000-01-01T00:00:00Z", 400, "invalid_lease_request"},
        {"9999-12-31T23:59:59.999-23:59", 200, "lease_inspected"},
    };
    json_decref(acquire_lease(fx.base, worker, "dl-range", "t-dl-range"));
    char *before = http_fx_state_digest(&fx);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *b = parse_owned(inspect_body("t-dl-range"));
        json_object_set_new(b, "deadline_at", json_string(cases[i].deadline_at));
        http_resp_t *r = call_owned(fx.base, "POST", "/v1/leases/inspect", worker, dump(b));
        check_reply(r, cases[i].status, cases[i].code, NULL);
        http_resp_free(r);

        /* mutations too: an acquire with the same deadline */
        char rid[32];
        snprintf(rid, sizeof rid, "dl-acq-%zu", i);
        b = parse_owned(acquire_body(rid, "t-dl-range"));
        json_object_set_new(b, "deadline_at", json_string(cases[i].deadline_at));
        r = call_owned(fx.base, "POST", "/v1/leases/acquire", worker, dump(b));
        /* within range the identity is held: conflict, and nothing changes */
        check_reply(r, cases[i].status == 200 ? 409 : cases[i].status,
                    cases[i].status == 200 ? "lease_conflict" : cases[i].code, NULL);
        http_resp_free(r);
    }
    /* the largest relative deadline is capped, not overflowed */
    json_t *b = parse_owned(inspect_body("t-dl-range"));
    json_object_set_new(b, "deadline_ms", json_integer(INT64_MAX / 1000000));
    http_resp_t *r = call_owned(fx.base, "POST", "/v1/leases/inspect", worker, dump(b));
    check_reply(r, 200, "lease_inspected", NULL);
    http_resp_free(r);
    char *after = http_fx_state_digest(&fx);
    assert_string_equal(before, after);
    free(before);
    free(after);
    /* and the server is still there (a sanitizer abort would end it) */
    r = call(fx.base, "GET", "/healthz", NULL, NULL);
    assert_int_equal(r->status, 200);
    http_resp_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metadata_numbers_refused),
        cmocka_unit_test(test_metadata_numbers_round_trip),
        cmocka_unit_test(test_stored_unreadable_number),
        cmocka_unit_test(test_unreadable_mutation_answer),
        cmocka_unit_test(test_deadlines_out_of_range),
    };
    return http_fx_run_group("http_numbers", tests, sizeof tests / sizeof tests[0], setup,
                             http_fx_teardown, NULL);
}
