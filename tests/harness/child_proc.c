/*
 * child_proc.c - see child_proc.h.
 */
#include "child_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

char **child_proc_env(const char *const *extra, const char *const *defaults)
{
    size_t n = 0;
    for (char **e = environ; *e; e++)
        n++;
    for (const char *const *e = extra; e && *e; e++)
        n++;
    for (const char *const *e = defaults; e && *e; e++)
        n++;
    char **env = calloc(n + 1, sizeof *env);
    size_t k = 0;
    for (char **e = environ; *e; e++)
        if (strncmp(*e, "LEASE_", 6) != 0)
            env[k++] = strdup(*e);
    for (const char *const *e = extra; e && *e; e++)
        env[k++] = strdup(*e);
    for (const char *const *d = defaults; d && *d; d++) {
        size_t name_len = strcspn(*d, "=");
        bool set = false;
        for (const char *const *e = extra; e && *e; e++)
            if (strncmp(*e, *d, name_len + 1) == 0)
                set = true;
        if (!set)
            env[k++] = strdup(*d);
    }
    env[k] = NULL;
    return env;
}

void child_proc_env_free(char **env)
{
    for (char **e = env; e && *e; e++)
        free(*e);
    free(env);
}

pid_t child_proc_spawn(const char *path, char *const *argv, char **env, const char *out_path)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "child_proc: fork: %s\n", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127); /* the parent died before prctl took effect */
        int in = open("/dev/null", O_RDONLY);
        int out = open(out_path, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (in < 0 || out < 0 || dup2(in, STDIN_FILENO) < 0 || dup2(out, STDOUT_FILENO) < 0 ||
            dup2(out, STDERR_FILENO) < 0)
            _exit(127);
        close(in);
        close(out);
        execve(path, argv, env);
        _exit(127);
    }
    return pid;
}

bool child_proc_reap(pid_t pid, int flags, int *status)
{
    int st;
    pid_t r = waitpid(pid, &st, flags);
    if (r != pid)
        return false;
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return true;
}

char *child_proc_read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return strdup("");
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 2) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
    }
    buf[len] = '\0';
    fclose(f);
    return buf;
}

long child_proc_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

void child_proc_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}
