/*
 * leased_proc.h - a real leased process for tests, and credentials for it.
 *
 *   char *db = testpg_create_db("mytest");
 *   leased_proc_t *srv = leased_proc_start(db, NULL);        // waits for /readyz
 *   char *token = leased_proc_credential(db, &(leased_cred_spec_t){
 *       .principal = "prn_a", .tenant = "tenant-main", .program = "program-a",
 *       .capabilities = "targets:lease,targets:read"}, NULL);
 *   ... http_call(leased_proc_url(srv), "POST", "/v1/leases/acquire", token, body) ...
 *   assert_int_equal(leased_proc_stop(srv), 0);              // SIGTERM, exit status
 *   testpg_drop_db(db);
 *
 * leased runs from LEASE_TEST_LEASED on 127.0.0.1 with a port it picks
 * itself (LEASE_LISTEN=127.0.0.1:0; the port is read from its log), connects
 * as testpg_service_url(db), and logs into a temporary file that is printed
 * when something fails. The environment of the test is passed on without its
 * LEASE_* variables; extra settings are "NAME=value" strings. Failures to
 * start abort the test (exit 1) after printing the log.
 */
#ifndef LEASE_TEST_LEASED_PROC_H
#define LEASE_TEST_LEASED_PROC_H

#include <stdbool.h>
#include <sys/types.h>

typedef struct leased_proc leased_proc_t;

/* Starts leased and waits until /readyz answers 200 (at most 30 s).
 * extra_env: NULL-terminated "NAME=value" list, or NULL. db_url NULL: no
 * LEASE_DATABASE_URL (a store given in extra_env, LEASE_STORE_URL=redis://). */
leased_proc_t *leased_proc_start(const char *db_url, const char *const *extra_env);
/* Starts leased and waits only until it listens (not for readiness). */
leased_proc_t *leased_proc_start_unready(const char *db_url, const char *const *extra_env);

/* "http://127.0.0.1:PORT" */
const char *leased_proc_url(const leased_proc_t *p);
int leased_proc_port(const leased_proc_t *p);
pid_t leased_proc_pid(const leased_proc_t *p);

/* Whether the process started by leased_proc_start still runs (it has not
 * exited, been killed or restarted: the same pid throughout). */
bool leased_proc_alive(leased_proc_t *p);

/* Sends a signal (e.g. SIGTERM without waiting). */
void leased_proc_signal(leased_proc_t *p, int sig);
/* Waits for the process to exit (at most timeout_ms, then SIGKILL) and
 * returns its exit status (128+N when killed by signal N). The log stays
 * readable; free with leased_proc_free. */
int leased_proc_wait(leased_proc_t *p, int timeout_ms);
/* SIGTERM, wait (30 s), free; returns the exit status. */
int leased_proc_stop(leased_proc_t *p);
/* Kills a process still running (SIGKILL) and frees; accepts NULL. */
void leased_proc_free(leased_proc_t *p);

/* Everything leased logged so far (heap string). */
char *leased_proc_log(const leased_proc_t *p);
/* How many times needle occurs in the log so far (a condition to wait on
 * with test_wait_until: "leased logged that it is draining"). */
int leased_proc_log_count(const leased_proc_t *p, const char *needle);
/* Prints the tail of the log to stderr (for failing tests). */
void leased_proc_dump_log(const leased_proc_t *p);

/* Runs `leased ARGS...` (NULL-terminated) with the given environment
 * additions and no database; returns its exit status and, when out is not
 * NULL, its stdout and stderr combined (heap). For --help and bad settings. */
int leased_proc_run_cli(const char *const *args, const char *const *extra_env, char **out);

/* A credential for leasectl credential create. */
typedef struct leased_cred_spec {
    const char *principal;    /* required */
    const char *client;       /* default: "cl_" + principal */
    const char *tenant;       /* required */
    const char *program;      /* required ("*" with admin) */
    const char *actors;       /* comma-separated actor names; NULL = "*" */
    const char *capabilities; /* comma-separated, e.g. "targets:lease,targets:read" */
    bool admin;
    const char *expires_in; /* "30d", "3600s"; NULL = never */
} leased_cred_spec_t;

/*
 * Creates a credential in db_url (a testpg_create_db URL) through
 * `leasectl credential create` (LEASE_TEST_LEASECTL) and returns its token
 * (heap). credential_id, when not NULL, receives the id (>= 32 bytes).
 * Aborts the test on failure.
 */
char *leased_proc_credential(const char *db_url, const leased_cred_spec_t *spec,
                             char *credential_id);

#endif
