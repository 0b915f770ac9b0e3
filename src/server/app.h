/*
 * app.h - the wiring of one leased process: the parts every route handler
 * may reach. leased_main.c builds it; nothing else owns these pointers.
 */
#ifndef LEASED_APP_H
#define LEASED_APP_H

#include "lease/store.h"
#include "server/admission.h"
#include "server/audit_queue.h"
#include "server/config.h"
#include "server/json_codec.h"
#include "server/metrics.h"
#include "server/service.h"
#include "server/sweeper.h"
#include "server/watch.h"

struct leased_app {
    const leased_config_t *config;
    lease_store_t *store;
    leased_service_t *service;
    leased_admission_t *admission;
    leased_metrics_t *metrics;
    leased_audit_queue_t *audit;
    leased_sweeper_t *sweeper;
    leased_watch_t *watch;
    leased_codec_limits_t limits;
    struct leased_http *http; /* set once listening; for metrics */
    int draining;             /* atomic: set on SIGTERM, /readyz answers 503 from then on */
};

#endif
