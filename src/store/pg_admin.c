/*
 * pg_admin.c - one-shot administrative calls (see pg_admin.h).
 */
#include "store/pg_admin.h"

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ADMIN_TRIES 5

static void one_line(char *s)
{
    for (; *s; s++)
        if (*s == '\n')
            *s = ' ';
}

int lease_pg_admin_call(const char *database_url, const char *sql, int nparams,
                        const char *const *params, char **out, char *sqlstate, char *err,
                        size_t errsz)
{
    *out = NULL;
    if (sqlstate)
        sqlstate[0] = '\0';
    PGconn *c = PQconnectdb(database_url);
    if (PQstatus(c) != CONNECTION_OK) {
        snprintf(err, errsz, "cannot connect to the database: %s", PQerrorMessage(c));
        one_line(err);
        PQfinish(c);
        return -1;
    }
    int rc = -1;
    for (int attempt = 0; attempt < ADMIN_TRIES; attempt++) {
        PQclear(PQexec(c, "BEGIN ISOLATION LEVEL SERIALIZABLE"));
        PGresult *r = PQexecParams(c, sql, nparams, NULL, params, NULL, NULL, 0);
        ExecStatusType st = PQresultStatus(r);
        if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
            if (st == PGRES_TUPLES_OK && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0))
                *out = strdup(PQgetvalue(r, 0, 0));
            PQclear(r);
            PGresult *commit = PQexec(c, "COMMIT");
            st = PQresultStatus(commit);
            if (st == PGRES_COMMAND_OK) {
                PQclear(commit);
                rc = 0;
                break;
            }
            r = commit;
            free(*out);
            *out = NULL;
        }
        const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        if (sqlstate)
            snprintf(sqlstate, 6, "%s", state ? state : "");
        snprintf(err, errsz, "%s", PQresultErrorMessage(r));
        one_line(err);
        PQclear(r);
        PQclear(PQexec(c, "ROLLBACK"));
        bool retry = state && (strcmp(state, "40001") == 0 || strcmp(state, "40P01") == 0);
        if (!retry)
            break;
        usleep(20000u << attempt);
    }
    PQfinish(c);
    return rc;
}
