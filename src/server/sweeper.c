/*
 * sweeper.c - periodic lease_store_sweep and lease_store_health.
 *
 * One thread sleeps on a condition variable (so stop is immediate) until
 * the next sweep or probe is due. Probes and sweeps use a deadline of one
 * interval, so a hung database cannot stall the thread longer than that,
 * and a stale probe shows up as an old age_ms.
 */
#include "sweeper.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lease/clock.h"
#include "lease/log.h"

struct leased_sweeper {
    lease_store_t *store;
    leased_sweeper_config_t cfg;
    pthread_mutex_t mutex;
    pthread_cond_t wake;
    pthread_t thread;
    bool started, stopping;
    bool have_health;
    lease_health_t health;
    int64_t health_at_ns;
    leased_sweeper_stats_t stats;
    bool was_unreachable; /* log transitions, not every failed probe */
};

leased_sweeper_t *leased_sweeper_new(lease_store_t *store, const leased_sweeper_config_t *cfg)
{
    leased_sweeper_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->store = store;
    s->cfg = *cfg;
    pthread_mutex_init(&s->mutex, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&s->wake, &attr);
    pthread_condattr_destroy(&attr);
    return s;
}

static void probe(leased_sweeper_t *s)
{
    lease_health_t h;
    memset(&h, 0, sizeof h);
    lease_deadline_t dl = lease_deadline_in(s->cfg.health_interval_ms);
    lease_code_t code = lease_store_health(s->store, &dl, &h);
    if (!lease_code_is_success(code))
        h.reachable = false;
    if (!h.reachable && !s->was_unreachable)
        LOG_WARN("database health probe failed (%s); not ready", lease_code_name(code));
    else if (h.reachable && s->was_unreachable)
        LOG_INFO("database reachable again");
    s->was_unreachable = !h.reachable;
    pthread_mutex_lock(&s->mutex);
    s->health = h;
    s->have_health = true;
    s->health_at_ns = lease_mono_now_ns();
    pthread_mutex_unlock(&s->mutex);
}

static void sweep(leased_sweeper_t *s)
{
    lease_sweep_result_t r;
    memset(&r, 0, sizeof r);
    lease_deadline_t dl = lease_deadline_in(s->cfg.sweep_interval_ms);
    lease_code_t code = lease_store_sweep(s->store, s->cfg.sweep_batch, &dl, &r);
    pthread_mutex_lock(&s->mutex);
    if (!lease_code_is_success(code)) {
        s->stats.failures++;
    } else if (r.ran) {
        s->stats.runs++;
        s->stats.expired += (uint64_t)(r.expired > 0 ? r.expired : 0);
    }
    pthread_mutex_unlock(&s->mutex);
    if (!lease_code_is_success(code))
        LOG_DEBUG("sweep failed: %s", lease_code_name(code));
    else if (r.ran && (r.expired || r.idempotency_purged || r.history_purged || r.audit_purged))
        LOG_DEBUG("sweep: %lld expired, %lld idempotency, %lld history, %lld audit purged",
                  (long long)r.expired, (long long)r.idempotency_purged,
                  (long long)r.history_purged, (long long)r.audit_purged);
}

static void *sweeper_main(void *arg)
{
    leased_sweeper_t *s = arg;
    /* Sweep (which first checks the namespace for a restore or failover)
     * before the first probe, so readiness reflects a sealed namespace at
     * start. */
    int64_t next_sweep = lease_mono_now_ns();
    int64_t next_probe = next_sweep;
    pthread_mutex_lock(&s->mutex);
    while (!s->stopping) {
        int64_t now = lease_mono_now_ns();
        if (now >= next_probe || now >= next_sweep) {
            bool do_probe = now >= next_probe, do_sweep = now >= next_sweep;
            pthread_mutex_unlock(&s->mutex);
            if (do_sweep) {
                sweep(s);
                next_sweep = lease_mono_now_ns() + s->cfg.sweep_interval_ms * 1000000;
            }
            if (do_probe) {
                probe(s);
                next_probe = lease_mono_now_ns() + s->cfg.health_interval_ms * 1000000;
            }
            pthread_mutex_lock(&s->mutex);
            continue;
        }
        int64_t until = next_probe < next_sweep ? next_probe : next_sweep;
        struct timespec ts = {(time_t)(until / 1000000000), (long)(until % 1000000000)};
        pthread_cond_timedwait(&s->wake, &s->mutex, &ts);
    }
    pthread_mutex_unlock(&s->mutex);
    return NULL;
}

bool leased_sweeper_start(leased_sweeper_t *s)
{
    if (pthread_create(&s->thread, NULL, sweeper_main, s) != 0)
        return false;
    s->started = true;
    return true;
}

void leased_sweeper_stop(leased_sweeper_t *s)
{
    if (!s || !s->started)
        return;
    pthread_mutex_lock(&s->mutex);
    s->stopping = true;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mutex);
    pthread_join(s->thread, NULL);
    s->started = false;
}

void leased_sweeper_free(leased_sweeper_t *s)
{
    if (!s)
        return;
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->mutex);
    free(s);
}

bool leased_sweeper_health(leased_sweeper_t *s, lease_health_t *out, int64_t *age_ms)
{
    pthread_mutex_lock(&s->mutex);
    bool have = s->have_health;
    if (have) {
        *out = s->health;
        *age_ms = (lease_mono_now_ns() - s->health_at_ns) / 1000000;
    }
    pthread_mutex_unlock(&s->mutex);
    return have;
}

void leased_sweeper_stats(leased_sweeper_t *s, leased_sweeper_stats_t *out)
{
    pthread_mutex_lock(&s->mutex);
    *out = s->stats;
    pthread_mutex_unlock(&s->mutex);
}
