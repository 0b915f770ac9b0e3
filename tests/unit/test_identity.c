/*
 * test_identity.c - every rule of docs/contract.md's identity on every component:
 * what is accepted and how it is normalised, what is rejected and which
 * field is named, identifier syntax, identity equality and lock keys.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "lease/identity.h"

#define GOLDEN_KEY "starintel:target-lease:v1:6UMHT_RTstSuGcqfVUzB0pc9lxli2lxUAbN_RNKMpBY"

static const char *const name_fields[] = {"tenant_id", "program_id", "actor_name", "workflow_name"};
static const char *const all_fields[] = {"tenant_id",      "program_id", "target_namespace",
                                         "target_id",      "actor_name", "workflow_name",
                                         "operation_class"};

static lease_identity_input_t golden_input(void)
{
    lease_identity_input_t in = {
        .tenant_id = "tenant-main",
        .program_id = "program-a",
        .target_namespace = "starintel-target",
        .target_id = "target_01",
        .actor_name = "usernamegen",
        .workflow_name = "default",
        .operation_class = "default",
    };
    return in;
}

static const char **input_slot(lease_identity_input_t *in, const char *field)
{
    if (strcmp(field, "tenant_id") == 0)
        return &in->tenant_id;
    if (strcmp(field, "program_id") == 0)
        return &in->program_id;
    if (strcmp(field, "target_namespace") == 0)
        return &in->target_namespace;
    if (strcmp(field, "target_id") == 0)
        return &in->target_id;
    if (strcmp(field, "actor_name") == 0)
        return &in->actor_name;
    if (strcmp(field, "workflow_name") == 0)
        return &in->workflow_name;
    if (strcmp(field, "operation_class") == 0)
        return &in->operation_class;
    fail_msg("unknown field %s", field);
    return NULL;
}

static const char *output_value(const lease_identity_t *id, const char *field)
{
    if (strcmp(field, "tenant_id") == 0)
        return id->tenant_id;
    if (strcmp(field, "program_id") == 0)
        return id->program_id;
    if (strcmp(field, "target_namespace") == 0)
        return id->target_namespace;
    if (strcmp(field, "target_id") == 0)
        return id->target_id;
    if (strcmp(field, "actor_name") == 0)
        return id->actor_name;
    if (strcmp(field, "workflow_name") == 0)
        return id->workflow_name;
    if (strcmp(field, "operation_class") == 0)
        return id->operation_class;
    fail_msg("unknown field %s", field);
    return NULL;
}

/* The golden identity with one component replaced must be accepted, with
 * that component normalised to `want`, through both entry points. */
static void expect_accept(const char *field, const char *value, const char *want)
{
    lease_identity_input_t in = golden_input();
    *input_slot(&in, field) = value;
    lease_identity_t id;
    const char *bad = "unset";
    if (!lease_identity_normalize(&in, &id, &bad))
        fail_msg("%s=\"%s\" rejected (bad_field %s), expected \"%s\"", field,
                 value ? value : "(null)", bad ? bad : "(null)", want);
    assert_null(bad);
    assert_string_equal(output_value(&id, field), want);

    char one[LEASE_TARGET_ID_MAX + 1];
    assert_true(lease_identity_component_normalize(field, value, one, sizeof one));
    assert_string_equal(one, want);
}

/* ... and rejected, naming exactly that component. */
static void expect_reject(const char *field, const char *value)
{
    lease_identity_input_t in = golden_input();
    *input_slot(&in, field) = value;
    lease_identity_t id;
    const char *bad = NULL;
    if (lease_identity_normalize(&in, &id, &bad))
        fail_msg("%s=\"%s\" accepted as \"%s\", expected rejection", field,
                 value ? value : "(null)", output_value(&id, field));
    assert_non_null(bad);
    assert_string_equal(bad, field);

    char one[LEASE_TARGET_ID_MAX + 1];
    assert_false(lease_identity_component_normalize(field, value, one, sizeof one));
}

static char *repeat(char c, size_t n)
{
    static char buf[4][256];
    static int next;
    char *b = buf[next++ % 4];
    assert_true(n < sizeof buf[0]);
    memset(b, c, n);
    b[n] = '\0';
    return b;
}

