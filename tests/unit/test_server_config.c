/*
 * test_server_config.c - the leased settings table: defaults, environment,
 * flags winning over it, bad values refused with the setting named, secrets
 * never echoed, flag names derived from the variables, docs/config.md and
 * `leased --help` listing every setting with its default, exit statuses.
 */
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "leased_proc.h"
#include "server/config.h"

static leased_config_status_t load(leased_config_t *cfg, char *const *argv, int argc,
                                   char *const *envp, char *err)
{
    return leased_config_load(cfg, argc, argv, envp, err, 512);
}

static void test_defaults(void **state)
{
    (void)state;
    char *env[] = {"LEASE_DATABASE_URL=postgresql:///x", NULL};
    char *argv[] = {"leased", NULL};
    leased_config_t cfg;
    char err[512];
    assert_int_equal(load(&cfg, argv, 1, env, err), LEASED_CONFIG_OK);
    assert_string_equal(cfg.listen, "127.0.0.1:8080");
    assert_string_equal(cfg.listen_host, "127.0.0.1");
    assert_int_equal(cfg.listen_port, 8080);
    assert_int_equal(cfg.default_deadline_ms, 5000);
    assert_int_equal(cfg.max_deadline_ms, 30000);
    assert_int_equal(cfg.max_wait_ms, 10000);
    assert_int_equal(cfg.rate_limit_per_s, 5000);
    assert_int_equal(cfg.max_inflight, 256);
    assert_int_equal(cfg.log_level, LEASE_LOG_INFO);
    assert_int_equal(cfg.log_format, LEASE_LOG_JSON);
    /* four per core, at least eight; one connection per thread */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    assert_int_equal(cfg.http_threads, 4 * cores < 8 ? 8 : 4 * cores);
    assert_int_equal(cfg.db_pool_size, cfg.http_threads);
    assert_string_equal(cfg.token_pepper, "");
    leased_config_free(&cfg);
    assert_null(cfg.database_url);
}

static void test_env_and_flags(void **state)
{
    (void)state;
    char *env[] = {"LEASE_DATABASE_URL=postgresql:///x",
                   "LEASE_DB_POOL_SIZE=3",
                   "LEASE_RATE_LIMIT=7/s",
                   "LEASE_LOG_LEVEL=debug",
                   "LEASE_LISTEN=[::1]:9000",
                   NULL};
    char *argv[] = {"leased", "--db-pool-size", "8", "--log-format=text", "--max-wait-ms=0", NULL};
    leased_config_t cfg;
    char err[512];
    assert_int_equal(load(&cfg, argv, 5, env, err), LEASED_CONFIG_OK);
    assert_int_equal(cfg.db_pool_size, 8); /* the flag wins */
    assert_int_equal(cfg.rate_limit_per_s, 7);
    assert_int_equal(cfg.log_level, LEASE_LOG_DEBUG);
    assert_int_equal(cfg.log_format, LEASE_LOG_TEXT);
    assert_int_equal(cfg.max_wait_ms, 0);
    assert_string_equal(cfg.listen_host, "::1");
    assert_int_equal(cfg.listen_port, 9000);
    leased_config_free(&cfg);
}

/* On Valkey the worker threads and the pool default to 16 per core, at
 * least 32 (a call waits on the server's shared fsync); a value given in
 * the environment or as a flag is kept, whatever it is. */
static void test_valkey_defaults(void **state)
{
    (void)state;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int64_t want = 16 * cores < 32 ? 32 : 16 * cores;
    leased_config_t cfg;
    char err[512];
    char *env[] = {"LEASE_STORE_URL=redis://127.0.0.1:6379", NULL};
    char *argv[] = {"leased", NULL};
    assert_int_equal(load(&cfg, argv, 1, env, err), LEASED_CONFIG_OK);
    assert_int_equal(cfg.http_threads, want);
    assert_int_equal(cfg.db_pool_size, want);
    leased_config_free(&cfg);

    char *env_given[] = {"LEASE_STORE_URL=redis://127.0.0.1:6379", "LEASE_HTTP_THREADS=8", NULL};
    char *argv_given[] = {"leased", "--db-pool-size=5", NULL};
    assert_int_equal(load(&cfg, argv_given, 2, env_given, err), LEASED_CONFIG_OK);
    assert_int_equal(cfg.http_threads, 8);
    assert_int_equal(cfg.db_pool_size, 5);
    leased_config_free(&cfg);

    char *argv_split[] = {"leased", "--http-threads", "3", NULL};
    assert_int_equal(load(&cfg, argv_split, 3, env, err), LEASED_CONFIG_OK);
    assert_int_equal(cfg.http_threads, 3);
    assert_int_equal(cfg.db_pool_size, want);
    leased_config_free(&cfg);
}

