/*
 * store_pg.h - opening the PostgreSQL adapter of the lease-store protocol.
 *
 * The adapter keeps a fixed pool of libpq connections, sends each operation
 * as one call of one stored function (docs/sql-api.md) in one SERIALIZABLE
 * transaction (the login role's default), enforces the call's deadline,
 * retries serialization failures with jittered backoff while the deadline
 * allows, and maps every outcome to a lease_code_t.
 */
#ifndef LEASE_STORE_PG_H
#define LEASE_STORE_PG_H

#include <stddef.h>
#include <stdint.h>

#include "lease/listener.h"
#include "lease/store.h"

typedef struct lease_store_pg_config {
    const char *conninfo;         /* libpq connection string or URI (any parameter) */
    int pool_size;                /* connections kept; >= 1 */
    int64_t connect_timeout_ms;   /* per connection attempt */
    const char *application_name; /* shown in pg_stat_activity; default "leased" */
    /* true: every call is sent as text, never as a prepared statement
     * (false, the default, prepares the typed calls on direct sessions) */
    bool no_prepared_statements;
} lease_store_pg_config_t;

/*
 * Opens the adapter. Connections are made lazily and re-made after failure,
 * so an unreachable database does not fail the open (operations answer
 * lease_backend_unavailable until it is back). Returns 0 and sets *out, or
 * -1 with a one-line reason in err (bad conninfo, out of memory).
 * Close with lease_store_close().
 */
LEASE_MUST_USE int lease_store_pg_open(const lease_store_pg_config_t *cfg, lease_store_t **out,
                                       char *err, size_t errsz);

/* The PostgreSQL feed of ended leases (lease/listener.h): LISTEN
 * lease_ended on a dedicated session and the poll lease.watch_ended. */
typedef struct lease_listener_pg_config {
    const char *conninfo;         /* libpq string or URI; a direct connection for LISTEN */
    int64_t connect_timeout_ms;   /* per attempt */
    const char *application_name; /* shown in pg_stat_activity */
    bool listen;                  /* false: poll only */
} lease_listener_pg_config_t;

/* Makes the listener (no connection yet). Returns 0, or -1 with a reason in
 * err (bad conninfo, out of memory). */
LEASE_MUST_USE int lease_listener_pg_open(const lease_listener_pg_config_t *cfg,
                                          lease_listener_t **out, char *err, size_t errsz);

#endif
