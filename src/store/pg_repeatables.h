/*
 * pg_repeatables.h - the repeatable definitions of sql/ (every function and
 * view, one file each), read in the order sql/ORDER lists them and applied
 * by pg_migrate.c inside its transaction, whenever a file's checksum differs
 * from the one lease.schema_repeatables recorded (Flyway's repeatable
 * migrations).
 */
#ifndef LEASE_STORE_PG_REPEATABLES_H
#define LEASE_STORE_PG_REPEATABLES_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct lease_repeatable {
    char name[256];    /* path under the folder, e.g. "lease/acquire.sql" */
    char checksum[65]; /* hex SHA-256 of the file */
    char *body;
} lease_repeatable_t;

typedef struct lease_repeatables {
    const char *dir;
    size_t count;
    lease_repeatable_t *items; /* in ORDER's order */
} lease_repeatables_t;

/* Reads dir/ORDER and every file it lists. Refuses a listed file that is
 * missing or listed twice, a name outside the folder, and a .sql file in
 * the folder that ORDER does not list (it would silently never apply).
 * 0, or -1 with err set (reps then holds nothing). */
int lease_repeatables_read(const char *dir, lease_repeatables_t *reps, char *err, size_t errsz);

/* Inside the caller's transaction (lease.schema_repeatables exists):
 * executes every file whose recorded checksum differs, or every file when
 * all is true or a recorded file is no longer listed, in order, and records
 * it. When every file ran (and ORDER lists at least one), drops each
 * function of schema lease that none of them defined (*dropped counts
 * them) and forgets the records of removed files. *applied counts the
 * files. 0, or -1. */
int lease_repeatables_apply(PGconn *c, const lease_repeatables_t *reps, bool all, size_t *applied,
                            size_t *dropped, char *err, size_t errsz);

/* How many files there are and how many are not recorded with their
 * current checksum (all of them when the table does not exist yet), plus
 * the recorded files ORDER no longer lists. */
int lease_repeatables_pending(PGconn *c, const lease_repeatables_t *reps, size_t *count,
                              size_t *pending, char *err, size_t errsz);

void lease_repeatables_free(lease_repeatables_t *reps);

#endif
