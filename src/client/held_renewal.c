/*
 * held_renewal.c - one held lease's state and the judgement of its renewals:
 * the window on the schedule of schedule.c, each renewal answer judged
 * (a grant anchored at its request's first send, a late answer confirmed
 * by inspection, a temporary failure retried), and the cancellation signal
 * (callback + eventfd) raised the moment local authority cannot be proven.
 * It sends renewals through the client and never starts a thread: the
 * renewal group (renewals.c) decides when, held.c starts and ends a hold.
 *
 * Locking: `lock` guards the lease, its window and the state (the group's
 * lock, when both are taken, first). No lock is held across an HTTP call
 * or while the cancel callback runs. The state leaves ACTIVE exactly once
 * (held_signal_cancel), so the callback and the eventfd write happen
 * exactly once.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lease/clock.h"
#include "lease/held.h"
#include "held_internal.h"

#define NS_PER_MS 1000000LL

const char *lease_held_state_name(lease_held_state_t state)
{
    switch (state) {
    case LEASE_HELD_ACTIVE:
        return "active";
    case LEASE_HELD_LOST:
        return "lost";
    case LEASE_HELD_UNCONFIRMED:
        return "unconfirmed";
    case LEASE_HELD_EXPIRED:
        return "expired";
    case LEASE_HELD_RELEASED:
        return "released";
    case LEASE_HELD_STOPPED:
        return "stopped";
    }
    return "unknown";
}

void held_log(lease_held_t *h, const char *fmt, ...)
{
    if (!h->cfg.log)
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    h->cfg.log(h->cfg.log_arg, line);
}

/* Leaves ACTIVE (first caller wins) and tells everyone who listens. */
void held_signal_cancel(lease_held_t *h, lease_held_state_t why, lease_code_t code)
{
    pthread_mutex_lock(&h->lock);
    bool first = h->state == LEASE_HELD_ACTIVE;
    if (first) {
        h->state = why;
        h->code = code;
    }
    bool announce = first && h->started;
    pthread_mutex_unlock(&h->lock);
    if (!announce)
        return;
    if (why != LEASE_HELD_RELEASED && why != LEASE_HELD_STOPPED) /* not the holder's doing */
        held_log(h, "lease %s: %s (%s)", h->lease.lease_id, lease_held_state_name(why),
                 lease_code_name(code));
    uint64_t one = 1;
    while (write(h->cancel_fd, &one, sizeof one) < 0 && errno == EINTR)
        ;
    if (h->cfg.on_cancel)
        h->cfg.on_cancel(h->cfg.cancel_arg, why, code);
}

static bool same_lease(const lease_record_t *held, const lease_record_t *answer)
{
    return answer->state == LEASE_STATE_ACTIVE && answer->fencing_token == held->fencing_token &&
           strcmp(answer->lease_id, held->lease_id) == 0;
}

/* Takes a confirmed grant whose request was first sent at sent_ns. */
static void accept_grant(lease_held_t *h, const lease_record_t *lease, int64_t sent_ns)
{
    pthread_mutex_lock(&h->lock);
    h->lease = *lease;
    h->window =
        lease_held_plan(sent_ns, lease_held_grant_ms(lease), &h->cfg, lease_jitter(UINT64_MAX));
    h->capped = lease_held_grant_capped(lease);
    h->failures = 0;
    h->code = LEASE_RENEWED;
    pthread_mutex_unlock(&h->lock);
}

/*
 * A renewal's answer came after its answer deadline: it grants nothing
 * unless an inspection, answered before the cancel point, shows the lease
 * still active with that renewal applied.
 */
static bool confirm_by_inspect(lease_held_t *h, const lease_record_t *renewed, int64_t cancel_ns)
{
    int64_t left_ms = (cancel_ns - lease_mono_now_ns()) / NS_PER_MS;
    if (left_ms <= 0)
        return false;
    lease_client_call_t call = {.deadline_ms = left_ms};
    lease_result_t res;
    lease_code_t code = lease_client_inspect_id(h->client, renewed->lease_id, &call, &res);
    bool in_time = lease_mono_now_ns() < cancel_ns;
    bool proven = code == LEASE_INSPECTED && in_time && same_lease(renewed, &res.lease) &&
                  res.lease.renewed_at_ms >= renewed->renewed_at_ms;
    held_log(h, "inspection after a late renewal answer: %s%s", lease_code_name(code),
             proven ? ", lease confirmed" : ", authority not proven");
    return proven;
}

