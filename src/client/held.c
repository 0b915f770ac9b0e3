/*
 * held.c - a held lease's life: lease_held_start puts it in its client's
 * renewal group (renewals.c: one thread per client renews every lease the
 * process holds, those due in the same period in one renew-batch call,
 * each answer judged by held_renewal.c as a renewal of its own), a watch
 * thread, and release, stop and free. The layers, top down: held.c ->
 * renewals.c -> held_renewal.c -> schedule.c -> the client (client.c).
 *
 * lease_held_acquire (issue 37) acquires in the client's session
 * (renewals.c) and starts the hold; lease_held_start recognises a lease
 * of that session, which the session's keep-alive keeps alive instead of
 * renewals.
 *
 * The watch thread long-polls GET .../watch and cancels as soon as the
 * service reports the lease ended; its HTTP call is aborted through the
 * cancel fd, so stopping never waits for a long-poll.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "lease/clock.h"
#include "lease/held.h"
#include "held_internal.h"

#define NS_PER_MS 1000000LL

#define WATCH_RETRY_FIRST_MS 200
#define WATCH_RETRY_MAX_MS 5000

/* Waits ms, or less when the cancel fd becomes readable. */
static void watch_pause(lease_held_t *h, int64_t ms)
{
    struct pollfd pfd = {.fd = h->cancel_fd, .events = POLLIN};
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
    lease_held_t *h = arg;
    int64_t wait_ms = h->cfg.watch_wait_ms > 0 ? h->cfg.watch_wait_ms : LEASE_HELD_WATCH_WAIT_MS;
    int64_t retry_ms = WATCH_RETRY_FIRST_MS;
    for (;;) {
        pthread_mutex_lock(&h->lock);
        bool go = !h->stop && h->state == LEASE_HELD_ACTIVE;
        char lease_id[LEASE_ID_MAX + 1];
        snprintf(lease_id, sizeof lease_id, "%s", h->lease.lease_id);
        pthread_mutex_unlock(&h->lock);
        if (!go)
            break;
        lease_client_call_t call = {0};
        lease_result_t res;
        lease_code_t code =
            lease_client_watch(h->client, lease_id, wait_ms, h->cancel_fd, &call, &res);
        if (lease_held_state(h, NULL) != LEASE_HELD_ACTIVE)
            break; /* cancelled meanwhile (the call was aborted) */
        if (code == LEASE_INSPECTED && res.has_lease && strcmp(res.lease.lease_id, lease_id) == 0) {
            if (res.lease.state != LEASE_STATE_ACTIVE) {
                held_log(h, "watch: lease %s is %s", lease_id, lease_state_name(res.lease.state));
                held_signal_cancel(h, LEASE_HELD_LOST, LEASE_LOST);
                break;
            }
            retry_ms = WATCH_RETRY_FIRST_MS;
            continue; /* the wait ended with the lease active: watch again */
        }
        if (watch_refused_for_good(code)) {
            held_log(h, "watch not available (%s): renewal alone guards lease %s",
                     lease_code_name(code), lease_id);
            break;
        }
        /* the service is unreachable or busy: renewal guards meanwhile */
        watch_pause(h, retry_ms + (int64_t)lease_jitter((uint64_t)retry_ms / 2 + 1));
        retry_ms = retry_ms * 2 > WATCH_RETRY_MAX_MS ? WATCH_RETRY_MAX_MS : retry_ms * 2;
    }
    return NULL;
}

static void held_destroy(lease_held_t *h)
{
    if (h->cancel_fd >= 0)
        close(h->cancel_fd);
    pthread_mutex_destroy(&h->lock);
    free(h);
}

