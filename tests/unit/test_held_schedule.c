/*
 * test_held_schedule.c - a held lease's renewal schedule, safety margin,
 * jitter bounds and the judgement of local expiry and late answers
 * (src/client/schedule.c), with no clock and no network.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "lease/held.h"

#define MS 1000000LL      /* nanoseconds */
#define S0 (1000000 * MS) /* an arbitrary monotonic origin */

static const lease_held_config_t no_jitter = {.jitter_permille = -1};

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

static void grant_is_ttl_or_what_is_left_of_the_lifetime(void **state)
{
    (void)state;
    lease_record_t full = record(1722859200000, 1722859230000, 30000);
    assert_int_equal(lease_held_grant_ms(&full), 30000);
    assert_false(lease_held_grant_capped(&full));

    /* maximum lifetime cut expires_at short of renewed_at + ttl */
    lease_record_t capped = record(1722859200000, 1722859212000, 30000);
    assert_int_equal(lease_held_grant_ms(&capped), 12000);
    assert_true(lease_held_grant_capped(&capped));

    /* a span longer than the ttl never grants more than the ttl */
    lease_record_t odd = record(1000, 99000, 30000);
    assert_int_equal(lease_held_grant_ms(&odd), 30000);

    /* millisecond truncation of both stamps is not a cap */
    lease_record_t trunc = record(1000, 30999, 30000);
    assert_false(lease_held_grant_capped(&trunc));

    /* nothing left (or a clock-skewed record) grants nothing */
    lease_record_t ended = record(5000, 5000, 30000);
    assert_int_equal(lease_held_grant_ms(&ended), 0);
    lease_record_t backwards = record(5000, 4000, 30000);
    assert_int_equal(lease_held_grant_ms(&backwards), 0);
}

/* A lease in a session (issue 37): expires_at is the session's end while
 * that comes first; a keep-alive moves it, so only the lease's own
 * lifetime's end caps it. Its grant is what is left of the session. */
static void a_session_lease_is_capped_only_by_its_own_lifetime(void **state)
{
    (void)state;
    /* acquired 500 ms into a 1 500 ms session: 1 000 ms left, TTL 1 500 */
    lease_record_t in_session = record(1722859200000, 1722859201000, 1500);
    in_session.maximum_lifetime_ms = 3600000;
    strcpy(in_session.session_id, "session_0192");
    assert_int_equal(lease_held_grant_ms(&in_session), 1000);
    assert_false(lease_held_grant_capped(&in_session));
    /* the same record without a session: the maximum lifetime cut it */
    lease_record_t plain = in_session;
    plain.session_id[0] = '\0';
    assert_true(lease_held_grant_capped(&plain));
    /* its own lifetime ends first: capped (within the millisecond) */
    lease_record_t ending = record(1722859200000, 1722859201000, 1500);
    ending.maximum_lifetime_ms = 1001;
    strcpy(ending.session_id, "session_0192");
    assert_true(lease_held_grant_capped(&ending));
    /* no maximum lifetime reported: never capped */
    ending.maximum_lifetime_ms = 0;
    assert_false(lease_held_grant_capped(&ending));
}

static void margin_defaults_and_bounds(void **state)
{
    (void)state;
    assert_int_equal(lease_held_margin_ms(30000, 0), 3000);  /* a tenth */
    assert_int_equal(lease_held_margin_ms(300000, 0), 5000); /* at most 5 s */
    assert_int_equal(lease_held_margin_ms(2000, 0), 200);
    assert_int_equal(lease_held_margin_ms(600, 0), 100);        /* at least 100 ms */
    assert_int_equal(lease_held_margin_ms(200, 0), 50);         /* but never over a quarter */
    assert_int_equal(lease_held_margin_ms(30000, 2000), 2000);  /* configured wins */
    assert_int_equal(lease_held_margin_ms(30000, 20000), 7500); /* ... up to a quarter */
    assert_int_equal(lease_held_margin_ms(0, 0), 0);
}

static void window_is_judged_from_the_send_time(void **state)
{
    (void)state;
    lease_held_window_t w = lease_held_plan(S0, 30000, &no_jitter, 12345);
    assert_int_equal(w.sent_ns, S0);
    assert_int_equal(w.grant_ms, 30000);
    assert_int_equal(w.expiry_ns, S0 + 30000 * MS);
    assert_int_equal(w.cancel_ns, S0 + 27000 * MS); /* expiry minus the 3 s margin */
    assert_int_equal(w.renew_ns, S0 + 9990 * MS);   /* a third (333 permille) in */

    /* the same grant confirmed by a request sent 2 s later moves every point
     * by exactly 2 s: the answer's arrival time plays no part */
    lease_held_window_t later = lease_held_plan(S0 + 2000 * MS, 30000, &no_jitter, 1);
    assert_int_equal(later.expiry_ns - w.expiry_ns, 2000 * MS);
    assert_int_equal(later.cancel_ns - w.cancel_ns, 2000 * MS);
    assert_int_equal(later.renew_ns - w.renew_ns, 2000 * MS);

    /* configured fraction and margin */
    lease_held_config_t cfg = {.renew_permille = 250, .jitter_permille = -1, .margin_ms = 1000};
    lease_held_window_t q = lease_held_plan(S0, 8000, &cfg, 0);
    assert_int_equal(q.renew_ns, S0 + 2000 * MS);
    assert_int_equal(q.cancel_ns, S0 + 7000 * MS);
}

