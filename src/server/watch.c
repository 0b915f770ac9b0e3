/*
 * watch.c - the watch hub (see watch.h): parked watch requests, the ring of
 * recently ended ids, and the thread that listens, polls and wakes.
 *
 * Locking: `lock` guards the parked array, the ring, the counters and the
 * schedule. It is never held across a database call or a wake function:
 * entries to wake are moved out under the lock and woken after it.
 * The thread sleeps in lease_listener_wait on the listening session and an
 * eventfd; park (when the new wait ends before the planned wake, or when the
 * first request parks) and release_all write the eventfd.
 */
#include "watch.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "lease/clock.h"
#include "lease/identity.h"
#include "lease/log.h"

#define RING_SIZE 1024
#define IDLE_WAIT_MS 1000 /* nothing parked: still keep the session alive */
#define POLL_BUDGET_MS 2000

typedef struct parked {
    char lease_id[LEASE_ID_MAX + 1];
    int64_t until_ns;
    leased_watch_wake_fn wake;
    void *arg;
} parked_t;

typedef struct heard {
    uint64_t seq;
    char lease_id[LEASE_ID_MAX + 1];
} heard_t;

struct leased_watch {
    lease_listener_t *listener;
    leased_watch_config_t cfg;
    int efd;
    pthread_t thread;
    bool thread_running;

    pthread_mutex_t lock;
    parked_t *parked; /* n of cap; cap grows up to max_watches */
    size_t n, cap;
    heard_t ring[RING_SIZE];
    uint64_t seq; /* number of the newest ring entry; 0: none yet */
    bool stopping, stop;
    int64_t next_poll_ns;
    int64_t planned_wake_ns;
    leased_watch_stats_t stats;
};

leased_watch_t *leased_watch_new(lease_listener_t *listener, const leased_watch_config_t *cfg)
{
    leased_watch_t *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (w->efd < 0) {
        free(w);
        return NULL;
    }
    w->listener = listener;
    w->cfg = *cfg;
    if (w->cfg.poll_ms < 1)
        w->cfg.poll_ms = 1;
    pthread_mutex_init(&w->lock, NULL);
    return w;
}

static void kick(leased_watch_t *w)
{
    uint64_t one = 1;
    while (write(w->efd, &one, sizeof one) < 0 && errno == EINTR)
        ;
}

uint64_t leased_watch_seq(leased_watch_t *w)
{
    pthread_mutex_lock(&w->lock);
    uint64_t s = w->seq;
    pthread_mutex_unlock(&w->lock);
    return s;
}

bool leased_watch_stopping(leased_watch_t *w)
{
    pthread_mutex_lock(&w->lock);
    bool s = w->stopping;
    pthread_mutex_unlock(&w->lock);
    return s;
}

void leased_watch_stats(leased_watch_t *w, leased_watch_stats_t *out)
{
    pthread_mutex_lock(&w->lock);
    *out = w->stats;
    out->parked = w->n;
    out->mode = lease_listener_mode(w->listener);
    pthread_mutex_unlock(&w->lock);
}

/* Whether the ring proves lease_id ended after seen_seq. When more ids were
 * heard since than the ring holds, it cannot tell: say yes (a spurious wake
 * costs one inspect, a missed one a whole wait). Under lock. */
static bool heard_since(const leased_watch_t *w, const char *lease_id, uint64_t seen_seq)
{
    if (w->seq <= seen_seq)
        return false;
    if (w->seq - seen_seq > RING_SIZE)
        return true;
    for (uint64_t s = seen_seq + 1; s <= w->seq; s++) {
        const heard_t *h = &w->ring[s % RING_SIZE];
        if (h->seq == s && strcmp(h->lease_id, lease_id) == 0)
            return true;
    }
    return false;
}

