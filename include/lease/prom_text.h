/*
 * prom_text.h - building Prometheus text exposition (format 0.0.4), for
 * leased's and leased-relay's GET /metrics.
 *
 * A growing buffer: an allocation failure leaves it failed, later writes do
 * nothing, and lease_prom_finish answers NULL. Callers write the
 * families in order and need not check each write.
 */
#ifndef LEASE_PROM_TEXT_H
#define LEASE_PROM_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lease/result.h"

typedef struct lease_metrics_text {
    char *buf;
    size_t len, cap;
    bool failed;
} lease_prom_text_t;

/* Starts an empty text with room for cap bytes; false when out of memory. */
LEASE_MUST_USE bool lease_prom_init(lease_prom_text_t *t, size_t cap);

/* Appends printf-formatted text. */
void lease_prom_emit(lease_prom_text_t *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* One family of one sample: HELP, TYPE and the value. */
void lease_prom_counter(lease_prom_text_t *t, const char *name, const char *help, uint64_t v);
void lease_prom_gauge(lease_prom_text_t *t, const char *name, const char *help, double v);

/* The text (heap, free()) or NULL when any write failed (then freed). */
LEASE_MUST_USE char *lease_prom_finish(lease_prom_text_t *t);

#endif
