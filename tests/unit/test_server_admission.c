/*
 * test_server_admission.c - the per-credential token bucket (rate n/s,
 * burst n, refill over time, independent credentials, retry hints) and the
 * global in-flight bound.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "server/admission.h"

#define SEC INT64_C(1000000000)

static void test_bucket(void **state)
{
    (void)state;
    leased_admission_t *adm = leased_admission_new(5, 100);
    int64_t t0 = 10 * SEC, retry = 0;
    /* a full bucket: the burst is the rate */
    for (int i = 0; i < 5; i++)
        assert_true(leased_admission_take(adm, "key_a", t0, &retry));
    assert_false(leased_admission_take(adm, "key_a", t0, &retry));
    assert_true(retry > 0 && retry <= 201); /* one token every 200 ms */
    /* another credential is not affected */
    assert_true(leased_admission_take(adm, "key_b", t0, &retry));
    /* 200 ms later exactly one more token */
    assert_true(leased_admission_take(adm, "key_a", t0 + SEC / 5, &retry));
    assert_false(leased_admission_take(adm, "key_a", t0 + SEC / 5, &retry));
    /* a long pause refills only up to the burst */
    for (int i = 0; i < 5; i++)
        assert_true(leased_admission_take(adm, "key_a", t0 + 100 * SEC, &retry));
    assert_false(leased_admission_take(adm, "key_a", t0 + 100 * SEC, &retry));
    /* time seen going backwards (threads read the clock before the lock)
     * grants nothing */
    assert_false(leased_admission_take(adm, "key_a", t0 + 99 * SEC, &retry));
    assert_int_equal(leased_admission_rejected_rate(adm), 4);
    leased_admission_free(adm);
}

/* Many credentials: the table stays bounded and still admits. */
static void test_many_credentials(void **state)
{
    (void)state;
    leased_admission_t *adm = leased_admission_new(1, 100);
    int64_t retry = 0;
    char id[32];
    for (int i = 0; i < 20000; i++) {
        snprintf(id, sizeof id, "key_%d", i);
        /* 2 s apart per thousand: older buckets are full again and pruned */
        assert_true(leased_admission_take(adm, id, (int64_t)(i / 1000) * 2 * SEC, &retry));
    }
    leased_admission_free(adm);
}

static void test_inflight(void **state)
{
    (void)state;
    leased_admission_t *adm = leased_admission_new(100, 2);
    int64_t retry = 0;
    assert_true(leased_admission_enter(adm, &retry));
    assert_true(leased_admission_enter(adm, &retry));
    assert_false(leased_admission_enter(adm, &retry));
    assert_true(retry > 0);
    assert_int_equal(leased_admission_inflight(adm), 2);
    leased_admission_leave(adm);
    assert_true(leased_admission_enter(adm, &retry));
    assert_int_equal(leased_admission_rejected_inflight(adm), 1);
    leased_admission_leave(adm);
    leased_admission_leave(adm);
    assert_int_equal(leased_admission_inflight(adm), 0);
    leased_admission_free(adm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bucket),
        cmocka_unit_test(test_many_credentials),
        cmocka_unit_test(test_inflight),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
