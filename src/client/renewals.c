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
 * The client's session (issue 37) lives here too: opened on the first
 * hold that asks for it (renewal_group_session, under open_lock so that
 * concurrent first holds share one), kept alive by this thread with one
 * POST /v1/sessions/{id}/keepalive per period (a third of its TTL) while
 * it is open, closed by lease_client_free. Its members (in_session) are
 * never renewed: each confirmed keep-alive extends every member's window
 * (held_session_extend); lease_lost, or a refusal for good, cancels every
 * member; a keep-alive without an answer is repeated until the session's
 * cancel point, and each member is cancelled (unconfirmed) at its own;
 * an answer after its answer deadline counts for nothing and is followed
 * by another keep-alive at once. A service without sessions (400 naming
 * session_id) is remembered (sessions_refused): holds renew from then on.
 *
 * The group is the client's attachment (client_attachment): made on the
 * first lease_held_start, freed by lease_client_free, which never calls
 * up into this file.
 *
 * Locking: `lock` guards the member list, each member's in_flight and the
 * session's fields; a member's own lock is taken inside it, never the
 * other way round. No lock is held across an HTTP call or a cancel
 * callback (open_lock is, by design: it only orders opens).
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

    /* The client's session (issue 37): its members (in_session) are kept
     * alive by one keep-alive per period, sent by this thread. Guarded by
     * `lock`; open_lock makes concurrent first holds share one open. */
    pthread_mutex_t open_lock;
    bool sessions_refused; /* 400 naming session_id: this service has none */
    bool session_open;     /* session_id names the session holds go into */
    char session_id[LEASE_ID_MAX + 1];
    lease_held_window_t session_window; /* of the last confirmed open or keep-alive */
    int64_t session_next_ns;            /* the next keep-alive: renewal point or retry */
    int session_failures;               /* keep-alives in a row without an answer */
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

/* The window a session's confirmed open or keep-alive, first sent at
 * sent_ns, gives the session itself (the default margin and jitter). */
static lease_held_window_t session_plan(int64_t sent_ns, const lease_session_t *s)
{
    int64_t grant = s->expires_at_ms - s->renewed_at_ms;
    if (s->ttl_ms > 0 && s->ttl_ms < grant)
        grant = s->ttl_ms;
    return lease_held_plan(sent_ns, grant, NULL, lease_jitter(UINT64_MAX));
}

/* Whether a keep-alive's refusal ends the session for good: lease_lost
 * (closed, expired, unknown, another principal's), or a refusal no repeat
 * changes (credential, scope, a service without sessions). */
static bool session_refused_for_good(lease_code_t code)
{
    return code == LEASE_LOST || code == LEASE_INVALID_LEASE_REQUEST ||
           code == LEASE_INVALID_CREDENTIAL || code == LEASE_ACCESS_DENIED ||
           code == LEASE_NOT_FOUND;
}

/*
 * The keep-alive of the session, for the n members of it collected (in
 * flight) by the round: one call, repeated by the client while no answer
 * comes, until the session's cancel point. Its answer extends every
 * member, ends every member, or leaves them to their cancel points.
 */
