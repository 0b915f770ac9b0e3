/*
 * app.h - the wiring of one leased process: the parts every route handler
 * may reach. leased_main.c builds it; nothing else owns these pointers.
 */
#ifndef LEASED_APP_H
#define LEASED_APP_H

#include "lease/store.h"
#include "admission.h"
#include "audit_queue.h"
#include "config.h"
#include "json_codec.h"
#include "metrics.h"
#include "service.h"
#include "sweeper.h"
#include "watch.h"

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
