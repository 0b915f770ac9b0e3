/*
 * test_relay_config.c - the leased-relay settings table: defaults, the
 * environment, flags winning over it, bad values refused with the setting
 * named, secrets never echoed, --once, docs/relay.md listing every setting
 * with its default, and the program's --help / --version / exit status 2.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relay/relay_config.h"
#include "relay_proc.h"

static relay_config_status_t load(relay_config_t *cfg, char *const *argv, int argc,
                                  char *const *envp, char *err)
{
    return relay_config_load(cfg, argc, argv, envp, err, 512);
}

static void test_defaults(void **state)
{
    (void)state;
    char *env[] = {"LEASE_DATABASE_URL=postgresql:///x", NULL};
    char *argv[] = {"leased-relay", NULL};
    relay_config_t cfg;
    char err[512];
    assert_int_equal(load(&cfg, argv, 1, env, err), RELAY_CONFIG_OK);
    assert_string_equal(cfg.amqp_url, "amqp://guest:guest@127.0.0.1:5672/");
    assert_string_equal(cfg.exchange, "leased.outbox");
    assert_string_equal(cfg.routes, "");
    assert_true(cfg.declare_exchanges);
    assert_string_equal(cfg.couchdb_url, "");
    assert_int_equal(cfg.batch_size, 500);
    assert_int_equal(cfg.poll_interval_ms, 100);
    assert_int_equal(cfg.confirm_timeout_ms, 10000);
    assert_int_equal(cfg.backoff_min_ms, 100);
    assert_int_equal(cfg.backoff_max_ms, 10000);
    assert_int_equal(cfg.retry_delay_ms, 5000);
    assert_true(cfg.metrics_enabled);
    assert_string_equal(cfg.metrics_host, "127.0.0.1");
    assert_int_equal(cfg.metrics_port, 8081);
    assert_int_equal(cfg.purge_after_ms, 604800000);
    assert_true(strlen(cfg.instance_id) > 0); /* host-pid */
    assert_false(cfg.once);
    relay_config_free(&cfg);
    assert_null(cfg.database_url);
}

static void test_env_and_flags(void **state)
{
    (void)state;
    char *env[] = {"LEASE_DATABASE_URL=postgresql:///x", "LEASE_RELAY_BATCH_SIZE=7",
                   "LEASE_RELAY_METRICS_LISTEN=off",     "LEASE_RELAY_DECLARE_EXCHANGES=false",
                   "LEASE_RELAY_INSTANCE_ID=relay-1",    NULL};
    char *argv[] = {"leased-relay",  "--batch-size",     "9",       "--once",
                    "--exchange=ex", "--metrics-listen", "[::1]:0", NULL};
    relay_config_t cfg;
    char err[512];
    assert_int_equal(load(&cfg, argv, 7, env, err), RELAY_CONFIG_OK);
    assert_int_equal(cfg.batch_size, 9); /* the flag wins */
    assert_true(cfg.once);
    assert_string_equal(cfg.exchange, "ex");
    assert_false(cfg.declare_exchanges);
    assert_true(cfg.metrics_enabled);
    assert_string_equal(cfg.metrics_host, "::1");
    assert_int_equal(cfg.metrics_port, 0);
    assert_string_equal(cfg.instance_id, "relay-1");
    relay_config_free(&cfg);

    char *env_off[] = {"LEASE_DATABASE_URL=postgresql:///x", "LEASE_RELAY_METRICS_LISTEN=off",
                       NULL};
    assert_int_equal(load(&cfg, argv, 1, env_off, err), RELAY_CONFIG_OK);
    assert_false(cfg.metrics_enabled);
    relay_config_free(&cfg);
}

