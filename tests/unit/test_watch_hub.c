/*
 * test_watch_hub.c - the watch hub without a database (its listener points
 * at a socket folder that does not exist, so it stays down): a parked
 * request is woken exactly once when its wait ends or when the hub is
 * released for shutdown; the limit refuses parks beyond it; a released hub
 * refuses new parks. (Ends heard and polled: tests/http/http_watch.c.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lease/clock.h"
#include "lease/listener.h"
#include "lease/store_pg.h"
#include "server/watch.h"

typedef struct woken {
    int count;       /* atomic */
    int64_t when_ns; /* atomic: the last wake */
} woken_t;

static void on_wake(void *arg)
{
    woken_t *w = arg;
    __atomic_store_n(&w->when_ns, lease_mono_now_ns(), __ATOMIC_RELEASE);
    __atomic_add_fetch(&w->count, 1, __ATOMIC_ACQ_REL);
}

static int count_of(woken_t *w)
{
    return __atomic_load_n(&w->count, __ATOMIC_ACQUIRE);
}

static leased_watch_t *hub(int64_t max_watches)
{
    lease_listener_pg_config_t lc = {"postgresql:///x?host=/nonexistent/leased-test&port=1",
                                     200, "leased-watch-test", true};
    lease_listener_t *l = NULL;
    char err[256];
    assert_int_equal(lease_listener_pg_open(&lc, &l, err, sizeof err), 0);
    leased_watch_config_t wc = {50, max_watches};
    leased_watch_t *w = leased_watch_new(l, &wc);
    assert_non_null(w);
    assert_true(leased_watch_start(w));
    return w;
}

/* Waits (at most 10 s) until w was woken n times. */
static void wait_count(woken_t *w, int n)
{
    lease_deadline_t until = lease_deadline_in(10000);
    while (count_of(w) < n && !lease_deadline_passed(&until))
        lease_sleep_ms(5);
    assert_int_equal(count_of(w), n);
}

static void test_wait_end_wakes_once(void **state)
{
    (void)state;
    leased_watch_t *w = hub(10);
    woken_t a = {0};
    int64_t until = lease_mono_now_ns() + 200 * 1000000LL;
    assert_int_equal(leased_watch_park(w, "lease_a", leased_watch_seq(w), until, on_wake, &a),
                     LEASED_WATCH_PARKED);
    leased_watch_stats_t st;
    leased_watch_stats(w, &st);
    assert_int_equal(st.parked, 1);
    assert_int_equal(st.mode, LEASE_LISTENER_DOWN);
    wait_count(&a, 1);
    assert_true(__atomic_load_n(&a.when_ns, __ATOMIC_ACQUIRE) >= until); /* not before its wait ended */
    lease_sleep_ms(100);
    assert_int_equal(count_of(&a), 1); /* once */
    leased_watch_stats(w, &st);
    assert_int_equal(st.parked, 0);
    leased_watch_free(w);
}

static void test_limit_and_release(void **state)
{
    (void)state;
    leased_watch_t *w = hub(2);
    woken_t a = {0}, b = {0}, c = {0};
    int64_t later = lease_mono_now_ns() + 600LL * 1000000000;
    assert_int_equal(leased_watch_park(w, "lease_a", 0, later, on_wake, &a), LEASED_WATCH_PARKED);
    assert_int_equal(leased_watch_park(w, "lease_b", 0, later, on_wake, &b), LEASED_WATCH_PARKED);
    assert_int_equal(leased_watch_park(w, "lease_c", 0, later, on_wake, &c), LEASED_WATCH_FULL);
    leased_watch_stats_t st;
    leased_watch_stats(w, &st);
    assert_int_equal(st.refused_full, 1);
    assert_false(leased_watch_stopping(w));
    /* shutdown: both woken at once, new parks refused */
    leased_watch_release_all(w);
    assert_int_equal(count_of(&a), 1);
    assert_int_equal(count_of(&b), 1);
    assert_int_equal(count_of(&c), 0);
    assert_true(leased_watch_stopping(w));
    assert_int_equal(leased_watch_park(w, "lease_c", 0, later, on_wake, &c),
                     LEASED_WATCH_STOPPING);
    leased_watch_free(w);
    assert_int_equal(count_of(&a), 1);
    assert_int_equal(count_of(&b), 1);
}

static void test_free_wakes_what_is_parked(void **state)
{
    (void)state;
    leased_watch_t *w = hub(10);
    woken_t a = {0};
    int64_t later = lease_mono_now_ns() + 600LL * 1000000000;
    assert_int_equal(leased_watch_park(w, "lease_a", 0, later, on_wake, &a), LEASED_WATCH_PARKED);
    leased_watch_free(w);
    assert_int_equal(count_of(&a), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wait_end_wakes_once),
        cmocka_unit_test(test_limit_and_release),
        cmocka_unit_test(test_free_wakes_what_is_parked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
