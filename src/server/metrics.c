/*
 * metrics.c - counters and histograms of requests, and the text exposition.
 *
 * Cells are plain uint64_t updated with relaxed atomics: a scrape may see a
 * count and a sum from slightly different instants, which Prometheus
 * tolerates. Latency buckets are fixed (seconds) and cover the deadline
 * range; the +Inf bucket is the count.
 */
#include "metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lease/clock.h"
#include "lease/process_metrics.h"
#include "lease/prom_text.h"

#ifndef LEASE_VERSION
#error "LEASE_VERSION must be defined by the build"
#endif

static const double bucket_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                       0.25,  0.5,    1,     2.5,  5,     10,   30};
#define N_BUCKETS (sizeof bucket_bounds / sizeof bucket_bounds[0])

typedef struct route_cells {
    uint64_t requests[LEASED_METRICS_CODE_SLOTS];
    uint64_t buckets[N_BUCKETS];
    uint64_t count;
    uint64_t sum_ns;
} route_cells_t;

struct leased_metrics {
    size_t n; /* routes; cells has n + 1 entries (unmatched last) */
    const char *const *names;
    route_cells_t *cells;
};

leased_metrics_t *leased_metrics_new(size_t n, const char *const *route_names)
{
    leased_metrics_t *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->cells = calloc(n + 1, sizeof *m->cells);
    if (!m->cells) {
        free(m);
        return NULL;
    }
    m->n = n;
    m->names = route_names;
    return m;
}

void leased_metrics_free(leased_metrics_t *m)
{
    if (!m)
        return;
    free(m->cells);
    free(m);
}

static const char *slot_name(int slot)
{
    if (slot == LEASED_METRICS_CODE_OK)
        return "ok";
    if (slot == LEASED_METRICS_CODE_NOT_READY)
        return "not_ready";
    return lease_code_name((lease_code_t)slot);
}

int leased_metrics_code_slot(const char *label)
{
    lease_code_t code;
    if (strcmp(label, "not_ready") == 0)
        return LEASED_METRICS_CODE_NOT_READY;
    if (lease_code_parse(label, &code))
        return (int)code;
    return LEASED_METRICS_CODE_OK;
}

void leased_metrics_observe(leased_metrics_t *m, size_t route, int code_slot, int64_t latency_ns)
{
    if (route > m->n)
        route = m->n;
    if (code_slot < 0 || code_slot >= LEASED_METRICS_CODE_SLOTS)
        code_slot = LEASE_BACKEND_UNAVAILABLE;
    if (latency_ns < 0)
        latency_ns = 0;
    route_cells_t *c = &m->cells[route];
    __atomic_add_fetch(&c->requests[code_slot], 1, __ATOMIC_RELAXED);
    double secs = (double)latency_ns / 1e9;
    for (size_t b = 0; b < N_BUCKETS; b++)
        if (secs <= bucket_bounds[b])
            __atomic_add_fetch(&c->buckets[b], 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&c->count, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&c->sum_ns, (uint64_t)latency_ns, __ATOMIC_RELAXED);
}

uint64_t leased_metrics_requests(const leased_metrics_t *m, size_t route, int code_slot)
{
    if (route > m->n || code_slot < 0 || code_slot >= LEASED_METRICS_CODE_SLOTS)
        return 0;
    return __atomic_load_n(&m->cells[route].requests[code_slot], __ATOMIC_RELAXED);
}

static const char *route_label(const leased_metrics_t *m, size_t r)
{
    return r < m->n ? m->names[r] : "unmatched";
}

/* The HTTP status a code slot answers with: a lease code's own, 200 for the
 * health routes, 503 for /readyz when not ready. */
static int slot_status(int slot)
{
    if (slot == LEASED_METRICS_CODE_OK)
        return 200;
    if (slot == LEASED_METRICS_CODE_NOT_READY)
        return 503;
    return lease_code_http_status((lease_code_t)slot);
}

/* leased_http_responses_total{route,status}: the same requests as
 * leased_http_requests_total summed by HTTP status at scrape time, so an
 * alert on 5xx needs no list of codes and the request path counts once. */
