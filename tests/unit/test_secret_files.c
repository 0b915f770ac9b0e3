/*
 * test_secret_files.c - NAME_FILE for every secret setting: leased's
 * (LEASE_DATABASE_URL, LEASE_TOKEN_PEPPER, LEASE_WATCH_DATABASE_URL),
 * leased-relay's (LEASE_DATABASE_URL, LEASE_RELAY_AMQP_URL,
 * LEASE_RELAY_COUCHDB_URL) and leasectl's (LEASE_TOKEN, LEASE_DATABASE_URL,
 * LEASE_TOKEN_PEPPER). The value comes from an owner-only file with its
 * trailing newline dropped; a file accessible by group or others, a
 * missing, empty or non-regular file, and NAME with NAME_FILE are refused
 * with the variable and the path named and the contents never echoed; a
 * flag still wins.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "ctl/ctl_options.h"
#include "lease/settings.h"
#include "relay/relay_config.h"
#include "server/config.h"

#define SECRET "postgresql://leased:s3cret-Pa55@db/leases"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/test_secret_files.XXXXXX");
    assert_non_null(mkdtemp(dir));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    return 0;
}

/* dir/name holding text, with the given mode; returns the path (static). */
static const char *secret_file(const char *name, const char *text, mode_t mode)
{
    static char paths[8][160];
    static int next;
    char *path = paths[next++ % 8];
    snprintf(path, 160, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(path, mode), 0);
    return path;
}

static char *env_of(const char *name, const char *value)
{
    char *e = NULL;
    assert_true(asprintf(&e, "%s=%s", name, value) > 0);
    return e;
}

static leased_config_status_t load_leased(leased_config_t *cfg, char *const *env, int argc,
                                          char *const *argv, char *err)
{
    return leased_config_load(cfg, argc, argv, env, err, 512);
}

static void test_leased_reads_each_secret_from_its_file(void **state)
{
    (void)state;
    char *env[] = {env_of("LEASE_DATABASE_URL_FILE", secret_file("db", SECRET "\n", 0600)),
                   env_of("LEASE_TOKEN_PEPPER_FILE", secret_file("pepper", "pep-per\r\n", 0400)),
                   env_of("LEASE_WATCH_DATABASE_URL_FILE",
                          secret_file("watch", "postgresql:///watch", 0600)),
                   NULL};
    char *argv[] = {"leased", NULL};
    leased_config_t cfg;
    char err[512];
    assert_int_equal(load_leased(&cfg, env, 1, argv, err), LEASED_CONFIG_OK);
    assert_string_equal(cfg.database_url, SECRET); /* one trailing newline dropped */
    assert_string_equal(cfg.token_pepper, "pep-per");
    assert_string_equal(cfg.watch_database_url, "postgresql:///watch");
    leased_config_free(&cfg);

    /* a flag still wins over the file */
    char *argv2[] = {"leased", "--database-url", "postgresql:///flag", NULL};
    assert_int_equal(load_leased(&cfg, env, 3, argv2, err), LEASED_CONFIG_OK);
    assert_string_equal(cfg.database_url, "postgresql:///flag");
    leased_config_free(&cfg);
    for (char **e = env; *e; e++)
        free(*e);
}

/* Loads leased with LEASE_DATABASE_URL_FILE=path (plus extra) and expects
 * a refusal whose message holds want and never the secret. */
static void expect_refused(const char *path, const char *extra, const char *want)
{
    char *env[] = {env_of("LEASE_DATABASE_URL_FILE", path), extra ? strdup(extra) : NULL, NULL};
    char *argv[] = {"leased", NULL};
    leased_config_t cfg;
    char err[512];
    assert_int_equal(load_leased(&cfg, env, 1, argv, err), LEASED_CONFIG_ERROR);
    if (!strstr(err, want))
        fail_msg("error '%s' does not say '%s'", err, want);
    assert_null(strstr(err, "s3cret"));
    leased_config_free(&cfg);
    free(env[0]);
    free(env[1]);
}

static void test_unsafe_or_bad_files_are_refused(void **state)
{
    (void)state;
    const char *group = secret_file("group", SECRET, 0640);
    expect_refused(group, NULL, "is accessible by group or others (mode 0640)");
    expect_refused(group, NULL, "LEASE_DATABASE_URL_FILE");
    expect_refused(secret_file("others", SECRET, 0604), NULL, "(mode 0604)");
    expect_refused(secret_file("world", SECRET, 0644), NULL, "readable by its owner only");
    expect_refused(secret_file("empty", "", 0600), NULL, "is empty");
    expect_refused(secret_file("newline", "\n", 0600), NULL, "is empty");
    char missing[200];
    snprintf(missing, sizeof missing, "%s/missing", dir);
    expect_refused(missing, NULL, "cannot open");
    expect_refused(dir, NULL, "is not a regular file");
    /* both the variable and its file: which one was meant? */
    expect_refused(secret_file("both", SECRET, 0600), "LEASE_DATABASE_URL=postgresql:///env",
                   "set LEASE_DATABASE_URL or LEASE_DATABASE_URL_FILE, not both");
}

