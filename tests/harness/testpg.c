/*
 * testpg.c - throwaway databases for tests, from the fixture's state file.
 */
#include "testpg.h"

#include <libpq-fe.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "state_file.h"

static char state_url[1024];
static char state_template[128];
static bool state_owned;
static char state_sockdir[512];
static int state_port;
static bool state_loaded;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "testpg: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

static void take(const char *key, const char *val, void *arg)
{
    (void)arg;
    if (strcmp(key, "PG_URL") == 0)
        snprintf(state_url, sizeof state_url, "%s", val);
    else if (strcmp(key, "PG_TEMPLATE") == 0)
        snprintf(state_template, sizeof state_template, "%s", val);
    else if (strcmp(key, "PG_OWNED") == 0)
        state_owned = strcmp(val, "1") == 0;
    else if (strcmp(key, "PG_SOCKDIR") == 0)
        snprintf(state_sockdir, sizeof state_sockdir, "%s", val);
    else if (strcmp(key, "PG_PORT") == 0)
        state_port = atoi(val);
}

/* The KEY='value' lines written by pgcluster. */
static void load_state(void)
{
    if (state_loaded)
        return;
    state_file_read(LEASE_TEST_STATE_FILE, "pg_setup", take, NULL);
    if (!state_url[0] || !state_template[0])
        die("incomplete state file %s", LEASE_TEST_STATE_FILE);
    state_loaded = true;
}

/* Replaces the database (path) of a postgresql:// URL. */
static char *url_with_db(const char *url, const char *db)
{
    const char *scheme_end = strstr(url, "://");
    if (!scheme_end)
        die("not a URL: %s", url);
    const char *path = strchr(scheme_end + 3, '/');
    if (!path)
        die("URL without a path: %s", url);
    const char *query = strchr(path, '?');
    size_t head = (size_t)(path - url) + 1;
    size_t len = head + strlen(db) + (query ? strlen(query) : 0) + 1;
    char *out = malloc(len);
    snprintf(out, len, "%.*s%s%s", (int)head, url, db, query ? query : "");
    return out;
}

static char *url_db_name(const char *url)
{
    const char *path = strchr(strstr(url, "://") + 3, '/') + 1;
    size_t n = strcspn(path, "?");
    char *out = malloc(n + 1);
    memcpy(out, path, n);
    out[n] = '\0';
    return out;
}

char *testpg_url_as(const char *db_url, const char *user)
{
    /* Replace or add user=... in the query string. */
    const char *q = strchr(db_url, '?');
    size_t cap = strlen(db_url) + strlen(user) + 16;
    char *out = malloc(cap);
    if (!q) {
        snprintf(out, cap, "%s?user=%s", db_url, user);
        return out;
    }
    size_t pos = (size_t)(q - db_url) + 1;
    memcpy(out, db_url, pos);
    out[pos] = '\0';
    const char *p = q + 1;
    bool first = true;
    while (*p) {
        size_t n = strcspn(p, "&");
        if (!(n >= 5 && strncmp(p, "user=", 5) == 0)) {
            if (!first)
                strcat(out, "&");
            strncat(out, p, n);
            first = false;
        }
        p += n;
        if (*p == '&')
            p++;
    }
    if (!first)
        strcat(out, "&");
    strcat(out, "user=");
    strcat(out, user);
    return out;
}

char *testpg_service_url(const char *db_url)
{
    return testpg_url_as(db_url, "leased_app");
}

bool testpg_exec(const char *url, const char *sql)
{
    PGconn *c = PQconnectdb(url);
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "testpg: connect %s: %s", url, PQerrorMessage(c));
        PQfinish(c);
        return false;
    }
    PGresult *r = PQexec(c, sql);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    if (!ok)
        fprintf(stderr, "testpg: %s\n  in: %s\n", PQresultErrorMessage(r), sql);
    PQclear(r);
    PQfinish(c);
    return ok;
}

char *testpg_query_value(const char *url, const char *sql)
{
    PGconn *c = PQconnectdb(url);
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "testpg: connect: %s", PQerrorMessage(c));
        PQfinish(c);
        return NULL;
    }
    PGresult *r = PQexec(c, sql);
    char *out = NULL;
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0))
        out = strdup(PQgetvalue(r, 0, 0));
    else if (PQresultStatus(r) != PGRES_TUPLES_OK)
        fprintf(stderr, "testpg: %s\n  in: %s\n", PQresultErrorMessage(r), sql);
    PQclear(r);
    PQfinish(c);
    return out;
}