static void render_responses(lease_prom_text_t *t, const leased_metrics_t *m)
{
    lease_prom_emit(t, "# HELP leased_http_responses_total HTTP requests by route and HTTP status "
                       "(leased_http_requests_total summed by status).\n"
                       "# TYPE leased_http_responses_total counter\n");
    for (size_t r = 0; r <= m->n; r++) {
        uint64_t by_status[600] = {0};
        for (int s = 0; s < LEASED_METRICS_CODE_SLOTS; s++) {
            int status = slot_status(s);
            if (status >= 100 && status < 600)
                by_status[status] += __atomic_load_n(&m->cells[r].requests[s], __ATOMIC_RELAXED);
        }
        for (int status = 100; status < 600; status++)
            if (by_status[status])
                lease_prom_emit(t, "leased_http_responses_total{route=\"%s\",status=\"%d\"} %llu\n",
                                route_label(m, r), status, (unsigned long long)by_status[status]);
    }
}

static void render_requests(lease_prom_text_t *t, const leased_metrics_t *m)
{
    lease_prom_emit(t, "# HELP leased_http_requests_total HTTP requests by route and result code.\n"
                       "# TYPE leased_http_requests_total counter\n");
    for (size_t r = 0; r <= m->n; r++)
        for (int s = 0; s < LEASED_METRICS_CODE_SLOTS; s++) {
            uint64_t v = __atomic_load_n(&m->cells[r].requests[s], __ATOMIC_RELAXED);
            if (v)
                lease_prom_emit(t, "leased_http_requests_total{route=\"%s\",code=\"%s\"} %llu\n",
                                route_label(m, r), slot_name(s), (unsigned long long)v);
        }
    lease_prom_emit(t, "# HELP leased_http_request_duration_seconds Time from request received to "
                       "response queued.\n# TYPE leased_http_request_duration_seconds histogram\n");
    for (size_t r = 0; r <= m->n; r++) {
        const route_cells_t *c = &m->cells[r];
        const char *name = route_label(m, r);
        for (size_t b = 0; b < N_BUCKETS; b++)
            lease_prom_emit(
                t, "leased_http_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} %llu\n",
                name, bucket_bounds[b],
                (unsigned long long)__atomic_load_n(&c->buckets[b], __ATOMIC_RELAXED));
        unsigned long long count = __atomic_load_n(&c->count, __ATOMIC_RELAXED);
        lease_prom_emit(
            t, "leased_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n", name,
            count);
        lease_prom_emit(t, "leased_http_request_duration_seconds_sum{route=\"%s\"} %.9f\n", name,
                        (double)__atomic_load_n(&c->sum_ns, __ATOMIC_RELAXED) / 1e9);
        lease_prom_emit(t, "leased_http_request_duration_seconds_count{route=\"%s\"} %llu\n", name,
                        count);
    }
}

/* Each housekeeping step's successes, failures and age of its last
 * success, and each retention table's purged rows and lag: what the alert
 * rules LeasedHousekeepingStalled and LeasedRetentionBehind watch
 * (docs/operators.md, "Housekeeping"). */
