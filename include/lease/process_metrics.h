/*
 * process_metrics.h - the standard process_* families and a build_info
 * gauge, for leased's and leased-relay's GET /metrics.
 *
 * The names are those of the Prometheus client libraries' process
 * collector, so dashboards and alerts written for any exporter work on
 * both programs. Values are read from /proc/self at scrape time.
 */
#ifndef LEASE_PROCESS_METRICS_H
#define LEASE_PROCESS_METRICS_H

#include "lease/prom_text.h"

/* Appends process_cpu_seconds_total, process_resident_memory_bytes,
 * process_virtual_memory_bytes, process_open_fds, process_max_fds and
 * process_start_time_seconds; a value that cannot be read is left out. */
void lease_prom_process(lease_prom_text_t *t);

/* Appends NAME{version="...",schema="N"} 1: the version of this build and
 * the schema version it expects (include/lease/schema.h). */
void lease_prom_build_info(lease_prom_text_t *t, const char *name, const char *version);

#endif
