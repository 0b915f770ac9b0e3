/*
 * store_admin.h - the one-shot administrative calls of the PostgreSQL store,
 * for leasectl: migrations, credentials, epoch recovery and verification.
 *
 * Not the service's hot path (that is store_pg.c's pool). Each call opens one
 * connection (libpq's connect_timeout 10 s unless the URL says otherwise,
 * application name "leasectl"), runs in explicit transactions, and closes.
 * The credential, recover and verify calls run one function each inside
 * `BEGIN ISOLATION LEVEL SERIALIZABLE` (an operator's login role need not
 * default to it), repeat the transaction after a serialization failure with
 * a jittered backoff, and classify a backend error through the one SQLSTATE
 * table of the adapter (src/store/pg_sqlstate.c, its "leasectl" column).
 *
 * What reaches the operator in err: one line, the database's primary
 * message only (never DETAIL or CONTEXT, which may quote parameter values),
 * with any secret the caller names blanked. No SQL text or backend type
 * crosses this header.
 */
#ifndef LEASE_STORE_ADMIN_H
#define LEASE_STORE_ADMIN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "lease/result.h"

/* How an administrative call ended; leasectl maps each to an exit status. */
typedef enum lease_admin_status {
    LEASE_ADMIN_OK = 0,      /* done; outputs are set */
    LEASE_ADMIN_INVALID,     /* the database rejected the input (classes 22, 23, LS003, LS005) */
    LEASE_ADMIN_DENIED,      /* the login role may not do this (42501) */
    LEASE_ADMIN_UNAVAILABLE, /* no connection, lost, or still conflicting after retries */
    LEASE_ADMIN_FAILED,      /* any other error (schema missing, bad reply) */
} lease_admin_status_t;

/* ---- credentials (`leasectl credential`) ------------------------------ */

/*
 * Creates a credential from `request` (the jsonb of docs/sql-api.md, with
 * secret_digest already computed; borrowed). On LEASE_ADMIN_OK, *row is the
 * stored row as the function returned it, without any secret_digest (caller
 * decrefs). err never contains the request's digest.
 */
LEASE_MUST_USE lease_admin_status_t lease_admin_credential_create(const char *database_url,
                                                                  const json_t *request,
                                                                  json_t **row, char *err,
                                                                  size_t errsz);

/* Revokes by id. *revoked is what the function answered: true when this call
 * revoked an active credential. */
LEASE_MUST_USE lease_admin_status_t lease_admin_credential_revoke(const char *database_url,
                                                                  const char *credential_id,
                                                                  bool *revoked, char *err,
                                                                  size_t errsz);

/* Lists credentials: *rows is a JSON array without digests (caller decrefs). */
LEASE_MUST_USE lease_admin_status_t lease_admin_credential_list(const char *database_url,
                                                                json_t **rows, char *err,
                                                                size_t errsz);

/* ---- sessions (`leasectl session list`) ------------------------------- */

/* The open sessions of lease.active_sessions (all tenants, or tenant_id's
 * when not NULL) as a JSON array of objects, oldest first; remaining_ms is
 * what is left of each at backend time (caller decrefs *rows). */
LEASE_MUST_USE lease_admin_status_t lease_admin_session_list(const char *database_url,
                                                             const char *tenant_id, json_t **rows,
                                                             char *err, size_t errsz);

/* ---- recovery (`leasectl recover`, `leasectl verify`) ----------------- */

/*
 * lease.recover_epoch(reason, floor): raises every fencing counter by the
 * epoch stride (or to floor, when floor is not NULL: decimal text, checked
 * by the caller), revokes every live lease, unseals. On LEASE_ADMIN_OK
 * *answer is the function's JSON answer as text (heap, caller frees; NULL
 * when the function answered NULL).
 */
LEASE_MUST_USE lease_admin_status_t lease_admin_recover(const char *database_url,
                                                        const char *reason, const char *floor,
                                                        char **answer, char *err, size_t errsz);

/*
 * lease.verify(): on LEASE_ADMIN_OK *report is the text of
 * {"consistent":bool,"problems":[...]} (heap, caller frees) and *consistent
 * says whether problems is empty.
 */
LEASE_MUST_USE lease_admin_status_t lease_admin_verify(const char *database_url, char **report,
                                                       bool *consistent, char *err, size_t errsz);

/* ---- migrations (`leasectl migrate`) ---------------------------------- */

/*
 * migrations/NNNN_name.sql applied in order, then the repeatable
 * definitions of sql/ (one file per function or view, in the order
 * sql/ORDER lists them). Each numbered file runs in its own transaction
 * under a transaction-level advisory lock, the definitions in the
 * transaction of the last file. A numbered file is recorded in lease.schema_migrations with
 * its SHA-256 and skipped once applied; an applied file whose checksum
 * changed, or an applied version this build does not have, stops
 * everything: migrations are append-only. A definition is recorded in
 * lease.schema_repeatables and applied again whenever its checksum changes
 * (and all of them whenever a numbered file was applied).
 */
typedef struct lease_migration {
    int version;
    char name[128];    /* file name, e.g. "0001_lease_store.sql" */
    char checksum[65]; /* hex SHA-256 of the file */
    bool applied;
    char applied_at[40]; /* RFC 3339, applied ones only */
} lease_migration_t;

typedef struct lease_migration_plan {
    size_t count;
    lease_migration_t *items; /* sorted by version */
    size_t repeatables;         /* files sql/ORDER lists */
    size_t repeatables_pending; /* of them, not applied with their current checksum */
} lease_migration_plan_t;

/* The migrations folder: $LEASE_MIGRATIONS_DIR, else the share folder of
 * the prefix the program is installed in (PREFIX/bin/leasectl reads
 * PREFIX/share/leased/migrations), else the build tree's link to the
 * source's migrations/. */
const char *lease_migrations_dir(void);

/* The repeatable definitions' folder for a migrations folder:
 * $LEASE_SQL_DIR, else the folder "sql" beside it (PREFIX/share/leased/sql,
 * or the build tree's link to the source's sql/). */
const char *lease_repeatables_dir(const char *migrations_dir);

/* Applies every pending migration. Progress lines go to `log` (may be NULL).
 * Returns 0 on success; otherwise writes a one-line reason into err and
 * returns -1. On success *plan (if not NULL) describes the final state. */
LEASE_MUST_USE int lease_migrate_apply(const char *database_url, const char *dir, FILE *log,
                                       lease_migration_plan_t *plan, char *err, size_t errsz);

/* Reads the state without changing anything (checksums still verified). */
LEASE_MUST_USE int lease_migrate_status(const char *database_url, const char *dir,
                                        lease_migration_plan_t *plan, char *err, size_t errsz);

void lease_migration_plan_free(lease_migration_plan_t *plan);

#endif