static bool transient(lease_code_t code)
{
    return code == LEASE_BACKEND_UNAVAILABLE || code == LEASE_OUTCOME_UNKNOWN ||
           code == LEASE_RATE_LIMITED || code == LEASE_DEADLINE_EXCEEDED;
}

void held_renewal_prepare(lease_held_t *h, int64_t now_ns, held_renewal_t *r)
{
    pthread_mutex_lock(&h->lock);
    r->held = h->lease;
    r->window = h->window;
    pthread_mutex_unlock(&h->lock);
    r->h = h;
    r->started_ns = now_ns;
    r->answer_deadline_ns = lease_held_answer_deadline(now_ns, r->window.cancel_ns);
    lease_client_owner_t req = {lease_client_identity_of(&r->held.identity), r->held.lease_id,
                                r->held.fencing_token, h->service_instance_id, h->cfg.ttl_ms};
    r->req = req;
}

void held_renewal_judge(const held_renewal_t *r, lease_code_t code, const lease_result_t *res,
                        int64_t sent_ns, int64_t answered_ns)
{
    lease_held_t *h = r->h;
    if (code == LEASE_RENEWED) {
        if (!same_lease(&r->held, &res->lease)) {
            held_signal_cancel(h, LEASE_HELD_LOST, LEASE_LOST);
            return;
        }
        if (!lease_held_answer_counts(answered_ns, r->answer_deadline_ns)) {
            held_log(h, "renewal answer arrived %lld ms after its local deadline; inspecting",
                     (long long)((answered_ns - r->answer_deadline_ns) / NS_PER_MS));
            if (!confirm_by_inspect(h, &res->lease, r->window.cancel_ns)) {
                held_signal_cancel(h, LEASE_HELD_UNCONFIRMED, LEASE_OUTCOME_UNKNOWN);
                return;
            }
        }
        accept_grant(h, &res->lease, sent_ns);
        return;
    }
    if (transient(code)) {
        pthread_mutex_lock(&h->lock);
        h->failures++;
        h->code = code;
        h->window.renew_ns = lease_held_retry_at(answered_ns, h->window.cancel_ns, h->failures);
        int64_t left_ms = (h->window.cancel_ns - answered_ns) / NS_PER_MS;
        int failures = h->failures;
        pthread_mutex_unlock(&h->lock);
        /* near the cancel point attempts come fast: log the first and every fifth */
        if (failures == 1 || failures % 5 == 0)
            held_log(h,
                     "renewal failed (%s, %d in a row); retrying, %lld ms of local authority left",
                     lease_code_name(code), failures, (long long)left_ms);
        return;
    }
    /* lease_lost, or refused for good (credential, scope, invalid) */
    held_signal_cancel(h, LEASE_HELD_LOST, code);
}

void held_renew_once(lease_held_t *h)
{
    held_renewal_t r;
    held_renewal_prepare(h, lease_mono_now_ns(), &r);
    /* the call may run (and resolve an unknown outcome) up to the cancel
     * point, never past it: then cancellation is due anyway */
    int64_t budget_ms = (r.window.cancel_ns - r.started_ns) / NS_PER_MS;
    lease_client_call_t call = {.deadline_ms = budget_ms > 0 ? budget_ms : 1};
    lease_result_t res;
    lease_code_t code = lease_client_renew(h->client, &r.req, &call, &res);
    int64_t answered = lease_mono_now_ns();
    held_renewal_judge(&r, code, &res, call.anchor_mono_ns ? call.anchor_mono_ns : r.started_ns,
                       answered);
}

