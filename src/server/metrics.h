/*
 * metrics.h - the Prometheus registry of leased (text format 0.0.4).
 *
 * Request counters and latency histograms are updated lock-free on the
 * request path; gauges (pool, audit queue, active leases, readiness) are
 * passed in at scrape time from values other modules already hold in
 * memory, so a scrape never touches the database.
 */
#ifndef LEASED_METRICS_H
#define LEASED_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lease/store.h"
#include "sweeper.h"

typedef struct leased_metrics leased_metrics_t;

/* Code slots besides the lease codes: health routes answer these. */
enum {
    LEASED_METRICS_CODE_OK = LEASE_CODE_COUNT, /* healthz/readyz/metrics 200 */
    LEASED_METRICS_CODE_NOT_READY,             /* readyz 503 */
    LEASED_METRICS_CODE_SLOTS
};

/* route_names: n labels (the route table's names); one more slot,
 * "unmatched", counts requests no route matched. NULL when out of memory. */
leased_metrics_t *leased_metrics_new(size_t n, const char *const *route_names);
void leased_metrics_free(leased_metrics_t *m);

/* route: index into route_names, or n for unmatched; code_slot: a
 * lease_code_t or LEASED_METRICS_CODE_*. */
void leased_metrics_observe(leased_metrics_t *m, size_t route, int code_slot, int64_t latency_ns);
/* Maps a code label ("lease_acquired", "ok", "not_ready") to its slot. */
int leased_metrics_code_slot(const char *label);
uint64_t leased_metrics_requests(const leased_metrics_t *m, size_t route, int code_slot);

typedef struct leased_metrics_gauges {
    lease_store_stats_t store;
    bool health_known; /* at least one probe answered */
    lease_health_t health;
    bool ready;
    bool draining;
    int64_t inflight;
    uint64_t rejected_rate, rejected_inflight;
    uint64_t rejected_source, rejected_lookups, rejected_share;
    int64_t connections_open;
    uint64_t connections_refused_capacity, connections_refused_source;
    uint64_t receive_timeouts, framing_refused, connections_evicted;
    size_t queued, queue_flows; /* requests waiting for a worker, their flows */
    uint64_t queue_refused_full, queue_refused_waited; /* 429: flow queue full, waited too long */
    uint64_t audit_aggregated;
    uint64_t audit_refused; /* admissions refused: the tenant over its audit share */
    size_t audit_depth;
    uint64_t audit_written, audit_dropped, audit_fallback;
    uint64_t sweep_runs, sweep_expired, sweep_failures;
    leased_sweeper_stats_t housekeeping; /* per step and table (render_housekeeping) */
    size_t watches_parked;
    int watch_mode; /* lease_listener_mode_t: 0 down, 1 listening, 2 polling */
    uint64_t watch_heard, watch_polls, watch_poll_failures, watch_woken_by_end, watch_refused;
    int64_t fencing_token_max; /* leased_service_fencing_token_max */
} leased_metrics_gauges_t;

/* The exposition text; heap string (free()) or NULL when out of memory. */
char *leased_metrics_render(const leased_metrics_t *m, const leased_metrics_gauges_t *g);

#endif