static void jitter_stays_within_its_bounds_and_reaches_them(void **state)
{
    (void)state;
    /* 30 s grant: interval 9990 ms, spread 10 % = 999 ms */
    const int64_t interval = 9990, spread = 999;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (uint64_t draw = 0; draw < 5000; draw++) {
        uint64_t d = draw * 2654435761u; /* spread the draws over the range */
        lease_held_window_t w = lease_held_plan(S0, 30000, NULL, d);
        int64_t at = (w.renew_ns - S0) / MS;
        assert_true(at >= interval - spread);
        assert_true(at <= interval + spread);
        lo = at < lo ? at : lo;
        hi = at > hi ? at : hi;
    }
    /* both extremes are reachable: draw 0 is the earliest, 2*spread the latest */
    assert_int_equal((lease_held_plan(S0, 30000, NULL, 0).renew_ns - S0) / MS, interval - spread);
    assert_int_equal((lease_held_plan(S0, 30000, NULL, 2 * spread).renew_ns - S0) / MS,
                     interval + spread);
    /* and the draws actually spread (not one fixed point) */
    assert_true(hi - lo > spread);
}

static void renewal_always_leaves_half_the_window(void **state)
{
    (void)state;
    /* property over grants from the 1 s policy minimum to the 300 s maximum,
     * for default and aggressive configurations and many draws */
    lease_held_config_t late = {.renew_permille = 900, .jitter_permille = 500};
    const lease_held_config_t *cfgs[] = {NULL, &late, &no_jitter};
    for (size_t c = 0; c < 3; c++) {
        for (int64_t grant = 1001; grant <= 300000; grant += 997) {
            lease_held_window_t w = lease_held_plan(S0, grant, cfgs[c], (uint64_t)grant * 7919u);
            assert_true(w.renew_ns >= w.sent_ns);
            assert_true(w.renew_ns <= w.sent_ns + (w.cancel_ns - w.sent_ns) / 2);
            assert_true(w.cancel_ns > w.renew_ns);
            assert_true(w.cancel_ns < w.expiry_ns);
            /* the renewal's answer deadline still lies before the cancel point */
            int64_t a = lease_held_answer_deadline(w.renew_ns, w.cancel_ns);
            assert_true(a > w.renew_ns && a < w.cancel_ns);
        }
    }
}

static void zero_grant_cancels_at_once(void **state)
{
    (void)state;
    lease_held_window_t w = lease_held_plan(S0, 0, NULL, 99);
    assert_int_equal(w.expiry_ns, S0);
    assert_int_equal(w.cancel_ns, S0);
    assert_int_equal(w.renew_ns, S0);
}

static void late_answers_do_not_count(void **state)
{
    (void)state;
    lease_held_window_t w = lease_held_plan(S0, 30000, &no_jitter, 0);
    int64_t sent = w.renew_ns; /* S0 + 9.99 s */
    int64_t a = lease_held_answer_deadline(sent, w.cancel_ns);
    assert_int_equal(a, sent + (w.cancel_ns - sent) / 2); /* halfway to the cancel point */
    assert_true(lease_held_answer_counts(sent + 5 * MS, a));
    assert_true(lease_held_answer_counts(a, a));
    assert_false(lease_held_answer_counts(a + 1, a));
    assert_false(lease_held_answer_counts(w.cancel_ns, a));
    /* sent at or past the cancel point: nothing can count */
    assert_int_equal(lease_held_answer_deadline(w.cancel_ns + MS, w.cancel_ns), w.cancel_ns + MS);
}

static void a_partition_cancels_before_the_service_can_expire_the_lease(void **state)
{
    (void)state;
    /* acquire sent at S0, 6 s grant; every renewal fails (partition). The
     * retries march toward the cancel point and never past it, and the
     * cancel point precedes the earliest moment the service may expire. */
    lease_held_window_t w = lease_held_plan(S0, 6000, &no_jitter, 0);
    int64_t now = w.renew_ns;
    int attempts = 0;
    while (now < w.cancel_ns) {
        attempts++;
        int64_t next = lease_held_retry_at(now, w.cancel_ns, attempts);
        assert_true(next > now);
        now = next;
        assert_true(attempts < 100);
    }
    assert_true(attempts >= 4); /* several tries fit before giving up */
    assert_true(w.cancel_ns <= w.expiry_ns - 100 * MS);
}

