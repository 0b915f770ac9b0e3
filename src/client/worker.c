/*
 * worker.c - the auto-renewing lease holder: its window on the schedule of
 * worker_schedule.c, the judgement of each renewal answer, and the
 * cancellation signal (callback + eventfd) raised the moment local
 * authority cannot be proven. The renewals themselves are sent by the
 * client's renewal group (worker_group.c): one thread per client that
 * renews every lease the process holds, those due in the same period in
 * one renew-batch call, each answer judged here as a renewal of its own.
 *
 * A second thread watches the lease (GET .../watch, long-polled) and
 * cancels as soon as the service reports it ended; its HTTP call is
 * aborted through the cancel fd, so stopping never waits for a long-poll.
 *
 * Locking: `lock` guards the lease, its window and the state (the group's
 * lock, when both are taken, first). No lock is held across an HTTP call
 * or while the cancel callback runs. The state
 * leaves ACTIVE exactly once (signal_cancel), so the callback and the
 * eventfd write happen exactly once.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "lease/clock.h"
#include "lease/worker.h"
#include "worker_internal.h"

#define NS_PER_MS 1000000LL

const char *lease_worker_state_name(lease_worker_state_t state)
{
    switch (state) {
    case LEASE_WORKER_ACTIVE:
        return "active";
    case LEASE_WORKER_LOST:
        return "lost";
    case LEASE_WORKER_UNCONFIRMED:
        return "unconfirmed";
    case LEASE_WORKER_EXPIRED:
        return "expired";
    case LEASE_WORKER_RELEASED:
        return "released";
    case LEASE_WORKER_STOPPED:
        return "stopped";
    }
    return "unknown";
}

void worker_log(lease_worker_t *w, const char *fmt, ...)
{
    if (!w->cfg.log)
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    w->cfg.log(w->cfg.log_arg, line);
}

/* Leaves ACTIVE (first caller wins) and tells everyone who listens. */
static void signal_cancel(lease_worker_t *w, lease_worker_state_t why, lease_code_t code)
{
    pthread_mutex_lock(&w->lock);
    bool first = w->state == LEASE_WORKER_ACTIVE;
    if (first) {
        w->state = why;
        w->code = code;
    }
    bool announce = first && w->started;
    pthread_mutex_unlock(&w->lock);
    if (!announce)
        return;
    if (why != LEASE_WORKER_RELEASED && why != LEASE_WORKER_STOPPED) /* not the holder's doing */
        worker_log(w, "lease %s: %s (%s)", w->lease.lease_id, lease_worker_state_name(why),
                   lease_code_name(code));
    uint64_t one = 1;
    while (write(w->cancel_fd, &one, sizeof one) < 0 && errno == EINTR)
        ;
    if (w->cfg.on_cancel)
        w->cfg.on_cancel(w->cfg.cancel_arg, why, code);
}

static bool same_lease(const lease_record_t *held, const lease_record_t *answer)
{
    return answer->state == LEASE_STATE_ACTIVE && answer->fencing_token == held->fencing_token &&
           strcmp(answer->lease_id, held->lease_id) == 0;
}

/* Takes a confirmed grant whose request was first sent at sent_ns. */
static void accept_grant(lease_worker_t *w, const lease_record_t *lease, int64_t sent_ns)
{
    pthread_mutex_lock(&w->lock);
    w->lease = *lease;
    w->window =
        lease_worker_plan(sent_ns, lease_worker_grant_ms(lease), &w->cfg, lease_jitter(UINT64_MAX));
    w->capped = lease_worker_grant_capped(lease);
    w->failures = 0;
    w->code = LEASE_RENEWED;
    pthread_mutex_unlock(&w->lock);
}

/*
 * A renewal's answer came after its answer deadline: it grants nothing
 * unless an inspection, answered before the cancel point, shows the lease
 * still active with that renewal applied.
 */
static bool confirm_by_inspect(lease_worker_t *w, const lease_record_t *renewed, int64_t cancel_ns)
{
    int64_t left_ms = (cancel_ns - lease_mono_now_ns()) / NS_PER_MS;
    if (left_ms <= 0)
        return false;
    lease_client_call_t call = {.deadline_ms = left_ms};
    lease_result_t res;
    lease_code_t code = lease_client_inspect_id(w->client, renewed->lease_id, &call, &res);
    bool in_time = lease_mono_now_ns() < cancel_ns;
    bool proven = code == LEASE_INSPECTED && in_time && same_lease(renewed, &res.lease) &&
                  res.lease.renewed_at_ms >= renewed->renewed_at_ms;
    worker_log(w, "inspection after a late renewal answer: %s%s", lease_code_name(code),
               proven ? ", lease confirmed" : ", authority not proven");
    return proven;
}

