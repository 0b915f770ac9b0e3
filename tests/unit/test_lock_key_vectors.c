/*
 * test_lock_key_vectors.c - the C identity code against the shared vectors in
 * tests/vectors/lock_keys.json (computed independently with Python; the
 * pgTAP suite checks lease.lock_key against the same file). Every accepted
 * vector must normalise to its "normalized" tuple and derive its "key";
 * every rejected vector must fail naming its "field".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "lease/identity.h"

#define VECTORS LEASE_TEST_SOURCE_DIR "/tests/vectors/lock_keys.json"
#define MIN_VECTORS 40

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

/* Absent and JSON null both become NULL; anything else must be a string. */
static const char *component(json_t *input, const char *field, size_t index)
{
    json_t *v = json_object_get(input, field);
    if (!v || json_is_null(v))
        return NULL;
    if (!json_is_string(v))
        fail_msg("vector %zu: %s is not a string or null", index, field);
    /* the C API takes NUL-terminated text; a vector with an embedded NUL
     * would silently test a shorter string */
    if (strlen(json_string_value(v)) != json_string_length(v))
        fail_msg("vector %zu: %s contains NUL", index, field);
    return json_string_value(v);
}

static lease_identity_input_t input_of(json_t *input, size_t index)
{
    if (!json_is_object(input))
        fail_msg("vector %zu: input is not an object", index);
    lease_identity_input_t in = {
        component(input, "tenant_id", index),        component(input, "program_id", index),
        component(input, "target_namespace", index), component(input, "target_id", index),
        component(input, "actor_name", index),       component(input, "workflow_name", index),
        component(input, "operation_class", index),
    };
    return in;
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
    size_t total = json_array_size(acc) + json_array_size(rej);
    if (total < MIN_VECTORS)
        fail_msg("only %zu vectors, need at least %d", total, MIN_VECTORS);
    assert_true(json_array_size(acc) > 0);
    assert_true(json_array_size(rej) > 0);
    /* the first vector is docs/contract.md's golden one */
    json_t *first = json_array_get(acc, 0);
    assert_string_equal(json_string_value(json_object_get(first, "key")),
                        "starintel:target-lease:v1:6UMHT_RTstSuGcqfVUzB0pc9lxli2lxUAbN_RNKMpBY");
}

static void test_accepted(void **state)
{
    (void)state;
    json_t *acc = json_object_get(vectors, "accepted");
    size_t i;
    json_t *vec;
    json_array_foreach(acc, i, vec)
    {
        lease_identity_input_t in = input_of(json_object_get(vec, "input"), i);
        json_t *want = json_object_get(vec, "normalized");
        const char *want_key = json_string_value(json_object_get(vec, "key"));
        if (!json_is_object(want) || !want_key)
            fail_msg("accepted[%zu]: normalized or key missing", i);

        lease_identity_t id;
        const char *bad = NULL;
        if (!lease_identity_normalize(&in, &id, &bad))
            fail_msg("accepted[%zu]: rejected with bad_field %s", i, bad);
        for (size_t f = 0; f < 7; f++) {
            const char *expected = json_string_value(json_object_get(want, fields[f]));
            if (!expected)
                fail_msg("accepted[%zu]: normalized.%s missing", i, fields[f]);
            if (strcmp(normalized_field(&id, f), expected) != 0)
                fail_msg("accepted[%zu]: %s normalised to \"%s\", expected \"%s\"", i, fields[f],
                         normalized_field(&id, f), expected);

            char one[LEASE_TARGET_ID_MAX + 1];
            const char *raw = component(json_object_get(vec, "input"), fields[f], i);
            assert_true(lease_identity_component_normalize(fields[f], raw, one, sizeof one));
            assert_string_equal(one, expected);
        }

        char key[LEASE_LOCK_KEY_LEN + 1];
        lease_lock_key(&id, key);
        if (strcmp(key, want_key) != 0)
            fail_msg("accepted[%zu]: key %s, expected %s", i, key, want_key);

        /* normalising a normalised identity changes nothing */
        lease_identity_input_t again = {id.tenant_id,      id.program_id, id.target_namespace,
                                        id.target_id,      id.actor_name, id.workflow_name,
                                        id.operation_class};
        lease_identity_t id2;
        assert_true(lease_identity_normalize(&again, &id2, &bad));
        assert_true(lease_identity_equal(&id, &id2));
    }
}

/* Same tuple <=> same key, across the whole accepted set. */
static void test_no_collisions(void **state)
{
    (void)state;
    json_t *acc = json_object_get(vectors, "accepted");
    size_t n = json_array_size(acc);
    for (size_t i = 0; i < n; i++) {
        for (size_t j = i + 1; j < n; j++) {
            json_t *a = json_array_get(acc, i);
            json_t *b = json_array_get(acc, j);
            bool same_tuple =
                json_equal(json_object_get(a, "normalized"), json_object_get(b, "normalized"));
            bool same_key = strcmp(json_string_value(json_object_get(a, "key")),
                                   json_string_value(json_object_get(b, "key"))) == 0;
            if (same_tuple != same_key)
                fail_msg("accepted[%zu] and [%zu]: same tuple %d but same key %d", i, j, same_tuple,
                         same_key);
        }
    }
}

static void test_rejected(void **state)
{
    (void)state;
    json_t *rej = json_object_get(vectors, "rejected");
    size_t i;
    json_t *vec;
    json_array_foreach(rej, i, vec)
    {
        json_t *input = json_object_get(vec, "input");
        lease_identity_input_t in = input_of(input, i);
        const char *want = json_string_value(json_object_get(vec, "field"));
        const char *why = json_string_value(json_object_get(vec, "why"));
        if (!want || !why)
            fail_msg("rejected[%zu]: field or why missing", i);

        lease_identity_t id;
        const char *bad = NULL;
        if (lease_identity_normalize(&in, &id, &bad))
            fail_msg("rejected[%zu] (%s): accepted", i, why);
        if (!bad || strcmp(bad, want) != 0)
            fail_msg("rejected[%zu] (%s): bad_field %s, expected %s", i, why, bad ? bad : "(null)",
                     want);

        char one[LEASE_TARGET_ID_MAX + 1];
        if (lease_identity_component_normalize(want, component(input, want, i), one, sizeof one))
            fail_msg("rejected[%zu] (%s): component accepted alone", i, why);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_enough_vectors),
        cmocka_unit_test(test_accepted),
        cmocka_unit_test(test_no_collisions),
        cmocka_unit_test(test_rejected),
    };
    return cmocka_run_group_tests(tests, load, unload);
}