/* Rejections that hold for every component, whatever its rule. */
static void reject_common(const char *field, size_t max)
{
    expect_reject(field, "");
    expect_reject(field, repeat('a', max + 1));
    expect_reject(field, "a/b");
    expect_reject(field, "a\\b");
    expect_reject(field, "a b");
    expect_reject(field, " a");
    expect_reject(field, "a ");
    expect_reject(field, "a\tb");
    expect_reject(field, "a\nb");
    expect_reject(field, "a\r");
    expect_reject(field, "a\x01"
                         "b");
    expect_reject(field, "a\x1f");
    expect_reject(field, "a\x7f");
    expect_reject(field, "t\xc3\xa9");    /* e-acute, UTF-8 */
    expect_reject(field, "\xef\xbc\xa1"); /* full-width A */
    expect_reject(field, "\xe2\x84\xaa"); /* Kelvin sign: Unicode folds it to k */
    expect_reject(field, "a\xc2\xa0"
                         "b");     /* no-break space */
    expect_reject(field, "a\xff"); /* not UTF-8 at all */
    expect_reject(field, "\xc3");  /* truncated UTF-8 */
    expect_reject(field, "a\"b");
    expect_reject(field, "a,b");
    expect_reject(field, "a*");
    expect_reject(field, "a%2fb");
}

static void test_golden_key(void **state)
{
    (void)state;
    lease_identity_input_t in = golden_input();
    lease_identity_t id;
    const char *bad = "unset";
    assert_true(lease_identity_normalize(&in, &id, &bad));
    assert_null(bad);
    char key[LEASE_LOCK_KEY_LEN + 1];
    memset(key, 'X', sizeof key);
    lease_lock_key(&id, key);
    assert_string_equal(key, GOLDEN_KEY);
    assert_int_equal(strlen(key), LEASE_LOCK_KEY_LEN);
}

static void test_name_fields(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof name_fields / sizeof name_fields[0]; i++) {
        const char *f = name_fields[i];
        expect_accept(f, "a", "a");
        expect_accept(f, "0", "0");
        expect_accept(f, "9lives", "9lives");
        expect_accept(f, "a_b-c", "a_b-c");
        expect_accept(f, "trailing-", "trailing-");
        expect_accept(f, "trailing_", "trailing_");
        expect_accept(f, "MiXeD-Case_09", "mixed-case_09");
        expect_accept(f, "Z", "z");
        expect_accept(f, repeat('a', 64), repeat('a', 64));
        expect_accept(f, repeat('A', 64), repeat('a', 64));

        reject_common(f, 64);
        expect_reject(f, NULL);
        expect_reject(f, "-a");
        expect_reject(f, "_a");
        expect_reject(f, ".a");
        expect_reject(f, "a.b"); /* dot belongs to namespaces and targets */
        expect_reject(f, "a:b"); /* colon belongs to target_id only */
        expect_reject(f, ":a");
        expect_reject(f, "a..b");
    }
}

static void test_target_namespace(void **state)
{
    (void)state;
    const char *f = "target_namespace";
    expect_accept(f, "starintel-target", "starintel-target");
    expect_accept(f, "StarIntel-TARGET", "starintel-target");
    expect_accept(f, "a.b.c", "a.b.c");
    expect_accept(f, "a_b-c.d", "a_b-c.d");
    expect_accept(f, "ns.", "ns.");
    expect_accept(f, "0", "0");
    expect_accept(f, repeat('n', 64), repeat('n', 64));
    expect_accept(f, repeat('N', 64), repeat('n', 64));

    reject_common(f, 64);
    expect_reject(f, NULL);
    expect_reject(f, "-ns");
    expect_reject(f, "_ns");
    expect_reject(f, ".ns");
    expect_reject(f, "a..b");
    expect_reject(f, "ns..");
    expect_reject(f, "..");
    expect_reject(f, "star:intel");
}