static bool transient(lease_code_t code)
{
    return code == LEASE_BACKEND_UNAVAILABLE || code == LEASE_OUTCOME_UNKNOWN ||
           code == LEASE_RATE_LIMITED || code == LEASE_DEADLINE_EXCEEDED;
}

void worker_renewal_prepare(lease_worker_t *w, int64_t now_ns, worker_renewal_t *r)
{
    pthread_mutex_lock(&w->lock);
    r->held = w->lease;
    r->window = w->window;
    pthread_mutex_unlock(&w->lock);
    r->w = w;
    r->started_ns = now_ns;
    r->answer_deadline_ns = lease_worker_answer_deadline(now_ns, r->window.cancel_ns);
    lease_client_owner_t req = {lease_client_identity_of(&r->held.identity), r->held.lease_id,
                                r->held.fencing_token, w->service_instance_id, w->cfg.ttl_ms};
    r->req = req;
}

void worker_renewal_judge(const worker_renewal_t *r, lease_code_t code, const lease_result_t *res,
                          int64_t sent_ns, int64_t answered_ns)
{
    lease_worker_t *w = r->w;
    if (code == LEASE_RENEWED) {
        if (!same_lease(&r->held, &res->lease)) {
            signal_cancel(w, LEASE_WORKER_LOST, LEASE_LOST);
            return;
        }
        if (!lease_worker_answer_counts(answered_ns, r->answer_deadline_ns)) {
            worker_log(w, "renewal answer arrived %lld ms after its local deadline; inspecting",
                       (long long)((answered_ns - r->answer_deadline_ns) / NS_PER_MS));
            if (!confirm_by_inspect(w, &res->lease, r->window.cancel_ns)) {
                signal_cancel(w, LEASE_WORKER_UNCONFIRMED, LEASE_OUTCOME_UNKNOWN);
                return;
            }
        }
        accept_grant(w, &res->lease, sent_ns);
        return;
    }
    if (transient(code)) {
        pthread_mutex_lock(&w->lock);
        w->failures++;
        w->code = code;
        w->window.renew_ns = lease_worker_retry_at(answered_ns, w->window.cancel_ns, w->failures);
        int64_t left_ms = (w->window.cancel_ns - answered_ns) / NS_PER_MS;
        int failures = w->failures;
        pthread_mutex_unlock(&w->lock);
        /* near the cancel point attempts come fast: log the first and every fifth */
        if (failures == 1 || failures % 5 == 0)
            worker_log(
                w, "renewal failed (%s, %d in a row); retrying, %lld ms of local authority left",
                lease_code_name(code), failures, (long long)left_ms);
        return;
    }
    /* lease_lost, or refused for good (credential, scope, invalid) */
    signal_cancel(w, LEASE_WORKER_LOST, code);
}

void worker_renew_once(lease_worker_t *w)
{
    worker_renewal_t r;
    worker_renewal_prepare(w, lease_mono_now_ns(), &r);
    /* the call may run (and resolve an unknown outcome) up to the cancel
     * point, never past it: then cancellation is due anyway */
    int64_t budget_ms = (r.window.cancel_ns - r.started_ns) / NS_PER_MS;
    lease_client_call_t call = {.deadline_ms = budget_ms > 0 ? budget_ms : 1};
    lease_result_t res;
    lease_code_t code = lease_client_renew(w->client, &r.req, &call, &res);
    int64_t answered = lease_mono_now_ns();
    worker_renewal_judge(&r, code, &res, call.anchor_mono_ns ? call.anchor_mono_ns : r.started_ns,
                         answered);
}

bool worker_past_cancel_point(lease_worker_t *w, int64_t now_ns)
{
    pthread_mutex_lock(&w->lock);
    if (w->state != LEASE_WORKER_ACTIVE) {
        pthread_mutex_unlock(&w->lock);
        return true;
    }
    if (now_ns < w->window.cancel_ns) {
        pthread_mutex_unlock(&w->lock);
        return false;
    }
    lease_worker_state_t why = w->capped ? LEASE_WORKER_EXPIRED : LEASE_WORKER_UNCONFIRMED;
    /* the last failure says why nothing was confirmed */
    lease_code_t code = w->capped                  ? LEASE_LOST
                        : w->code == LEASE_RENEWED ? LEASE_BACKEND_UNAVAILABLE
                                                   : w->code;
    pthread_mutex_unlock(&w->lock);
    signal_cancel(w, why, code);
    return true;
}

