/*
 * relay_metrics.h - the relay's counters and gauges and their Prometheus
 * text exposition (format 0.0.4), served by relay_http.c.
 *
 * The relay's loop updates them with relaxed atomics; a scrape reads them
 * without a lock and never touches the database or the broker (the lag
 * gauges are the last values the loop measured).
 */
#ifndef LEASE_RELAY_METRICS_H
#define LEASE_RELAY_METRICS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct relay_metrics {
    uint64_t published_amqp;    /* rows marked published after the broker's ack */
    uint64_t published_couchdb; /* rows marked published after CouchDB took the write */
    uint64_t refused;           /* rows the fence refused (final, marked with the reason) */
    uint64_t deferred;          /* rows put back for a later try */
    uint64_t quarantined;       /* rows set aside: refused for a reason retrying cannot fix */
    uint64_t batches;           /* delivery transactions committed */
    uint64_t batch_failures;    /* delivery transactions ended by a broker or database failure */
    uint64_t broker_connects;   /* successful broker connections */
    uint64_t db_connects;       /* successful database connections */
    int64_t lag_rows;           /* unpublished rows at the last measurement */
    int64_t deferred_rows;      /* of which waiting for a retry */
    int64_t lag_millis;         /* age of the oldest unpublished row, ms */
    int64_t lag_known;          /* 1 once the lag was measured */
    int64_t broker_up;          /* 1 while connected to the broker */
    int64_t database_up;        /* 1 while connected to the database */
    int64_t draining;           /* 1 after SIGTERM */
} relay_metrics_t;

#define RELAY_METRIC_ADD(m, field, n) __atomic_add_fetch(&(m)->field, (n), __ATOMIC_RELAXED)
#define RELAY_METRIC_SET(m, field, v) __atomic_store_n(&(m)->field, (v), __ATOMIC_RELAXED)
#define RELAY_METRIC_GET(m, field) __atomic_load_n(&(m)->field, __ATOMIC_RELAXED)

/* The exposition text; heap (free()) or NULL when out of memory. */
char *relay_metrics_render(relay_metrics_t *m);

#endif
