/*
 * pg_log.h - one-line log records of the Postgres adapter on stderr.
 *
 * Backend messages are logged here and nowhere else: they never reach a
 * caller. LEASE_LOG_FORMAT=json (default) writes one JSON object per line,
 * `plain` writes key=value text; LEASE_LOG_LEVEL (debug, info, warn, error)
 * filters before anything is formatted. Alerts are always written.
 */
#ifndef LEASE_STORE_PG_LOG_H
#define LEASE_STORE_PG_LOG_H

#include <stdbool.h>

#include "store/pg_sqlstate.h"

/* One record. Every string may be NULL (omitted). */
typedef struct store_pg_log_rec {
    const char *event; /* stable name: "backend_error", "outcome_unknown", ... */
    const char *op;    /* "acquire", ... */
    const char *sqlstate;
    const char *condition; /* SQLSTATE condition name from the map */
    const char *message;   /* backend or libpq text: logged, never returned */
    const char *correlation_id;
    const char *request_id;
    int attempt; /* 0: not logged */
} store_pg_log_rec_t;

bool store_pg_log_enabled(store_pg_severity_t sev);
void store_pg_log(store_pg_severity_t sev, const store_pg_log_rec_t *rec);

#endif
