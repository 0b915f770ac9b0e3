/*
 * test_held_old_names.c - the deprecated names of lease/worker.h (issue 36
 * renamed lease_worker_* to lease_held_*) still compile, still do what
 * their lease_held_* namesakes do, and are still exported by
 * libleaseclient.so: a program built against the earlier names keeps
 * building, and one linked against them keeps loading.
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "lease/worker.h"

#define MS 1000000LL

static lease_record_t record(int64_t renewed_at, int64_t expires_at, int64_t ttl)
{
    lease_record_t l;
    memset(&l, 0, sizeof l);
    l.acquired_at_ms = renewed_at;
    l.renewed_at_ms = renewed_at;
    l.expires_at_ms = expires_at;
    l.ttl_ms = ttl;
    l.state = LEASE_STATE_ACTIVE;
    return l;
}

/* Every old type, constant and pure function, used as a caller would. */
static void old_names_compile_and_answer_as_the_new_ones(void **state)
{
    (void)state;
    lease_record_t capped = record(1000, 13000, 30000);
    assert_int_equal(lease_worker_grant_ms(&capped), lease_held_grant_ms(&capped));
    assert_true(lease_worker_grant_capped(&capped));
    assert_int_equal(lease_worker_anchor_ns(5 * MS, 3, 7 * MS),
                     lease_held_anchor_ns(5 * MS, 3, 7 * MS));
    assert_int_equal(lease_worker_margin_ms(30000, 0), lease_held_margin_ms(30000, 0));

    lease_worker_config_t cfg = {.renew_permille = LEASE_WORKER_RENEW_PERMILLE,
                                 .jitter_permille = LEASE_WORKER_JITTER_PERMILLE,
                                 .watch_wait_ms = LEASE_WORKER_WATCH_WAIT_MS};
    lease_worker_window_t old_w = lease_worker_plan(100 * MS, 30000, &cfg, 12345);
    lease_held_window_t new_w = lease_held_plan(100 * MS, 30000, &cfg, 12345);
    assert_memory_equal(&old_w, &new_w, sizeof old_w);
    assert_int_equal(lease_worker_answer_deadline(0, 100), lease_held_answer_deadline(0, 100));
    assert_true(lease_worker_answer_counts(10, 20));
    assert_int_equal(lease_worker_retry_at(0, 10000 * MS, 2),
                     lease_held_retry_at(0, 10000 * MS, 2));
    assert_true(LEASE_WORKER_MARGIN_MIN_MS == LEASE_HELD_MARGIN_MIN_MS &&
                LEASE_WORKER_MARGIN_MAX_MS == LEASE_HELD_MARGIN_MAX_MS);

    const lease_worker_state_t states[] = {LEASE_WORKER_ACTIVE,      LEASE_WORKER_LOST,
                                           LEASE_WORKER_UNCONFIRMED, LEASE_WORKER_EXPIRED,
                                           LEASE_WORKER_RELEASED,    LEASE_WORKER_STOPPED};
    const char *names[] = {"active", "lost", "unconfirmed", "expired", "released", "stopped"};
    for (size_t i = 0; i < sizeof states / sizeof states[0]; i++)
        assert_string_equal(lease_worker_state_name(states[i]), names[i]);
}

static void old_start_refuses_what_the_new_one_refuses(void **state)
{
    (void)state;
    /* an ended lease is refused before any thread or call: no service needed */
    lease_record_t ended = record(1000, 31000, 30000);
    ended.state = LEASE_STATE_RELEASED;
    strcpy(ended.service_instance_id, "host-1");
    lease_code_t code = LEASE_RENEWED;
    lease_worker_cancel_fn on_cancel = NULL;
    lease_worker_log_fn log = NULL;
    lease_worker_config_t cfg = {.on_cancel = on_cancel, .log = log};
    lease_worker_t *w = lease_worker_start(NULL, &ended, 1, &cfg, &code);
    assert_null(w);
    assert_int_equal(code, LEASE_LOST);
    lease_worker_free(NULL); /* accepted, as lease_held_free(NULL) */
}

/* The shared library a program links: every old symbol still there. */
static void the_shared_library_still_exports_every_old_symbol(void **state)
{
    (void)state;
    void *so = dlopen(LEASE_TEST_CLIENT_SO, RTLD_NOW | RTLD_LOCAL);
    if (!so)
        fail_msg("dlopen %s: %s", LEASE_TEST_CLIENT_SO, dlerror());
    static const char *const old[] = {"lease_worker_state_name",
                                      "lease_worker_grant_ms",
                                      "lease_worker_grant_capped",
                                      "lease_worker_anchor_ns",
                                      "lease_worker_margin_ms",
                                      "lease_worker_plan",
                                      "lease_worker_answer_deadline",
                                      "lease_worker_answer_counts",
                                      "lease_worker_retry_at",
                                      "lease_worker_start",
                                      "lease_worker_cancel_fd",
                                      "lease_worker_state",
                                      "lease_worker_snapshot",
                                      "lease_worker_release",
                                      "lease_worker_stop",
                                      "lease_worker_free"};
    for (size_t i = 0; i < sizeof old / sizeof old[0]; i++) {
        void *sym = dlsym(so, old[i]);
        if (!sym)
            fail_msg("libleaseclient.so no longer exports %s", old[i]);
        char held[64];
        snprintf(held, sizeof held, "lease_held_%s", old[i] + strlen("lease_worker_"));
        if (!dlsym(so, held))
            fail_msg("libleaseclient.so does not export %s", held);
    }
    const char *(*state_name)(int) = (const char *(*)(int))dlsym(so, "lease_worker_state_name");
    assert_string_equal(state_name(LEASE_HELD_LOST), "lost");
    dlclose(so);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(old_names_compile_and_answer_as_the_new_ones),
        cmocka_unit_test(old_start_refuses_what_the_new_one_refuses),
        cmocka_unit_test(the_shared_library_still_exports_every_old_symbol),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
