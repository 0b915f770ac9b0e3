/*
 * schedule.c - a held lease's renewal schedule and margin arithmetic, kept
 * pure (no clock, no I/O) so tests/unit/test_held_schedule.c can pin it
 * down. lease/held.h explains the window S, G, E, C, R and the answer
 * deadline.
 */
#include "client_internal.h"
#include "lease/held.h"

#define NS_PER_MS 1000000LL
#define RETRY_FIRST_MS 100
#define RETRY_MAX_SHIFT 4 /* 100 ms << 4 = 1.6 s */
#define RETRY_FLOOR_MS 10

int64_t lease_held_grant_ms(const lease_record_t *lease)
{
    int64_t span = lease->expires_at_ms - lease->renewed_at_ms;
    int64_t grant = lease->ttl_ms > 0 && lease->ttl_ms < span ? lease->ttl_ms : span;
    return grant > 0 ? grant : 0;
}

bool lease_held_grant_capped(const lease_record_t *lease)
{
    if (lease->session_id[0]) {
        /* its session's expiry comes and goes with keep-alives; only its own
         * lifetime's end is final (one millisecond of slack: truncation) */
        return lease->maximum_lifetime_ms > 0 &&
               lease->expires_at_ms + 1 >= lease->acquired_at_ms + lease->maximum_lifetime_ms;
    }
    /* one millisecond of slack: both timestamps are truncated to ms */
    return lease->expires_at_ms - lease->renewed_at_ms + 1 < lease->ttl_ms;
}

int64_t lease_held_anchor_ns(int64_t first_sent_ns, int64_t waited_ms, int64_t answered_ns)
{
    /* an answer's fact: the client computes it for every call */
    return client_anchor_ns(first_sent_ns, waited_ms, answered_ns);
}

int64_t lease_held_margin_ms(int64_t grant_ms, int64_t configured_ms)
{
    int64_t margin = configured_ms;
    if (margin <= 0) {
        margin = grant_ms / 10;
        if (margin < LEASE_HELD_MARGIN_MIN_MS)
            margin = LEASE_HELD_MARGIN_MIN_MS;
        if (margin > LEASE_HELD_MARGIN_MAX_MS)
            margin = LEASE_HELD_MARGIN_MAX_MS;
    }
    /* a margin eating most of the grant would leave no time to renew */
    if (margin > grant_ms / 4)
        margin = grant_ms / 4;
    return margin;
}

lease_held_window_t lease_held_plan(int64_t sent_ns, int64_t grant_ms,
                                    const lease_held_config_t *cfg, uint64_t jitter_draw)
{
    int renew_permille =
        cfg && cfg->renew_permille > 0 ? cfg->renew_permille : LEASE_HELD_RENEW_PERMILLE;
    if (renew_permille > 900)
        renew_permille = 900;
    int jitter_permille =
        cfg && cfg->jitter_permille != 0 ? cfg->jitter_permille : LEASE_HELD_JITTER_PERMILLE;
    if (jitter_permille < 0)
        jitter_permille = 0;
    if (grant_ms < 0)
        grant_ms = 0;

    lease_held_window_t w;
    w.sent_ns = sent_ns;
    w.grant_ms = grant_ms;
    w.expiry_ns = sent_ns + grant_ms * NS_PER_MS;
    w.cancel_ns =
        w.expiry_ns - lease_held_margin_ms(grant_ms, cfg ? cfg->margin_ms : 0) * NS_PER_MS;

    int64_t interval_ms = grant_ms * renew_permille / 1000;
    int64_t spread_ms = interval_ms * jitter_permille / 1000;
    int64_t jitter_ms = 0;
    if (spread_ms > 0)
        jitter_ms = (int64_t)(jitter_draw % (uint64_t)(2 * spread_ms + 1)) - spread_ms;
    w.renew_ns = sent_ns + (interval_ms + jitter_ms) * NS_PER_MS;

    /* however configured, leave half the window for the attempt and its
     * retries (and a late answer's inspection) before the cancel point */
    int64_t latest = sent_ns + (w.cancel_ns - sent_ns) / 2;
    if (w.renew_ns > latest)
        w.renew_ns = latest;
    if (w.renew_ns < sent_ns)
        w.renew_ns = sent_ns;
    return w;
}

int64_t lease_held_answer_deadline(int64_t sent_ns, int64_t cancel_ns)
{
    if (cancel_ns <= sent_ns)
        return sent_ns;
    return sent_ns + (cancel_ns - sent_ns) / 2;
}

bool lease_held_answer_counts(int64_t answered_ns, int64_t answer_deadline_ns)
{
    return answered_ns <= answer_deadline_ns;
}

int64_t lease_held_retry_at(int64_t now_ns, int64_t cancel_ns, int failures)
{
    int shift = failures < 1 ? 0 : failures - 1;
    if (shift > RETRY_MAX_SHIFT)
        shift = RETRY_MAX_SHIFT;
    int64_t backoff = ((int64_t)RETRY_FIRST_MS << shift) * NS_PER_MS;
    int64_t quarter = (cancel_ns - now_ns) / 4;
    if (quarter < RETRY_FLOOR_MS * NS_PER_MS)
        quarter = RETRY_FLOOR_MS * NS_PER_MS;
    return now_ns + (backoff < quarter ? backoff : quarter);
}
