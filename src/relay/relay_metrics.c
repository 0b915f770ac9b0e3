/*
 * relay_metrics.c - the text exposition of relay_metrics_t.
 */
#include "relay_metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct text {
    char *buf;
    size_t len, cap;
    bool failed;
} text_t;

static void emit(text_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(text_t *t, const char *fmt, ...)
{
    while (!t->failed) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = true;
            return;
        }
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap * 2 + (size_t)n;
        char *grown = realloc(t->buf, cap);
        if (!grown) {
            t->failed = true;
            return;
        }
        t->buf = grown;
        t->cap = cap;
    }
}

static void counter(text_t *t, const char *name, const char *help, uint64_t v)
{
    emit(t, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name,
         (unsigned long long)v);
}

static void gauge(text_t *t, const char *name, const char *help, double v)
{
    emit(t, "# HELP %s %s\n# TYPE %s gauge\n%s %.17g\n", name, help, name, name, v);
}

char *relay_metrics_render(relay_metrics_t *m)
{
    text_t t = {malloc(4096), 0, 4096, false};
    if (!t.buf)
        return NULL;
    emit(&t,
         "# HELP relay_published_total Outbox rows marked published after their "
         "destination confirmed them.\n# TYPE relay_published_total counter\n"
         "relay_published_total{destination=\"amqp\"} %llu\n"
         "relay_published_total{destination=\"couchdb\"} %llu\n",
         (unsigned long long)RELAY_METRIC_GET(m, published_amqp),
         (unsigned long long)RELAY_METRIC_GET(m, published_couchdb));
    counter(&t, "relay_refused_total",
            "Outbox rows the destination's fence refused for good (a higher token wrote first).",
            RELAY_METRIC_GET(m, refused));
    counter(&t, "relay_deferred_total",
            "Outbox rows put back for a later try (returned, nacked, CouchDB unavailable).",
            RELAY_METRIC_GET(m, deferred));
    counter(&t, "relay_batches_total", "Delivery transactions committed.",
            RELAY_METRIC_GET(m, batches));
    counter(&t, "relay_batch_failures_total",
            "Delivery transactions ended by a broker or database failure.",
            RELAY_METRIC_GET(m, batch_failures));
    counter(&t, "relay_broker_connects_total", "Successful connections to the broker.",
            RELAY_METRIC_GET(m, broker_connects));
    counter(&t, "relay_database_connects_total", "Successful connections to the database.",
            RELAY_METRIC_GET(m, db_connects));
    if (RELAY_METRIC_GET(m, lag_known)) {
        gauge(&t, "relay_lag_rows", "Outbox rows not yet published (last measurement).",
              (double)RELAY_METRIC_GET(m, lag_rows));
        gauge(&t, "relay_lag_deferred_rows",
              "Unpublished outbox rows waiting for a retry (last measurement).",
              (double)RELAY_METRIC_GET(m, deferred_rows));
        gauge(&t, "relay_lag_seconds",
              "Age of the oldest unpublished outbox row, seconds (last measurement).",
              (double)RELAY_METRIC_GET(m, lag_millis) / 1000.0);
    }
    gauge(&t, "relay_broker_up", "1 while connected to the broker.",
          (double)RELAY_METRIC_GET(m, broker_up));
    gauge(&t, "relay_database_up", "1 while connected to the database.",
          (double)RELAY_METRIC_GET(m, database_up));
    gauge(&t, "relay_draining", "1 after SIGTERM or SIGINT.",
          (double)RELAY_METRIC_GET(m, draining));
    if (t.failed) {
        free(t.buf);
        return NULL;
    }
    return t.buf;
}
