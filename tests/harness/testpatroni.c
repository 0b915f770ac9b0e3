/*
 * testpatroni.c - drive tests/harness/patronicluster from C.
 */
#include "testpatroni.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define CLUSTERS_MAX 4

struct testpatroni {
    char dir[128];
};

/* Clusters still running, removed at exit when a test aborts early. */
static testpatroni_t *live[CLUSTERS_MAX];

static int sh(const char *cmd)
{
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static void dump_logs(const testpatroni_t *pc)
{
    const char *members[] = {"m1", "m2", "m3"};
    for (size_t i = 0; i < 3; i++) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "'%s' log '%s' %s 30 >&2 2>/dev/null",
                 LEASE_TEST_PATRONICLUSTER, pc->dir, members[i]);
        (void)sh(cmd);
    }
}

static void destroy(testpatroni_t *pc)
{
    char cmd[512];
    if (getenv("LEASE_TEST_KEEP_LOGS")) {
        fprintf(stderr, "testpatroni: kept %s (stop it with: %s destroy %s)\n", pc->dir,
                LEASE_TEST_PATRONICLUSTER, pc->dir);
        return;
    }
    snprintf(cmd, sizeof cmd, "'%s' destroy '%s'", LEASE_TEST_PATRONICLUSTER, pc->dir);
    (void)sh(cmd);
}

static void destroy_live(void)
{
    for (size_t i = 0; i < CLUSTERS_MAX; i++)
        if (live[i]) {
            destroy(live[i]);
            free(live[i]);
            live[i] = NULL;
        }
}

testpatroni_t *testpatroni_new(const char *mode)
{
    static bool registered;
    if (!registered) {
        atexit(destroy_live);
        registered = true;
    }
    testpatroni_t *pc = calloc(1, sizeof *pc);
    snprintf(pc->dir, sizeof pc->dir, "/tmp/leased-patroni.XXXXXX");
    if (!mkdtemp(pc->dir)) {
        fprintf(stderr, "testpatroni: mkdtemp failed\n");
        exit(1);
    }
    size_t slot = 0;
    while (slot < CLUSTERS_MAX && live[slot])
        slot++;
    if (slot == CLUSTERS_MAX) {
        fprintf(stderr, "testpatroni: more than %d clusters at once\n", CLUSTERS_MAX);
        exit(1);
    }
    live[slot] = pc;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' init '%s' '%s' '%s'", LEASE_TEST_PATRONICLUSTER, pc->dir,
             LEASE_TEST_LEASECTL, mode);
    if (sh(cmd) != 0) {
        fprintf(stderr, "testpatroni: patronicluster init failed\n");
        dump_logs(pc);
        exit(1);
    }
    return pc;
}

void testpatroni_free(testpatroni_t *pc)
{
    if (!pc)
        return;
    for (size_t i = 0; i < CLUSTERS_MAX; i++)
        if (live[i] == pc)
            live[i] = NULL;
    destroy(pc);
    free(pc);
}

/* A running `patronicluster VERB DIR [ARG]`, its output read at the end. */
typedef struct pending {
    FILE *p;
    char what[160];
} pending_t;

void *testpatroni_begin(testpatroni_t *pc, const char *verb, const char *arg)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' %s '%s' %s%s%s", LEASE_TEST_PATRONICLUSTER, verb, pc->dir,
             arg ? "'" : "", arg ? arg : "", arg ? "'" : "");
    pending_t *h = calloc(1, sizeof *h);
    snprintf(h->what, sizeof h->what, "%s %s", verb, arg ? arg : "");
    h->p = popen(cmd, "r");
    if (!h->p) {
        fprintf(stderr, "testpatroni: cannot run %s\n", cmd);
        exit(1);
    }
    return h;
}

/* Waits for h and returns what it printed, without the final newline. */
static char *finish_out(testpatroni_t *pc, pending_t *h)
{
    FILE *p = h->p;
    size_t cap = 4096, len = 0;
    char *out = malloc(cap);
    size_t n;
    while ((n = fread(out + len, 1, cap - len - 1, p)) > 0) {
        len += n;
        if (cap - len < 2)
            out = realloc(out, cap *= 2);
    }
    out[len] = '\0';
    int st = pclose(p);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
        fprintf(stderr, "testpatroni: patronicluster %s failed (%d)\n", h->what, st);
        dump_logs(pc);
        exit(1);
    }
    free(h);
    while (len > 0 && (out[len - 1] == '\n' || out[len - 1] == ' '))
        out[--len] = '\0';
    return out;
}

void testpatroni_finish(testpatroni_t *pc, void *handle)
{
    free(finish_out(pc, handle));
}

char *testpatroni_out(testpatroni_t *pc, const char *verb, const char *arg)
{
    return finish_out(pc, testpatroni_begin(pc, verb, arg));
}

void testpatroni_run(testpatroni_t *pc, const char *verb, const char *arg)
{
    free(testpatroni_out(pc, verb, arg));
}

char *testpatroni_url(testpatroni_t *pc, const char *user)
{
    return testpatroni_out(pc, "url", user);
}

char *testpatroni_member_url(testpatroni_t *pc, const char *member, const char *user)
{
    char arg[128];
    snprintf(arg, sizeof arg, "%s' '%s", member, user);
    return testpatroni_out(pc, "member-url", arg);
}
