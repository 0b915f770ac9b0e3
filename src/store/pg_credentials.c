/*
 * pg_credentials.c - credential administration over libpq (see
 * pg_credentials.h).
 *
 * Each call is one short-lived connection and one explicit SERIALIZABLE
 * transaction around one function call: leasectl is run by operators whose
 * login role may default to READ COMMITTED, and the credential functions
 * refuse weaker isolation. A serialization failure rolls the whole
 * transaction back, so repeating it is safe.
 *
 * What reaches the operator: the database's primary message only (never its
 * DETAIL or CONTEXT, which may quote parameter values), with any occurrence
 * of the request's digest blanked; rows are returned without any
 * secret_digest member, whatever the function sent.
 */
#include "store/pg_credentials.h"

#include <libpq-fe.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lease/clock.h"

#define CRED_ATTEMPTS 5
#define CRED_BACKOFF_MS 20

#define SQLSTATE_SERIALIZATION_FAILURE "40001"
#define SQLSTATE_DEADLOCK_DETECTED "40P01"
#define SQLSTATE_INSUFFICIENT_PRIVILEGE "42501"
#define SQLSTATE_LEASE_MALFORMED_CALL "LS003"

static void set_err(char *err, size_t errsz, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errsz, const char *fmt, ...)
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

static PGconn *connect_db(const char *url, char *err, size_t errsz)
{
    /* Keywords before dbname are defaults the URL may override. */
    const char *const keys[] = {"connect_timeout", "fallback_application_name", "dbname", NULL};
    const char *const vals[] = {"10", "leasectl", url, NULL};
    PGconn *c = PQconnectdbParams(keys, vals, 1);
    if (!c) {
        set_err(err, errsz, "cannot connect to the database: out of memory");
        return NULL;
    }
    if (PQstatus(c) != CONNECTION_OK) {
        set_err(err, errsz, "cannot connect to the database: %s", PQerrorMessage(c));
        PQfinish(c);
        return NULL;
    }
    PQclear(PQexec(c, "SET client_min_messages = warning"));
    return c;
}

/* Classifies a failed result. *retry is set for serialization failures. */
static lease_cred_status_t classify(PGconn *c, const PGresult *r, bool *retry, const char *redact,
                                    char *err, size_t errsz)
{
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    const char *primary = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", primary ? primary : PQerrorMessage(c));
    blank_out(msg, redact);
    *retry = false;

    if (PQstatus(c) != CONNECTION_OK || !state) {
        set_err(err, errsz, "database connection lost: %s", msg);
        return LEASE_CRED_UNAVAILABLE;
    }
    if (strcmp(state, SQLSTATE_SERIALIZATION_FAILURE) == 0 ||
        strcmp(state, SQLSTATE_DEADLOCK_DETECTED) == 0) {
        *retry = true;
        set_err(err, errsz, "database kept reporting concurrent changes (%s)", state);
        return LEASE_CRED_UNAVAILABLE;
    }
    set_err(err, errsz, "database refused (SQLSTATE %s): %s", state, msg);
    if (strcmp(state, SQLSTATE_INSUFFICIENT_PRIVILEGE) == 0)
        return LEASE_CRED_DENIED;
    if (strncmp(state, "22", 2) == 0 || strncmp(state, "23", 2) == 0 ||
        strcmp(state, SQLSTATE_LEASE_MALFORMED_CALL) == 0)
        return LEASE_CRED_INVALID;
    if (strncmp(state, "08", 2) == 0 || strncmp(state, "57", 2) == 0 ||
        strncmp(state, "53", 2) == 0)
        return LEASE_CRED_UNAVAILABLE;
    return LEASE_CRED_FAILED;
}

static bool command_ok(const PGresult *r)
{
    ExecStatusType st = PQresultStatus(r);
    return st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
}

/*
 * Runs `sql` with at most one text parameter inside BEGIN ISOLATION LEVEL
 * SERIALIZABLE ... COMMIT, retrying serialization failures. On success
 * returns LEASE_CRED_OK with *value a heap copy of the single result value
 * (NULL when SQL NULL).
 */
