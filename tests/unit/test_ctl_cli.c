/*
 * test_ctl_cli.c - the leasectl binary as a newcomer meets it, without a
 * database or a service:
 * - `leasectl --version` names the version (the same as `leased
 *   --version`) and the schema it expects;
 * - each command's --help shows that command's options and not the
 *   options only other commands use (acquire's --ttl-ms/--wait-ms are not
 *   in inspect's or list's help);
 * - against a leased that is not there, client commands and `run` name the
 *   URL they tried and the connection error, exit 69, and never blame the
 *   database.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <arpa/inet.h>
#include <cmocka.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lease/schema.h"

typedef struct ran {
    int status;
    char *out;
    char *err;
} ran_t;

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char *text = calloc(1, 65536);
    size_t n = fread(text, 1, 65535, f);
    text[n] = '\0';
    fclose(f);
    return text;
}

/* Runs `sh -c CMD` with stdout and stderr to files; the command's LEASE_*
 * environment is only what CMD sets. */
static ran_t run_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static ran_t run_sh(const char *fmt, ...)
{
    char dir[] = "/tmp/test_ctl_cli.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char cmd[4096], shell[8192], out_path[256], err_path[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    snprintf(out_path, sizeof out_path, "%s/out", dir);
    snprintf(err_path, sizeof err_path, "%s/err", dir);
    snprintf(shell, sizeof shell,
             "unset LEASE_URL LEASE_TOKEN LEASE_ID LEASE_FENCING_TOKEN; cd '%s' && (%s) >'%s' "
             "2>'%s'",
             dir, cmd, out_path, err_path);
    int st = system(shell);
    ran_t r = {WIFEXITED(st) ? WEXITSTATUS(st) : 128, slurp(out_path), slurp(err_path)};
    unlink(out_path);
    unlink(err_path);
    char marker[256];
    snprintf(marker, sizeof marker, "%s/marker", dir);
    if (access(marker, F_OK) == 0) {
        unlink(marker);
        r.status = 1000; /* a command that must not run ran */
    }
    rmdir(dir);
    return r;
}

static void ran_free(ran_t *r)
{
    free(r->out);
    free(r->err);
}

static void test_version(void **state)
{
    (void)state;
    ran_t ctl = run_sh("'%s' --version", LEASE_TEST_LEASECTL);
    ran_t srv = run_sh("'%s' --version", LEASE_TEST_LEASED);
    assert_int_equal(ctl.status, 0);
    assert_int_equal(srv.status, 0);
    char want[128];
    /* "leased X (schema N)" -> "leasectl X (schema N)": one version */
    assert_int_equal(strncmp(srv.out, "leased ", 7), 0);
    snprintf(want, sizeof want, "leasectl %s", srv.out + 7);
    assert_string_equal(ctl.out, want);
    snprintf(want, sizeof want, "(schema %d)\n", LEASE_SCHEMA_VERSION);
    assert_non_null(strstr(ctl.out, want));
    assert_string_equal(ctl.err, "");
    ran_free(&ctl);
    ran_free(&srv);

    ran_t help = run_sh("'%s' --help", LEASE_TEST_LEASECTL);
    assert_int_equal(help.status, 0);
    assert_non_null(strstr(help.out, "--version"));
    ran_free(&help);
}

typedef struct help_case {
    const char *command;
    const char *const shows[8];
    const char *const hides[10];
} help_case_t;

static const help_case_t help_cases[] = {
    {"acquire",
     {"--ttl-ms", "--wait-ms", "--maximum-lifetime-ms", "--job-id", "--request-id", "--tenant"},
     {"--lease-id", "--fencing-token", "--reason", "--page-size", "--grace-ms", "--document"}},
    {"renew",
     {"--lease-id", "--fencing-token", "--service-instance", "--ttl-ms", "--request-id"},
     {"--wait-ms", "--maximum-lifetime-ms", "--job-id", "--reason", "--page-size"}},
    {"release",
     {"--lease-id", "--fencing-token", "--service-instance", "--request-id"},
     {"--ttl-ms", "--wait-ms", "--maximum-lifetime-ms", "--job-id", "--page-size"}},
    {"inspect",
     {"--lease-id", "--tenant", "--actor", "--url"},
     {"--ttl-ms", "--wait-ms", "--maximum-lifetime-ms", "--job-id", "--request-id",
      "--service-instance", "--page-size", "--fencing-token"}},
    {"list",
     {"--by", "--tenant", "--program", "--page-size", "--page-token", "--url"},
     {"--ttl-ms", "--wait-ms", "--maximum-lifetime-ms", "--job-id", "--request-id", "--lease-id",
      "--actor", "--workflow", "--service-instance"}},
    {"force-release",
     {"--reason", "--lease-id", "--tenant", "--request-id"},
     {"--ttl-ms", "--wait-ms", "--incident-id", "--page-size", "--job-id"}},
    {"revoke",
     {"--reason", "--incident-id", "--lease-id", "--tenant"},
     {"--ttl-ms", "--wait-ms", "--page-size", "--job-id"}},
    {"commit",
     {"--document", "--expected-revision", "--publication", "--lease-id"},
     {"--ttl-ms", "--wait-ms", "--maximum-lifetime-ms", "--page-size", "--reason", "--job-id"}},
    {"run",
     {"--ttl-ms", "--wait-ms", "--grace-ms", "--tenant", "--request-id"},
     {"--lease-id", "--fencing-token", "--page-size", "--reason", "--document"}},
    {"session",
     {"list", "--tenant", "close", "SESSION_ID", "--request-id", "--url", "lease.active_sessions"},
     {"--ttl-ms", "--wait-ms", "--lease-id", "--page-size", "--reason"}},
};

