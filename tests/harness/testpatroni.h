/*
 * testpatroni.h - a throwaway Patroni cluster for the Patroni failover drill
 * (tests/harness/patronicluster): one etcd and three PostgreSQL members, m1
 * (the first leader), m2 and m3, on loopback, each test program with a
 * cluster of its own.
 *
 *   testpatroni_t *pc = testpatroni_new("sync");     // or "async"
 *   char *url = testpatroni_url(pc, "leased_app");    // multi-host, read-write
 *   leased_proc_t *srv = leased_proc_start(url, NULL);
 *   char *old = testpatroni_out(pc, "leader", NULL);
 *   testpatroni_run(pc, "kill", old);
 *   ...
 *   testpatroni_free(pc);                             // stops and removes all
 *
 * Every failure of patronicluster aborts the test (exit 1) after printing
 * the members' logs; the clusters of a test that exits early are removed at
 * exit.
 */
#ifndef LEASE_TEST_TESTPATRONI_H
#define LEASE_TEST_TESTPATRONI_H

typedef struct testpatroni testpatroni_t;

/* etcd and three members started, m1 leading, database "leased" migrated,
 * the login role leased_app made. mode: "sync" (Patroni's synchronous_mode)
 * or "async". */
testpatroni_t *testpatroni_new(const char *mode);
/* Stops everything and removes the folder (kept with LEASE_TEST_KEEP_LOGS);
 * accepts NULL. */
void testpatroni_free(testpatroni_t *pc);

/* Runs `patronicluster VERB DIR [ARG]`; aborts the test when it fails. */
void testpatroni_run(testpatroni_t *pc, const char *verb, const char *arg);
/* The same, returning what it printed, without the final newline (heap). */
char *testpatroni_out(testpatroni_t *pc, const char *verb, const char *arg);

/* Starts `patronicluster VERB DIR [ARG]` without waiting for it; the
 * handle goes to testpatroni_finish, which waits and aborts the test when it
 * failed. */
void *testpatroni_begin(testpatroni_t *pc, const char *verb, const char *arg);
void testpatroni_finish(testpatroni_t *pc, void *handle);

/* The multi-host URL of the three members (target_session_attrs=read-write)
 * as user (heap). */
char *testpatroni_url(testpatroni_t *pc, const char *user);
/* One member's URL (database "leased") as user (heap). */
char *testpatroni_member_url(testpatroni_t *pc, const char *member, const char *user);

#endif