static void test_required_secret_names_its_file_variant(void **state)
{
    (void)state;
    char *env[] = {NULL};
    char *argv[] = {"leased", NULL};
    leased_config_t cfg;
    char err[512];
    assert_int_equal(load_leased(&cfg, env, 1, argv, err), LEASED_CONFIG_ERROR);
    assert_non_null(strstr(err, "LEASE_DATABASE_URL_FILE"));
    leased_config_free(&cfg);
}

static void test_relay_reads_each_secret_from_its_file(void **state)
{
    (void)state;
    char *env[] = {env_of("LEASE_DATABASE_URL_FILE", secret_file("rdb", SECRET "\n", 0600)),
                   env_of("LEASE_RELAY_AMQP_URL_FILE",
                          secret_file("amqp", "amqp://relay:pw@rabbit:5672/prod\n", 0600)),
                   env_of("LEASE_RELAY_COUCHDB_URL_FILE",
                          secret_file("couch", "http://admin:pw@couch:5984", 0600)),
                   NULL};
    char *argv[] = {"leased-relay", NULL};
    relay_config_t cfg;
    char err[512];
    assert_int_equal(relay_config_load(&cfg, 1, argv, env, err, sizeof err), RELAY_CONFIG_OK);
    assert_string_equal(cfg.database_url, SECRET);
    assert_string_equal(cfg.amqp_url, "amqp://relay:pw@rabbit:5672/prod");
    assert_string_equal(cfg.couchdb_url, "http://admin:pw@couch:5984");
    relay_config_free(&cfg);
    free(env[1]);
    env[1] = env_of("LEASE_RELAY_AMQP_URL_FILE", secret_file("amqp-open", "amqp://x:pw@h/", 0644));
    assert_int_equal(relay_config_load(&cfg, 1, argv, env, err, sizeof err), RELAY_CONFIG_ERROR);
    assert_non_null(strstr(err, "LEASE_RELAY_AMQP_URL_FILE"));
    assert_non_null(strstr(err, "accessible by group or others"));
    assert_null(strstr(err, "pw@"));
    relay_config_free(&cfg);
    for (char **e = env; *e; e++)
        free(*e);
}

static void test_leasectl_resolves_its_secret_files(void **state)
{
    (void)state;
    for (const char *const *n = ctl_secret_names; *n; n++) {
        char var[64];
        snprintf(var, sizeof var, "%s_FILE", *n);
        unsetenv(*n);
        unsetenv(var);
    }
    char err[512];
    setenv("LEASE_TOKEN_FILE", secret_file("token", "lsk_key_abc_secret\n", 0600), 1);
    setenv("LEASE_DATABASE_URL_FILE", secret_file("ctl-db", SECRET, 0400), 1);
    setenv("LEASE_TOKEN_PEPPER_FILE", secret_file("ctl-pepper", "pepper", 0600), 1);
    assert_true(ctl_resolve_secret_files(err, sizeof err));
    assert_string_equal(ctl_secret("LEASE_TOKEN"), "lsk_key_abc_secret");
    assert_string_equal(ctl_secret("LEASE_DATABASE_URL"), SECRET);
    assert_string_equal(ctl_secret("LEASE_TOKEN_PEPPER"), "pepper");
    /* held in memory, never put in the environment: a command `run` starts
     * inherits the environment (tests/http/http_run_env.c) */
    assert_null(getenv("LEASE_TOKEN"));
    assert_null(getenv("LEASE_DATABASE_URL"));
    assert_null(getenv("LEASE_TOKEN_PEPPER"));
    ctl_secrets_free();
    assert_null(ctl_secret("LEASE_DATABASE_URL"));
    unsetenv("LEASE_DATABASE_URL_FILE");
    unsetenv("LEASE_TOKEN_PEPPER_FILE");
    /* without a file, the variable itself */
    setenv("LEASE_TOKEN_PEPPER", "pepper-var", 1);
    assert_true(ctl_resolve_secret_files(err, sizeof err));
    assert_string_equal(ctl_secret("LEASE_TOKEN_PEPPER"), "pepper-var");
    unsetenv("LEASE_TOKEN_PEPPER");
    unsetenv("LEASE_TOKEN_FILE");
    setenv("LEASE_TOKEN", "lsk_key_abc_secret", 1);

    setenv("LEASE_TOKEN_FILE", secret_file("token2", "lsk_key_abc_other", 0600), 1);
    assert_false(ctl_resolve_secret_files(err, sizeof err));
    assert_string_equal(err, "set LEASE_TOKEN or LEASE_TOKEN_FILE, not both");
    unsetenv("LEASE_TOKEN");
    setenv("LEASE_TOKEN_FILE", secret_file("token3", "lsk_key_abc_other", 0660), 1);
    assert_false(ctl_resolve_secret_files(err, sizeof err));
    assert_non_null(strstr(err, "LEASE_TOKEN_FILE"));
    assert_non_null(strstr(err, "(mode 0660)"));
    assert_null(strstr(err, "lsk_"));
    assert_null(getenv("LEASE_TOKEN"));
    assert_null(ctl_secret("LEASE_TOKEN"));
    unsetenv("LEASE_TOKEN_FILE");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_leased_reads_each_secret_from_its_file),
        cmocka_unit_test(test_unsafe_or_bad_files_are_refused),
        cmocka_unit_test(test_required_secret_names_its_file_variant),
        cmocka_unit_test(test_relay_reads_each_secret_from_its_file),
        cmocka_unit_test(test_leasectl_resolves_its_secret_files),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
