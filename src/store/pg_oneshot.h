/*
 * pg_oneshot.h - the one database path of leasectl's administrative calls
 * (lease/store_admin.h): connecting with a timeout, running one function in
 * an explicit SERIALIZABLE transaction with jittered retries, and
 * classifying a backend error through the one SQLSTATE table
 * (pg_sqlstate.c). pg_credentials.c, pg_admin.c and pg_migrate.c use it;
 * nothing else in leasectl talks to libpq.
 */
#ifndef LEASE_STORE_PG_ONESHOT_H
#define LEASE_STORE_PG_ONESHOT_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>

#include "lease/store_admin.h"

/* Formats one line into err (line breaks become spaces); err may be NULL. */
void store_pg_set_err(char *err, size_t errsz, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * A session for one administrative call: libpq's connect_timeout 10 s and
 * fallback_application_name "leasectl" unless the URL (any libpq string or
 * URI) sets them; notices below WARNING are dropped on the client, so no
 * session setting is needed. NULL with a reason in err when it cannot
 * connect.
 */
PGconn *store_pg_oneshot_connect(const char *database_url, char *err, size_t errsz);

/* Runs sql (no result rows expected, or ignored); false with "what: message"
 * in err when it failed. */
LEASE_MUST_USE bool store_pg_oneshot_exec(PGconn *c, const char *sql, char *err, size_t errsz,
                                          const char *what);

/*
 * One statement with text parameters that answers exactly one row of one
 * text column, inside BEGIN ISOLATION LEVEL SERIALIZABLE ... COMMIT on a
 * connection of its own. A serialization failure (whatever the table says
 * to retry) repeats the whole transaction after a jittered backoff, a few
 * times. Every result is checked, BEGIN and COMMIT included. On
 * LEASE_ADMIN_OK *value is a heap copy of the value (NULL for SQL NULL;
 * caller frees). Otherwise err holds one line; every occurrence of redact
 * (NULL: none) in the database's message is blanked.
 */
typedef struct store_pg_oneshot {
    const char *sql;
    int nparams;
    const char *const *params;
    const char *redact;
} store_pg_oneshot_t;

LEASE_MUST_USE lease_admin_status_t store_pg_oneshot_call(const char *database_url,
                                                          const store_pg_oneshot_t *q, char **value,
                                                          char *err, size_t errsz);

#endif
