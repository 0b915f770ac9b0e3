/*
 * renewals.c - the renewal group: one thread per client for every lease
 * the process holds through it (issue 20: a fleet's steady load is renewals).
 *
 * The thread wakes at the earliest renewal or cancel point of its members.
 * When a member's renewal is due it renews, in one POST
 * /v1/leases/renew-batch call (one database transaction), that member and
 * every other member at least half way to its own renewal point: renewing
 * early only restarts a window, at the batch's send, so authority is never
 * extended past what the service granted, and after one batch the members
 * stay in step: one call per period however many leases are held.
 *
 * Each item's answer is judged by held_renewal.c exactly as a renewal of its own
 * (held_renewal_judge): the window anchored at the call's first send, a
 * late answer confirmed by inspection, lease_lost cancelling that holder
 * only. A failure of the whole call that may pass (backend unavailable,
 * outcome unknown, rate limited, deadline) is each item's temporary
 * failure, retried on each one's schedule. A refusal of the whole call
 * (one renewal outside the credential's scope, a malformed one) tells
 * nothing about each lease: those items are renewed one by one at once,
 * so each gets its own verdict. A leased without the route (400 naming
 * "method", or 404) is renewed one by one from then on. A lone due
 * renewal goes out as a plain /v1/leases/renew.
 *
 * The group is the client's attachment (client_attachment): made on the
 * first lease_held_start, freed by lease_client_free, which never calls
 * up into this file.
 *
 * Locking: `lock` guards the member list and each member's in_flight; a
 * member's own lock is taken inside it, never the other way round. No lock
 * is held across an HTTP call or a cancel callback.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client_internal.h"
#include "lease/clock.h"
#include "held_internal.h"

#define NS_PER_MS 1000000LL
#define GROUP_BATCH_MAX 100 /* the route's limit (docs/api.md) */

struct renewal_group {
    lease_client_t *client;
    pthread_mutex_t lock;
    pthread_cond_t wake; /* CLOCK_MONOTONIC: a member joined, or stop */
    pthread_cond_t idle; /* a round ended: in_flight flags were cleared */
    pthread_t thread;
    bool stop;
    bool no_batch_route; /* the service answered 404: renew one by one */
    lease_held_t *members;
};

static bool transient(lease_code_t code)
{
    return code == LEASE_BACKEND_UNAVAILABLE || code == LEASE_OUTCOME_UNKNOWN ||
           code == LEASE_RATE_LIMITED || code == LEASE_DEADLINE_EXCEEDED;
}

static struct timespec mono_timespec(int64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    return ts;
}

/* Renews n prepared members in one call and judges each answer. */
static void renew_batch(renewal_group_t *g, held_renewal_t *r, size_t n)
{
    lease_client_owner_t *reqs = calloc(n, sizeof *reqs);
    lease_result_t *results = calloc(n, sizeof *results);
    if (!reqs || !results) {
        free(reqs);
        free(results);
        for (size_t i = 0; i < n; i++)
            held_renew_once(r[i].h);
        return;
    }
    /* one deadline for the call: the nearest cancel point among its items */
    int64_t cancel = INT64_MAX;
    for (size_t i = 0; i < n; i++) {
        reqs[i] = r[i].req;
        if (r[i].window.cancel_ns < cancel)
            cancel = r[i].window.cancel_ns;
    }
    int64_t budget_ms = (cancel - r[0].started_ns) / NS_PER_MS;
    lease_client_call_t call = {.deadline_ms = budget_ms > 0 ? budget_ms : 1};
    lease_code_t code = lease_client_renew_many(g->client, reqs, n, NULL, &call, results);
    int64_t answered = lease_mono_now_ns();
    int64_t sent = call.anchor_mono_ns ? call.anchor_mono_ns : r[0].started_ns;
    if (code == LEASE_RENEWED || transient(code)) {
        for (size_t i = 0; i < n; i++)
            held_renewal_judge(&r[i], code == LEASE_RENEWED ? results[i].code : code, &results[i],
                               sent, answered);
    } else {
        /* an older leased: /v1/leases/{id} takes GET only (400, field
         * "method"); a proxy may answer 404 */
        if (call.http_status == 404 || strcmp(results[0].field, "method") == 0) {
            pthread_mutex_lock(&g->lock);
            g->no_batch_route = true;
            pthread_mutex_unlock(&g->lock);
            held_log(r[0].h, "the service has no renew-batch route: renewing one by one");
        }
        for (size_t i = 0; i < n; i++)
            held_renew_once(r[i].h);
    }
    free(reqs);
    free(results);
}

/* Where a member stands in this round. */
typedef enum standing { IDLE, OVER, DUE, GATHERABLE } standing_t;

static standing_t standing_of(lease_held_t *m, int64_t now, int64_t *at)
{
    bool due, gatherable;
    *at = held_next_ns(m, now, &due, &gatherable);
    if (*at == INT64_MAX)
        return IDLE; /* ended: its holder takes it out */
    if (now >= *at && !due)
        return OVER; /* its cancel point passed */
    return due ? DUE : gatherable ? GATHERABLE : IDLE;
}