static void test_target_id(void **state)
{
    (void)state;
    const char *f = "target_id";
    expect_accept(f, "target_01", "target_01");
    /* case-sensitive: preserved, never folded */
    expect_accept(f, "TARGET_01", "TARGET_01");
    expect_accept(f, "Target_01", "Target_01");
    expect_accept(f, "urn:example:target.01-x", "urn:example:target.01-x");
    expect_accept(f, "A-Z_a.z:0-9", "A-Z_a.z:0-9");
    expect_accept(f, "x.", "x.");
    expect_accept(f, "x:", "x:");
    expect_accept(f, "0", "0");
    expect_accept(f, "Z", "Z");
    expect_accept(f, repeat('T', 128), repeat('T', 128));

    reject_common(f, 128);
    expect_reject(f, NULL);
    expect_reject(f, "-t");
    expect_reject(f, "_t");
    expect_reject(f, ".t");
    expect_reject(f, ":t");
    expect_reject(f, "a..b");
    expect_reject(f, "..");
    expect_reject(f, "a:..:b");
}

static void test_operation_class(void **state)
{
    (void)state;
    const char *f = "operation_class";
    static const char *const values[] = {"default", "collect", "enrich", "publish", "maintenance"};
    for (size_t i = 0; i < 5; i++) {
        char upper[32];
        char mixed[32];
        size_t n = strlen(values[i]);
        for (size_t j = 0; j <= n; j++) {
            upper[j] = (char)(values[i][j] >= 'a' ? values[i][j] - 32 : values[i][j]);
            mixed[j] = (char)(j == 0 ? upper[j] : values[i][j]);
        }
        expect_accept(f, values[i], values[i]);
        expect_accept(f, upper, values[i]);
        expect_accept(f, mixed, values[i]);
    }
    /* absent means the canonical "default", never an omitted component */
    expect_accept(f, NULL, "default");

    reject_common(f, 16);
    expect_reject(f, "unknown");
    expect_reject(f, "defaults");
    expect_reject(f, "defaul");
    expect_reject(f, "null");
    expect_reject(f, "none");
    expect_reject(f, "default ");
    expect_reject(f, " default");
    expect_reject(f, "default\n");
    expect_reject(f, "d\xc3\xa9"
                     "fault");
    expect_reject(f, "collect:x");
    expect_reject(f, "maintenance.");
    expect_reject(f, repeat('c', 65));
}

/* The first bad component in tuple order is the one reported, and a NULL
 * bad_field pointer is allowed. */
static void test_reporting(void **state)
{
    (void)state;
    lease_identity_input_t in = golden_input();
    in.workflow_name = "";
    in.operation_class = "bogus";
    lease_identity_t id;
    const char *bad = NULL;
    assert_false(lease_identity_normalize(&in, &id, &bad));
    assert_string_equal(bad, "workflow_name");
    assert_false(lease_identity_normalize(&in, &id, NULL));

    in = golden_input();
    in.operation_class = "bogus";
    assert_false(lease_identity_normalize(&in, &id, &bad));
    assert_string_equal(bad, "operation_class");

    assert_false(lease_identity_normalize(NULL, &id, &bad));
    assert_string_equal(bad, "tenant_id");
}

static void test_component_normalize_edges(void **state)
{
    (void)state;
    char out[LEASE_TARGET_ID_MAX + 1];
    assert_false(lease_identity_component_normalize("lock_key", "a", out, sizeof out));
    assert_false(lease_identity_component_normalize("TENANT_ID", "a", out, sizeof out));
    assert_false(lease_identity_component_normalize(NULL, "a", out, sizeof out));
    assert_false(lease_identity_component_normalize("tenant_id", "a", NULL, 10));
    assert_false(lease_identity_component_normalize("tenant_id", "a", out, 0));

    /* the output must hold the value and its NUL, or the call fails */
    char small[4];
    assert_false(lease_identity_component_normalize("tenant_id", "abcd", small, sizeof small));
    assert_true(lease_identity_component_normalize("tenant_id", "ABC", small, sizeof small));
    assert_string_equal(small, "abc");
    assert_true(lease_identity_component_normalize("operation_class", NULL, out, sizeof out));
    assert_string_equal(out, "default");
}

static void normalize_or_fail(const lease_identity_input_t *in, lease_identity_t *id)
{
    const char *bad = NULL;
    if (!lease_identity_normalize(in, id, &bad))
        fail_msg("rejected: %s", bad);
}

