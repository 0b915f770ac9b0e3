/*
 * worker_compat.c - the deprecated lease_worker_* functions of lease/worker.h,
 * each calling its lease_held_* namesake. They stay exported by
 * libleaseclient.so (leaseclient.map exports lease_*), so a program linked
 * against the earlier names keeps running; tests/unit/test_held_old_names.c
 * holds them to it. Nothing in this repository calls them.
 */
#include "lease/worker.h"

const char *lease_worker_state_name(lease_worker_state_t state)
{
    return lease_held_state_name(state);
}

int64_t lease_worker_grant_ms(const lease_record_t *lease)
{
    return lease_held_grant_ms(lease);
}

bool lease_worker_grant_capped(const lease_record_t *lease)
{
    return lease_held_grant_capped(lease);
}

int64_t lease_worker_anchor_ns(int64_t first_sent_ns, int64_t waited_ms, int64_t answered_ns)
{
    return lease_held_anchor_ns(first_sent_ns, waited_ms, answered_ns);
}

int64_t lease_worker_margin_ms(int64_t grant_ms, int64_t configured_ms)
{
    return lease_held_margin_ms(grant_ms, configured_ms);
}

lease_worker_window_t lease_worker_plan(int64_t sent_ns, int64_t grant_ms,
                                        const lease_worker_config_t *cfg, uint64_t jitter_draw)
{
    return lease_held_plan(sent_ns, grant_ms, cfg, jitter_draw);
}

int64_t lease_worker_answer_deadline(int64_t sent_ns, int64_t cancel_ns)
{
    return lease_held_answer_deadline(sent_ns, cancel_ns);
}

bool lease_worker_answer_counts(int64_t answered_ns, int64_t answer_deadline_ns)
{
    return lease_held_answer_counts(answered_ns, answer_deadline_ns);
}

int64_t lease_worker_retry_at(int64_t now_ns, int64_t cancel_ns, int failures)
{
    return lease_held_retry_at(now_ns, cancel_ns, failures);
}

lease_worker_t *lease_worker_start(lease_client_t *client, const lease_record_t *lease,
                                   int64_t sent_mono_ns, const lease_worker_config_t *cfg,
                                   lease_code_t *code)
{
    return lease_held_start(client, lease, sent_mono_ns, cfg, code);
}

int lease_worker_cancel_fd(const lease_worker_t *w)
{
    return lease_held_cancel_fd(w);
}

lease_worker_state_t lease_worker_state(lease_worker_t *w, lease_code_t *code)
{
    return lease_held_state(w, code);
}

void lease_worker_snapshot(lease_worker_t *w, lease_record_t *lease, lease_worker_window_t *window)
{
    lease_held_snapshot(w, lease, window);
}

lease_code_t lease_worker_release(lease_worker_t *w, int64_t deadline_ms, lease_result_t *res)
{
    return lease_held_release(w, deadline_ms, res);
}

void lease_worker_stop(lease_worker_t *w)
{
    lease_held_stop(w);
}

void lease_worker_free(lease_worker_t *w)
{
    lease_held_free(w);
}