/* One round: cancels members past their cancel point, renews the due ones
 * (and those gathered with them). Called with g->lock held; returns with it
 * held. Returns the next wake-up, or 0 when work was done (look again). */
static int64_t round_locked(renewal_group_t *g)
{
    int64_t now = lease_mono_now_ns();
    int64_t next = INT64_MAX, at;
    size_t n_over = 0, n_due = 0, n_gather = 0;
    for (lease_held_t *m = g->members; m; m = m->group_next) {
        standing_t s = standing_of(m, now, &at);
        n_over += s == OVER;
        n_due += s == DUE;
        n_gather += s == GATHERABLE;
        if (at < next)
            next = at;
    }
    if (n_over == 0 && n_due == 0)
        return next;
    size_t cap = n_over + n_due + n_gather;
    held_renewal_t *batch = calloc(cap, sizeof *batch);
    lease_held_t **over = calloc(cap, sizeof *over);
    if (!batch || !over) {
        free(batch);
        free(over);
        return now + 10 * NS_PER_MS; /* out of memory: try again shortly */
    }
    /* the same `now`: a member can only have ended since the count */
    size_t nb = 0, no = 0;
    for (lease_held_t *m = g->members; m; m = m->group_next) {
        standing_t s = standing_of(m, now, &at);
        if (s == OVER && no < cap) {
            m->in_flight = true;
            over[no++] = m;
        } else if ((s == DUE || (s == GATHERABLE && n_due)) && nb < cap && nb < GROUP_BATCH_MAX) {
            m->in_flight = true;
            batch[nb++].h = m;
        }
    }
    bool one_by_one = g->no_batch_route;
    pthread_mutex_unlock(&g->lock);

    for (size_t i = 0; i < no; i++)
        (void)held_past_cancel_point(over[i], lease_mono_now_ns());
    if (nb == 1 || one_by_one) {
        for (size_t i = 0; i < nb; i++)
            held_renew_once(batch[i].h);
    } else if (nb > 1) {
        int64_t start = lease_mono_now_ns();
        for (size_t i = 0; i < nb; i++)
            held_renewal_prepare(batch[i].h, start, &batch[i]);
        renew_batch(g, batch, nb);
    }

    pthread_mutex_lock(&g->lock);
    for (size_t i = 0; i < no; i++)
        over[i]->in_flight = false;
    for (size_t i = 0; i < nb; i++)
        batch[i].h->in_flight = false;
    pthread_cond_broadcast(&g->idle);
    free(batch);
    free(over);
    return 0;
}

static void *group_main(void *arg)
{
    renewal_group_t *g = arg;
    pthread_mutex_lock(&g->lock);
    while (!g->stop) {
        int64_t next = round_locked(g);
        if (next == 0 || g->stop)
            continue;
        if (next == INT64_MAX) {
            pthread_cond_wait(&g->wake, &g->lock);
        } else if (next > lease_mono_now_ns()) {
            struct timespec ts = mono_timespec(next);
            pthread_cond_timedwait(&g->wake, &g->lock, &ts);
        }
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

static void drop_group(void *g)
{
    renewal_group_free(g);
}

/* Makes a client's group and starts its thread (client_attachment's make,
 * under the client's lock). */
static void *make_group(lease_client_t *client)
{
    renewal_group_t *g = calloc(1, sizeof *g);
    if (g) {
        g->client = client;
        pthread_mutex_init(&g->lock, NULL);
        pthread_condattr_t attr;
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&g->wake, &attr);
        pthread_condattr_destroy(&attr);
        pthread_cond_init(&g->idle, NULL);
        if (pthread_create(&g->thread, NULL, group_main, g) != 0) {
            pthread_cond_destroy(&g->idle);
            pthread_cond_destroy(&g->wake);
            pthread_mutex_destroy(&g->lock);
            free(g);
            g = NULL;
        }
    }
    return g;
}

renewal_group_t *renewal_group_of(lease_client_t *client)
{
    return client_attachment(client, make_group, drop_group);
}

void renewal_group_join(renewal_group_t *g, lease_held_t *h)
{
    pthread_mutex_lock(&g->lock);
    h->group_next = g->members;
    g->members = h;
    h->in_group = true;
    pthread_cond_broadcast(&g->wake);
    pthread_mutex_unlock(&g->lock);
}

void renewal_group_leave(renewal_group_t *g, lease_held_t *h)
{
    pthread_mutex_lock(&g->lock);
    if (h->in_group) {
        for (lease_held_t **p = &g->members; *p; p = &(*p)->group_next)
            if (*p == h) {
                *p = h->group_next;
                break;
            }
        h->in_group = false;
    }
    if (!pthread_equal(pthread_self(), g->thread))
        while (h->in_flight)
            pthread_cond_wait(&g->idle, &g->lock);
    pthread_mutex_unlock(&g->lock);
}

void renewal_group_free(renewal_group_t *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->lock);
    g->stop = true;
    pthread_cond_broadcast(&g->wake);
    pthread_mutex_unlock(&g->lock);
    pthread_join(g->thread, NULL);
    pthread_cond_destroy(&g->idle);
    pthread_cond_destroy(&g->wake);
    pthread_mutex_destroy(&g->lock);
    free(g);
}
