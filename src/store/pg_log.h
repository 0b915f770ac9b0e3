/*
 * pg_log.h - log records of the Postgres adapter.
 *
 * Backend messages are logged here and nowhere else: they never reach a
 * caller. Records go through the project's log module (lease/log.h): one
 * line each, the event as "msg" and the adapter's details under "store";
 * alerts are logged at error level and marked "alert":true.
 */
#ifndef LEASE_STORE_PG_LOG_H
#define LEASE_STORE_PG_LOG_H

#include <stdbool.h>

#include "pg_sqlstate.h"

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
