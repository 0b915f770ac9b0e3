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
        if (strchr(*e, '=')) /* a bare "NAME" only removes a default */
            env[k++] = strdup(*e);
    for (const char *const *d = defaults; d && *d; d++) {
        size_t name_len = strcspn(*d, "=");
        bool set = false;
        for (const char *const *e = extra; e && *e; e++)
            if (strncmp(*e, *d, name_len) == 0 && ((*e)[name_len] == '=' || !(*e)[name_len]))
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

void child_daemon_init(child_daemon_t *d, const char *name, const char *prefix,
                       const char *log_name)
{
    memset(d, 0, sizeof *d);
    d->name = name;
    d->pid = -1;
    snprintf(d->dir, sizeof d->dir, "/tmp/%s.XXXXXX", prefix);
    if (!mkdtemp(d->dir)) {
        fprintf(stderr, "child_proc: mkdtemp %s: %s\n", d->dir, strerror(errno));
        exit(1);
    }
    snprintf(d->log_path, sizeof d->log_path, "%s/%s", d->dir, log_name);
}

void child_daemon_spawn(child_daemon_t *d, const char *path, char *const *argv, char **env)
{
    d->pid = child_proc_spawn(path, argv, env, d->log_path);
    if (d->pid < 0) {
        fprintf(stderr, "child_proc: cannot start %s (%s)\n", d->name, path);
        exit(1);
    }
}

bool child_daemon_reap(child_daemon_t *d, int flags)
{
    if (d->exited)
        return true;
    if (d->pid <= 0 || !child_proc_reap(d->pid, flags, &d->status))
        return false;
    d->exited = true;
    return true;
}

void child_daemon_signal(child_daemon_t *d, int sig)
{
    if (!d->exited && d->pid > 0)
        kill(d->pid, sig);
}

void child_daemon_dump_log(const child_daemon_t *d)
{
    char *log = child_proc_read_file(d->log_path);
    size_t n = strlen(log);
    const char *tail = n > 12000 ? log + n - 12000 : log;
    fprintf(stderr, "---- %s log (%s) ----\n%s---- end of %s log ----\n", d->name, d->log_path,
            tail, d->name);
    free(log);
}

int child_daemon_wait(child_daemon_t *d, int timeout_ms)
{
    long end = child_proc_now_ms() + timeout_ms;
    while (!child_daemon_reap(d, WNOHANG)) {
        if (child_proc_now_ms() > end) {
            fprintf(stderr, "child_proc: %s (pid %d) did not exit within %d ms; killing it\n",
                    d->name, (int)d->pid, timeout_ms);
            child_daemon_dump_log(d);
            kill(d->pid, SIGCONT);
            kill(d->pid, SIGKILL);
            child_daemon_reap(d, 0);
            break;
        }
        child_proc_sleep_ms(10);
    }
    return d->status;
}

void child_daemon_release(child_daemon_t *d)
{
    if (!d->exited && d->pid > 0) {
        kill(d->pid, SIGCONT);
        kill(d->pid, SIGKILL);
        child_daemon_reap(d, 0);
    }
    if (!getenv("LEASE_TEST_KEEP_LOGS")) {
        unlink(d->log_path);
        rmdir(d->dir);
    }
}

int child_daemon_stop(child_daemon_t *d)
{
    child_daemon_signal(d, SIGTERM);
    int status = child_daemon_wait(d, 30000);
    if (status != 0)
        child_daemon_dump_log(d);
    child_daemon_release(d);
    return status;
}
