/*
 * test_clock.c - RFC 3339 formatting and parsing (offsets, fractional
 * digits, leap years, rejections) and deadline arithmetic on the two
 * clocks. Expected epoch values were computed with Python's datetime.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>

#include "lease/clock.h"

static void expect_format(int64_t ms, const char *want)
{
    char out[LEASE_TIME_LEN + 1];
    memset(out, 'X', sizeof out);
    lease_time_format(ms, out);
    assert_string_equal(out, want);
    assert_int_equal(strlen(out), LEASE_TIME_LEN);
}

static void expect_parse(const char *s, int64_t want)
{
    int64_t got = 42;
    if (!lease_time_parse(s, &got))
        fail_msg("\"%s\" rejected", s);
    if (got != want)
        fail_msg("\"%s\" parsed to %lld, expected %lld", s, (long long)got, (long long)want);
}

static void expect_reject(const char *s)
{
    int64_t got = 42;
    if (lease_time_parse(s, &got))
        fail_msg("\"%s\" accepted as %lld", s ? s : "(null)", (long long)got);
    assert_int_equal(got, 42); /* untouched */
}

static void test_format(void **state)
{
    (void)state;
    expect_format(0, "1970-01-01T00:00:00.000Z");
    expect_format(1785931200000, "2026-08-05T12:00:00.000Z");
    expect_format(1785931220000, "2026-08-05T12:00:20.000Z");
    expect_format(1785931200007, "2026-08-05T12:00:00.007Z");
    expect_format(1709251199999, "2024-02-29T23:59:59.999Z");
    expect_format(951782400000, "2000-02-29T00:00:00.000Z");
    expect_format(-1, "1969-12-31T23:59:59.999Z");
    expect_format(-1000, "1969-12-31T23:59:59.000Z");
    expect_format(-2203891200000, "1900-03-01T00:00:00.000Z");
    expect_format(-62135596800000, "0001-01-01T00:00:00.000Z");
    expect_format(253402300799999, "9999-12-31T23:59:59.999Z");
    /* out of four-digit years: clamped, still well-formed */
    expect_format(INT64_MAX, "9999-12-31T23:59:59.999Z");
    expect_format(INT64_MIN, "0000-01-01T00:00:00.000Z");
}

static void test_parse_utc(void **state)
{
    (void)state;
    expect_parse("2026-08-05T12:00:00.000Z", 1785931200000);
    expect_parse("2026-08-05T12:00:00Z", 1785931200000);
    expect_parse("2026-08-05t12:00:00z", 1785931200000);
    expect_parse("1970-01-01T00:00:00Z", 0);
    expect_parse("1969-12-31T23:59:59.999Z", -1);
    expect_parse("0001-01-01T00:00:00Z", -62135596800000);
    expect_parse("9999-12-31T23:59:59.999Z", 253402300799999);
    /* a leap second is read as the last ordinary second of its minute */
    expect_parse("2016-12-31T23:59:60Z", 1483228799000);
}

static void test_parse_offsets(void **state)
{
    (void)state;
    expect_parse("2026-08-05T14:00:00+02:00", 1785931200000);
    expect_parse("2026-08-05T07:30:00-04:30", 1785931200000);
    expect_parse("2026-08-05T12:00:00+00:00", 1785931200000);
    expect_parse("2026-08-05T12:00:00-00:00", 1785931200000);
    expect_parse("2026-01-01T00:30:00+01:00", 1767223800000); /* crosses a year */
    expect_parse("2026-08-05T23:59:00+23:59", 1785888000000);
    expect_parse("2026-08-05T12:00:00.250+05:45", 1785910500250);
}

static void test_parse_fraction(void **state)
{
    (void)state;
    expect_parse("2026-08-05T12:00:00.5Z", 1785931200500);
    expect_parse("2026-08-05T12:00:00.05Z", 1785931200050);
    expect_parse("2026-08-05T12:00:00.123Z", 1785931200123);
    /* more than three digits truncate to the millisecond, never round */
    expect_parse("2026-08-05T12:00:00.1239Z", 1785931200123);
    expect_parse("2026-08-05T12:00:00.999999999Z", 1785931200999);
    expect_parse("1969-12-31T23:59:59.9999Z", -1);
    expect_reject("2026-08-05T12:00:00.1234567890Z"); /* ten digits */
    expect_reject("2026-08-05T12:00:00.Z");
    expect_reject("2026-08-05T12:00:00,5Z");
}

