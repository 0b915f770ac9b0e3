/*
 * test_identity_vectors.c - the C identity rules (src/core/identity.c, and
 * the lock_identity object as json_codec.c reads it) against the shared
 * vectors in tests/vectors/identity.json; pgtap/24_identity_vectors.sql
 * checks lease.normalize_component, lease._identity, lease._canonical_of and
 * lease.acquire against the same file. Each vector's input is a request's
 * whole lock_identity value (any JSON); an accepted one normalises to its
 * "normalized" tuple, a rejected one fails naming its "field".
 * tests/vectors/lock_keys.json adds the lock keys of whole tuples.
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

#include "lease/identity.h"
#include "server/json_codec.h"

#define VECTORS LEASE_TEST_SOURCE_DIR "/tests/vectors/identity.json"
#define MIN_VECTORS 120
#define PREFIX "lock_identity."

static const leased_codec_limits_t limits = {10000};
static const char *const fields[] = {"tenant_id",  "program_id",    "target_namespace", "target_id",
                                     "actor_name", "workflow_name", "operation_class"};
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

/* Decodes an acquire whose lock_identity is the vector's input; the rest of
 * the body is valid. */
static bool decode(json_t *input, leased_request_t **req, leased_codec_error_t *err)
{
    json_t *body = json_pack("{s:s, s:O, s:s, s:s, s:s}", "request_id", "r", "lock_identity", input,
                             "service_instance_id", "i", "execution_id", "e", "job_id", "j");
    assert_non_null(body);
    char *text = json_dumps(body, JSON_COMPACT);
    assert_non_null(text);
    json_decref(body);
    *req = leased_request_new(LEASED_OP_ACQUIRE);
    bool ok = leased_codec_decode(LEASED_OP_ACQUIRE, text, strlen(text), NULL, &limits, *req, err);
    free(text);
    return ok;
}

static const char *normalized_field(const lease_identity_t *id, size_t i)
{
    const char *values[] = {id->tenant_id,  id->program_id,    id->target_namespace, id->target_id,
                            id->actor_name, id->workflow_name, id->operation_class};
    return values[i];
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
        json_t *input = json_object_get(vec, "input");
        json_t *want = json_object_get(vec, "normalized");
        const char *why = json_string_value(json_object_get(vec, "why"));
        if (!json_is_object(input) || !json_is_object(want) || !why)
            fail_msg("accepted[%zu]: input, normalized or why missing", i);
        leased_request_t *req;
        leased_codec_error_t err;
        if (!decode(input, &req, &err))
            fail_msg("accepted[%zu] (%s): refused naming %s", i, why, err.field);
        const lease_identity_t *id = &req->u.acquire.identity;
        for (size_t f = 0; f < 7; f++) {
            const char *expected = json_string_value(json_object_get(want, fields[f]));
            if (!expected)
                fail_msg("accepted[%zu]: normalized.%s missing", i, fields[f]);
            if (strcmp(normalized_field(id, f), expected) != 0)
                fail_msg("accepted[%zu] (%s): %s normalised to \"%s\", expected \"%s\"", i, why,
                         fields[f], normalized_field(id, f), expected);
            /* one component alone gives the same answer (list filters) */
            char one[LEASE_TARGET_ID_MAX + 1];
            const char *raw = json_string_value(json_object_get(input, fields[f]));
            assert_true(lease_identity_component_normalize(fields[f], raw, one, sizeof one));
            assert_string_equal(one, expected);
        }
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
        json_t *input = json_object_get(vec, "input");
        const char *want = json_string_value(json_object_get(vec, "field"));
        const char *why = json_string_value(json_object_get(vec, "why"));
        if (!input || !want || !why)
            fail_msg("rejected[%zu]: input, field or why missing", i);
        leased_request_t *req;
        leased_codec_error_t err;
        if (decode(input, &req, &err))
            fail_msg("rejected[%zu] (%s): accepted", i, why);
        if (strcmp(err.field, want) != 0)
            fail_msg("rejected[%zu] (%s): field %s, expected %s", i, why, err.field, want);
        leased_request_free(req);

        /* a string component named by the vector is refused alone too */
        const char *component =
            strncmp(want, PREFIX, strlen(PREFIX)) == 0 ? want + strlen(PREFIX) : NULL;
        json_t *value = component ? json_object_get(input, component) : NULL;
        char one[LEASE_TARGET_ID_MAX + 1];
        if (json_is_string(value) && lease_identity_component_normalize(
                                         component, json_string_value(value), one, sizeof one))
            fail_msg("rejected[%zu] (%s): component accepted alone", i, why);
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
