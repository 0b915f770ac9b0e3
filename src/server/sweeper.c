/*
 * sweeper.c - periodic housekeeping (lease_store_housekeep) and
 * lease_store_health.
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
    int64_t warned_ns[LEASE_STEP_COUNT]; /* last warn of a failed step */
    uint64_t unwarned[LEASE_STEP_COUNT]; /* failures since, not logged */
};

leased_sweeper_t *leased_sweeper_new(lease_store_t *store, const leased_sweeper_config_t *cfg)
{
    leased_sweeper_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->store = store;
    s->cfg = *cfg;
    s->stats.started_ns = lease_mono_now_ns();
    s->stats.interval_ms = cfg->sweep_interval_ms;
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

const char *leased_step_name(lease_housekeeping_step_t step)
{
    static const char *const names[LEASE_STEP_COUNT] = {"namespace", "expire", "purge"};
    return (unsigned)step < LEASE_STEP_COUNT ? names[step] : "unknown";
}

const char *leased_table_name(lease_retention_table_t table)
{
    static const char *const names[LEASE_TABLE_COUNT] = {"idempotency", "history", "lease_index",
                                                         "audit_events"};
    return (unsigned)table < LEASE_TABLE_COUNT ? names[table] : "unknown";
}

/* A failed step at warn, at most once a minute per step: a database that
 * refuses housekeeping for hours must not flood the log, and must not be
 * silent either (it used to be logged at debug only). */
#define STEP_WARN_EVERY_NS (60LL * 1000000000)

typedef struct sweep_pass {
    bool failed;     /* some step failed */
    bool expire_ran; /* the expiry step held the lock at least once */
} sweep_pass_t;

static bool is_stopping(leased_sweeper_t *s)
{
    pthread_mutex_lock(&s->mutex);
    bool stopping = s->stopping;
    pthread_mutex_unlock(&s->mutex);
    return stopping;
}

/* One call of one step; updates the stats. Returns whether another batch
 * is due at once (the step answered "more"). */
static bool run_step(leased_sweeper_t *s, lease_housekeeping_step_t step, sweep_pass_t *pass)
{
    lease_housekeeping_result_t r;
    /* each step has the interval as its deadline: a hung database cannot
     * hold the thread longer than that */
    lease_deadline_t dl = lease_deadline_in(s->cfg.sweep_interval_ms);
    /* half an interval of grace: a lease that has only just expired is
     * likely being taken over by the acquisition waiting for it; expired
     * leases still reach history within two intervals */
    int64_t grace_ms = s->cfg.sweep_interval_ms / 2;
    if (grace_ms > 3600000)
        grace_ms = 3600000;
    lease_code_t code = lease_store_housekeep(s->store, step, s->cfg.sweep_batch, grace_ms, &dl, &r);
    bool ok = lease_code_is_success(code);
    int64_t now = lease_mono_now_ns();
    uint64_t hidden = 0;
    bool warn = false;
    pthread_mutex_lock(&s->mutex);
    leased_step_stats_t *st = &s->stats.step[step];
    if (!ok) {
        st->failures++;
        st->failure_streak++;
        if (st->failure_streak > st->failure_streak_max)
            st->failure_streak_max = st->failure_streak;
        if (now - s->warned_ns[step] >= STEP_WARN_EVERY_NS || s->warned_ns[step] == 0) {
            warn = true;
            hidden = s->unwarned[step];
            s->unwarned[step] = 0;
            s->warned_ns[step] = now;
        } else {
            s->unwarned[step]++;
        }
        pass->failed = true;
    } else {
        st->successes++;
        st->failure_streak = 0;
        st->last_success_ns = now;
        if (step == LEASE_STEP_EXPIRE && r.ran) {
            pass->expire_ran = true;
            s->stats.expired += (uint64_t)(r.expired > 0 ? r.expired : 0);
            s->stats.expire_lag_ms = r.lag_ms;
        }
        if (step == LEASE_STEP_PURGE && r.ran)
            for (int t = 0; t < LEASE_TABLE_COUNT; t++) {
                s->stats.purged[t] += (uint64_t)(r.purged[t] > 0 ? r.purged[t] : 0);
                s->stats.purge_lag_ms[t] = r.purge_lag_ms[t];
            }
        if (step == LEASE_STEP_PURGE && r.ran)
            s->stats.sessions_purged += (uint64_t)(r.sessions_purged > 0 ? r.sessions_purged : 0);
    }
    uint64_t streak = st->failure_streak;
    pthread_mutex_unlock(&s->mutex);
    if (warn)
        LOG_WARN("housekeeping step %s failed: %s (%llu in a row; %llu more failures not logged "
                 "in the last minute); retried next interval",
                 leased_step_name(step), lease_code_name(code), (unsigned long long)streak,
                 (unsigned long long)hidden);
    else if (ok && r.ran && (r.expired || r.purged[0] || r.purged[1] || r.purged[2] || r.purged[3]))
        LOG_DEBUG("housekeeping %s: %lld expired; %lld idempotency, %lld history, %lld lease index, "
                  "%lld audit purged",
                  leased_step_name(step), (long long)r.expired, (long long)r.purged[0],
                  (long long)r.purged[1], (long long)r.purged[2], (long long)r.purged[3]);
    return ok && r.ran && r.more;
}

/* Every step in turn; expiry and purging repeat while their batch came
 * back full, within half an interval, so that they keep up with traffic
 * in bounded transactions and the next interval still starts on time. */
static void sweep(leased_sweeper_t *s)
{
    sweep_pass_t pass = {false, false};
    int64_t budget_end = lease_mono_now_ns() + s->cfg.sweep_interval_ms * 1000000 / 2;
    for (int step = 0; step < LEASE_STEP_COUNT && !is_stopping(s); step++) {
        while (run_step(s, (lease_housekeeping_step_t)step, &pass) && !is_stopping(s) &&
               lease_mono_now_ns() < budget_end) {
        }
    }
    pthread_mutex_lock(&s->mutex);
    if (pass.failed)
        s->stats.failures++;
    if (pass.expire_ran)
        s->stats.runs++;
    pthread_mutex_unlock(&s->mutex);
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
                /* at a fixed rate, from the start of each sweep: a lease
                 * that expired reaches history within the grace plus one
                 * interval however long the steps took (a sweep that ran
                 * over is followed at once) */
                next_sweep = now + s->cfg.sweep_interval_ms * 1000000;
                sweep(s);
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
