/*
 * pg_admin.h - one-shot administrative calls for leasectl (recover, verify,
 * namespace check): connect, run one function in one SERIALIZABLE
 * transaction, disconnect. Not for the service's hot path (that is
 * store_pg.c's pool).
 */
#ifndef LEASE_PG_ADMIN_H
#define LEASE_PG_ADMIN_H

#include <stddef.h>

#include "lease/result.h"

/*
 * Runs `sql` (one statement returning one text column, at most one row)
 * with text parameters inside BEGIN ISOLATION LEVEL SERIALIZABLE ... COMMIT,
 * retrying serialization failures a few times. On success returns 0 and
 * sets *out to a heap copy of the value (NULL for SQL NULL or no row; caller
 * frees). On failure returns -1 with a one-line reason in err; *sqlstate
 * (when not NULL, 6 bytes) receives the SQLSTATE or "" for connection
 * failures.
 */
LEASE_MUST_USE int lease_pg_admin_call(const char *database_url, const char *sql, int nparams,
                                       const char *const *params, char **out, char *sqlstate,
                                       char *err, size_t errsz);

#endif
