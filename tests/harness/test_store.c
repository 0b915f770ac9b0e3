/*
 * test_store.c - the backend switch of the contract tests (test_store.h):
 * the redis-server through the same script the Valkey tests use, the
 * library and namespace through the real leasectl, as an operator would.
 */
#include "test_store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

bool test_store_is_valkey(void)
{
    const char *v = getenv("LEASE_TEST_STORE");
    if (!v || !*v || strcmp(v, "postgres") == 0)
        return false;
    if (strcmp(v, "valkey") == 0)
        return true;
    fprintf(stderr, "test_store: LEASE_TEST_STORE=%s is neither postgres nor valkey\n", v);
    exit(2);
}

/* The servers started and not yet stopped: a test that exits early (a
 * testpg_* call on Valkey exits the program, a failed setup) still stops
 * them, so no redis-server outlives its test. */
#define TEST_STORE_MAX 8
static test_store_valkey_t *running[TEST_STORE_MAX];

static void stop_server(const char *state)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' stop '%s' >&2", LEASE_TEST_VALKEYSERVER_SCRIPT, state);
    if (system(cmd) != 0)
        fprintf(stderr, "test_store: valkeyserver stop failed\n");
}

static void stop_left_running(void)
{
    for (int i = 0; i < TEST_STORE_MAX; i++)
        if (running[i])
            test_store_valkey_stop(running[i]); /* clears running[i] */
}

static void track(test_store_valkey_t *v, bool on)
{
    static bool registered;
    if (!registered) {
        atexit(stop_left_running);
        registered = true;
    }
    for (int i = 0; i < TEST_STORE_MAX; i++)
        if (on ? running[i] == NULL : running[i] == v) {
            running[i] = on ? v : NULL;
            return;
        }
}

static void fail(const char *what)
{
    fprintf(stderr, "test_store: %s\n", what);
    exit(1);
}

void test_store_valkey_start(test_store_valkey_t *v)
{
    char dir[] = "/tmp/lease-test-store-XXXXXX";
    if (!mkdtemp(dir))
        fail("mkdtemp failed");
    snprintf(v->state, sizeof v->state, "%s/valkey.state", dir);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' start '%s' >&2", LEASE_TEST_VALKEYSERVER_SCRIPT, v->state);
    if (system(cmd) != 0)
        fail("valkeyserver start failed");
    track(v, true);
    snprintf(cmd, sizeof cmd, "'%s' port '%s'", LEASE_TEST_VALKEYSERVER_SCRIPT, v->state);
    FILE *p = popen(cmd, "r");
    int port = 0;
    if (!p || fscanf(p, "%d", &port) != 1 || port <= 0)
        fail("valkeyserver port failed");
    pclose(p);
    snprintf(v->url, sizeof v->url, "redis://127.0.0.1:%d", port);
    snprintf(v->setting, sizeof v->setting, "LEASE_STORE_URL=%s", v->url);
    snprintf(cmd, sizeof cmd, "'%s' migrate --database-url '%s' >&2", LEASE_TEST_LEASECTL, v->url);
    if (system(cmd) != 0)
        fail("leasectl migrate on the redis-server failed");
}

void test_store_valkey_stop(test_store_valkey_t *v)
{
    track(v, false);
    stop_server(v->state);
    unlink(v->state);
    char *slash = strrchr(v->state, '/');
    if (slash) {
        *slash = '\0';
        rmdir(v->state);
    }
    *v = (test_store_valkey_t){0};
}

char *test_store_valkey_cli(const test_store_valkey_t *v, const char *const *args)
{
    const char *port = strrchr(v->url, ':');
    if (!port)
        return NULL;
    const char *cli = getenv("LEASE_TEST_REDIS_CLI");
    if (!cli || !*cli)
        cli = "redis-cli";
    /* copies: execvp takes char *const[] */
    char *argv[64] = {strdup(cli), strdup("-p"), strdup(port + 1)};
    size_t n = 3;
    for (const char *const *a = args; *a && n < 63; a++)
        argv[n++] = strdup(*a);
    argv[n] = NULL;
    int out[2];
    pid_t pid = pipe(out) == 0 ? fork() : -2;
    if (pid == -1) {
        close(out[0]);
        close(out[1]);
    }
    if (pid < 0) {
        for (size_t i = 0; i < n; i++)
            free(argv[i]);
        return NULL;
    }
    if (pid == 0) {
        dup2(out[1], STDOUT_FILENO);
        close(out[0]);
        close(out[1]);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(out[1]);
    for (size_t i = 0; i < n; i++)
        free(argv[i]);
    size_t len = 0, cap = 256;
    char *text = malloc(cap);
    ssize_t got;
    while (text && (got = read(out[0], text + len, cap - len - 1)) > 0) {
        len += (size_t)got;
        if (cap - len < 64) {
            char *grown = realloc(text, cap * 2);
            if (!grown) {
                free(text);
                text = NULL;
                break;
            }
            text = grown;
            cap *= 2;
        }
    }
    close(out[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!text || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        free(text);
        return NULL;
    }
    text[len] = '\0';
    return text;
}

long long test_store_valkey_cli_int(const test_store_valkey_t *v, const char *const *args)
{
    char *out = test_store_valkey_cli(v, args);
    char *end = out;
    long long n = out ? strtoll(out, &end, 10) : 0;
    if (!out || end == out) {
        fprintf(stderr, "redis-cli %s: printed %s, not an integer\n", args[0],
                out ? out : "nothing (it could not run, or failed)");
        exit(1);
    }
    free(out);
    return n;
}