static void keep_session_alive(renewal_group_t *g, const char *session_id, int64_t cancel_ns,
                               lease_held_t **members, size_t n)
{
    int64_t started = lease_mono_now_ns();
    int64_t budget_ms = (cancel_ns - started) / NS_PER_MS;
    lease_client_call_t call = {.deadline_ms = budget_ms > 0 ? budget_ms : 1};
    lease_result_t res;
    lease_code_t code = lease_client_session_keepalive(g->client, session_id, &call, &res);
    int64_t now = lease_mono_now_ns();
    /* the first send: the service extended at or after it, whichever
     * attempt it answered (a keep-alive has no idempotency record) */
    int64_t sent = call.first_sent_mono_ns ? call.first_sent_mono_ns : now;
    bool confirmed =
        code == LEASE_RENEWED && res.has_session && strcmp(res.session.session_id, session_id) == 0;
    if (confirmed &&
        !lease_held_answer_counts(now, lease_held_answer_deadline(started, cancel_ns))) {
        /* as for a renewal (docs/executor.md, "Late answers"): an answer
         * after its answer deadline grants nothing by itself; the next
         * keep-alive, at once, must be answered in time to count */
        if (n)
            held_log(
                members[0],
                "keep-alive of session %s answered %lld ms after its local deadline; "
                "keeping alive again",
                session_id,
                (long long)((now - lease_held_answer_deadline(started, cancel_ns)) / NS_PER_MS));
        confirmed = false;
        code = LEASE_OUTCOME_UNKNOWN;
    }
    if (confirmed) {
        lease_held_window_t w = session_plan(sent, &res.session);
        pthread_mutex_lock(&g->lock);
        if (g->session_open && strcmp(g->session_id, session_id) == 0) {
            if (w.cancel_ns > g->session_window.cancel_ns)
                g->session_window = w;
            g->session_next_ns = w.renew_ns; /* a period after this one's send */
            g->session_failures = 0;
        }
        pthread_mutex_unlock(&g->lock);
        for (size_t i = 0; i < n; i++)
            held_session_extend(members[i], sent, &res.session);
        return;
    }
    if (session_refused_for_good(code)) {
        pthread_mutex_lock(&g->lock);
        if (g->session_open && strcmp(g->session_id, session_id) == 0)
            g->session_open = false; /* the next hold opens a new one */
        if (code == LEASE_INVALID_LEASE_REQUEST && strcmp(res.field, "session_id") == 0)
            g->sessions_refused = true;
        pthread_mutex_unlock(&g->lock);
        if (n)
            held_log(members[0], "keep-alive of session %s: %s: its %zu held lease(s) are lost",
                     session_id, lease_code_name(code), n);
        for (size_t i = 0; i < n; i++)
            held_signal_cancel(members[i], LEASE_HELD_LOST, code);
        return;
    }
    /* no answer, a 5xx, a timeout: repeat until the cancel point; each
     * member is cancelled at its own (unconfirmed) when none comes */
    pthread_mutex_lock(&g->lock);
    int failures = 0;
    if (g->session_open && strcmp(g->session_id, session_id) == 0) {
        failures = ++g->session_failures;
        g->session_next_ns = code == LEASE_OUTCOME_UNKNOWN && call.answered_mono_ns
                                 ? now /* a late answer: confirm at once */
                                 : lease_held_retry_at(now, g->session_window.cancel_ns, failures);
    }
    pthread_mutex_unlock(&g->lock);
    for (size_t i = 0; i < n; i++)
        held_session_failed(members[i], code == LEASE_RENEWED ? LEASE_OUTCOME_UNKNOWN : code);
    if (n && (failures == 1 || failures % 5 == 0))
        held_log(members[0], "keep-alive of session %s failed (%s, %d in a row); retrying",
                 session_id, lease_code_name(code), failures);
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
/* Whether m is a live member of g's open session (called with g->lock). */
static bool in_open_session(const renewal_group_t *g, const lease_held_t *m, standing_t s)
{
    return m->in_session && s != OVER && g->session_open &&
           strcmp(m->session_id, g->session_id) == 0;
}

static int64_t round_locked(renewal_group_t *g)
{
    int64_t now = lease_mono_now_ns();
    int64_t next = INT64_MAX, at;
    size_t n_over = 0, n_due = 0, n_gather = 0, n_session = 0;
    for (lease_held_t *m = g->members; m; m = m->group_next) {
        standing_t s = standing_of(m, now, &at);
        n_over += s == OVER;
        n_due += s == DUE;
        n_gather += s == GATHERABLE;
        n_session += at != INT64_MAX && in_open_session(g, m, s);
        if (at < next)
            next = at;
    }
    /* One keep-alive per period while the session is open, members or not
     * (a hold may be waiting to acquire in it; lease_client_free closes
     * it). Past the expiry of its last confirmed window it is given up:
     * the service has ended it or will, and the next hold opens another. */
    if (g->session_open && now >= g->session_window.expiry_ns) {
        g->session_open = false;
        n_session = 0;
    }
    bool keepalive = g->session_open && now >= g->session_next_ns;
    if (g->session_open && g->session_next_ns < next)
        next = g->session_next_ns;
    if (n_over == 0 && n_due == 0 && !keepalive)
        return next;
    size_t cap = n_over + n_due + n_gather + n_session;
    held_renewal_t *batch = calloc(cap, sizeof *batch);
    lease_held_t **over = calloc(cap, sizeof *over);
    lease_held_t **kept = calloc(cap, sizeof *kept);
    if (!batch || !over || !kept) {
        free(batch);
        free(over);
        free(kept);
        return now + 10 * NS_PER_MS; /* out of memory: try again shortly */
    }
    /* the same `now`: a member can only have ended since the count */
    size_t nb = 0, no = 0, nk = 0;
    for (lease_held_t *m = g->members; m; m = m->group_next) {
        standing_t s = standing_of(m, now, &at);
        if (s == OVER && no < cap) {
            m->in_flight = true;
            over[no++] = m;
        } else if ((s == DUE || (s == GATHERABLE && n_due)) && nb < cap && nb < GROUP_BATCH_MAX) {
            m->in_flight = true;
            batch[nb++].h = m;
        } else if (keepalive && at != INT64_MAX && in_open_session(g, m, s) && nk < cap) {
            m->in_flight = true;
            kept[nk++] = m;
        }
    }
    bool one_by_one = g->no_batch_route;
    char session_id[LEASE_ID_MAX + 1];
    snprintf(session_id, sizeof session_id, "%s", g->session_id);
    int64_t session_cancel = g->session_window.cancel_ns;
    if (keepalive) /* not again before this one is judged */
        g->session_next_ns = INT64_MAX;
    pthread_mutex_unlock(&g->lock);

    for (size_t i = 0; i < no; i++)
        (void)held_past_cancel_point(over[i], lease_mono_now_ns());
    if (keepalive)
        keep_session_alive(g, session_id, session_cancel, kept, nk);
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
    for (size_t i = 0; i < nk; i++)
        kept[i]->in_flight = false;
    if (keepalive && g->session_next_ns == INT64_MAX)
        g->session_next_ns = now; /* judged without a verdict (ended): look again */
    pthread_cond_broadcast(&g->idle);
    free(batch);
    free(over);
    free(kept);
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
        pthread_mutex_init(&g->open_lock, NULL);
        pthread_condattr_t attr;
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&g->wake, &attr);
        pthread_condattr_destroy(&attr);
        pthread_cond_init(&g->idle, NULL);
        if (pthread_create(&g->thread, NULL, group_main, g) != 0) {
            pthread_cond_destroy(&g->idle);
            pthread_cond_destroy(&g->wake);
            pthread_mutex_destroy(&g->open_lock);
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

#define SESSION_CLOSE_DEADLINE_MS 1000

void renewal_group_free(renewal_group_t *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->lock);
    g->stop = true;
    pthread_cond_broadcast(&g->wake);
    pthread_mutex_unlock(&g->lock);
    pthread_join(g->thread, NULL);
    if (g->session_open) {
        /* the client's session ends with it (its holds are gone already):
         * best effort and brief, it would expire at its TTL anyway */
        lease_client_call_t call = {.deadline_ms = SESSION_CLOSE_DEADLINE_MS};
        lease_result_t res;
        lease_code_t closed = lease_client_session_close(g->client, g->session_id, &call, &res);
        (void)closed;
    }
    pthread_cond_destroy(&g->idle);
    pthread_cond_destroy(&g->wake);
    pthread_mutex_destroy(&g->open_lock);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

bool renewal_group_session_is(renewal_group_t *g, const char *session_id)
{
    pthread_mutex_lock(&g->lock);
    bool is =
        session_id && *session_id && g->session_open && strcmp(g->session_id, session_id) == 0;
    pthread_mutex_unlock(&g->lock);
    return is;
}

void renewal_group_session_ended(renewal_group_t *g, const char *session_id)
{
    pthread_mutex_lock(&g->lock);
    if (g->session_open && strcmp(g->session_id, session_id) == 0)
        g->session_open = false;
    pthread_mutex_unlock(&g->lock);
}

/* Whether g's open session may take a new lease now: its last confirmed
 * window has not reached its cancel point (called with g->lock). */
static bool session_usable_locked(const renewal_group_t *g, int64_t now)
{
    return g->session_open && now < g->session_window.cancel_ns;
}

/* Opens a session (or repeats the open of request_id) and confirms its
 * window; LEASE_ACQUIRED with *session filled and *sent_ns its anchor. */
static lease_code_t open_session(renewal_group_t *g, const char *service_instance_id,
                                 int64_t ttl_ms, const char *request_id, lease_session_t *session,
                                 int64_t *sent_ns, char *field, size_t fieldsz)
{
    lease_client_call_t call = {.request_id = request_id};
    lease_result_t res;
    lease_code_t code =
        lease_client_session_open(g->client, service_instance_id, ttl_ms, &call, &res);
    snprintf(field, fieldsz, "%s", res.field);
    if (code != LEASE_ACQUIRED)
        return code;
    *session = res.session;
    *sent_ns = call.anchor_mono_ns ? call.anchor_mono_ns : call.first_sent_mono_ns;
    if (!res.replayed)
        return code;
    /* a repeated open answers what the first one decided, an unknown time
     * ago: only a keep-alive now says the session is open and until when */
    lease_client_call_t kcall = {0};
    code = lease_client_session_keepalive(g->client, session->session_id, &kcall, &res);
    snprintf(field, fieldsz, "%s", res.field);
    if (code != LEASE_RENEWED || !res.has_session)
        return code == LEASE_RENEWED ? LEASE_OUTCOME_UNKNOWN : code;
    *session = res.session;
    *sent_ns = kcall.first_sent_mono_ns;
    return LEASE_ACQUIRED;
}

lease_code_t renewal_group_session(renewal_group_t *g, const char *service_instance_id,
                                   int64_t ttl_ms, const char *request_id, char *session_id,
                                   size_t session_id_size)
{
    if (session_id_size > 0)
        session_id[0] = '\0';
    pthread_mutex_lock(&g->open_lock);
    pthread_mutex_lock(&g->lock);
    lease_code_t code = LEASE_ACQUIRED;
    if (g->sessions_refused) {
        code = LEASE_INVALID_LEASE_REQUEST;
    } else if (session_usable_locked(g, lease_mono_now_ns())) {
        snprintf(session_id, session_id_size, "%s", g->session_id);
    } else {
        pthread_mutex_unlock(&g->lock);
        lease_session_t s;
        int64_t sent = 0;
        char field[LEASE_FIELD_MAX + 1] = "";
        code = open_session(g, service_instance_id, ttl_ms, request_id, &s, &sent, field,
                            sizeof field);
        pthread_mutex_lock(&g->lock);
        if (code == LEASE_ACQUIRED && strlen(s.session_id) < session_id_size) {
            g->session_open = true;
            snprintf(g->session_id, sizeof g->session_id, "%s", s.session_id);
            g->session_window = session_plan(sent, &s);
            g->session_next_ns = g->session_window.renew_ns;
            g->session_failures = 0;
            snprintf(session_id, session_id_size, "%s", s.session_id);
            pthread_cond_broadcast(&g->wake);
        } else if (code == LEASE_ACQUIRED) {
            code = LEASE_INVALID_LEASE_REQUEST; /* no room for the id */
        } else if (code == LEASE_INVALID_LEASE_REQUEST && strcmp(field, "session_id") == 0) {
            g->sessions_refused = true; /* remembered: renew one by one from now on */
        }
    }
    pthread_mutex_unlock(&g->lock);
    pthread_mutex_unlock(&g->open_lock);
    return code;
}
