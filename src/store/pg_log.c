/*
 * pg_log.c - the adapter's stderr log lines (see pg_log.h). Each record is
 * written with a single fputs under the stdio lock so lines of concurrent
 * threads never interleave.
 */
#include "store/pg_log.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lease/clock.h"

static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static store_pg_severity_t min_level = STORE_PG_LOG_WARN;
static bool plain_format;

static void read_config(void)
{
    const char *lvl = getenv("LEASE_LOG_LEVEL");
    if (lvl) {
        if (strcmp(lvl, "debug") == 0 || strcmp(lvl, "info") == 0)
            min_level = STORE_PG_LOG_DEBUG;
        else if (strcmp(lvl, "warn") == 0)
            min_level = STORE_PG_LOG_WARN;
        else if (strcmp(lvl, "error") == 0)
            min_level = STORE_PG_LOG_ERROR;
    }
    const char *fmt = getenv("LEASE_LOG_FORMAT");
    plain_format = fmt && strcmp(fmt, "plain") == 0;
}

bool store_pg_log_enabled(store_pg_severity_t sev)
{
    pthread_once(&config_once, read_config);
    return sev == STORE_PG_LOG_ALERT || sev >= min_level;
}

static const char *level_name(store_pg_severity_t sev)
{
    switch (sev) {
    case STORE_PG_LOG_DEBUG:
        return "debug";
    case STORE_PG_LOG_WARN:
        return "warn";
    case STORE_PG_LOG_ERROR:
        return "error";
    case STORE_PG_LOG_ALERT:
        return "alert";
    }
    return "error";
}

static void set_str(json_t *o, const char *k, const char *v)
{
    if (v && *v)
        json_object_set_new(o, k, json_string(v));
}

void store_pg_log(store_pg_severity_t sev, const store_pg_log_rec_t *rec)
{
    if (!store_pg_log_enabled(sev))
        return;
    char ts[LEASE_TIME_LEN + 1];
    lease_time_format(lease_wall_now_ms(), ts);
    json_t *o = json_object();
    char *line = NULL;
    if (!o)
        goto cleanup;
    set_str(o, "ts", ts);
    set_str(o, "level", level_name(sev));
    set_str(o, "component", "store_pg");
    set_str(o, "event", rec->event);
    set_str(o, "op", rec->op);
    set_str(o, "sqlstate", rec->sqlstate);
    set_str(o, "condition", rec->condition);
    set_str(o, "correlation_id", rec->correlation_id);
    set_str(o, "request_id", rec->request_id);
    if (rec->attempt > 0)
        json_object_set_new(o, "attempt", json_integer(rec->attempt));
    if (rec->message && *rec->message) {
        /* backend text may span lines; a log record is one line */
        char msg[512];
        snprintf(msg, sizeof msg, "%s", rec->message);
        for (char *p = msg; *p; p++)
            if (*p == '\n' || *p == '\r')
                *p = ' ';
        set_str(o, "message", msg);
    }
    if (plain_format) {
        size_t cap = 1024;
        line = malloc(cap);
        if (!line)
            goto cleanup;
        size_t len = 0;
        const char *key;
        json_t *val;
        json_object_foreach(o, key, val)
        {
            int n = json_is_string(val)
                        ? snprintf(line + len, cap - len, "%s=%s ", key, json_string_value(val))
                        : snprintf(line + len, cap - len, "%s=%lld ", key,
                                   (long long)json_integer_value(val));
            if (n < 0 || (size_t)n >= cap - len)
                break;
            len += (size_t)n;
        }
        if (len > 0)
            line[len - 1] = '\n';
        else
            line[0] = '\0';
    } else {
        line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (!line)
            goto cleanup;
        size_t n = strlen(line);
        char *nl = realloc(line, n + 2);
        if (!nl)
            goto cleanup;
        line = nl;
        line[n] = '\n';
        line[n + 1] = '\0';
    }
    fputs(line, stderr);
cleanup:
    free(line);
    json_decref(o);
}