typedef struct bad {
    const char *env;  /* NAME=value, or NULL */
    const char *flag; /* a flag and its value as one argument, or NULL */
    const char *must_name;
} bad_t;

static void test_bad_values(void **state)
{
    (void)state;
    static const bad_t cases[] = {
        {"LEASE_DB_POOL_SIZE=0", NULL, "LEASE_DB_POOL_SIZE"},
        {"LEASE_DB_POOL_SIZE=four", NULL, "LEASE_DB_POOL_SIZE"},
        {"LEASE_DB_POOL_SIZE= 4", NULL, "LEASE_DB_POOL_SIZE"},
        {NULL, "--db-pool-size=4x", "--db-pool-size"},
        {"LEASE_RATE_LIMIT=200", NULL, "LEASE_RATE_LIMIT"},
        {"LEASE_RATE_LIMIT=200/m", NULL, "LEASE_RATE_LIMIT"},
        {"LEASE_RATE_LIMIT=0/s", NULL, "LEASE_RATE_LIMIT"},
        {"LEASE_LISTEN=localhost:80", NULL, "LEASE_LISTEN"},
        {"LEASE_LISTEN=127.0.0.1:70000", NULL, "LEASE_LISTEN"},
        {"LEASE_LISTEN=127.0.0.1", NULL, "LEASE_LISTEN"},
        {"LEASE_LOG_LEVEL=verbose", NULL, "LEASE_LOG_LEVEL"},
        {"LEASE_LOG_FORMAT=xml", NULL, "LEASE_LOG_FORMAT"},
        {"LEASE_MAX_DEADLINE_MS=-1", NULL, "LEASE_MAX_DEADLINE_MS"},
        {"LEASE_DEFAULT_DEADLINE_MS=40000", NULL, "LEASE_MAX_DEADLINE_MS"},
        {NULL, "--no-such-setting=1", "--no-such-setting"},
        {NULL, "positional", "positional"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *case_env = cases[i].env ? strdup(cases[i].env) : NULL;
        char *case_flag = cases[i].flag ? strdup(cases[i].flag) : NULL;
        char *env[] = {"LEASE_DATABASE_URL=postgresql:///x", case_env, NULL};
        char *argv[] = {"leased", case_flag, NULL};
        leased_config_t cfg;
        char err[512];
        leased_config_status_t st = load(&cfg, argv, case_flag ? 2 : 1, env, err);
        free(case_env);
        free(case_flag);
        if (st != LEASED_CONFIG_ERROR || !strstr(err, cases[i].must_name))
            fprintf(stderr, "case %zu: status %d, message '%s'\n", i, st, err);
        assert_int_equal(st, LEASED_CONFIG_ERROR);
        assert_non_null(strstr(err, cases[i].must_name));
        leased_config_free(&cfg);
    }
    /* no database URL at all */
    char *env[] = {NULL};
    char *argv[] = {"leased", NULL};
    leased_config_t cfg;
    char err[512];
    assert_int_equal(load(&cfg, argv, 1, env, err), LEASED_CONFIG_ERROR);
    assert_non_null(strstr(err, "LEASE_DATABASE_URL"));
    leased_config_free(&cfg);
    /* a flag without its value */
    char *argv2[] = {"leased", "--db-pool-size", NULL};
    char *env2[] = {"LEASE_DATABASE_URL=x", NULL};
    assert_int_equal(load(&cfg, argv2, 2, env2, err), LEASED_CONFIG_ERROR);
    assert_non_null(strstr(err, "--db-pool-size"));
    leased_config_free(&cfg);
}

/* Secret values never appear in a message, even when refused. */
static void test_secrets_not_echoed(void **state)
{
    (void)state;
    char *env[] = {"LEASE_DATABASE_URL=postgresql://u:hunter2@db/x",
                   "LEASE_TOKEN_PEPPER=pepper-secret-value", "LEASE_DB_POOL_SIZE=zero", NULL};
    char *argv[] = {"leased", NULL};
    leased_config_t cfg;
    char err[512];
    assert_int_equal(load(&cfg, argv, 1, env, err), LEASED_CONFIG_ERROR);
    assert_null(strstr(err, "hunter2"));
    assert_null(strstr(err, "pepper-secret-value"));
    leased_config_free(&cfg);
    char *env2[] = {"LEASE_DATABASE_URL=", NULL};
    assert_int_equal(load(&cfg, argv, 1, env2, err), LEASED_CONFIG_ERROR);
    assert_non_null(strstr(err, "database url"));
    leased_config_free(&cfg);
}

/* Each flag is its variable in kebab-case without LEASE_. */
static void test_flag_names(void **state)
{
    (void)state;
    for (size_t i = 0; i < leased_config_setting_count(); i++) {
        leased_setting_info_t info;
        char buf[32];
        leased_config_setting(i, &info, buf, sizeof buf);
        char expect[96] = "--";
        size_t k = 2;
        assert_int_equal(strncmp(info.env, "LEASE_", 6), 0);
        for (const char *p = info.env + 6; *p; p++)
            expect[k++] = *p == '_' ? '-' : (char)tolower((unsigned char)*p);
        expect[k] = '\0';
        assert_string_equal(info.flag, expect);
    }
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char buf[1 << 17];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* docs/config.md has a table row per setting: `VAR` | `--flag` | default. */
static void test_docs_list_every_setting(void **state)
{
    (void)state;
    const char *doc = read_text(LEASE_TEST_SOURCE_DIR "/docs/config.md");
    for (size_t i = 0; i < leased_config_setting_count(); i++) {
        leased_setting_info_t info;
        char buf[32];
        leased_config_setting(i, &info, buf, sizeof buf);
        char row[256];
        snprintf(row, sizeof row, "| `%s` | `%s` |", info.env, info.flag);
        const char *at = strstr(doc, row);
        if (!at)
            fprintf(stderr, "docs/config.md has no row starting %s\n", row);
        assert_non_null(at);
        /* the default column: machine-dependent defaults are described */
        const char *eol = strchr(at, '\n');
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)(eol - at), at);
        bool dynamic = strstr(info.env, "POOL_SIZE") || strstr(info.env, "HTTP_THREADS");
        if (!dynamic && strcmp(info.default_text, "(required)") != 0) {
            char cell[64];
            snprintf(cell, sizeof cell, "`%s`", info.default_text);
            if (strcmp(info.default_text, "(none)") == 0)
                snprintf(cell, sizeof cell, "(none)");
            if (!strstr(line, cell))
                fprintf(stderr, "docs/config.md row lacks default %s: %s\n", cell, line);
            assert_non_null(strstr(line, cell));
        }
    }
}

