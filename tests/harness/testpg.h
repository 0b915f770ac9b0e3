/*
 * testpg.h - the test suite's throwaway Postgres (see tests/harness/pgcluster).
 *
 * Every test that needs a database calls testpg_create_db() and works in its
 * own copy of the migrated template, so tests run in parallel and leave
 * nothing behind. URLs returned are heap strings the caller frees.
 */
#ifndef LEASE_TESTPG_H
#define LEASE_TESTPG_H

#include <stdbool.h>

/* A fresh database copied from the migrated template; the URL connects as
 * the superuser (owner). Aborts the test on failure. */
char *testpg_create_db(const char *prefix);
/* A fresh, empty database (no schema); for migration tests. */
char *testpg_create_empty_db(const char *prefix);
/* The same database, connecting as the service login role "leased_app"
 * (member of lease_service, default isolation serializable). */
char *testpg_service_url(const char *db_url);
/* The same database as another role (e.g. "lease_operator_login"). */
char *testpg_url_as(const char *db_url, const char *user);
/* Drops a database made by testpg_create_db (terminating its sessions). */
void testpg_drop_db(const char *db_url);

/* Runs SQL (one or more statements, simple protocol); returns true on
 * success, prints the error otherwise. */
bool testpg_exec(const char *url, const char *sql);
/* Runs a query returning one value; returns a heap string or NULL on error
 * or no row. */
char *testpg_query_value(const char *url, const char *sql);
/* Same, parsed as an integer (aborts the test when it is not one). */
long long testpg_query_int(const char *url, const char *sql);

/* A digest of every lease table but the audit log (heap): equal before and
 * after a refused request proves the request changed nothing. */
char *testpg_state_digest(const char *url);

/* Whether the tests own the cluster (so they may stop and start it). */
bool testpg_owned(void);
/* The owned cluster's socket folder (and *port), or NULL when the tests do
 * not own the cluster (LEASE_TEST_DATABASE_URL). Borrowed string. */
const char *testpg_socket(int *port);
/* Stops (immediate shutdown) / starts the whole cluster. */
bool testpg_pause(void);
bool testpg_resume(void);

/* Terminates every backend of the database whose application_name matches
 * and waits until they have exited; returns how many. */
int testpg_terminate_backends(const char *db_url, const char *application_name);

#endif
