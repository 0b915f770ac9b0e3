/*
 * test_json_text.c - lease_json_dumps: jansson's compact text except that
 * reals are the shortest text that reads back as the same double; and the
 * metadata number bound.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lease/json_text.h"

static void check_dump(const char *in, size_t flags, const char *want)
{
    json_error_t err;
    json_t *v = json_loads(in, JSON_DECODE_ANY, &err);
    assert_non_null(v);
    char *got = lease_json_dumps(v, flags);
    assert_non_null(got);
    if (strcmp(got, want) != 0)
        fail_msg("%s dumped as %s, want %s", in, got, want);
    free(got);
    json_decref(v);
}

/* lease_json_int writes what printf's %lld writes, at the edges and
 * between them. */
static void test_integers_as_printf(void **state)
{
    (void)state;
    long long edges[] = {0,
                         1,
                         -1,
                         9,
                         10,
                         -10,
                         99,
                         100,
                         -100,
                         123456789,
                         INT32_MAX,
                         INT32_MIN,
                         INT64_MAX,
                         INT64_MIN,
                         INT64_MIN + 1,
                         9007199254740991LL,
                         -9007199254740991LL};
    unsigned long long x = 88172645463325252ULL; /* xorshift: many magnitudes */
    for (size_t i = 0; i < sizeof edges / sizeof edges[0] + 2000; i++) {
        long long v = (long long)x >> (x % 64);
        if (i < sizeof edges / sizeof edges[0])
            v = edges[i];
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        lease_json_buf_t b = {0};
        lease_json_int(&b, v);
        char *got = lease_json_take(&b);
        char want[24];
        snprintf(want, sizeof want, "%lld", v);
        assert_non_null(got);
        if (strcmp(got, want) != 0)
            fail_msg("%s written for %s", got, want);
        free(got);
    }
}

static void test_reals_shortest(void **state)
{
    (void)state;
    check_dump("0.1", 0, "0.1");
    check_dump("-2.5", 0, "-2.5");
    check_dump("1e300", 0, "1e+300");
    check_dump("0.30000000000000004", 0, "0.30000000000000004");
    check_dump("123456.789", 0, "123456.789");
    check_dump("-0.0", 0, "0");
    check_dump("5e-324", 0, "5e-324");
    check_dump("9007199254740991", 0, "9007199254740991");
    check_dump("-9223372036854775808", 0, "-9223372036854775808");
    /* every double that prints shortest reads back as itself */
    double samples[] = {0.1, 1.0 / 3, 2.0 / 3, 1e-7, 123e45, 4.35, 0.000001, 1e21, 1e22, 3.14159};
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
        char text[LEASE_JSON_REAL_TEXT_MAX];
        assert_true(lease_json_real_text(samples[i], text));
        assert_true(strtod(text, NULL) == samples[i]);
    }
    char text[LEASE_JSON_REAL_TEXT_MAX];
    assert_false(lease_json_real_text(NAN, text));
    assert_false(lease_json_real_text(INFINITY, text));
}

/* Everything but reals is exactly what jansson writes. */
static void test_same_as_jansson(void **state)
{
    (void)state;
    static const char *const docs[] = {
        "{\"b\":1,\"a\":[true,false,null,\"x\\u0001\\n\\t\\\"\\\\/\"],\"c\":{\"z\":{}}}",
        "[\"\\u00e9\\u2028\\u0000tail\",-5,[],{}]",
        "{\"\\u007f\":\"\\u001f\\b\\f\\r\"}",
        "\"only a string\"",
    };
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        json_error_t err;
        json_t *v = json_loads(docs[i], JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
        assert_non_null(v);
        for (int sorted = 0; sorted < 2; sorted++) {
            size_t flags = sorted ? JSON_SORT_KEYS : 0;
            char *mine = lease_json_dumps(v, flags);
            char *theirs = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | flags);
            assert_non_null(mine);
            assert_non_null(theirs);
            assert_string_equal(mine, theirs);
            free(mine);
            free(theirs);
        }
        json_decref(v);
    }
    check_dump("{\"b\":1,\"a\":2}", JSON_SORT_KEYS, "{\"a\":2,\"b\":1}");
    check_dump("{\"b\":1,\"a\":2}", 0, "{\"b\":1,\"a\":2}");
}

/* lease_json_string against jansson's escaping for every length up to 40
 * with each byte that needs an escape (and a UTF-8 lead byte) at every
 * position: the word-at-a-time path hands over to the byte loop around it. */
static void test_strings_escaped_as_jansson(void **state)
{
    (void)state;
    static const unsigned char special[] = {0x00, 0x01, 0x08, 0x09, 0x0a, 0x1f, '"',
                                            '\\', 0x20, 0x21, 0x5b, 0x5d, 0x7f};
    char s[41];
    for (size_t len = 0; len <= 40; len++) {
        for (size_t pos = 0; pos < (len ? len : 1); pos++) {
            for (size_t k = 0; k < sizeof special; k++) {
                for (size_t i = 0; i < len; i++)
                    s[i] = (char)('a' + (i % 26));
                if (len > 0)
                    s[pos] = (char)special[k];
                /* a second one, further on, after a clean word */
                if (pos + 9 < len)
                    s[pos + 9] = (char)special[(k + 5) % sizeof special];
                json_t *str = json_stringn(s, len);
                assert_non_null(str);
                char *want = json_dumps(str, JSON_ENCODE_ANY | JSON_COMPACT);
                lease_json_buf_t b = {0};
                lease_json_string(&b, s, len);
                char *got = lease_json_take(&b);
                assert_non_null(want);
                assert_non_null(got);
                assert_string_equal(got, want);
                free(got);
                free(want);
                json_decref(str);
            }
        }
    }
}

static void test_number_bound(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        bool safe;
    } cases[] = {
        {"9007199254740991", true},
        {"-9007199254740991", true},
        {"9007199254740992", false},
        {"9200000000000000000", false},
        {"0.1", true},
        {"9007199254740991.0", true},
        {"1e19", false},
        {"-1e300", false},
        {"12345678901234567890.5", false},
        {"0", true},
        {"\"1\"", false},
        {"true", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_error_t err;
        json_t *v = json_loads(cases[i].text, JSON_DECODE_ANY, &err);
        assert_non_null(v);
        if (lease_json_number_safe(v) != cases[i].safe)
            fail_msg("%s: safe should be %d", cases[i].text, cases[i].safe);
        json_decref(v);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_integers_as_printf),
        cmocka_unit_test(test_reals_shortest),
        cmocka_unit_test(test_same_as_jansson),
        cmocka_unit_test(test_strings_escaped_as_jansson),
        cmocka_unit_test(test_number_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