static void test_help_per_command(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof help_cases / sizeof help_cases[0]; i++) {
        const help_case_t *c = &help_cases[i];
        ran_t r = run_sh("'%s' %s --help", LEASE_TEST_LEASECTL, c->command);
        char head[64];
        snprintf(head, sizeof head, "usage: leasectl %s ", c->command);
        if (r.status != 0 || strncmp(r.out, head, strlen(head)) != 0)
            fprintf(stderr, "%s --help: status %d\n%s%s", c->command, r.status, r.out, r.err);
        assert_int_equal(r.status, 0);
        assert_int_equal(strncmp(r.out, head, strlen(head)), 0);
        assert_string_equal(r.err, "");
        for (const char *const *o = c->shows; *o; o++) {
            if (!strstr(r.out, *o))
                fprintf(stderr, "%s --help does not show %s:\n%s", c->command, *o, r.out);
            assert_non_null(strstr(r.out, *o));
        }
        for (const char *const *o = c->hides; *o; o++) {
            if (strstr(r.out, *o))
                fprintf(stderr, "%s --help shows %s, which it does not use:\n%s", c->command, *o,
                        r.out);
            assert_null(strstr(r.out, *o));
        }
        ran_free(&r);
    }
}

/* A loopback port with nothing listening: bound, then closed. */
static int closed_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t len = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

#define IDENTITY_FLAGS                                                                             \
    "--tenant tenant-main --program program-a --namespace ns --target t1 --actor a --workflow w"

static void expect_unreachable(const ran_t *r, const char *url, bool json_on_stdout)
{
    if (r->status != 69 || !strstr(r->err, url) || !strstr(r->err, "Connection refused"))
        fprintf(stderr, "status %d\nstdout: %s\nstderr: %s\n", r->status, r->out, r->err);
    assert_int_equal(r->status, 69);
    assert_non_null(strstr(r->err, url));
    assert_non_null(strstr(r->err, "Connection refused"));
    assert_non_null(strstr(r->err, "could not be reached"));
    /* the old words sent people looking at Postgres */
    assert_null(strstr(r->err, "backend cannot"));
    if (json_on_stdout) {
        assert_non_null(strstr(r->out, "\"code\":\"lease_backend_unavailable\""));
        assert_non_null(strstr(r->out, url));
    }
}

static void test_unreachable_service_is_named(void **state)
{
    (void)state;
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", closed_port());

    ran_t r =
        run_sh("LEASE_TOKEN=lsk_x '%s' acquire --url %s " IDENTITY_FLAGS, LEASE_TEST_LEASECTL, url);
    expect_unreachable(&r, url, true);
    ran_free(&r);

    /* from LEASE_URL, for reads too */
    r = run_sh("LEASE_URL=%s LEASE_TOKEN=lsk_x '%s' list --by owner", url, LEASE_TEST_LEASECTL);
    expect_unreachable(&r, url, true);
    ran_free(&r);
    r = run_sh("LEASE_URL=%s LEASE_TOKEN=lsk_x '%s' inspect --lease-id lease_x", url,
               LEASE_TEST_LEASECTL);
    expect_unreachable(&r, url, true);
    ran_free(&r);

    /* run says the same and never starts the command */
    r = run_sh("LEASE_URL=%s LEASE_TOKEN=lsk_x '%s' run " IDENTITY_FLAGS " -- touch marker", url,
               LEASE_TEST_LEASECTL);
    expect_unreachable(&r, url, false);
    ran_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_help_per_command),
        cmocka_unit_test(test_unreachable_service_is_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