static lease_cred_status_t call_serializable(const char *url, const char *sql, const char *param,
                                             const char *redact, char **value, char *err,
                                             size_t errsz)
{
    *value = NULL;
    PGconn *c = connect_db(url, err, errsz);
    if (!c)
        return LEASE_CRED_UNAVAILABLE;

    lease_cred_status_t st = LEASE_CRED_FAILED;
    for (int attempt = 1; attempt <= CRED_ATTEMPTS; attempt++) {
        bool retry = false;
        PGresult *r = PQexec(c, "BEGIN ISOLATION LEVEL SERIALIZABLE");
        if (!command_ok(r)) {
            st = classify(c, r, &retry, redact, err, errsz);
            PQclear(r);
            break;
        }
        PQclear(r);

        const char *params[1] = {param};
        r = PQexecParams(c, sql, param ? 1 : 0, NULL, param ? params : NULL, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_TUPLES_OK) {
            st = classify(c, r, &retry, redact, err, errsz);
            PQclear(r);
            PQclear(PQexec(c, "ROLLBACK"));
        } else if (PQntuples(r) != 1 || PQnfields(r) != 1) {
            set_err(err, errsz, "unexpected reply shape from the database");
            PQclear(r);
            PQclear(PQexec(c, "ROLLBACK"));
            st = LEASE_CRED_FAILED;
        } else {
            char *copy = PQgetisnull(r, 0, 0) ? NULL : strdup(PQgetvalue(r, 0, 0));
            bool oom = !PQgetisnull(r, 0, 0) && !copy;
            PQclear(r);
            r = PQexec(c, "COMMIT");
            /* A COMMIT can fail with a serialization failure too. */
            if (oom) {
                set_err(err, errsz, "out of memory");
                st = LEASE_CRED_FAILED;
            } else if (command_ok(r)) {
                *value = copy;
                copy = NULL;
                st = LEASE_CRED_OK;
            } else {
                st = classify(c, r, &retry, redact, err, errsz);
            }
            free(copy);
            PQclear(r);
        }
        if (!retry)
            break;
        lease_sleep_ms(CRED_BACKOFF_MS * attempt + (int64_t)lease_jitter(CRED_BACKOFF_MS));
    }
    PQfinish(c);
    return st;
}

/* Removes secret_digest from an object, or from each object of an array. */
static void strip_digests(json_t *v)
{
    if (json_is_object(v)) {
        json_object_del(v, "secret_digest");
        json_t *inner = json_object_get(v, "credentials");
        if (json_is_array(inner))
            strip_digests(inner);
    } else if (json_is_array(v)) {
        size_t i;
        json_t *item;
        json_array_foreach(v, i, item)
        {
            if (json_is_object(item))
                json_object_del(item, "secret_digest");
        }
    }
}

static lease_cred_status_t parse_json(char *text, json_t **out, char *err, size_t errsz)
{
    json_error_t jerr;
    json_t *v = text ? json_loads(text, JSON_REJECT_DUPLICATES, &jerr) : NULL;
    if (!v) {
        set_err(err, errsz, "the database answered with no or malformed JSON");
        return LEASE_CRED_FAILED;
    }
    strip_digests(v);
    *out = v;
    return LEASE_CRED_OK;
}

lease_cred_status_t lease_pg_credential_create(const char *database_url, const json_t *request,
                                               json_t **row, char *err, size_t errsz)
{
    *row = NULL;
    json_t *digest = json_object_get(request, "secret_digest");
    const char *redact = json_is_string(digest) ? json_string_value(digest) : NULL;
    char *body = json_dumps(request, JSON_COMPACT);
    if (!body) {
        set_err(err, errsz, "cannot encode the request");
        return LEASE_CRED_FAILED;
    }
    char *value = NULL;
    lease_cred_status_t st =
        call_serializable(database_url, "SELECT lease.credential_create($1::jsonb)::text", body,
                          redact, &value, err, errsz);
    free(body);
    if (st == LEASE_CRED_OK) {
        st = parse_json(value, row, err, errsz);
        if (st == LEASE_CRED_OK && !json_is_object(*row)) {
            json_decref(*row);
            *row = NULL;
            set_err(err, errsz, "the database answered with something other than a row");
            st = LEASE_CRED_FAILED;
        }
    }
    free(value);
    return st;
}

lease_cred_status_t lease_pg_credential_revoke(const char *database_url, const char *credential_id,
                                               bool *revoked, char *err, size_t errsz)
{
    *revoked = false;
    char *value = NULL;
    lease_cred_status_t st =
        call_serializable(database_url, "SELECT lease.credential_revoke($1::text)::text",
                          credential_id, NULL, &value, err, errsz);
    if (st == LEASE_CRED_OK) {
        if (value && strcmp(value, "true") == 0) {
            *revoked = true;
        } else if (!value || strcmp(value, "false") != 0) {
            set_err(err, errsz, "the database answered with something other than a boolean");
            st = LEASE_CRED_FAILED;
        }
    }
    free(value);
    return st;
}

lease_cred_status_t lease_pg_credential_list(const char *database_url, json_t **rows, char *err,
                                             size_t errsz)
{
    *rows = NULL;
    char *value = NULL;
    lease_cred_status_t st = call_serializable(database_url, "SELECT lease.credential_list()::text",
                                               NULL, NULL, &value, err, errsz);
    if (st == LEASE_CRED_OK)
        st = parse_json(value, rows, err, errsz);
    free(value);
    return st;
}
