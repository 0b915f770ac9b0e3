/*
 * schema.h - the schema version this build expects. It is the number of the
 * newest file in migrations/; tests/unit/test_schema_version.c fails when a
 * migration is added without raising it. leased reports not-ready until the
 * database is at exactly this version.
 */
#ifndef LEASE_SCHEMA_H
#define LEASE_SCHEMA_H

#define LEASE_SCHEMA_VERSION 30

#endif
