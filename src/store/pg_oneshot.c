/*
 * pg_oneshot.c - the one database path of leasectl's administrative calls
 * (see pg_oneshot.h).
 *
 * Each call is one short-lived connection and one explicit SERIALIZABLE
 * transaction around one function call: leasectl is run by operators whose
 * login role may default to READ COMMITTED, and the functions refuse weaker
 * isolation. A serialization failure rolls the whole transaction back, so
 * repeating it is safe. What a backend error means is the SQLSTATE table's
 * "leasectl" column (pg_sqlstate.c), the same table the service uses.
 *
 * What reaches the operator: the database's primary message only (never its
 * DETAIL or CONTEXT, which may quote parameter values), with any occurrence
 * of the caller's secret blanked.
 */
#include "pg_oneshot.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lease/clock.h"
#include "lease/pg_session.h"
#include "pg_sqlstate.h"

#define ONESHOT_ATTEMPTS 5
#define ONESHOT_BACKOFF_MS 20

void store_pg_set_err(char *err, size_t errsz, const char *fmt, ...)
{
    if (!err || errsz == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errsz, fmt, ap);
    va_end(ap);
    for (char *p = err; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
}

/* Overwrites every occurrence of `secret_text` in s (NULL/"" ignored). */
static void blank_out(char *s, const char *secret_text)
{
    if (!secret_text || !*secret_text)
        return;
    size_t n = strlen(secret_text);
    for (char *p = strstr(s, secret_text); p; p = strstr(p + n, secret_text))
        memset(p, '*', n);
}

/* Warnings reach the operator as libpq would print them; notices (a
 * migration's "already exists, skipping") do not. */
static void print_warnings(void *arg, const PGresult *r)
{
    (void)arg;
    const char *sev = PQresultErrorField(r, PG_DIAG_SEVERITY_NONLOCALIZED);
    if (sev && (strcmp(sev, "NOTICE") == 0 || strcmp(sev, "INFO") == 0 || strcmp(sev, "LOG") == 0 ||
                strncmp(sev, "DEBUG", 5) == 0))
        return;
    fputs(PQresultErrorMessage(r), stderr);
}

PGconn *store_pg_oneshot_connect(const char *database_url, char *err, size_t errsz)
{
    /* the project's one session setup; the URL may override its defaults */
    char why[512];
    PGconn *c = lease_pg_session_open(database_url, 10000, "leasectl", NULL, why, sizeof why);
    if (!c) {
        store_pg_set_err(err, errsz, "cannot connect to the database: %s", why);
        return NULL;
    }
    PQsetNoticeReceiver(c, print_warnings, NULL);
    return c;
}

static bool result_ok(const PGresult *r)
{
    ExecStatusType st = PQresultStatus(r);
    return st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
}

bool store_pg_oneshot_exec(PGconn *c, const char *sql, char *err, size_t errsz, const char *what)
{
    PGresult *r = PQexec(c, sql);
    bool ok = result_ok(r);
    if (!ok)
        store_pg_set_err(err, errsz, "%s: %s", what,
                         r ? PQresultErrorMessage(r) : PQerrorMessage(c));
    PQclear(r);
    return ok;
}

/* Classifies a failed result through the table. *retry is set when the
 * transaction may be repeated. */
static lease_admin_status_t classify(PGconn *c, const PGresult *r, bool *retry, const char *redact,
                                     char *err, size_t errsz)
{
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    const char *primary = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", primary ? primary : PQerrorMessage(c));
    blank_out(msg, redact);
    *retry = false;

    if (PQstatus(c) != CONNECTION_OK || !state) {
        store_pg_set_err(err, errsz, "database connection lost: %s", msg);
        return LEASE_ADMIN_UNAVAILABLE;
    }
    const store_pg_sqlstate_rule_t *rule = store_pg_sqlstate_lookup(state);
    switch (rule->admin) {
    case STORE_PG_ADMIN_RETRY:
        *retry = true;
        store_pg_set_err(err, errsz, "database kept reporting concurrent changes (%s)", state);
        return LEASE_ADMIN_UNAVAILABLE;
    case STORE_PG_ADMIN_INVALID:
        store_pg_set_err(err, errsz, "database refused (SQLSTATE %s): %s", state, msg);
        return LEASE_ADMIN_INVALID;
    case STORE_PG_ADMIN_DENIED:
        store_pg_set_err(err, errsz, "database refused (SQLSTATE %s): %s", state, msg);
        return LEASE_ADMIN_DENIED;
    case STORE_PG_ADMIN_UNAVAILABLE:
        store_pg_set_err(err, errsz, "database refused (SQLSTATE %s): %s", state, msg);
        return LEASE_ADMIN_UNAVAILABLE;
    case STORE_PG_ADMIN_FAILED:
        break;
    }
    store_pg_set_err(err, errsz, "database refused (SQLSTATE %s): %s", state, msg);
    return LEASE_ADMIN_FAILED;
}

/* One attempt: BEGIN, the statement, COMMIT. A failed attempt leaves the
 * session idle (rolled back) or says why it cannot. */
static lease_admin_status_t attempt_once(PGconn *c, const store_pg_oneshot_t *q, char **value,
                                         bool *retry, char *err, size_t errsz)
{
    *retry = false;
    PGresult *r = PQexec(c, "BEGIN ISOLATION LEVEL SERIALIZABLE");
    if (!result_ok(r)) {
        lease_admin_status_t st = classify(c, r, retry, q->redact, err, errsz);
        PQclear(r);
        return st;
    }
    PQclear(r);

    lease_admin_status_t st;
    r = PQexecParams(c, q->sql, q->nparams, NULL, q->params, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        st = classify(c, r, retry, q->redact, err, errsz);
    } else if (PQntuples(r) != 1 || PQnfields(r) != 1) {
        store_pg_set_err(err, errsz, "unexpected reply shape from the database");
        st = LEASE_ADMIN_FAILED;
    } else if (PQgetisnull(r, 0, 0)) {
        st = LEASE_ADMIN_OK;
    } else if ((*value = strdup(PQgetvalue(r, 0, 0))) == NULL) {
        store_pg_set_err(err, errsz, "out of memory");
        st = LEASE_ADMIN_FAILED;
    } else {
        st = LEASE_ADMIN_OK;
    }
    PQclear(r);

    /* A COMMIT can fail with a serialization failure too. */
    r = PQexec(c, st == LEASE_ADMIN_OK ? "COMMIT" : "ROLLBACK");
    if (!result_ok(r) && st == LEASE_ADMIN_OK) {
        st = classify(c, r, retry, q->redact, err, errsz);
    } else if (!result_ok(r)) {
        *retry = false; /* the session is in no state to try again */
    }
    PQclear(r);
    if (st != LEASE_ADMIN_OK) {
        free(*value);
        *value = NULL;
    }
    return st;
}

lease_admin_status_t store_pg_oneshot_call(const char *database_url, const store_pg_oneshot_t *q,
                                           char **value, char *err, size_t errsz)
{
    *value = NULL;
    PGconn *c = store_pg_oneshot_connect(database_url, err, errsz);
    if (!c)
        return LEASE_ADMIN_UNAVAILABLE;
    lease_admin_status_t st = LEASE_ADMIN_FAILED;
    for (int attempt = 1; attempt <= ONESHOT_ATTEMPTS; attempt++) {
        bool retry = false;
        st = attempt_once(c, q, value, &retry, err, errsz);
        if (!retry)
            break;
        lease_sleep_ms(ONESHOT_BACKOFF_MS * attempt + (int64_t)lease_jitter(ONESHOT_BACKOFF_MS));
    }
    PQfinish(c);
    return st;
}
