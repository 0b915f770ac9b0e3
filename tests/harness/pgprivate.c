/*
 * pgprivate.c - private clusters and PgBouncer for tests (see pgprivate.h),
 * through the tests/harness/pgprivate script.
 */
#include "free_port.h"
#include "pgprivate.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testpg.h"

#define PGPRIVATE LEASE_TEST_SOURCE_DIR "/tests/harness/pgprivate"

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "pgprivate: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

bool pg_private_available(void)
{
    return testpg_owned() && system("command -v pgbouncer >/dev/null 2>&1 || "
                                     "test -x /usr/sbin/pgbouncer") == 0;
}

static void tail(const char *path)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "tail -n 40 '%s' >&2", path);
    if (system(cmd) != 0)
        fprintf(stderr, "(no log at %s)\n", path);
}

pg_private_t *pg_private_start(const pg_private_opts_t *opts)
{
    pg_private_t *pg = calloc(1, sizeof *pg);
    snprintf(pg->dir, sizeof pg->dir, "/tmp/leased-pgp.XXXXXX");
    if (!mkdtemp(pg->dir))
        die("mkdtemp failed");
    pg->port = test_free_port();
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' start '%s' %d %s%s%s", PGPRIVATE, pg->dir, pg->port,
             opts && opts->ssl_dir ? "'" : "", opts && opts->ssl_dir ? opts->ssl_dir : "",
             opts && opts->ssl_dir ? "'" : "");
    if (system(cmd) != 0) {
        pg_private_dump_log(pg);
        die("cannot start a private cluster (%s)", cmd);
    }
    return pg;
}

char *pg_private_url(const pg_private_t *pg, const char *db, const char *user)
{
    char *url = malloc(512);
    snprintf(url, 512, "postgresql:///%s?host=%s&port=%d&user=%s", db, pg->dir, pg->port, user);
    return url;
}

void pg_private_dump_log(const pg_private_t *pg)
{
    char path[256];
    snprintf(path, sizeof path, "%s/postgres.log", pg->dir);
    tail(path);
}

void pg_private_stop(pg_private_t *pg)
{
    if (!pg)
        return;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "'%s' stop '%s'", PGPRIVATE, pg->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "pgprivate: stopping %s failed\n", pg->dir);
    free(pg);
}

pg_bouncer_t *pg_bouncer_start(const char *upstream_sockdir, int upstream_port,
                               const char *pool_mode, int pool_size, const char *const *users)
{
    pg_bouncer_t *b = calloc(1, sizeof *b);
    snprintf(b->dir, sizeof b->dir, "/tmp/leased-pgb.XXXXXX");
    if (!mkdtemp(b->dir))
        die("mkdtemp failed");
    b->port = test_free_port();
    char cmd[2048];
    int n = snprintf(cmd, sizeof cmd, "'%s' bouncer '%s' %d '%s' %d %s %d", PGPRIVATE, b->dir,
                     b->port, upstream_sockdir, upstream_port, pool_mode, pool_size);
    for (const char *const *u = users; u && *u; u++)
        n += snprintf(cmd + n, sizeof cmd - (size_t)n, " '%s'", *u);
    if (system(cmd) != 0)
        die("cannot start pgbouncer (%s)", cmd);
    return b;
}

char *pg_bouncer_url(const pg_bouncer_t *b, const char *db, const char *user, const char *app)
{
    char *url = malloc(512);
    snprintf(url, 512, "postgresql://%s@127.0.0.1:%d/%s%s%s", user, b->port, db,
             app ? "?application_name=" : "", app ? app : "");
    return url;
}

void pg_bouncer_dump_log(const pg_bouncer_t *b)
{
    char path[256];
    snprintf(path, sizeof path, "%s/pgbouncer.log", b->dir);
    tail(path);
}

void pg_bouncer_stop(pg_bouncer_t *b)
{
    if (!b)
        return;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "'%s' bouncer-stop '%s'", PGPRIVATE, b->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "pgprivate: stopping pgbouncer in %s failed\n", b->dir);
    free(b);
}
