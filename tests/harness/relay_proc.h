/*
 * relay_proc.h - a real leased-relay process for tests.
 *
 *   relay_proc_t *r = relay_proc_start(db, (const char *[]){"LEASE_RELAY_EXCHANGE=x", NULL});
 *   ... wait for conditions; relay_proc_metric(r, "leased_relay_lag_rows") ...
 *   assert_int_equal(relay_proc_stop(r), 0);             // SIGTERM, exit status
 *
 * The relay runs from LEASE_TEST_RELAY, connects to db's database as the
 * relay login role (leased_relay_app, a member of lease_relay) and to the
 * fixture's broker, serves /metrics on a port it picks itself (read from
 * its log), logs at debug level into a temporary file printed when a test
 * fails. The test's environment is passed on without its LEASE_*
 * variables; extra settings are "NAME=value" strings and win.
 */
#ifndef LEASE_TEST_RELAY_PROC_H
#define LEASE_TEST_RELAY_PROC_H

#include <stdbool.h>
#include <sys/types.h>

typedef struct relay_proc relay_proc_t;

/* Starts leased-relay and waits (at most 30 s) until its metrics endpoint
 * answers. Aborts the test (exit 1) after printing the log on failure. */
relay_proc_t *relay_proc_start(const char *db_url, const char *const *extra_env);

pid_t relay_proc_pid(const relay_proc_t *p);
/* "http://127.0.0.1:PORT" of /metrics, /healthz, /readyz. */
const char *relay_proc_url(const relay_proc_t *p);

/* The value of one series of /metrics (the exact name with its labels,
 * e.g. "leased_relay_published_total{destination=\"amqp\"}"), or -1 when it is
 * absent or the endpoint does not answer. */
double relay_proc_metric(const relay_proc_t *p, const char *series);

void relay_proc_signal(relay_proc_t *p, int sig);
/* Waits for the exit (at most timeout_ms, then SIGKILL); 128+N for signal N. */
int relay_proc_wait(relay_proc_t *p, int timeout_ms);
/* SIGTERM, wait 30 s, free; returns the exit status (the log is printed
 * when it is not 0). */
int relay_proc_stop(relay_proc_t *p);
/* SIGKILL when still running, free; accepts NULL. */
void relay_proc_free(relay_proc_t *p);

char *relay_proc_log(const relay_proc_t *p);
void relay_proc_dump_log(const relay_proc_t *p);

/* The relay's database URL for db (a testpg_create_db URL); heap. */
char *relay_proc_db_url(const char *db_url);

/*
 * Runs leased-relay ARGS... to the end (at most timeout_ms) with the
 * relay's defaults for db_url (NULL: no database setting) plus extra_env;
 * returns its exit status and, when out is not NULL, its output (heap).
 */
int relay_proc_run(const char *db_url, const char *const *args, const char *const *extra_env,
                   int timeout_ms, char **out);

#endif
