/*
 * pg_session.c - the connection parameters every session of the project
 * opens with (lease/pg_session.h says which and why).
 */
#include "lease/pg_session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Defaults that let a silent partition surface within seconds; any of them
 * set in the user's conninfo wins. */
#define KEEPALIVES_IDLE_S "5"
#define KEEPALIVES_INTERVAL_S "2"
#define KEEPALIVES_COUNT "3"
#define TCP_USER_TIMEOUT_MS "10000"
#define MAX_PARAMS 12

void lease_pg_copy_msg(char *dst, size_t dstsz, const char *src)
{
    if (!dst || dstsz == 0)
        return;
    snprintf(dst, dstsz, "%s", src ? src : "");
    size_t n = strlen(dst);
    while (n > 0 && (dst[n - 1] == '\n' || dst[n - 1] == ' '))
        dst[--n] = '\0';
    for (char *c = dst; *c; c++)
        if (*c == '\n')
            *c = ' ';
}

int lease_pg_session_params_init(lease_pg_session_params_t *p, const char *conninfo,
                                 int64_t connect_timeout_ms, const char *fallback_name,
                                 const char *application_name, char *err, size_t errsz)
{
    memset(p, 0, sizeof *p);
    if (!conninfo || !*conninfo) {
        lease_pg_copy_msg(err, errsz, "empty database connection string");
        return -1;
    }
    char *perr = NULL;
    PQconninfoOption *parsed = PQconninfoParse(conninfo, &perr);
    if (!parsed) {
        /* libpq's reason names the bad option, not the secret parts */
        lease_pg_copy_msg(err, errsz,
                          perr ? perr : "invalid database connection string (out of memory)");
        PQfreemem(perr);
        return -1;
    }
    PQconninfoFree(parsed);

    p->keywords = calloc(MAX_PARAMS, sizeof *p->keywords);
    p->values = calloc(MAX_PARAMS, sizeof *p->values);
    p->owned = calloc(2, sizeof *p->owned);
    if (!p->keywords || !p->values || !p->owned)
        goto oom;
    if (connect_timeout_ms <= 0)
        connect_timeout_ms = 5000;
    p->connect_timeout_ms = connect_timeout_ms;
    char timeout_s[24];
    /* libpq counts whole seconds (minimum 2); the pool's own wait uses the ms */
    int64_t secs = (connect_timeout_ms + 999) / 1000;
    snprintf(timeout_s, sizeof timeout_s, "%lld", (long long)(secs < 2 ? 2 : secs));
    char *ts = strdup(timeout_s);
    char *db = strdup(conninfo);
    if (!ts || !db) {
        free(ts);
        free(db);
        goto oom;
    }
    p->owned[p->n_owned++] = ts;
    p->owned[p->n_owned++] = db;
    size_t i = 0;
    p->keywords[i] = "keepalives", p->values[i++] = "1";
    p->keywords[i] = "keepalives_idle", p->values[i++] = KEEPALIVES_IDLE_S;
    p->keywords[i] = "keepalives_interval", p->values[i++] = KEEPALIVES_INTERVAL_S;
    p->keywords[i] = "keepalives_count", p->values[i++] = KEEPALIVES_COUNT;
    p->keywords[i] = "tcp_user_timeout", p->values[i++] = TCP_USER_TIMEOUT_MS;
    p->keywords[i] = "connect_timeout", p->values[i++] = ts;
    p->keywords[i] = "fallback_application_name", p->values[i++] = fallback_name;
    p->keywords[i] = "dbname", p->values[i++] = db;
    if (application_name && *application_name)
        p->keywords[i] = "application_name", p->values[i++] = application_name;
    p->keywords[i] = NULL;
    p->values[i] = NULL;
    return 0;
oom:
    lease_pg_session_params_free(p);
    lease_pg_copy_msg(err, errsz, "out of memory");
    return -1;
}

void lease_pg_session_params_free(lease_pg_session_params_t *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_owned; i++) {
        /* the conninfo may hold a password */
        if (p->owned[i])
            memset(p->owned[i], 0, strlen(p->owned[i]));
        free(p->owned[i]);
    }
    free(p->owned);
    free(p->keywords);
    free(p->values);
    memset(p, 0, sizeof *p);
}

PGconn *lease_pg_session_open(const char *conninfo, int64_t connect_timeout_ms,
                              const char *fallback_name, const char *application_name, char *err,
                              size_t errsz)
{
    lease_pg_session_params_t p;
    if (lease_pg_session_params_init(&p, conninfo, connect_timeout_ms, fallback_name,
                                     application_name, err, errsz) != 0)
        return NULL;
    PGconn *conn = PQconnectdbParams(p.keywords, p.values, 1);
    lease_pg_session_params_free(&p);
    if (!conn) {
        lease_pg_copy_msg(err, errsz, "out of memory");
        return NULL;
    }
    if (PQstatus(conn) != CONNECTION_OK) {
        lease_pg_copy_msg(err, errsz, PQerrorMessage(conn));
        PQfinish(conn);
        return NULL;
    }
    return conn;
}