static void render_housekeeping(lease_prom_text_t *t, const leased_sweeper_stats_t *h)
{
    int64_t now = lease_mono_now_ns();
    lease_prom_emit(t, "# HELP leased_housekeeping_successes_total Housekeeping steps that "
                       "answered, by step.\n# TYPE leased_housekeeping_successes_total counter\n");
    for (int s = 0; s < LEASE_STEP_COUNT; s++)
        lease_prom_emit(t, "leased_housekeeping_successes_total{step=\"%s\"} %llu\n",
                        leased_step_name((lease_housekeeping_step_t)s),
                        (unsigned long long)h->step[s].successes);
    lease_prom_emit(t, "# HELP leased_housekeeping_failures_total Housekeeping steps that "
                       "failed (retried next interval), by step.\n"
                       "# TYPE leased_housekeeping_failures_total counter\n");
    for (int s = 0; s < LEASE_STEP_COUNT; s++)
        lease_prom_emit(t, "leased_housekeeping_failures_total{step=\"%s\"} %llu\n",
                        leased_step_name((lease_housekeeping_step_t)s),
                        (unsigned long long)h->step[s].failures);
    lease_prom_emit(t, "# HELP leased_housekeeping_failure_streak_max The most failures of a "
                       "step in a row since start.\n"
                       "# TYPE leased_housekeeping_failure_streak_max gauge\n");
    for (int s = 0; s < LEASE_STEP_COUNT; s++)
        lease_prom_emit(t, "leased_housekeeping_failure_streak_max{step=\"%s\"} %llu\n",
                        leased_step_name((lease_housekeeping_step_t)s),
                        (unsigned long long)h->step[s].failure_streak_max);
    lease_prom_emit(t, "# HELP leased_housekeeping_last_success_age_seconds Seconds since the "
                       "step last succeeded (since start when it never has).\n"
                       "# TYPE leased_housekeeping_last_success_age_seconds gauge\n");
    for (int s = 0; s < LEASE_STEP_COUNT; s++) {
        int64_t since = h->step[s].last_success_ns ? h->step[s].last_success_ns : h->started_ns;
        lease_prom_emit(t, "leased_housekeeping_last_success_age_seconds{step=\"%s\"} %.3f\n",
                        leased_step_name((lease_housekeeping_step_t)s),
                        since ? (double)(now - since) / 1e9 : 0.0);
    }
    lease_prom_gauge(t, "leased_housekeeping_interval_seconds",
                     "The sweep interval (LEASE_SWEEP_INTERVAL_MS).", (double)h->interval_ms / 1e3);
    lease_prom_gauge(t, "leased_housekeeping_expiry_lag_seconds",
                     "At the last expiry step: how long ago the oldest lease it found expired.",
                     (double)h->expire_lag_ms / 1e3);
    lease_prom_emit(t, "# HELP leased_housekeeping_purged_rows_total Rows deleted past "
                       "retention, by table.\n# TYPE leased_housekeeping_purged_rows_total counter\n");
    for (int i = 0; i < LEASE_TABLE_COUNT; i++)
        lease_prom_emit(t, "leased_housekeeping_purged_rows_total{table=\"%s\"} %llu\n",
                        leased_table_name((lease_retention_table_t)i),
                        (unsigned long long)h->purged[i]);
    /* ended sessions (lease.sessions, schema 28): no retention of their
     * own (they go with the idempotency retention), so no lag below */
    lease_prom_emit(t, "leased_housekeeping_purged_rows_total{table=\"sessions\"} %llu\n",
                    (unsigned long long)h->sessions_purged);
    lease_prom_emit(t, "# HELP leased_housekeeping_retention_lag_seconds After the last purge: "
                       "how far past retention the oldest row left is (0: none), by table.\n"
                       "# TYPE leased_housekeeping_retention_lag_seconds gauge\n");
    for (int i = 0; i < LEASE_TABLE_COUNT; i++)
        lease_prom_emit(t, "leased_housekeeping_retention_lag_seconds{table=\"%s\"} %.3f\n",
                        leased_table_name((lease_retention_table_t)i),
                        (double)h->purge_lag_ms[i] / 1e3);
}

