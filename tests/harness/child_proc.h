/*
 * child_proc.h - real child processes for tests: an environment without the
 * developer's LEASE_* settings, fork + exec with the output in a file, and
 * the child killed by the kernel if the test process dies (PR_SET_PDEATHSIG),
 * so a failing test never leaves a process behind. (leased_proc.c has the
 * same pieces for leased; new harness code uses these.)
 */
#ifndef LEASE_TEST_CHILD_PROC_H
#define LEASE_TEST_CHILD_PROC_H

#include <stdbool.h>
#include <sys/types.h>

/* The test's environment without LEASE_*, then extra, then defaults for
 * what extra does not set ("NAME=value", NULL-terminated lists, may be
 * NULL). Free with child_proc_env_free. */
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

#endif
