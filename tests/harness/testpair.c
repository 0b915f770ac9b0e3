/*
 * testpair.c - drive tests/harness/pgpair from C.
 */
#include "testpair.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define PAIR_MAX 8

struct testpair {
    char dir[128];
};

/* Pairs still running, stopped at exit when a test aborts early. */
static testpair_t *live[PAIR_MAX];

static int port_of(const char *node)
{
    if (strcmp(node, "primary") == 0)
        return 5433;
    if (strcmp(node, "replica") == 0)
        return 5434;
    if (strcmp(node, "restored") == 0)
        return 5435;
    fprintf(stderr, "testpair: unknown node '%s'\n", node);
    exit(1);
}

static int sh(const char *cmd)
{
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

void testpair_dump_logs(const testpair_t *pair)
{
    const char *nodes[] = {"primary", "replica", "restored"};
    for (size_t i = 0; i < 3; i++) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "'%s' log '%s' %s 30 >&2 2>/dev/null", LEASE_TEST_PGPAIR,
                 pair->dir, nodes[i]);
        fprintf(stderr, "---- %s log ----\n", nodes[i]);
        (void)sh(cmd);
    }
}

static void destroy(testpair_t *pair)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "'%s' destroy '%s'", LEASE_TEST_PGPAIR, pair->dir);
    if (getenv("LEASE_TEST_KEEP_LOGS")) {
        const char *nodes[] = {"primary", "replica", "restored"};
        for (size_t i = 0; i < 3; i++) {
            snprintf(cmd, sizeof cmd,
                     "[ -f '%s/%s/postmaster.pid' ] && '%s' kill '%s' %s >/dev/null 2>&1",
                     pair->dir, nodes[i], LEASE_TEST_PGPAIR, pair->dir, nodes[i]);
            (void)sh(cmd);
        }
        fprintf(stderr, "testpair: kept %s\n", pair->dir);
        return;
    }
    (void)sh(cmd);
}

static void destroy_live(void)
{
    for (size_t i = 0; i < PAIR_MAX; i++)
        if (live[i]) {
            destroy(live[i]);
            free(live[i]);
            live[i] = NULL;
        }
}

void testpair_run(testpair_t *pair, const char *verb, const char *arg)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' %s '%s' %s%s%s", LEASE_TEST_PGPAIR, verb, pair->dir,
             arg ? "'" : "", arg ? arg : "", arg ? "'" : "");
    int st = sh(cmd);
    if (st != 0) {
        fprintf(stderr, "testpair: pgpair %s %s failed (%d)\n", verb, arg ? arg : "", st);
        testpair_dump_logs(pair);
        exit(1);
    }
}

testpair_t *testpair_new(void)
{
    static bool registered;
    if (!registered) {
        atexit(destroy_live);
        registered = true;
    }
    testpair_t *pair = calloc(1, sizeof *pair);
    snprintf(pair->dir, sizeof pair->dir, "/tmp/leased-pair.XXXXXX");
    if (!mkdtemp(pair->dir)) {
        fprintf(stderr, "testpair: mkdtemp failed\n");
        exit(1);
    }
    size_t slot = 0;
    while (slot < PAIR_MAX && live[slot])
        slot++;
    if (slot == PAIR_MAX) {
        fprintf(stderr, "testpair: more than %d pairs at once\n", PAIR_MAX);
        exit(1);
    }
    live[slot] = pair;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' init '%s' '%s'", LEASE_TEST_PGPAIR, pair->dir,
             LEASE_TEST_LEASECTL);
    if (sh(cmd) != 0) {
        fprintf(stderr, "testpair: pgpair init failed\n");
        testpair_dump_logs(pair);
        exit(1);
    }
    return pair;
}

void testpair_free(testpair_t *pair)
{
    if (!pair)
        return;
    for (size_t i = 0; i < PAIR_MAX; i++)
        if (live[i] == pair)
            live[i] = NULL;
    destroy(pair);
    free(pair);
}

char *testpair_url(const testpair_t *pair, const char *node, const char *user)
{
    char buf[512];
    snprintf(buf, sizeof buf, "postgresql:///leased?host=%s&port=%d&user=%s", pair->dir,
             port_of(node), user);
    return strdup(buf);
}

char *testpair_multi_url(const testpair_t *pair, const char *nodes, const char *user)
{
    char hosts[512] = "", ports[128] = "";
    char *copy = strdup(nodes);
    char *save = NULL;
    for (char *n = strtok_r(copy, ",", &save); n; n = strtok_r(NULL, ",", &save)) {
        size_t h = strlen(hosts), p = strlen(ports);
        snprintf(hosts + h, sizeof hosts - h, "%s%s", h ? "," : "", pair->dir);
        snprintf(ports + p, sizeof ports - p, "%s%d", p ? "," : "", port_of(n));
    }
    free(copy);
    char buf[1024];
    snprintf(buf, sizeof buf,
             "postgresql:///leased?host=%s&port=%s&user=%s&target_session_attrs=read-write", hosts,
             ports, user);
    return strdup(buf);
}
