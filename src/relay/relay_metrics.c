/*
 * relay_metrics.c - the text exposition of relay_metrics_t.
 */
#include "relay_metrics.h"

#include "lease/process_metrics.h"
#include "lease/prom_text.h"

#ifndef LEASE_VERSION
#error "LEASE_VERSION must be defined by the build"
#endif

char *relay_metrics_render(relay_metrics_t *m)
{
    lease_prom_text_t t;
    if (!lease_prom_init(&t, 4096))
        return NULL;
    lease_prom_build_info(&t, "leased_relay_build_info", LEASE_VERSION);
    lease_prom_emit(&t,
                    "# HELP leased_relay_published_total Outbox rows marked published after their "
                    "destination confirmed them.\n# TYPE leased_relay_published_total counter\n"
                    "leased_relay_published_total{destination=\"amqp\"} %llu\n"
                    "leased_relay_published_total{destination=\"couchdb\"} %llu\n",
                    (unsigned long long)RELAY_METRIC_GET(m, published_amqp),
                    (unsigned long long)RELAY_METRIC_GET(m, published_couchdb));
    lease_prom_counter(
        &t, "leased_relay_refused_total",
        "Outbox rows the destination's fence refused for good (a higher token wrote first).",
        RELAY_METRIC_GET(m, refused));
    lease_prom_counter(&t, "leased_relay_quarantined_total",
                       "Outbox rows set aside (quarantined): their destination refused them for a "
                       "reason retrying cannot fix.",
                       RELAY_METRIC_GET(m, quarantined));
    lease_prom_counter(
        &t, "leased_relay_deferred_total",
        "Outbox rows put back for a later try (returned, nacked, CouchDB unavailable).",
        RELAY_METRIC_GET(m, deferred));
    lease_prom_counter(&t, "leased_relay_batches_total", "Delivery transactions committed.",
                       RELAY_METRIC_GET(m, batches));
    lease_prom_counter(&t, "leased_relay_batch_failures_total",
                       "Delivery transactions ended by a broker or database failure.",
                       RELAY_METRIC_GET(m, batch_failures));
    lease_prom_counter(&t, "leased_relay_broker_connects_total", "Successful connections to the broker.",
                       RELAY_METRIC_GET(m, broker_connects));
    lease_prom_counter(&t, "leased_relay_database_connects_total",
                       "Successful connections to the database.", RELAY_METRIC_GET(m, db_connects));
    if (RELAY_METRIC_GET(m, lag_known)) {
        lease_prom_gauge(&t, "leased_relay_lag_rows", "Outbox rows not yet published (last measurement).",
                         (double)RELAY_METRIC_GET(m, lag_rows));
        lease_prom_gauge(&t, "leased_relay_lag_deferred_rows",
                         "Unpublished outbox rows waiting for a retry (last measurement).",
                         (double)RELAY_METRIC_GET(m, deferred_rows));
        lease_prom_gauge(&t, "leased_relay_lag_seconds",
                         "Age of the oldest unpublished outbox row, seconds (last measurement).",
                         (double)RELAY_METRIC_GET(m, lag_millis) / 1000.0);
    }
    lease_prom_gauge(&t, "leased_relay_broker_up", "1 while connected to the broker.",
                     (double)RELAY_METRIC_GET(m, broker_up));
    lease_prom_gauge(&t, "leased_relay_database_up", "1 while connected to the database.",
                     (double)RELAY_METRIC_GET(m, database_up));
    lease_prom_gauge(&t, "leased_relay_draining", "1 after SIGTERM or SIGINT.",
                     (double)RELAY_METRIC_GET(m, draining));
    lease_prom_process(&t);
    return lease_prom_finish(&t);
}