static void retry_backoff_grows_and_respects_the_cancel_point(void **state)
{
    (void)state;
    int64_t far = S0 + 60000 * MS;
    assert_int_equal(lease_held_retry_at(S0, far, 1) - S0, 100 * MS);
    assert_int_equal(lease_held_retry_at(S0, far, 2) - S0, 200 * MS);
    assert_int_equal(lease_held_retry_at(S0, far, 3) - S0, 400 * MS);
    assert_int_equal(lease_held_retry_at(S0, far, 5) - S0, 1600 * MS);
    assert_int_equal(lease_held_retry_at(S0, far, 50) - S0, 1600 * MS); /* capped */
    /* 200 ms before the cancel point: a quarter of it */
    assert_int_equal(lease_held_retry_at(S0, S0 + 200 * MS, 5) - S0, 50 * MS);
    /* at or past the cancel point: the 10 ms floor (the loop then cancels) */
    assert_int_equal(lease_held_retry_at(S0, S0, 1) - S0, 10 * MS);
    assert_int_equal(lease_held_retry_at(S0, S0 - 5 * MS, 1) - S0, 10 * MS);
}

/* The anchor of a grant: the first send, moved later by the wait leased
 * reports, never past the answer's arrival. */
static void a_reported_wait_moves_the_anchor_up_to_the_answer(void **state)
{
    (void)state;
    /* no wait reported (absent, 0, or nonsense): the first send */
    assert_true(lease_held_anchor_ns(S0, 0, S0 + 40 * MS) == S0);
    assert_true(lease_held_anchor_ns(S0, -5, S0 + 40 * MS) == S0);
    /* granted 2,000 ms into the wait, answered 30 ms later */
    assert_true(lease_held_anchor_ns(S0, 2000, S0 + 2030 * MS) == S0 + 2000 * MS);
    /* a wait longer than the exchange took (a confused or hostile answer)
     * never anchors after the answer arrived */
    assert_true(lease_held_anchor_ns(S0, 5000, S0 + 2030 * MS) == S0 + 2030 * MS);
    assert_true(lease_held_anchor_ns(S0, INT64_MAX, S0 + 2030 * MS) == S0 + 2030 * MS);
    /* arrival unknown: the reported wait alone */
    assert_true(lease_held_anchor_ns(S0, 700, 0) == S0 + 700 * MS);
}

/*
 * The defect a late grant used to hit: `--ttl-ms 2000 --wait-ms 3000`
 * granted 2,000 ms into its wait. Anchored at the first send the window
 * had closed before the answer arrived (cancel point S + 1,800 ms); from
 * the anchor the whole grant is ahead, and the renewal is a third into it.
 */
static void a_late_grant_starts_with_its_full_window(void **state)
{
    (void)state;
    int64_t arrived = S0 + 2030 * MS;
    lease_held_window_t old = lease_held_plan(S0, 2000, &no_jitter, 0);
    assert_true(old.cancel_ns < arrived);

    int64_t anchor = lease_held_anchor_ns(S0, 2000, arrived);
    lease_held_window_t w = lease_held_plan(anchor, 2000, &no_jitter, 0);
    assert_true(w.expiry_ns == S0 + 4000 * MS);
    assert_true(w.cancel_ns == S0 + 3800 * MS); /* margin 200 ms */
    assert_true(w.renew_ns == S0 + 2666 * MS);  /* 333 permille of 2,000 ms */
    assert_true(w.renew_ns > arrived);          /* no renewal needed at once */

    /* 4,800 ms into a 9,000 ms wait with --ttl-ms 5000 */
    int64_t arrived_b = S0 + 4850 * MS;
    assert_true(lease_held_plan(S0, 5000, &no_jitter, 0).cancel_ns < arrived_b);
    lease_held_window_t b =
        lease_held_plan(lease_held_anchor_ns(S0, 4800, arrived_b), 5000, &no_jitter, 0);
    assert_true(b.cancel_ns == S0 + 9300 * MS);
    assert_true(b.renew_ns > arrived_b);
}

static void state_names_are_stable(void **state)
{
    (void)state;
    assert_string_equal(lease_held_state_name(LEASE_HELD_ACTIVE), "active");
    assert_string_equal(lease_held_state_name(LEASE_HELD_LOST), "lost");
    assert_string_equal(lease_held_state_name(LEASE_HELD_UNCONFIRMED), "unconfirmed");
    assert_string_equal(lease_held_state_name(LEASE_HELD_EXPIRED), "expired");
    assert_string_equal(lease_held_state_name(LEASE_HELD_RELEASED), "released");
    assert_string_equal(lease_held_state_name(LEASE_HELD_STOPPED), "stopped");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(grant_is_ttl_or_what_is_left_of_the_lifetime),
        cmocka_unit_test(a_session_lease_is_capped_only_by_its_own_lifetime),
        cmocka_unit_test(margin_defaults_and_bounds),
        cmocka_unit_test(window_is_judged_from_the_send_time),
        cmocka_unit_test(jitter_stays_within_its_bounds_and_reaches_them),
        cmocka_unit_test(renewal_always_leaves_half_the_window),
        cmocka_unit_test(zero_grant_cancels_at_once),
        cmocka_unit_test(late_answers_do_not_count),
        cmocka_unit_test(a_partition_cancels_before_the_service_can_expire_the_lease),
        cmocka_unit_test(retry_backoff_grows_and_respects_the_cancel_point),
        cmocka_unit_test(a_reported_wait_moves_the_anchor_up_to_the_answer),
        cmocka_unit_test(a_late_grant_starts_with_its_full_window),
        cmocka_unit_test(state_names_are_stable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