static void test_leap_years(void **state)
{
    (void)state;
    expect_parse("2024-02-29T00:00:00Z", 1709164800000);
    expect_parse("2000-02-29T00:00:00Z", 951782400000);
    expect_parse("1600-02-29T00:00:00Z", -11670998400000);
    expect_reject("2023-02-29T00:00:00Z");
    expect_reject("1900-02-29T00:00:00Z");
    expect_reject("2100-02-29T00:00:00Z");
    expect_reject("2024-02-30T00:00:00Z");
    expect_reject("2026-04-31T00:00:00Z");
    expect_reject("2026-06-31T00:00:00Z");
    expect_parse("2026-12-31T00:00:00Z", 1798675200000);
}

static void test_parse_rejects(void **state)
{
    (void)state;
    expect_reject(NULL);
    expect_reject("");
    expect_reject("2026-08-05");
    expect_reject("2026-08-05T12:00:00"); /* no offset */
    expect_reject("2026-08-05T12:00Z");   /* no seconds */
    expect_reject("2026-8-5T12:00:00Z");
    expect_reject("2026-08-05T12:00:00ZZ");
    expect_reject("2026-08-05T12:00:00Z ");
    expect_reject(" 2026-08-05T12:00:00Z");
    expect_reject("2026-08-05X12:00:00Z");
    expect_reject("2026-13-01T00:00:00Z");
    expect_reject("2026-00-01T00:00:00Z");
    expect_reject("2026-01-00T00:00:00Z");
    expect_reject("2026-01-32T00:00:00Z");
    expect_reject("2026-01-01T24:00:00Z");
    expect_reject("2026-01-01T00:60:00Z");
    expect_reject("2026-01-01T00:00:61Z");
    expect_reject("2026-01-01T00:00:00+24:00");
    expect_reject("2026-01-01T00:00:00+01:60");
    expect_reject("2026-01-01T00:00:00+0100");
    expect_reject("2026-01-01T00:00:00+01");
    expect_reject("2026-01-01T00:00:00+01:00x");
    expect_reject("2026-01-01T00:00:00UTC");
    expect_reject("+2026-01-01T00:00:00Z");
    expect_reject("2026-01-01T00:00:0aZ");
    expect_reject("1785931200000");
}

static void test_round_trip(void **state)
{
    (void)state;
    const int64_t values[] = {0,
                              1,
                              999,
                              1000,
                              -1,
                              -999,
                              -1001,
                              1785931200123,
                              951868799999,
                              1709251199999,
                              -2203891200001,
                              253402300799999,
                              -62135596800000};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        char text[LEASE_TIME_LEN + 1];
        lease_time_format(values[i], text);
        expect_parse(text, values[i]);
    }
    /* every millisecond of a few leap-day seconds */
    for (int64_t ms = 951868790000; ms < 951868810000; ms += 7) {
        char text[LEASE_TIME_LEN + 1];
        lease_time_format(ms, text);
        expect_parse(text, ms);
    }
}

static void test_deadline_in(void **state)
{
    (void)state;
    int64_t mono_before = lease_mono_now_ns();
    int64_t wall_before = lease_wall_now_ms();
    lease_deadline_t d = lease_deadline_in(1000);
    int64_t wall_after = lease_wall_now_ms();
    assert_in_range(d.wall_ms, wall_before + 1000, wall_after + 1000);
    /* what is left is 1 s less what has passed since (measured, not
     * assumed small) */
    int64_t left = lease_deadline_remaining_ms(&d);
    int64_t passed_ms = (lease_mono_now_ns() - mono_before) / 1000000 + 1;
    assert_true(left >= 1000 - passed_ms && left <= 1000);
    assert_false(lease_deadline_passed(&d));

    lease_deadline_t now = lease_deadline_in(0);
    assert_true(lease_deadline_passed(&now));
    assert_true(lease_deadline_remaining_ms(&now) <= 0);

    lease_deadline_t past = lease_deadline_in(-50);
    assert_true(lease_deadline_passed(&past));
    assert_true(lease_deadline_remaining_ms(&past) <= -50);
    assert_true(lease_deadline_remaining_ms(&past) > -10000);
}