lease_held_t *lease_held_start(lease_client_t *client, const lease_record_t *lease,
                               int64_t sent_mono_ns, const lease_held_config_t *cfg,
                               lease_code_t *code)
{
    static const lease_held_config_t defaults = {0};
    if (!cfg)
        cfg = &defaults;
    const char *sid = cfg->service_instance_id && *cfg->service_instance_id
                          ? cfg->service_instance_id
                          : lease->service_instance_id;
    if (lease->state != LEASE_STATE_ACTIVE || !*sid || strlen(sid) > LEASE_ID_MAX ||
        lease_held_grant_ms(lease) <= 0) {
        *code = LEASE_LOST;
        return NULL;
    }
    lease_held_t *h = calloc(1, sizeof *h);
    if (!h) {
        *code = LEASE_BACKEND_UNAVAILABLE;
        return NULL;
    }
    h->client = client;
    h->cfg = *cfg;
    strcpy(h->service_instance_id, sid);
    h->cfg.service_instance_id = h->service_instance_id;
    h->state = LEASE_HELD_ACTIVE;
    h->code = LEASE_RENEWED;
    pthread_mutex_init(&h->lock, NULL);
    h->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (h->cancel_fd < 0) {
        *code = LEASE_BACKEND_UNAVAILABLE;
        held_destroy(h);
        return NULL;
    }
    h->lease = *lease;
    /* in a session, the acquire's grant is what was left of the session
     * then (expires_at - renewed_at), anchored at the acquire's send */
    h->window = lease_held_plan(sent_mono_ns, lease_held_grant_ms(lease), &h->cfg,
                                lease_jitter(UINT64_MAX));
    h->capped = lease_held_grant_capped(lease);
    h->group = renewal_group_of(client);
    if (!h->group) {
        *code = LEASE_BACKEND_UNAVAILABLE;
        held_destroy(h);
        return NULL;
    }
    /* a lease in this client's session is kept alive by its keep-alive;
     * any other (no session, another's) is renewed as before */
    h->in_session = !h->cfg.no_watch && renewal_group_session_is(h->group, lease->session_id);
    if (h->in_session)
        snprintf(h->session_id, sizeof h->session_id, "%s", lease->session_id);

    /* Past the renewal point already (a long bounded wait, a slow answer):
     * renew now, so the holder starts work with a fresh window, or not at all. */
    if (!h->capped && !h->in_session && lease_mono_now_ns() >= h->window.renew_ns)
        held_renew_once(h);
    if (h->state == LEASE_HELD_ACTIVE && lease_mono_now_ns() >= h->window.cancel_ns)
        h->state = LEASE_HELD_UNCONFIRMED;
    if (h->state != LEASE_HELD_ACTIVE) {
        *code = h->code == LEASE_RENEWED ? LEASE_LOST : h->code;
        held_destroy(h);
        return NULL;
    }
    h->started = true;
    renewal_group_join(h->group, h);
    if (!h->cfg.no_watch) {
        if (pthread_create(&h->watch_thread, NULL, watch_main, h) == 0)
            h->watch_running = true;
        else
            held_log(h, "cannot start the watch thread: renewal alone guards lease %s",
                     h->lease.lease_id);
    }
    *code = LEASE_ACQUIRED;
    return h;
}

lease_code_t lease_held_session(lease_client_t *client, const char *service_instance_id,
                                int64_t ttl_ms, const char *request_id, char *session_id,
                                size_t session_id_size)
{
    renewal_group_t *g = renewal_group_of(client);
    if (!g) {
        if (session_id_size > 0)
            session_id[0] = '\0';
        return LEASE_BACKEND_UNAVAILABLE;
    }
    return renewal_group_session(g, service_instance_id, ttl_ms, request_id, session_id,
                                 session_id_size);
}