static void test_bad_values(void **state)
{
    (void)state;
    static struct {
        char *env, *flag;
        const char *must_name;
    } bad[] = {
        {"LEASE_RELAY_BATCH_SIZE=0", NULL, "batch size"},
        {"LEASE_RELAY_BATCH_SIZE=10001", NULL, "batch size"},
        {NULL, "--confirm-timeout-ms=50", "confirm timeout"},
        {NULL, "--declare-exchanges=yes", "declare exchanges"},
        {NULL, "--metrics-listen=localhost:80", "metrics listen"},
        {NULL, "--instance-id=a b", "instance id"},
        {"LEASE_RELAY_BACKOFF_MIN_MS=5000", "--backoff-max-ms=100", "LEASE_RELAY_BACKOFF_MIN_MS"},
        {"LEASE_LOG_LEVEL=loud", NULL, "log level"},
        {NULL, "--no-such-flag", "no-such-flag"},
        {NULL, "--batch-size", "needs a value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *env[3] = {"LEASE_DATABASE_URL=postgresql:///x", bad[i].env, NULL};
        char *argv[3] = {"leased-relay", bad[i].flag, NULL};
        relay_config_t cfg;
        char err[512];
        relay_config_status_t st = load(&cfg, argv, bad[i].flag ? 2 : 1, env, err);
        if (st != RELAY_CONFIG_ERROR || !strstr(err, bad[i].must_name))
            fail_msg("%s / %s: status %d, '%s'", bad[i].env ? bad[i].env : "-",
                     bad[i].flag ? bad[i].flag : "-", st, err);
        relay_config_free(&cfg);
    }
    /* the database URL is required and its value never echoed */
    char *none[] = {NULL};
    char *argv[] = {"leased-relay", NULL};
    relay_config_t cfg;
    char err[512];
    assert_int_equal(load(&cfg, argv, 1, none, err), RELAY_CONFIG_ERROR);
    assert_non_null(strstr(err, "LEASE_DATABASE_URL"));
    relay_config_free(&cfg);
    char *secret[] = {"LEASE_DATABASE_URL=", NULL};
    assert_int_equal(load(&cfg, argv, 1, secret, err), RELAY_CONFIG_ERROR);
    relay_config_free(&cfg);
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

/* docs/relay.md has a table row per setting: `VAR` | `--flag` | default. */
static void test_docs_list_every_setting(void **state)
{
    (void)state;
    const char *doc = read_text(LEASE_TEST_SOURCE_DIR "/docs/relay.md");
    for (size_t i = 0; i < relay_config_setting_count(); i++) {
        relay_setting_info_t info;
        relay_config_setting(i, &info);
        char row[256];
        snprintf(row, sizeof row, "| `%s` | `%s` |", info.env, info.flag);
        const char *at = strstr(doc, row);
        if (!at)
            fprintf(stderr, "docs/relay.md has no row starting %s\n", row);
        assert_non_null(at);
        const char *eol = strchr(at, '\n');
        char line[768];
        snprintf(line, sizeof line, "%.*s", (int)(eol - at), at);
        char cell[128];
        if (info.default_text[0] == '(')
            snprintf(cell, sizeof cell, "%s", info.default_text);
        else
            snprintf(cell, sizeof cell, "`%s`", info.default_text);
        if (!strstr(line, cell))
            fprintf(stderr, "docs/relay.md row lacks default %s: %s\n", cell, line);
        assert_non_null(strstr(line, cell));
    }
}

static void test_cli(void **state)
{
    (void)state;
    char *out = NULL;
    assert_int_equal(relay_proc_run(NULL, (const char *[]){"--help", NULL}, NULL, 10000, &out), 0);
    for (size_t i = 0; i < relay_config_setting_count(); i++) {
        relay_setting_info_t info;
        relay_config_setting(i, &info);
        assert_non_null(strstr(out, info.env));
        assert_non_null(strstr(out, info.flag));
    }
    assert_non_null(strstr(out, "--once"));
    free(out);
    assert_int_equal(relay_proc_run(NULL, (const char *[]){"--version", NULL}, NULL, 10000, &out),
                     0);
    assert_non_null(strstr(out, "leased-relay"));
    free(out);
    /* no database: exit 2, and a secret in a bad value is never printed */
    assert_int_equal(relay_proc_run(NULL, NULL, NULL, 10000, &out), 2);
    assert_non_null(strstr(out, "LEASE_DATABASE_URL"));
    free(out);
    assert_int_equal(
        relay_proc_run(NULL, NULL,
                       (const char *[]){"LEASE_DATABASE_URL=postgresql:///x",
                                        "LEASE_RELAY_AMQP_URL=not-a-url-pw=hunter2", NULL},
                       10000, &out),
        2);
    assert_non_null(strstr(out, "AMQP url"));
    assert_null(strstr(out, "hunter2"));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),   cmocka_unit_test(test_env_and_flags),
        cmocka_unit_test(test_bad_values), cmocka_unit_test(test_docs_list_every_setting),
        cmocka_unit_test(test_cli),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