static void test_equal_and_distinct_keys(void **state)
{
    (void)state;
    lease_identity_input_t in = golden_input();
    lease_identity_t base;
    normalize_or_fail(&in, &base);
    char base_key[LEASE_LOCK_KEY_LEN + 1];
    lease_lock_key(&base, base_key);

    /* case-folded and absent-class equivalents are the same tuple and key */
    lease_identity_input_t folded = {"TENANT-MAIN", "Program-A",   "STARINTEL-TARGET",
                                     "target_01",   "UserNameGen", "Default",
                                     NULL};
    lease_identity_t same;
    normalize_or_fail(&folded, &same);
    assert_true(lease_identity_equal(&base, &same));
    char key[LEASE_LOCK_KEY_LEN + 1];
    lease_lock_key(&same, key);
    assert_string_equal(key, base_key);

    /* changing any one component changes the tuple and the key */
    static const char *const other[] = {"tenant-other", "program-b", "starintel-other", "Target_01",
                                        "othergen",     "nightly",   "collect"};
    char keys[7][LEASE_LOCK_KEY_LEN + 1];
    for (size_t i = 0; i < 7; i++) {
        lease_identity_input_t changed = golden_input();
        *input_slot(&changed, all_fields[i]) = other[i];
        lease_identity_t id;
        normalize_or_fail(&changed, &id);
        assert_false(lease_identity_equal(&base, &id));
        lease_lock_key(&id, keys[i]);
        assert_string_not_equal(keys[i], base_key);
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(keys[i], keys[j]);
    }

    /* component boundaries are part of the key: ("a","bc") != ("ab","c") */
    lease_identity_input_t split1 = golden_input();
    lease_identity_input_t split2 = golden_input();
    split1.tenant_id = "a";
    split1.program_id = "bc";
    split2.tenant_id = "ab";
    split2.program_id = "c";
    lease_identity_t s1, s2;
    normalize_or_fail(&split1, &s1);
    normalize_or_fail(&split2, &s2);
    char k1[LEASE_LOCK_KEY_LEN + 1], k2[LEASE_LOCK_KEY_LEN + 1];
    lease_lock_key(&s1, k1);
    lease_lock_key(&s2, k2);
    assert_string_not_equal(k1, k2);
}

static void test_key_shape(void **state)
{
    (void)state;
    lease_identity_input_t in = {"t", "p", "n", "x", "a", "w", "publish"};
    lease_identity_t id;
    normalize_or_fail(&in, &id);
    char key[LEASE_LOCK_KEY_LEN + 1];
    lease_lock_key(&id, key);
    assert_int_equal(strlen(key), LEASE_LOCK_KEY_LEN);
    assert_memory_equal(key, LEASE_LOCK_KEY_PREFIX, strlen(LEASE_LOCK_KEY_PREFIX));
    for (const char *p = key + strlen(LEASE_LOCK_KEY_PREFIX); *p; p++) {
        bool b64url = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
                      (*p >= '0' && *p <= '9') || *p == '-' || *p == '_';
        if (!b64url)
            fail_msg("key character '%c' is not unpadded base64url", *p);
    }
}

static void test_id_valid(void **state)
{
    (void)state;
    assert_true(lease_id_valid("a"));
    assert_true(lease_id_valid("lease_01HZX.abc:def-9"));
    assert_true(lease_id_valid("-leading.ok"));
    assert_true(lease_id_valid(".."));
    assert_true(lease_id_valid(repeat('r', 128)));
    assert_false(lease_id_valid(repeat('r', 129)));
    assert_false(lease_id_valid(""));
    assert_false(lease_id_valid(NULL));
    assert_false(lease_id_valid("a b"));
    assert_false(lease_id_valid("a/b"));
    assert_false(lease_id_valid("a\\b"));
    assert_false(lease_id_valid("a\n"));
    assert_false(lease_id_valid("a\x01"));
    assert_false(lease_id_valid("a\x7f"));
    assert_false(lease_id_valid("r\xc3\xa9q"));
    assert_false(lease_id_valid("a+b"));
    assert_false(lease_id_valid("a=b"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_key),
        cmocka_unit_test(test_name_fields),
        cmocka_unit_test(test_target_namespace),
        cmocka_unit_test(test_target_id),
        cmocka_unit_test(test_operation_class),
        cmocka_unit_test(test_reporting),
        cmocka_unit_test(test_component_normalize_edges),
        cmocka_unit_test(test_equal_and_distinct_keys),
        cmocka_unit_test(test_key_shape),
        cmocka_unit_test(test_id_valid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