static void test_cli(void **state)
{
    (void)state;
    char *out = NULL;
    const char *help[] = {"--help", NULL};
    assert_int_equal(leased_proc_run_cli(help, NULL, &out), 0);
    for (size_t i = 0; i < leased_config_setting_count(); i++) {
        leased_setting_info_t info;
        char buf[32];
        leased_config_setting(i, &info, buf, sizeof buf);
        assert_non_null(strstr(out, info.env));
        assert_non_null(strstr(out, info.flag));
    }
    assert_non_null(strstr(out, "5000/s"));
    free(out);

    const char *bad[] = {"--db-pool-size", "0", NULL};
    const char *env[] = {"LEASE_DATABASE_URL=postgresql:///nothing", NULL};
    assert_int_equal(leased_proc_run_cli(bad, env, &out), 2);
    assert_non_null(strstr(out, "--db-pool-size"));
    free(out);
    assert_int_equal(leased_proc_run_cli(NULL, NULL, &out), 2);
    assert_non_null(strstr(out, "LEASE_DATABASE_URL"));
    free(out);
    const char *version[] = {"--version", NULL};
    assert_int_equal(leased_proc_run_cli(version, NULL, &out), 0);
    assert_non_null(strstr(out, "leased "));
    free(out);
    /* a port that cannot be bound is a runtime failure: exit 1 */
    const char *env_bad_listen[] = {"LEASE_DATABASE_URL=postgresql:///nothing",
                                    "LEASE_LISTEN=192.0.2.1:1", NULL};
    assert_int_equal(leased_proc_run_cli(NULL, env_bad_listen, &out), 1);
    assert_non_null(strstr(out, "cannot listen"));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),   cmocka_unit_test(test_env_and_flags),
        cmocka_unit_test(test_bad_values), cmocka_unit_test(test_secrets_not_echoed),
        cmocka_unit_test(test_flag_names), cmocka_unit_test(test_docs_list_every_setting),
        cmocka_unit_test(test_cli),        cmocka_unit_test(test_valkey_defaults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
