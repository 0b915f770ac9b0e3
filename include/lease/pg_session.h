/*
 * pg_session.h - the one way a program of this project opens a PostgreSQL
 * session: leased's pool and listener (src/store/pg_conn.c), leasectl's
 * one-shot calls (src/store/pg_oneshot.c) and leased-relay's session
 * (src/relay/relay_db.c) all start from these parameters.
 *
 * The parameters, in order (libpq lets a later keyword win):
 *   keepalives=1, keepalives_idle=5, keepalives_interval=2,
 *   keepalives_count=3, tcp_user_timeout=10000 (ms): a silent partition
 *   surfaces within seconds instead of the kernel's two hours;
 *   connect_timeout (whole seconds, at least 2) and
 *   fallback_application_name: defaults;
 *   dbname=<the user's conninfo>, expanded in place: anything the URL or
 *   keyword string sets wins over the defaults above;
 *   application_name, when given: the program's name for the session wins
 *   over the URL's.
 *
 * Part of the store layer (the modules with libpq): lease_pg_session links
 * libpq; leased's server module never sees this header, the relay sees it
 * without seeing the store adapter (tests/layers).
 */
#ifndef LEASE_PG_SESSION_H
#define LEASE_PG_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "lease/result.h"

/* Keyword/value arrays for PQconnectdbParams / PQconnectStartParams with
 * expand_dbname = 1. */
typedef struct lease_pg_session_params {
    const char **keywords; /* NULL-terminated */
    const char **values;
    char **owned; /* strings allocated for values (wiped on free) */
    size_t n_owned;
    int64_t connect_timeout_ms;
} lease_pg_session_params_t;

/*
 * Builds the parameters above. connect_timeout_ms <= 0 means 5000;
 * fallback_name names the program when neither the URL nor
 * application_name does; application_name may be NULL or "". Returns 0, or
 * -1 with a reason in err (libpq's parse error names the bad option; the
 * conninfo text itself is never copied into err).
 */
LEASE_MUST_USE int lease_pg_session_params_init(lease_pg_session_params_t *p, const char *conninfo,
                                                int64_t connect_timeout_ms,
                                                const char *fallback_name,
                                                const char *application_name, char *err,
                                                size_t errsz);
/* Copies a libpq message into dst as one line: trailing newlines and blanks
 * cut, inner newlines made spaces; NULL copies as "". Every session's
 * errors and replies are reported this way. */
void lease_pg_copy_msg(char *dst, size_t dstsz, const char *src);

/* Releases the arrays, wiping the copy of the conninfo; accepts NULL. */
void lease_pg_session_params_free(lease_pg_session_params_t *p);

/*
 * Opens a blocking session with those parameters (libpq's connect_timeout
 * bounds it). Returns the session, or NULL with libpq's reason in err (one
 * line; libpq's connection errors do not repeat the password).
 */
LEASE_MUST_USE PGconn *lease_pg_session_open(const char *conninfo, int64_t connect_timeout_ms,
                                             const char *fallback_name,
                                             const char *application_name, char *err, size_t errsz);

#endif