leased_watch_park_result_t leased_watch_park(leased_watch_t *w, const char *lease_id,
                                             uint64_t seen_seq, int64_t until_mono_ns,
                                             leased_watch_wake_fn wake, void *arg)
{
    pthread_mutex_lock(&w->lock);
    if (w->stopping) {
        pthread_mutex_unlock(&w->lock);
        return LEASED_WATCH_STOPPING;
    }
    if (heard_since(w, lease_id, seen_seq)) {
        w->stats.woken_by_end++;
        pthread_mutex_unlock(&w->lock);
        wake(arg);
        return LEASED_WATCH_PARKED;
    }
    if ((int64_t)w->n >= w->cfg.max_watches) {
        w->stats.refused_full++;
        pthread_mutex_unlock(&w->lock);
        return LEASED_WATCH_FULL;
    }
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        if ((int64_t)cap > w->cfg.max_watches)
            cap = (size_t)w->cfg.max_watches;
        parked_t *grown = realloc(w->parked, cap * sizeof *grown);
        if (!grown) {
            w->stats.refused_full++;
            pthread_mutex_unlock(&w->lock);
            return LEASED_WATCH_FULL;
        }
        w->parked = grown;
        w->cap = cap;
    }
    parked_t *p = &w->parked[w->n++];
    snprintf(p->lease_id, sizeof p->lease_id, "%s", lease_id);
    p->until_ns = until_mono_ns;
    p->wake = wake;
    p->arg = arg;
    bool first = w->n == 1;
    /* The first park after an idle spell polls one interval later. A
     * request that re-parks (woken to recheck its credential, routes.c)
     * keeps a running schedule: else one that re-parks more often than
     * poll_ms would put the poll off for ever. */
    int64_t now = lease_mono_now_ns();
    if (first && now - w->next_poll_ns > w->cfg.poll_ms * 1000000)
        w->next_poll_ns = now + w->cfg.poll_ms * 1000000;
    bool sooner = until_mono_ns < w->planned_wake_ns;
    pthread_mutex_unlock(&w->lock);
    if (first || sooner)
        kick(w);
    return LEASED_WATCH_PARKED;
}

/* Moves the parked entries that match (lease_id, or every expired one when
 * lease_id is NULL) out into `out` (room for w->n). Under lock. */
static size_t take(leased_watch_t *w, const char *lease_id, int64_t now_ns, parked_t *out)
{
    size_t k = 0;
    for (size_t i = 0; i < w->n;) {
        bool hit = lease_id ? strcmp(w->parked[i].lease_id, lease_id) == 0
                            : w->parked[i].until_ns <= now_ns;
        if (hit) {
            out[k++] = w->parked[i];
            w->parked[i] = w->parked[--w->n];
        } else {
            i++;
        }
    }
    return k;
}

static void wake_all(const parked_t *list, size_t k)
{
    for (size_t i = 0; i < k; i++)
        list[i].wake(list[i].arg);
}

