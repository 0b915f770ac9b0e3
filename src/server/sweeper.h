/*
 * sweeper.h - the background thread that keeps the store tidy and the
 * readiness picture fresh.
 *
 * Every sweep interval it calls lease_store_sweep (the SQL side takes a
 * transaction advisory lock, so across instances one sweep runs at a time;
 * the others answer "did not run"). Every health interval it calls
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

typedef struct leased_sweeper_stats {
    uint64_t runs;     /* sweeps that held the lock and ran */
    uint64_t expired;  /* leases moved to history */
    uint64_t failures; /* sweeps the store could not do */
} leased_sweeper_stats_t;

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
