/*
 * sweeper.h - the background thread that keeps the store tidy and the
 * readiness picture fresh.
 *
 * Every sweep interval it runs the housekeeping steps, each its own
 * transaction (lease_store_housekeep): the namespace check, then expiry and
 * retention purging in bounded batches, each repeated while its batch came
 * back full and half the interval is not spent, so that housekeeping keeps
 * up with traffic without monopolising anything. The SQL side takes a
 * transaction advisory lock, so across instances one step runs at a time;
 * the others answer "did not run". A failed step is retried at the next
 * interval and logged at warn (at most once a minute per step, with how
 * many failures the quiet minute hid). Every health interval it calls
 * lease_store_health and keeps the answer for /readyz and /metrics, so
 * neither ever waits on the database.
 */
#ifndef LEASED_SWEEPER_H
#define LEASED_SWEEPER_H

#include <stdbool.h>
#include <stdint.h>

#include "lease/store.h"

typedef struct leased_sweeper leased_sweeper_t;

typedef struct leased_sweeper_config {
    int64_t sweep_interval_ms;
    int sweep_batch;
    int64_t health_interval_ms;
} leased_sweeper_config_t;

/* What each housekeeping step (lease_housekeeping_step_t) did since start. */
typedef struct leased_step_stats {
    uint64_t successes;      /* calls that answered (ran or found another instance running) */
    uint64_t failures;       /* calls the store could not do */
    uint64_t failure_streak; /* failures since the last success */
    uint64_t failure_streak_max;
    int64_t last_success_ns; /* monotonic; 0: none yet */
} leased_step_stats_t;

typedef struct leased_sweeper_stats {
    uint64_t runs;     /* sweep intervals whose expiry step held the lock and ran */
    uint64_t expired;  /* leases moved to history */
    uint64_t failures; /* sweep intervals in which some step failed */
    leased_step_stats_t step[LEASE_STEP_COUNT];
    uint64_t purged[LEASE_TABLE_COUNT];     /* rows deleted past retention */
    int64_t purge_lag_ms[LEASE_TABLE_COUNT]; /* after the last purge: oldest row left past retention */
    uint64_t sessions_purged; /* ended sessions deleted past retention (PostgreSQL) */
    int64_t expire_lag_ms; /* the last expiry step: how long ago the oldest lease it found expired */
    int64_t started_ns;    /* monotonic, when the sweeper was created */
    int64_t interval_ms;
} leased_sweeper_stats_t;

/* The metric label of a step: "namespace", "expire", "purge". */
const char *leased_step_name(lease_housekeeping_step_t step);
/* The metric label of a table: "idempotency", "history", "lease_index", "audit_events". */
const char *leased_table_name(lease_retention_table_t table);

/* store is borrowed. NULL when out of memory. */
leased_sweeper_t *leased_sweeper_new(lease_store_t *store, const leased_sweeper_config_t *cfg);
/* Starts the thread; the first health probe runs at once. */
LEASE_MUST_USE bool leased_sweeper_start(leased_sweeper_t *s);
void leased_sweeper_stop(leased_sweeper_t *s);
void leased_sweeper_free(leased_sweeper_t *s);

/*
 * The last health answer. Returns false before the first probe finished.
 * A probe that failed reports reachable = false. *age_ms is the time since
 * that probe finished.
 */
bool leased_sweeper_health(leased_sweeper_t *s, lease_health_t *out, int64_t *age_ms);
void leased_sweeper_stats(leased_sweeper_t *s, leased_sweeper_stats_t *out);

#endif
