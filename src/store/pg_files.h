/*
 * pg_files.h - reading a schema file and its checksum, shared by the
 * numbered migrations (pg_migrate.c) and the repeatable definitions
 * (pg_repeatables.c). Neither defines what the other uses: both sit on this
 * file, so the two do not include each other.
 */
#ifndef LEASE_STORE_PG_FILES_H
#define LEASE_STORE_PG_FILES_H

#include <stddef.h>

/* The whole file, NUL-terminated, its length in *len; NULL with errno set. */
char *store_pg_read_file(const char *path, size_t *len);

/* The hex SHA-256 of data (what lease.schema_migrations and
 * lease.schema_repeatables record). */
void store_pg_sha256_hex(const char *data, size_t len, char out[65]);

#endif