long long testpg_query_int(const char *url, const char *sql)
{
    char *v = testpg_query_value(url, sql);
    if (!v)
        die("query returned nothing: %s", sql);
    char *end;
    long long n = strtoll(v, &end, 10);
    if (*end)
        die("not an integer (%s): %s", v, sql);
    free(v);
    return n;
}

char *testpg_state_digest(const char *url)
{
    /* Every table whose rows a lease request may change, audit aside (a
     * refused request is audited: that is its one allowed trace). A table a
     * later migration drops or renames is skipped, not an error. */
    static const char *const tables[] = {
        "lease.locks",       "lease.lease_index",      "lease.history",         "lease.idempotency",
        "lease.fence_marks", "lease.fenced_documents", "lease.outbox",          "lease.quarantine",
        "lease.recoveries",  "lease.credentials",      "lease.namespace_state", "lease.policy",
    };
    size_t cap = 64 * (sizeof tables / sizeof tables[0]) + 1, used = 0;
    char *out = calloc(1, cap);
    if (!out)
        return NULL;
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
        char sql[512];
        snprintf(sql, sizeof sql, "SELECT to_regclass('%s') IS NOT NULL", tables[i]);
        char *exists = testpg_query_value(url, sql);
        bool present = exists && strcmp(exists, "t") == 0;
        free(exists);
        snprintf(sql, sizeof sql,
                 present ? "SELECT md5(coalesce(string_agg(x::text, ',' ORDER BY x::text), '')) "
                           "FROM %s x"
                         : "SELECT '-' /* %s */",
                 tables[i]);
        char *d = testpg_query_value(url, sql);
        if (!d) {
            free(out);
            return NULL;
        }
        used += (size_t)snprintf(out + used, cap - used, "%.33s|", d);
        free(d);
    }
    return out;
}

static char *create_db(const char *prefix, const char *template)
{
    static int counter;
    load_state();
    char name[64];
    snprintf(name, sizeof name, "t_%.30s_%d_%d", prefix, (int)getpid(),
             __atomic_add_fetch(&counter, 1, __ATOMIC_SEQ_CST));
    for (char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
            *p = '_';
    char sql[256];
    snprintf(sql, sizeof sql, "CREATE DATABASE %s TEMPLATE %s", name, template);
    /* The template may be briefly busy when tests start together. */
    for (int attempt = 0;; attempt++) {
        if (testpg_exec(state_url, sql))
            break;
        if (attempt == 50)
            die("cannot create database %s", name);
        usleep(100000);
    }
    return url_with_db(state_url, name);
}

char *testpg_create_db(const char *prefix)
{
    load_state();
    return create_db(prefix, state_template);
}

char *testpg_create_empty_db(const char *prefix)
{
    return create_db(prefix, "template0");
}

void testpg_drop_db(const char *db_url)
{
    load_state();
    char *name = url_db_name(db_url);
    char sql[256];
    snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s WITH (FORCE)", name);
    (void)testpg_exec(state_url, sql);
    free(name);
}

bool testpg_owned(void)
{
    load_state();
    return state_owned;
}

const char *testpg_socket(int *port)
{
    load_state();
    *port = state_port;
    return state_owned && state_sockdir[0] ? state_sockdir : NULL;
}

static bool run_pgcluster(const char *verb)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' %s '%s'", LEASE_TEST_PGCLUSTER, verb, LEASE_TEST_STATE_FILE);
    return system(cmd) == 0;
}

bool testpg_pause(void)
{
    return testpg_owned() && run_pgcluster("pause");
}

bool testpg_resume(void)
{
    return testpg_owned() && run_pgcluster("resume");
}

int testpg_terminate_backends(const char *db_url, const char *application_name)
{
    load_state();
    char *name = url_db_name(db_url);
    char sql[512];
    snprintf(sql, sizeof sql,
             /* wait (up to 5 s) until each backend has exited, so the
              * caller's next step sees the sessions gone, not dying */
             "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
             "WHERE datname = '%s' AND application_name = '%s' AND pid <> pg_backend_pid()",
             name, application_name);
    free(name);
    return (int)testpg_query_int(state_url, sql);
}