bool leased_watch_cancel(leased_watch_t *w, void *arg)
{
    parked_t hit = {0};
    bool found = false;
    pthread_mutex_lock(&w->lock);
    for (size_t i = 0; i < w->n; i++) {
        if (w->parked[i].arg == arg) {
            hit = w->parked[i];
            w->parked[i] = w->parked[--w->n];
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(&w->lock);
    if (found)
        hit.wake(hit.arg);
    return found;
}

/* An id heard or polled: remember it, wake its watchers. Hub thread only. */
static void on_ended(void *arg, const char *lease_id)
{
    leased_watch_t *w = arg;
    if (!lease_id || strlen(lease_id) > LEASE_ID_MAX)
        return;
    parked_t *out = NULL;
    size_t k = 0;
    pthread_mutex_lock(&w->lock);
    w->seq++;
    heard_t *h = &w->ring[w->seq % RING_SIZE];
    h->seq = w->seq;
    snprintf(h->lease_id, sizeof h->lease_id, "%s", lease_id);
    size_t hits = 0;
    for (size_t i = 0; i < w->n; i++)
        hits += strcmp(w->parked[i].lease_id, lease_id) == 0;
    if (hits > 0 && (out = malloc(hits * sizeof *out)) != NULL) {
        k = take(w, lease_id, 0, out);
        w->stats.woken_by_end += k;
    }
    pthread_mutex_unlock(&w->lock);
    /* out of memory: they stay parked until their wait ends */
    wake_all(out, k);
    free(out);
}

static void on_heard(void *arg, const char *lease_id)
{
    leased_watch_t *w = arg;
    pthread_mutex_lock(&w->lock);
    w->stats.heard++;
    pthread_mutex_unlock(&w->lock);
    on_ended(arg, lease_id);
}

/* The ids to poll (copies), or NULL when nothing is parked. Under lock. */
static char **poll_ids(leased_watch_t *w, size_t *n)
{
    *n = 0;
    if (w->n == 0)
        return NULL;
    char **ids = calloc(w->n, sizeof *ids);
    if (!ids)
        return NULL;
    for (size_t i = 0; i < w->n; i++) {
        ids[i] = strdup(w->parked[i].lease_id);
        if (!ids[i]) {
            for (size_t j = 0; j < i; j++)
                free(ids[j]);
            free(ids);
            return NULL;
        }
    }
    *n = w->n;
    return ids;
}

static void *hub_main(void *arg)
{
    leased_watch_t *w = arg;
    bool poll_now = false;
    pthread_mutex_lock(&w->lock);
    while (!w->stop) {
        int64_t now = lease_mono_now_ns();
        parked_t *expired = w->n ? malloc(w->n * sizeof *expired) : NULL;
        size_t k = expired ? take(w, NULL, now, expired) : 0;
        size_t n_ids = 0;
        char **ids = NULL;
        if (w->n > 0 && (poll_now || now >= w->next_poll_ns)) {
            ids = poll_ids(w, &n_ids);
            w->next_poll_ns = now + w->cfg.poll_ms * 1000000;
        }
        pthread_mutex_unlock(&w->lock);
        wake_all(expired, k);
        free(expired);
        if (ids) {
            lease_deadline_t dl = lease_deadline_in(POLL_BUDGET_MS);
            lease_code_t code =
                lease_listener_poll(w->listener, (const char *const *)ids, n_ids, &dl, on_ended, w);
            for (size_t i = 0; i < n_ids; i++)
                free(ids[i]);
            free(ids);
            pthread_mutex_lock(&w->lock);
            if (code == LEASE_INSPECTED)
                w->stats.polls++;
            else
                w->stats.poll_failures++;
            pthread_mutex_unlock(&w->lock);
            poll_now = false;
        }

        pthread_mutex_lock(&w->lock);
        now = lease_mono_now_ns();
        int64_t next = now + IDLE_WAIT_MS * 1000000LL;
        for (size_t i = 0; i < w->n; i++)
            if (w->parked[i].until_ns < next)
                next = w->parked[i].until_ns;
        if (w->n > 0 && w->next_poll_ns < next)
            next = w->next_poll_ns;
        w->planned_wake_ns = next;
        bool stop = w->stop;
        pthread_mutex_unlock(&w->lock);
        if (stop)
            break;
        int64_t timeout_ms = next > now ? (next - now + 999999) / 1000000 : 0;
        bool new_session = false;
        (void)lease_listener_wait(w->listener, w->efd, timeout_ms, on_heard, w, &new_session);
        uint64_t drained;
        while (read(w->efd, &drained, sizeof drained) > 0)
            ;
        /* a new session heard nothing of what ended while there was none */
        if (new_session)
            poll_now = true;
        pthread_mutex_lock(&w->lock);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

bool leased_watch_start(leased_watch_t *w)
{
    if (pthread_create(&w->thread, NULL, hub_main, w) != 0)
        return false;
    w->thread_running = true;
    return true;
}

void leased_watch_release_all(leased_watch_t *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->stopping = true;
    parked_t *out = w->n ? malloc(w->n * sizeof *out) : NULL;
    size_t k = 0;
    if (out) {
        memcpy(out, w->parked, w->n * sizeof *out);
        k = w->n;
        w->n = 0;
    } else {
        /* out of memory: make every wait end now; the thread wakes them */
        for (size_t i = 0; i < w->n; i++)
            w->parked[i].until_ns = 0;
    }
    pthread_mutex_unlock(&w->lock);
    wake_all(out, k);
    free(out);
    kick(w);
}

void leased_watch_free(leased_watch_t *w)
{
    if (!w)
        return;
    leased_watch_release_all(w);
    pthread_mutex_lock(&w->lock);
    w->stop = true;
    pthread_mutex_unlock(&w->lock);
    kick(w);
    if (w->thread_running)
        pthread_join(w->thread, NULL);
    /* anything parked after release_all was refused; nothing is left */
    lease_listener_close(w->listener);
    close(w->efd);
    pthread_mutex_destroy(&w->lock);
    free(w->parked);
    free(w);
}
