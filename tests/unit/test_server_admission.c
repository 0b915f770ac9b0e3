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

/* Fair shares: per credential and per tenant, in flight and waiting, and
 * they come back. */
static void test_shares(void **state)
{
    (void)state;
    leased_admission_t *adm = leased_admission_new(100, 100);
    leased_admission_limits_t lim = {2, 3, 1, 1, 1000, 1000};
    leased_admission_configure(adm, &lim);
    int64_t retry = 0;
    assert_true(leased_admission_claim(adm, "key_a", "t1", false, &retry));
    assert_true(leased_admission_claim(adm, "key_a", "t1", false, &retry));
    /* the credential's share is full; another credential of the tenant is not */
    assert_false(leased_admission_claim(adm, "key_a", "t1", false, &retry));
    assert_true(retry > 0);
    assert_true(leased_admission_claim(adm, "key_b", "t1", false, &retry));
    /* now the tenant's share (3) is full too */
    assert_false(leased_admission_claim(adm, "key_c", "t1", false, &retry));
    assert_true(leased_admission_claim(adm, "key_c", "t2", false, &retry));
    /* waiting is counted apart */
    assert_true(leased_admission_claim(adm, "key_a", "t1", true, &retry));
    assert_false(leased_admission_claim(adm, "key_b", "t1", true, &retry)); /* tenant: 1 */
    leased_admission_unclaim(adm, "key_a", "t1", true);
    assert_true(leased_admission_claim(adm, "key_b", "t1", true, &retry));
    /* releasing gives the shares back */
    leased_admission_unclaim(adm, "key_a", "t1", false);
    assert_true(leased_admission_claim(adm, "key_a", "t1", false, &retry));
    leased_admission_stats_t st;
    leased_admission_stats(adm, &st);
    assert_int_equal(st.rejected_share, 3);
    leased_admission_free(adm);
}

/* Before authentication: the address's request bucket, and its lookup
 * budget that failed authentications use up. */
static void test_source_buckets(void **state)
{
    (void)state;
    leased_admission_t *adm = leased_admission_new(100, 100);
    leased_admission_limits_t lim = {10, 10, 10, 10, 3, 2};
    leased_admission_configure(adm, &lim);
    int64_t t0 = 5 * SEC, retry = 0;
    for (int i = 0; i < 3; i++)
        assert_true(leased_admission_source_take(adm, "10.0.0.1", t0, &retry));
    assert_false(leased_admission_source_take(adm, "10.0.0.1", t0, &retry));
    assert_true(retry > 0);
    assert_true(leased_admission_source_take(adm, "10.0.0.2", t0, &retry));
    /* lookups stay allowed until two failures; looking takes nothing */
    for (int i = 0; i < 5; i++)
        assert_true(leased_admission_lookup_allowed(adm, "10.0.0.1", t0, &retry));
    leased_admission_auth_failed(adm, "10.0.0.1", t0);
    assert_true(leased_admission_lookup_allowed(adm, "10.0.0.1", t0, &retry));
    leased_admission_auth_failed(adm, "10.0.0.1", t0);
    assert_false(leased_admission_lookup_allowed(adm, "10.0.0.1", t0, &retry));
    assert_true(retry > 0 && retry <= 501);
    assert_true(leased_admission_lookup_allowed(adm, "10.0.0.2", t0, &retry));
    /* half a second later one lookup is allowed again */
    assert_true(leased_admission_lookup_allowed(adm, "10.0.0.1", t0 + SEC / 2, &retry));
    leased_admission_free(adm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bucket),         cmocka_unit_test(test_many_credentials),
        cmocka_unit_test(test_inflight),       cmocka_unit_test(test_shares),
        cmocka_unit_test(test_source_buckets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