int64_t worker_next_ns(lease_worker_t *w, int64_t now_ns, bool *due, bool *gatherable)
{
    pthread_mutex_lock(&w->lock);
    *due = *gatherable = false;
    int64_t next = INT64_MAX;
    if (w->state == LEASE_WORKER_ACTIVE && !w->stop) {
        const lease_worker_window_t *win = &w->window;
        /* a capped grant cannot be extended: just wait for its end */
        bool renews = !w->capped && win->renew_ns <= win->cancel_ns;
        next = renews ? win->renew_ns : win->cancel_ns;
        if (now_ns >= win->cancel_ns)
            next = win->cancel_ns;
        *due = renews && now_ns >= win->renew_ns && now_ns < win->cancel_ns;
        /* renewing early is always safe (the new window starts at the
         * batch's send); half way to the renewal point keeps the renewals
         * of a process in step without renewing much more often */
        *gatherable = renews && now_ns >= win->sent_ns + (win->renew_ns - win->sent_ns) / 2;
    }
    pthread_mutex_unlock(&w->lock);
    return next;
}

#define WATCH_RETRY_FIRST_MS 200
#define WATCH_RETRY_MAX_MS 5000

/* Waits ms, or less when the cancel fd becomes readable. */
static void watch_pause(lease_worker_t *w, int64_t ms)
{
    struct pollfd pfd = {.fd = w->cancel_fd, .events = POLLIN};
    while (poll(&pfd, 1, (int)ms) < 0 && errno == EINTR)
        ;
}

/* Whether a watch answer means the service will never watch for us (an
 * older leased without the route, a credential without the right): then
 * renewal alone carries on. */
static bool watch_refused_for_good(lease_code_t code)
{
    return code == LEASE_INVALID_LEASE_REQUEST || code == LEASE_ACCESS_DENIED ||
           code == LEASE_INVALID_CREDENTIAL || code == LEASE_NOT_FOUND;
}

static void *watch_main(void *arg)
{
    lease_worker_t *w = arg;
    int64_t wait_ms = w->cfg.watch_wait_ms > 0 ? w->cfg.watch_wait_ms : LEASE_WORKER_WATCH_WAIT_MS;
    int64_t retry_ms = WATCH_RETRY_FIRST_MS;
    for (;;) {
        pthread_mutex_lock(&w->lock);
        bool go = !w->stop && w->state == LEASE_WORKER_ACTIVE;
        char lease_id[LEASE_ID_MAX + 1];
        snprintf(lease_id, sizeof lease_id, "%s", w->lease.lease_id);
        pthread_mutex_unlock(&w->lock);
        if (!go)
            break;
        lease_client_call_t call = {0};
        lease_result_t res;
        lease_code_t code =
            lease_client_watch(w->client, lease_id, wait_ms, w->cancel_fd, &call, &res);
        if (lease_worker_state(w, NULL) != LEASE_WORKER_ACTIVE)
            break; /* cancelled meanwhile (the call was aborted) */
        if (code == LEASE_INSPECTED && res.has_lease && strcmp(res.lease.lease_id, lease_id) == 0) {
            if (res.lease.state != LEASE_STATE_ACTIVE) {
                worker_log(w, "watch: lease %s is %s", lease_id, lease_state_name(res.lease.state));
                signal_cancel(w, LEASE_WORKER_LOST, LEASE_LOST);
                break;
            }
            retry_ms = WATCH_RETRY_FIRST_MS;
            continue; /* the wait ended with the lease active: watch again */
        }
        if (watch_refused_for_good(code)) {
            worker_log(w, "watch not available (%s): renewal alone guards lease %s",
                       lease_code_name(code), lease_id);
            break;
        }
        /* the service is unreachable or busy: renewal guards meanwhile */
        watch_pause(w, retry_ms + (int64_t)lease_jitter((uint64_t)retry_ms / 2 + 1));
        retry_ms = retry_ms * 2 > WATCH_RETRY_MAX_MS ? WATCH_RETRY_MAX_MS : retry_ms * 2;
    }
    return NULL;
}

