/*
 * pg_log.c - the adapter's log records (see pg_log.h), written through the
 * project's one log module (lease/log.h) so leased's level and format apply.
 */
#include "pg_log.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lease/log.h"

static lease_log_level_t level_of(store_pg_severity_t sev)
{
    switch (sev) {
    case STORE_PG_LOG_DEBUG:
        return LEASE_LOG_DEBUG;
    case STORE_PG_LOG_WARN:
        return LEASE_LOG_WARN;
    case STORE_PG_LOG_ERROR:
    case STORE_PG_LOG_ALERT:
        return LEASE_LOG_ERROR;
    }
    return LEASE_LOG_ERROR;
}

bool store_pg_log_enabled(store_pg_severity_t sev)
{
    return LEASE_LOG_ENABLED(level_of(sev));
}

static void set_str(json_t *o, const char *k, const char *v)
{
    if (v && *v)
        json_object_set_new(o, k, json_string(v));
}

void store_pg_log(store_pg_severity_t sev, const store_pg_log_rec_t *rec)
{
    lease_log_level_t level = level_of(sev);
    if (!LEASE_LOG_ENABLED(level))
        return;
    json_t *o = json_object();
    if (!o)
        return;
    set_str(o, "op", rec->op);
    set_str(o, "sqlstate", rec->sqlstate);
    set_str(o, "condition", rec->condition);
    set_str(o, "request_id", rec->request_id);
    if (rec->attempt > 0)
        json_object_set_new(o, "attempt", json_integer(rec->attempt));
    if (sev == STORE_PG_LOG_ALERT)
        json_object_set_new(o, "alert", json_true());
    if (rec->message && *rec->message) {
        /* backend text may span lines; a log record is one line */
        char msg[512];
        snprintf(msg, sizeof msg, "%s", rec->message);
        for (char *p = msg; *p; p++)
            if (*p == '\n' || *p == '\r')
                *p = ' ';
        set_str(o, "message", msg);
    }
    char *store = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!store)
        return;
    lease_log_fields_t fields = {.correlation_id = rec->correlation_id, .latency_ms = -1};
    lease_log_write_json(level, &fields, rec->event ? rec->event : "store", "store", store);
    free(store);
}
