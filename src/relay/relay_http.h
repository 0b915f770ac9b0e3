/*
 * relay_http.h - leased-relay's small HTTP endpoint (libmicrohttpd):
 * GET /metrics (Prometheus text), /healthz (the process runs) and /readyz
 * (200 while connected to both the database and the broker, else 503).
 */
#ifndef LEASE_RELAY_HTTP_H
#define LEASE_RELAY_HTTP_H

#include <stddef.h>

#include "relay_metrics.h"

typedef struct relay_http relay_http_t;

/* Listens on host:port (port 0: any free port). NULL and err on failure.
 * metrics is borrowed and must outlive the endpoint. */
relay_http_t *relay_http_start(const char *host, int port, relay_metrics_t *metrics, char *err,
                               size_t errsz);
/* The port actually bound. */
int relay_http_port(const relay_http_t *h);
void relay_http_stop(relay_http_t *h);

#endif
