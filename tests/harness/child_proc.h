/*
 * child_proc.h - real child processes for tests: an environment without the
 * developer's LEASE_* settings, fork + exec with the output in a file, and
 * the child killed by the kernel if the test process dies (PR_SET_PDEATHSIG),
 * so a failing test never leaves a process behind; and the life of a
 * daemon under test (child_daemon_t: leased_proc.c, relay_proc.c).
 */
#ifndef LEASE_TEST_CHILD_PROC_H
#define LEASE_TEST_CHILD_PROC_H

#include <stdbool.h>
#include <sys/types.h>

/* The test's environment without LEASE_*, then extra, then defaults for
 * what extra does not set ("NAME=value", NULL-terminated lists, may be
 * NULL). A bare "NAME" in extra (no '=') leaves out the default of NAME
 * (leased with LEASE_DATABASE_URL_FILE instead of the default
 * LEASE_DATABASE_URL). Free with child_proc_env_free. */
char **child_proc_env(const char *const *extra, const char *const *defaults);
void child_proc_env_free(char **env);

/* Starts path with argv and env; stdin /dev/null, stdout and stderr
 * appended to out_path. Returns the pid or -1. */
pid_t child_proc_spawn(const char *path, char *const *argv, char **env, const char *out_path);

/* waitpid(pid, flags): true when it has exited; *status receives its exit
 * status, or 128+N when signal N killed it. */
bool child_proc_reap(pid_t pid, int flags, int *status);

/* A whole file as a heap string ("" when it cannot be read). */
char *child_proc_read_file(const char *path);

long child_proc_now_ms(void);
void child_proc_sleep_ms(long ms);

/*
 * A program run by a harness (leased, leased-relay, leasectl), its stdout
 * and stderr in log_path inside a temp folder of its own. Embedded in the
 * harness's own struct; name is for messages.
 */
typedef struct child_daemon {
    const char *name;
    pid_t pid;
    bool exited;
    int status; /* once exited: its exit status, or 128+N for signal N */
    char dir[128];
    char log_path[192];
} child_daemon_t;

/* Makes the temp folder (/tmp/<prefix>.XXXXXX) and names the log in it;
 * exits the test process when it cannot. */
void child_daemon_init(child_daemon_t *d, const char *name, const char *prefix,
                       const char *log_name);
/* Starts path (argv, env) with its output in the log; exits the test
 * process when it cannot. */
void child_daemon_spawn(child_daemon_t *d, const char *path, char *const *argv, char **env);
/* waitpid(flags): true once it has exited (status recorded). */
bool child_daemon_reap(child_daemon_t *d, int flags);
void child_daemon_signal(child_daemon_t *d, int sig);
/* The last 12 KB of its log on stderr. */
void child_daemon_dump_log(const child_daemon_t *d);
/* Waits up to timeout_ms for it to exit (then SIGKILL, and its log on
 * stderr); returns its status. */
int child_daemon_wait(child_daemon_t *d, int timeout_ms);
/* SIGTERM, wait 30 s, the log on stderr unless it exited 0; then
 * child_daemon_release. Returns its status. */
int child_daemon_stop(child_daemon_t *d);
/* Kills it if still running (SIGCONT first: it may be stopped), removes
 * the log and folder unless LEASE_TEST_KEEP_LOGS is set. */
void child_daemon_release(child_daemon_t *d);

#endif
