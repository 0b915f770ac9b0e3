/*
 * testpair.h - replicated throwaway Postgres for the failover tests
 * (tests/harness/pgpair): a primary, a streaming replica, a WAL archive and
 * point-in-time restores, each test program with clusters of its own.
 *
 *   testpair_t *pair = testpair_new();                 // primary, migrated
 *   testpair_run(pair, "replica", "async");            // pg_basebackup -R
 *   char *url = testpair_multi_url(pair, "primary,replica", "postgres");
 *   leased_proc_t *srv = leased_proc_start(url, NULL); // as leased_app
 *   testpair_run(pair, "kill", "primary");
 *   testpair_run(pair, "promote", "replica");
 *   ...
 *   testpair_free(pair);                               // stops and removes all
 *
 * Nodes: "primary", "replica", "restored". Every failure of pgpair aborts
 * the test (exit 1) after printing the nodes' logs; the clusters of a test
 * that exits early are stopped and removed at exit.
 */
#ifndef LEASE_TEST_TESTPAIR_H
#define LEASE_TEST_TESTPAIR_H

typedef struct testpair testpair_t;

/* A temporary folder with a started primary whose database "leased" is
 * migrated (leasectl migrate) and has the login role leased_app. */
testpair_t *testpair_new(void);
/* Stops every node and removes the folder (kept with LEASE_TEST_KEEP_LOGS);
 * accepts NULL. */
void testpair_free(testpair_t *pair);

/* Runs `pgpair VERB DIR [ARG]` (see tests/harness/pgpair); aborts the test
 * when it fails. */
void testpair_run(testpair_t *pair, const char *verb, const char *arg);

/* The URL of one node's database "leased" as user (heap). */
char *testpair_url(const testpair_t *pair, const char *node, const char *user);
/* One libpq multi-host URL naming the nodes (comma-separated) with
 * target_session_attrs=read-write, as an operator configures leased for a
 * primary and its standby (heap). */
char *testpair_multi_url(const testpair_t *pair, const char *nodes, const char *user);

/* Prints the tail of every node's server log to stderr. */
void testpair_dump_logs(const testpair_t *pair);

#endif
