/*
 * migrate.h - applying migrations/NNNN_name.sql in order.
 *
 * Each file runs in its own transaction under a transaction-level advisory
 * lock, is recorded in lease.schema_migrations with its SHA-256, and is
 * skipped once applied. An applied file whose checksum changed, or an applied
 * version this build does not have, stops everything: migrations are
 * append-only.
 */
#ifndef LEASE_MIGRATE_H
#define LEASE_MIGRATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "lease/result.h"

typedef struct lease_migration {
    int version;
    char name[128];       /* file name, e.g. "0001_lease_store.sql" */
    char checksum[65];    /* hex SHA-256 of the file */
    bool applied;
    char applied_at[40];  /* RFC 3339, applied ones only */
} lease_migration_t;

typedef struct lease_migration_plan {
    size_t count;
    lease_migration_t *items; /* sorted by version */
} lease_migration_plan_t;

/* The migrations folder: $LEASE_MIGRATIONS_DIR, else the share folder of
 * the prefix the program is installed in (PREFIX/bin/leasectl reads
 * PREFIX/share/leased/migrations), else the build tree's link to the
 * source's migrations/. */
const char *lease_migrations_dir(void);

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