static void test_deadline_passes(void **state)
{
    (void)state;
    lease_deadline_t d = lease_deadline_in(30);
    assert_false(lease_deadline_passed(&d));
    int64_t start = lease_mono_now_ns();
    lease_sleep_ms(40);
    assert_true(lease_mono_now_ns() - start >= 40 * 1000000LL);
    assert_true(lease_deadline_passed(&d));
    assert_true(lease_deadline_remaining_ms(&d) <= -10);
}

static void test_deadline_min(void **state)
{
    (void)state;
    lease_deadline_t soon = lease_deadline_in(100);
    lease_deadline_t late = lease_deadline_in(100000);
    lease_deadline_t m1 = lease_deadline_min(soon, late);
    lease_deadline_t m2 = lease_deadline_min(late, soon);
    assert_int_equal(m1.mono_ns, soon.mono_ns);
    assert_int_equal(m1.wall_ms, soon.wall_ms);
    assert_int_equal(m2.mono_ns, soon.mono_ns);
    assert_int_equal(m2.wall_ms, soon.wall_ms);
    lease_deadline_t same = lease_deadline_min(late, late);
    assert_int_equal(same.mono_ns, late.mono_ns);
}

static void test_deadline_at_wall(void **state)
{
    (void)state;
    int64_t target = lease_wall_now_ms() + 2000;
    lease_deadline_t d = lease_deadline_at_wall(target);
    assert_int_equal(d.wall_ms, target); /* sent to Postgres as given */
    assert_in_range(lease_deadline_remaining_ms(&d), 1500, 2000);
    assert_false(lease_deadline_passed(&d));

    lease_deadline_t past = lease_deadline_at_wall(lease_wall_now_ms() - 5000);
    assert_true(lease_deadline_passed(&past));
    int64_t left = lease_deadline_remaining_ms(&past);
    assert_true(left <= -4999 && left > -6000);

    /* absurd values clamp instead of overflowing (UBSan aborts on overflow) */
    lease_deadline_t far = lease_deadline_at_wall(253402300799999);
    assert_false(lease_deadline_passed(&far));
    assert_true(lease_deadline_remaining_ms(&far) > 50LL * 365 * 86400 * 1000);
    lease_deadline_t max = lease_deadline_at_wall(INT64_MAX);
    assert_false(lease_deadline_passed(&max));
    assert_true(max.wall_ms > lease_wall_now_ms());
    lease_deadline_t min = lease_deadline_at_wall(INT64_MIN);
    assert_true(lease_deadline_passed(&min));
    assert_true(min.wall_ms < lease_wall_now_ms());
    lease_deadline_t huge = lease_deadline_in(INT64_MAX);
    assert_false(lease_deadline_passed(&huge));
    lease_deadline_t neg = lease_deadline_in(INT64_MIN);
    assert_true(lease_deadline_passed(&neg));
}

static void test_jitter(void **state)
{
    (void)state;
    assert_int_equal(lease_jitter(0), 0);
    assert_int_equal(lease_jitter(1), 0);
    bool seen[10] = {false};
    for (int i = 0; i < 1000; i++) {
        uint64_t v = lease_jitter(10);
        assert_true(v < 10);
        seen[v] = true;
    }
    for (int i = 0; i < 10; i++)
        assert_true(seen[i]); /* 1000 draws miss a value with p < 1e-44 */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format),           cmocka_unit_test(test_parse_utc),
        cmocka_unit_test(test_parse_offsets),    cmocka_unit_test(test_parse_fraction),
        cmocka_unit_test(test_leap_years),       cmocka_unit_test(test_parse_rejects),
        cmocka_unit_test(test_round_trip),       cmocka_unit_test(test_deadline_in),
        cmocka_unit_test(test_deadline_passes),  cmocka_unit_test(test_deadline_min),
        cmocka_unit_test(test_deadline_at_wall), cmocka_unit_test(test_jitter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