char *leased_metrics_render(const leased_metrics_t *m, const leased_metrics_gauges_t *g)
{
    lease_prom_text_t t;
    if (!lease_prom_init(&t, 16384))
        return NULL;
    lease_prom_build_info(&t, "leased_build_info", LEASE_VERSION);
    render_requests(&t, m);
    render_responses(&t, m);
    lease_prom_gauge(&t, "leased_http_inflight", "Requests admitted and not yet answered.",
                     (double)g->inflight);
    lease_prom_counter(&t, "leased_admission_rate_limited_total",
                       "Requests refused by a credential's token bucket.", g->rejected_rate);
    lease_prom_counter(&t, "leased_admission_inflight_rejected_total",
                       "Requests refused by the global in-flight bound.", g->rejected_inflight);
    lease_prom_counter(
        &t, "leased_admission_source_rate_limited_total",
        "Requests refused by a client address's token bucket (before authentication).",
        g->rejected_source);
    lease_prom_counter(
        &t, "leased_admission_lookups_refused_total",
        "Credential lookups refused: the client address's authentications kept failing.",
        g->rejected_lookups);
    lease_prom_counter(
        &t, "leased_admission_share_rejected_total",
        "Requests refused by a credential's or tenant's share of requests in flight.",
        g->rejected_share);
    lease_prom_gauge(&t, "leased_http_connections_open", "Client connections open.",
                     (double)g->connections_open);
    lease_prom_counter(&t, "leased_http_connections_refused_capacity_total",
                       "Connections answered 503 and closed: LEASE_MAX_CONNECTIONS were open.",
                       g->connections_refused_capacity);
    lease_prom_counter(&t, "leased_http_connections_refused_source_total",
                       "Connections answered 429 and closed: their address held "
                       "LEASE_MAX_CONNECTIONS_PER_SOURCE.",
                       g->connections_refused_source);
    lease_prom_counter(&t, "leased_http_receive_timeouts_total",
                       "Requests answered 408: not received within LEASE_RECEIVE_TIMEOUT_MS.",
                       g->receive_timeouts);
    lease_prom_counter(&t, "leased_http_framing_refused_total",
                       "Requests refused by the HTTP framing rules (answered 400 and closed).",
                       g->framing_refused);
    lease_prom_counter(&t, "leased_http_connections_evicted_total",
                       "Connections closed to make room (idle, or nothing sent yet, of the source "
                       "holding the most; a trickled head past its grace).",
                       g->connections_evicted);
    lease_prom_gauge(&t, "leased_http_queued", "Requests waiting for a worker, in all flows.",
                     (double)g->queued);
    lease_prom_gauge(&t, "leased_http_queue_flows",
                     "Flows (tenants, or client addresses without a cached credential) with "
                     "requests waiting for a worker.",
                     (double)g->queue_flows);
    lease_prom_counter(&t, "leased_http_queue_refused_total",
                       "Requests answered 429 before running: their flow held "
                       "LEASE_MAX_QUEUED_PER_FLOW waiting requests.",
                       g->queue_refused_full);
    lease_prom_counter(&t, "leased_http_queue_expired_total",
                       "Requests answered 429 before running: they waited "
                       "LEASE_MAX_QUEUE_WAIT_MS for a worker.",
                       g->queue_refused_waited);
    lease_prom_counter(&t, "leased_audit_refusals_aggregated_total",
                       "Refusals counted into aggregated audit events (one per source and window).",
                       g->audit_aggregated);
    lease_prom_gauge(&t, "leased_db_pool_size", "Database connections configured.",
                     (double)g->store.pool_size);
    lease_prom_gauge(&t, "leased_db_pool_in_use", "Database connections lent out.",
                     (double)g->store.pool_in_use);
    lease_prom_gauge(&t, "leased_db_pool_waiting", "Callers waiting for a database connection.",
                     (double)g->store.pool_waiting);
    lease_prom_counter(&t, "leased_db_serialization_retries_total",
                       "Calls repeated after a serialization failure or deadlock.",
                       g->store.serialization_retries);
    lease_prom_counter(&t, "leased_db_outcome_unknown_total",
                       "Lease mutations whose outcome is unknown (sent, then the session failed); "
                       "the caller resolves each by repeating its request id.",
                       g->store.outcome_unknown);
    lease_prom_counter(&t, "leased_db_backend_errors_total", "Calls that failed in the backend.",
                       g->store.backend_errors);
    lease_prom_counter(
        &t, "leased_namespace_sealed_refusals_total",
        "Acquisitions, renewals and commits refused because the namespace is sealed.",
        g->store.sealed_refusals);
    lease_prom_counter(&t, "leased_valkey_combined_calls_total",
                       "Valkey: function calls that carried the requests of several workers "
                       "(LEASE_VALKEY_COMBINE_ITEMS).",
                       g->store.combined_calls);
    lease_prom_counter(&t, "leased_valkey_combined_items_total",
                       "Valkey: acquisitions, renewals and releases carried by those calls.",
                       g->store.combined_items);
    lease_prom_gauge(&t, "leased_audit_queue_depth", "Audit events waiting to be written.",
                     (double)g->audit_depth);
    lease_prom_counter(&t, "leased_audit_events_written_total",
                       "Audit events written to the database.", g->audit_written);
    lease_prom_counter(&t, "leased_audit_events_dropped_total",
                       "Audit events dropped: the queue was full.", g->audit_dropped);
    lease_prom_counter(&t, "leased_audit_events_fallback_total",
                       "Audit events logged because the database refused them.", g->audit_fallback);
    lease_prom_counter(&t, "leased_audit_admission_refused_total",
                       "Requests refused (429): their tenant's audit events waiting were over its "
                       "fair share of the audit queue.",
                       g->audit_refused);
    lease_prom_counter(&t, "leased_sweep_runs_total", "Sweeps that ran (held the sweep lock).",
                       g->sweep_runs);
    lease_prom_counter(&t, "leased_sweep_expired_total",
                       "Leases the sweeper moved to history as expired.", g->sweep_expired);
    lease_prom_counter(&t, "leased_sweep_failures_total", "Sweeps that failed.", g->sweep_failures);
    render_housekeeping(&t, &g->housekeeping);
    lease_prom_gauge(&t, "leased_watches_waiting", "Watch requests parked until their lease ends.",
                     (double)g->watches_parked);
    lease_prom_gauge(&t, "leased_watch_listening",
                     "1 while the watch session LISTENs for ended leases (0: polling or down).",
                     g->watch_mode == 1 ? 1 : 0);
    lease_prom_gauge(&t, "leased_watch_session_up",
                     "1 while the watch session exists (listening or polling).",
                     g->watch_mode != 0 ? 1 : 0);
    lease_prom_counter(&t, "leased_watch_notifications_total", "Ended-lease notifications heard.",
                       g->watch_heard);
    lease_prom_counter(&t, "leased_watch_polls_total", "Batched checks of the watched leases.",
                       g->watch_polls);
    lease_prom_counter(&t, "leased_watch_poll_failures_total", "Batched checks that failed.",
                       g->watch_poll_failures);
    lease_prom_counter(&t, "leased_watch_woken_by_end_total",
                       "Parked watches woken because their lease ended (heard or polled).",
                       g->watch_woken_by_end);
    lease_prom_counter(&t, "leased_watch_refused_total",
                       "Watches refused: LEASE_MAX_WATCHES were waiting.", g->watch_refused);
    /* exact as an integer (a double would round tokens past 2^53):
     * `leasectl recover --floor-from` reads it as its floor */
    lease_prom_emit(&t, "# HELP leased_fencing_token_max The highest fencing token this process "
                        "has answered since it started; 0 when none.\n"
                        "# TYPE leased_fencing_token_max gauge\n"
                        "leased_fencing_token_max %lld\n",
                    (long long)g->fencing_token_max);
    lease_prom_gauge(&t, "leased_ready", "1 when /readyz answers 200.", g->ready ? 1 : 0);
    lease_prom_gauge(&t, "leased_draining", "1 after SIGTERM.", g->draining ? 1 : 0);
    if (g->health_known) {
        lease_prom_gauge(&t, "leased_active_leases", "Active leases (last health probe).",
                         (double)g->health.active_leases);
        lease_prom_gauge(&t, "leased_schema_version", "Schema version of the database.",
                         (double)g->health.schema_version);
        lease_prom_gauge(&t, "leased_namespace_sealed", "1 while the namespace is sealed.",
                         g->health.sealed ? 1 : 0);
        lease_prom_gauge(&t, "leased_database_reachable",
                         "1 when the last probe reached the database.",
                         g->health.reachable ? 1 : 0);
    }
    lease_prom_process(&t);
    return lease_prom_finish(&t);
}