lease_held_t *lease_held_acquire(lease_client_t *client, const lease_client_acquire_t *req,
                                 lease_client_call_t *call, lease_result_t *res,
                                 const lease_held_config_t *cfg, lease_code_t *code)
{
    lease_client_call_t local_call = {0};
    lease_result_t local_res;
    if (!call)
        call = &local_call;
    if (!res)
        res = &local_res;
    lease_client_acquire_t in_session = *req;
    char sid[LEASE_ID_MAX + 1] = "";
    /* without the watch, only a renewal of its own learns that one lease
     * ended while its session lives on (a force-release, a revoke) */
    bool own_session = !(cfg && (cfg->per_lease_renewal || cfg->no_watch)) &&
                       !(req->session_id && *req->session_id);
    /* two tries: an acquisition refused lease_lost because the session
     * ended since its last keep-alive is repeated once in a new one */
    for (int attempt = 0; attempt < 2; attempt++) {
        if (own_session) {
            /* no session (the service has none, or cannot open one now):
             * this lease is renewed on its own */
            lease_code_t sc = lease_held_session(client, req->service_instance_id, req->ttl_ms,
                                                 NULL, sid, sizeof sid);
            in_session.session_id = sc == LEASE_ACQUIRED ? sid : NULL;
        }
        *code = lease_client_acquire(client, &in_session, call, res);
        if (*code != LEASE_LOST || !own_session || !sid[0])
            break;
        renewal_group_t *g = renewal_group_of(client);
        if (g)
            renewal_group_session_ended(g, sid);
    }
    if (*code != LEASE_ACQUIRED)
        return NULL;
    lease_held_t *h = lease_held_start(client, &res->lease, call->anchor_mono_ns, cfg, code);
    if (!h) {
        /* nobody would hold it: give it back rather than block its target */
        lease_client_owner_t rel = {lease_client_identity_of(&res->lease.identity),
                                    res->lease.lease_id, res->lease.fencing_token,
                                    cfg && cfg->service_instance_id && *cfg->service_instance_id
                                        ? cfg->service_instance_id
                                        : res->lease.service_instance_id,
                                    0};
        lease_result_t released;
        lease_code_t given_back = lease_client_release(client, &rel, NULL, &released);
        (void)given_back; /* best effort: it ends at its expiry otherwise */
    }
    return h;
}

/* Takes the held lease out of its renewal group (waiting for a batch that is
 * renewing it, unless called from the group's thread), stops the watch
 * (joining it unless called from it) and leaves ACTIVE. */
static void halt(lease_held_t *h, lease_held_state_t why, lease_code_t code)
{
    pthread_mutex_lock(&h->lock);
    h->stop = true;
    /* the watch is joined once, never by itself (a cancel callback may stop
     * the hold from the thread that saw the loss) */
    bool join_watch = h->watch_running && !h->watch_join_claimed &&
                      !pthread_equal(pthread_self(), h->watch_thread);
    if (join_watch)
        h->watch_join_claimed = true;
    pthread_mutex_unlock(&h->lock);
    if (h->group)
        renewal_group_leave(h->group, h);
    /* signal first: the holder stops work before the lease is given up;
     * the cancel fd also aborts the watch's long-poll */
    held_signal_cancel(h, why, code);
    if (join_watch)
        pthread_join(h->watch_thread, NULL);
}

lease_code_t lease_held_release(lease_held_t *h, int64_t deadline_ms, lease_result_t *res)
{
    lease_result_t local;
    if (!res)
        res = &local;
    halt(h, LEASE_HELD_RELEASED, LEASE_RELEASED);
    lease_record_t held;
    lease_held_snapshot(h, &held, NULL);
    lease_client_owner_t req = {lease_client_identity_of(&held.identity), held.lease_id,
                                held.fencing_token, h->service_instance_id, 0};
    lease_client_call_t call = {.deadline_ms = deadline_ms};
    lease_code_t code = lease_client_release(h->client, &req, &call, res);
    held_log(h, "release of lease %s: %s", held.lease_id, lease_code_name(code));
    return code;
}

void lease_held_stop(lease_held_t *h)
{
    lease_code_t last;
    (void)lease_held_state(h, &last);
    halt(h, LEASE_HELD_STOPPED, last);
}

void lease_held_free(lease_held_t *h)
{
    if (!h)
        return;
    lease_held_stop(h);
    held_destroy(h);
}
