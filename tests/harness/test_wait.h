/*
 * test_wait.h - waiting on a condition with a deadline, the one way tests
 * synchronise (never a sleep of a guessed length).
 *
 *   assert_true(test_wait_until(10000, leased_log_has(srv, "draining")));
 *
 * cond is evaluated again every few milliseconds until it is true or
 * timeout_ms has passed on the monotonic clock; the macro's value is the
 * last evaluation. The timeout only keeps a broken build from hanging: it
 * is generous and no assertion depends on how much of it was used.
 */
#ifndef LEASE_TEST_WAIT_H
#define LEASE_TEST_WAIT_H

#include <stdbool.h>

#include "lease/clock.h"

#define TEST_WAIT_POLL_MS 5

#define test_wait_until(timeout_ms, cond)                                                          \
    ({                                                                                             \
        lease_deadline_t test_wait_until_ = lease_deadline_in(timeout_ms);                         \
        bool test_wait_ok_;                                                                        \
        while (!(test_wait_ok_ = (cond)) && !lease_deadline_passed(&test_wait_until_))             \
            lease_sleep_ms(TEST_WAIT_POLL_MS);                                                     \
        test_wait_ok_;                                                                             \
    })

#endif
