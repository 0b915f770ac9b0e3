/*
 * exec_common.h - leasectl as a real child process, for the executor tests
 * (header only; each test file is its own program): start it with a given
 * LEASE_URL and LEASE_TOKEN, wait for it, read its output files, and the
 * command `leasectl run` supervises in those tests (it records its LEASE_*
 * environment and, on SIGTERM, the wall time in ms).
 */
#ifndef LEASE_TEST_EXEC_COMMON_H
#define LEASE_TEST_EXEC_COMMON_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "http_common.h"
#include "lease/clock.h"

typedef struct proc {
    pid_t pid;
    char dir[64]; /* scratch folder: out, err, env, term */
} proc_t;

static inline char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        fwrite(chunk, 1, n, mem);
    fclose(f);
    fclose(mem);
    return buf;
}

static inline char *proc_file(const proc_t *p, const char *name)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", p->dir, name);
    return slurp(path);
}

/*
 * Starts leasectl with argv (after "leasectl") talking to url with token,
 * stdout/stderr to files in a fresh scratch folder; extra_env are more
 * NAME=value entries (NULL-terminated, may be NULL). The child's own LEASE_*
 * are replaced.
 */
static inline proc_t ctl_start(const char *const *args, const char *url, const char *token,
                               const char *const *extra_env)
{
    proc_t p;
    snprintf(p.dir, sizeof p.dir, "/tmp/http_executor.XXXXXX");
    assert_non_null(mkdtemp(p.dir));
    char *argv[64] = {(char *)LEASE_TEST_LEASECTL};
    for (size_t i = 0; args[i] && i < 62; i++)
        argv[i + 1] = (char *)(uintptr_t)args[i];

    char *envp[32];
    size_t e = 0;
    char url_var[256], token_var[256], dir_var[128];
    snprintf(url_var, sizeof url_var, "LEASE_URL=%s", url);
    snprintf(token_var, sizeof token_var, "LEASE_TOKEN=%s", token ? token : "");
    snprintf(dir_var, sizeof dir_var, "TEST_DIR=%s", p.dir);
    envp[e++] = url_var;
    envp[e++] = token_var;
    envp[e++] = dir_var;
    /* leasectl itself is on the PATH, as for a user who installed it */
    char path_var[512];
    const char *slash = strrchr(LEASE_TEST_LEASECTL, '/');
    snprintf(path_var, sizeof path_var, "PATH=%.*s:/usr/local/bin:/usr/bin:/bin",
             (int)(slash - LEASE_TEST_LEASECTL), LEASE_TEST_LEASECTL);
    envp[e++] = path_var;
    envp[e++] = "NO_PROXY=*";
    /* sanitizer settings reach leasectl too, so its findings fail loudly */
    const char *pass[] = {"ASAN_OPTIONS", "UBSAN_OPTIONS"};
    char pass_var[2][512];
    for (size_t i = 0; i < 2; i++) {
        if (getenv(pass[i])) {
            snprintf(pass_var[i], sizeof pass_var[i], "%s=%s", pass[i], getenv(pass[i]));
            envp[e++] = pass_var[i];
        }
    }
    for (size_t i = 0; extra_env && extra_env[i] && e < 31; i++)
        envp[e++] = (char *)(uintptr_t)extra_env[i];
    envp[e] = NULL;

    char out[128], err[128];
    snprintf(out, sizeof out, "%s/out", p.dir);
    snprintf(err, sizeof err, "%s/err", p.dir);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 2, err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_int_equal(posix_spawn(&p.pid, argv[0], &fa, NULL, argv, envp), 0);
    posix_spawn_file_actions_destroy(&fa);
    return p;
}

/* Waits for the process; its exit status (128+N for signal N). */
static inline int proc_wait(proc_t *p, int64_t timeout_ms)
{
    lease_deadline_t until = lease_deadline_in(timeout_ms);
    int status;
    for (;;) {
        pid_t r = waitpid(p->pid, &status, WNOHANG);
        if (r == p->pid)
            break;
        if (lease_deadline_passed(&until)) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &status, 0);
            char *err = proc_file(p, "err");
            fail_msg("leasectl still running after %lld ms; stderr:\n%s", (long long)timeout_ms,
                     err ? err : "");
        }
        lease_sleep_ms(5);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static inline void proc_cleanup(proc_t *p)
{
    const char *names[] = {"out", "err", "env", "term"};
    for (size_t i = 0; i < 4; i++) {
        char path[128];
        snprintf(path, sizeof path, "%s/%s", p->dir, names[i]);
        unlink(path);
    }
    rmdir(p->dir);
}

/* Runs leasectl to completion; returns its status, stdout parsed as JSON. */
static inline int ctl(const char *const *args, const char *url, const char *token,
                      const char *const *extra_env, json_t **out)
{
    proc_t p = ctl_start(args, url, token, extra_env);
    int status = proc_wait(&p, 30000);
    char *text = proc_file(&p, "out");
    if (status != 0) { /* expected or not, it helps to read why */
        char *err = proc_file(&p, "err");
        print_message("leasectl %s -> %d\n  stdout: %s  stderr: %s", args[0], status,
                      text ? text : "", err ? err : "");
        free(err);
    }
    if (out)
        *out = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    proc_cleanup(&p);
    return status;
}

/* Waits for a file in the scratch folder; false on timeout. */
static inline bool wait_file(const proc_t *p, const char *name, int64_t timeout_ms)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", p->dir, name);
    lease_deadline_t until = lease_deadline_in(timeout_ms);
    struct stat st;
    while (stat(path, &st) != 0) {
        if (lease_deadline_passed(&until))
            return false;
        lease_sleep_ms(5);
    }
    return true;
}

/* One KEY=value from the command's recorded environment (heap). */
static inline char *env_value(const proc_t *p, const char *key)
{
    char *text = proc_file(p, "env");
    assert_non_null(text);
    size_t klen = strlen(key);
    char *out = NULL;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
        if (strncmp(line, key, klen) == 0 && line[klen] == '=')
            out = strdup(line + klen + 1);
    free(text);
    assert_non_null(out);
    return out;
}

/* The command `run` supervises: sets its SIGTERM handler (record the wall
 * time in ms, exit 143), then records its LEASE_* environment, then loops.
 * The environment file is the tests' sign that the command is running, so
 * it comes after the handler: a SIGTERM between the two (a loaded machine
 * can leave that window open for a while) would end sh unrecorded. */
#define child_script                                                                               \
    "trap 'date +%s%3N > \"$TEST_DIR/term.tmp\"; mv \"$TEST_DIR/term.tmp\" \"$TEST_DIR/term\";"    \
    " exit 143' TERM\n"                                                                            \
    "env | grep '^LEASE_' > \"$TEST_DIR/env.tmp\" && mv \"$TEST_DIR/env.tmp\" \"$TEST_DIR/env\"\n" \
    "while :; do sleep 0.05; done\n"

#endif