static void worker_destroy(lease_worker_t *w)
{
    if (w->cancel_fd >= 0)
        close(w->cancel_fd);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

lease_worker_t *lease_worker_start(lease_client_t *client, const lease_record_t *lease,
                                   int64_t sent_mono_ns, const lease_worker_config_t *cfg,
                                   lease_code_t *code)
{
    static const lease_worker_config_t defaults = {0};
    if (!cfg)
        cfg = &defaults;
    const char *sid = cfg->service_instance_id && *cfg->service_instance_id
                          ? cfg->service_instance_id
                          : lease->service_instance_id;
    if (lease->state != LEASE_STATE_ACTIVE || !*sid || strlen(sid) > LEASE_ID_MAX ||
        lease_worker_grant_ms(lease) <= 0) {
        *code = LEASE_LOST;
        return NULL;
    }
    lease_worker_t *w = calloc(1, sizeof *w);
    if (!w) {
        *code = LEASE_BACKEND_UNAVAILABLE;
        return NULL;
    }
    w->client = client;
    w->cfg = *cfg;
    strcpy(w->service_instance_id, sid);
    w->cfg.service_instance_id = w->service_instance_id;
    w->state = LEASE_WORKER_ACTIVE;
    w->code = LEASE_RENEWED;
    pthread_mutex_init(&w->lock, NULL);
    w->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (w->cancel_fd < 0) {
        *code = LEASE_BACKEND_UNAVAILABLE;
        worker_destroy(w);
        return NULL;
    }
    w->lease = *lease;
    w->window = lease_worker_plan(sent_mono_ns, lease_worker_grant_ms(lease), &w->cfg,
                                  lease_jitter(UINT64_MAX));
    w->capped = lease_worker_grant_capped(lease);

    /* Past the renewal point already (a long bounded wait, a slow answer):
     * renew now, so the holder starts work with a fresh window, or not at all. */
    if (!w->capped && lease_mono_now_ns() >= w->window.renew_ns)
        worker_renew_once(w);
    if (w->state == LEASE_WORKER_ACTIVE && lease_mono_now_ns() >= w->window.cancel_ns)
        w->state = LEASE_WORKER_UNCONFIRMED;
    if (w->state != LEASE_WORKER_ACTIVE) {
        *code = w->code == LEASE_RENEWED ? LEASE_LOST : w->code;
        worker_destroy(w);
        return NULL;
    }
    w->group = worker_group_of(client);
    if (!w->group) {
        *code = LEASE_BACKEND_UNAVAILABLE;
        worker_destroy(w);
        return NULL;
    }
    w->started = true;
    worker_group_join(w->group, w);
    if (!w->cfg.no_watch) {
        if (pthread_create(&w->watch_thread, NULL, watch_main, w) == 0)
            w->watch_running = true;
        else
            worker_log(w, "cannot start the watch thread: renewal alone guards lease %s",
                       w->lease.lease_id);
    }
    *code = LEASE_ACQUIRED;
    return w;
}

int lease_worker_cancel_fd(const lease_worker_t *w)
{
    return w->cancel_fd;
}

lease_worker_state_t lease_worker_state(lease_worker_t *w, lease_code_t *code)
{
    pthread_mutex_lock(&w->lock);
    lease_worker_state_t s = w->state;
    if (code)
        *code = w->code;
    pthread_mutex_unlock(&w->lock);
    return s;
}

void lease_worker_snapshot(lease_worker_t *w, lease_record_t *lease, lease_worker_window_t *window)
{
    pthread_mutex_lock(&w->lock);
    if (lease)
        *lease = w->lease;
    if (window)
        *window = w->window;
    pthread_mutex_unlock(&w->lock);
}

/* Takes the worker out of its renewal group (waiting for a batch that is
 * renewing it, unless called from the group's thread), stops the watch
 * (joining it unless called from it) and leaves ACTIVE. */
static void halt(lease_worker_t *w, lease_worker_state_t why, lease_code_t code)
{
    pthread_mutex_lock(&w->lock);
    w->stop = true;
    /* the watch is joined once, never by itself (a cancel callback may stop
     * the worker from the thread that saw the loss) */
    bool join_watch = w->watch_running && !w->watch_join_claimed &&
                      !pthread_equal(pthread_self(), w->watch_thread);
    if (join_watch)
        w->watch_join_claimed = true;
    pthread_mutex_unlock(&w->lock);
    if (w->group)
        worker_group_leave(w->group, w);
    /* signal first: the holder stops work before the lease is given up;
     * the cancel fd also aborts the watch's long-poll */
    signal_cancel(w, why, code);
    if (join_watch)
        pthread_join(w->watch_thread, NULL);
}

lease_code_t lease_worker_release(lease_worker_t *w, int64_t deadline_ms, lease_result_t *res)
{
    lease_result_t local;
    if (!res)
        res = &local;
    halt(w, LEASE_WORKER_RELEASED, LEASE_RELEASED);
    lease_record_t held;
    lease_worker_snapshot(w, &held, NULL);
    lease_client_owner_t req = {lease_client_identity_of(&held.identity), held.lease_id,
                                held.fencing_token, w->service_instance_id, 0};
    lease_client_call_t call = {.deadline_ms = deadline_ms};
    lease_code_t code = lease_client_release(w->client, &req, &call, res);
    worker_log(w, "release of lease %s: %s", held.lease_id, lease_code_name(code));
    return code;
}

void lease_worker_stop(lease_worker_t *w)
{
    lease_code_t last;
    (void)lease_worker_state(w, &last);
    halt(w, LEASE_WORKER_STOPPED, last);
}

void lease_worker_free(lease_worker_t *w)
{
    if (!w)
        return;
    lease_worker_stop(w);
    worker_destroy(w);
}
