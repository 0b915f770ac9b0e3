/*
 * test_metadata_vectors.c - the C metadata rules (json_codec.c) against the
 * shared vectors in tests/vectors/metadata.json; pgtap/23_metadata_vectors.sql
 * checks lease._bad_metadata and lease.acquire against the same file. Each
 * vector's input is the metadata value as JSON text (a string in the file),
 * so numbers reach both sides exactly as written, not as the loader's double.
 * An accepted vector decodes and is stored as the same JSON value; a
 * rejected one fails naming its "field".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/json_codec.h"

#define VECTORS LEASE_TEST_SOURCE_DIR "/tests/vectors/metadata.json"
#define MIN_VECTORS 50

static const leased_codec_limits_t limits = {10000};
static json_t *vectors;

static int load(void **state)
{
    (void)state;
    json_error_t err;
    vectors = json_load_file(VECTORS, JSON_REJECT_DUPLICATES, &err);
    if (!vectors) {
        fprintf(stderr, "%s:%d: %s\n", VECTORS, err.line, err.text);
        return -1;
    }
    return 0;
}

static int unload(void **state)
{
    (void)state;
    json_decref(vectors);
    return 0;
}

/* Decodes an acquire whose metadata is the vector's text; the rest of the
 * body is valid, so any refusal is the metadata's. */
static bool decode(const char *metadata, leased_request_t **req, leased_codec_error_t *err)
{
    static const char head[] =
        "{\"request_id\":\"r\",\"lock_identity\":{\"tenant_id\":\"tenant-main\",\"program_id\":"
        "\"program-a\",\"target_namespace\":\"starintel-target\",\"target_id\":\"target_01\","
        "\"actor_name\":\"usernamegen\",\"workflow_name\":\"default\"},\"service_instance_id\":"
        "\"i\",\"execution_id\":\"e\",\"job_id\":\"j\",\"metadata\":";
    size_t n = strlen(head) + strlen(metadata) + 2;
    char *body = malloc(n);
    assert_non_null(body);
    snprintf(body, n, "%s%s}", head, metadata);
    *req = leased_request_new(LEASED_OP_ACQUIRE);
    bool ok = leased_codec_decode(LEASED_OP_ACQUIRE, body, strlen(body), NULL, &limits, *req, err);
    free(body);
    return ok;
}

static const char *text_of(json_t *vec, const char *kind, size_t i)
{
    const char *input = json_string_value(json_object_get(vec, "input"));
    if (!input || !json_string_value(json_object_get(vec, "why")))
        fail_msg("%s[%zu]: input (a string) or why missing", kind, i);
    return input;
}

static void test_enough_vectors(void **state)
{
    (void)state;
    json_t *acc = json_object_get(vectors, "accepted");
    json_t *rej = json_object_get(vectors, "rejected");
    assert_true(json_is_array(acc));
    assert_true(json_is_array(rej));
    assert_true(json_array_size(acc) > 0);
    assert_true(json_array_size(rej) > 0);
    size_t total = json_array_size(acc) + json_array_size(rej);
    if (total < MIN_VECTORS)
        fail_msg("only %zu vectors, need at least %d", total, MIN_VECTORS);
}

static void test_accepted(void **state)
{
    (void)state;
    size_t i;
    json_t *vec;
    json_array_foreach(json_object_get(vectors, "accepted"), i, vec)
    {
        const char *input = text_of(vec, "accepted", i);
        leased_request_t *req;
        leased_codec_error_t err;
        if (!decode(input, &req, &err))
            fail_msg("accepted[%zu] (%s): refused naming %s (%s)", i,
                     json_string_value(json_object_get(vec, "why")), err.field, err.reason);
        /* what is stored is the value sent; numbers compared as doubles,
         * since a real may be stored in its shortest form ("1.50" as 1.5,
         * 4503599627370496.0 as 4503599627370496) */
        json_t *sent = json_loads(input, JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL, NULL);
        json_t *stored = json_loads(req->u.acquire.metadata_json, JSON_DECODE_INT_AS_REAL, NULL);
        assert_non_null(sent);
        assert_non_null(stored);
        if (!json_equal(sent, stored))
            fail_msg("accepted[%zu]: stored %s for %s", i, req->u.acquire.metadata_json, input);
        json_decref(sent);
        json_decref(stored);
        leased_request_free(req);
    }
}

static void test_rejected(void **state)
{
    (void)state;
    size_t i;
    json_t *vec;
    json_array_foreach(json_object_get(vectors, "rejected"), i, vec)
    {
        const char *input = text_of(vec, "rejected", i);
        const char *want = json_string_value(json_object_get(vec, "field"));
        const char *why = json_string_value(json_object_get(vec, "why"));
        if (!want)
            fail_msg("rejected[%zu]: field missing", i);
        leased_request_t *req;
        leased_codec_error_t err;
        if (decode(input, &req, &err))
            fail_msg("rejected[%zu] (%s): accepted", i, why);
        if (strcmp(err.field, want) != 0)
            fail_msg("rejected[%zu] (%s): field %s, expected %s", i, why, err.field, want);
        leased_request_free(req);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_enough_vectors),
        cmocka_unit_test(test_accepted),
        cmocka_unit_test(test_rejected),
    };
    return cmocka_run_group_tests(tests, load, unload);
}