void held_session_extend(lease_held_t *h, int64_t sent_ns, const lease_session_t *session)
{
    pthread_mutex_lock(&h->lock);
    if (h->state != LEASE_HELD_ACTIVE || h->stop) {
        pthread_mutex_unlock(&h->lock);
        return;
    }
    /* server times only subtracted from each other: what the keep-alive
     * granted, and what is left of the lease's own lifetime at that moment */
    int64_t grant = session->expires_at_ms - session->renewed_at_ms;
    if (session->ttl_ms > 0 && session->ttl_ms < grant)
        grant = session->ttl_ms;
    bool capped = false;
    if (h->lease.maximum_lifetime_ms > 0) {
        int64_t life_left =
            h->lease.acquired_at_ms + h->lease.maximum_lifetime_ms - session->renewed_at_ms;
        if (life_left <= grant) {
            grant = life_left;
            capped = true;
        }
    }
    lease_held_window_t w = lease_held_plan(sent_ns, grant, &h->cfg, lease_jitter(UINT64_MAX));
    if (grant > 0 && w.cancel_ns > h->window.cancel_ns) {
        h->window = w;
        h->capped = capped;
        int64_t session_end = session->expires_at_ms;
        int64_t own_end = h->lease.acquired_at_ms + h->lease.maximum_lifetime_ms;
        h->lease.renewed_at_ms = session->renewed_at_ms;
        h->lease.expires_at_ms = capped && h->lease.maximum_lifetime_ms > 0 && own_end < session_end
                                     ? own_end
                                     : session_end;
    }
    h->failures = 0;
    h->code = LEASE_RENEWED;
    pthread_mutex_unlock(&h->lock);
}

void held_session_failed(lease_held_t *h, lease_code_t code)
{
    pthread_mutex_lock(&h->lock);
    h->failures++;
    h->code = code;
    pthread_mutex_unlock(&h->lock);
}

bool held_past_cancel_point(lease_held_t *h, int64_t now_ns)
{
    pthread_mutex_lock(&h->lock);
    if (h->state != LEASE_HELD_ACTIVE) {
        pthread_mutex_unlock(&h->lock);
        return true;
    }
    if (now_ns < h->window.cancel_ns) {
        pthread_mutex_unlock(&h->lock);
        return false;
    }
    lease_held_state_t why = h->capped ? LEASE_HELD_EXPIRED : LEASE_HELD_UNCONFIRMED;
    /* the last failure says why nothing was confirmed */
    lease_code_t code = h->capped                  ? LEASE_LOST
                        : h->code == LEASE_RENEWED ? LEASE_BACKEND_UNAVAILABLE
                                                   : h->code;
    pthread_mutex_unlock(&h->lock);
    held_signal_cancel(h, why, code);
    return true;
}

int64_t held_next_ns(lease_held_t *h, int64_t now_ns, bool *due, bool *gatherable)
{
    pthread_mutex_lock(&h->lock);
    *due = *gatherable = false;
    int64_t next = INT64_MAX;
    if (h->state == LEASE_HELD_ACTIVE && !h->stop) {
        const lease_held_window_t *win = &h->window;
        /* a capped grant cannot be extended: just wait for its end; a
         * lease in the client's session waits for the session's keep-alive */
        bool renews = !h->capped && !h->in_session && win->renew_ns <= win->cancel_ns;
        next = renews ? win->renew_ns : win->cancel_ns;
        if (now_ns >= win->cancel_ns)
            next = win->cancel_ns;
        *due = renews && now_ns >= win->renew_ns && now_ns < win->cancel_ns;
        /* renewing early is always safe (the new window starts at the
         * batch's send); half way to the renewal point keeps the renewals
         * of a process in step without renewing much more often */
        *gatherable = renews && now_ns >= win->sent_ns + (win->renew_ns - win->sent_ns) / 2;
    }
    pthread_mutex_unlock(&h->lock);
    return next;
}

int lease_held_cancel_fd(const lease_held_t *h)
{
    return h->cancel_fd;
}

lease_held_state_t lease_held_state(lease_held_t *h, lease_code_t *code)
{
    pthread_mutex_lock(&h->lock);
    lease_held_state_t s = h->state;
    if (code)
        *code = h->code;
    pthread_mutex_unlock(&h->lock);
    return s;
}

void lease_held_snapshot(lease_held_t *h, lease_record_t *lease, lease_held_window_t *window)
{
    pthread_mutex_lock(&h->lock);
    if (lease)
        *lease = h->lease;
    if (window)
        *window = h->window;
    pthread_mutex_unlock(&h->lock);
}
