/*
 * relay_session.c - leased-relay opens its database session the way leased
 * does (lease/pg_session.h): the same keepalive, tcp_user_timeout and
 * connect timeout options as the store's sessions, an application_name of
 * its own that shows in pg_stat_activity, and a conninfo that overrides the
 * defaults. White box (relay_db.h, the store's pg_conn.h) for the options;
 * a real leased-relay process for pg_stat_activity.
 */
#include "relay_common.h"

#include "relay/relay_db.h"
#include "store/pg_conn.h"

static relay_fx_t fx;

static int setup(void **state)
{
    (void)state;
    relay_fx_open(&fx, "relay_session");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    relay_fx_close(&fx);
    return 0;
}

static char *option(const relay_db_t *db, const char *keyword)
{
    static char value[256];
    if (!relay_db_option(db, keyword, value, sizeof value))
        snprintf(value, sizeof value, "(unset)");
    return value;
}

/* The relay's session has every option the store's sessions open with. */
static void same_options_as_the_store(void **state)
{
    (void)state;
    char *url = relay_proc_db_url(fx.http.db);
    relay_db_t *db = relay_db_new(url, "sess-a", 30000);
    assert_non_null(db);
    char err[512] = "";
    relay_db_status_t st = relay_db_connect(db, err, sizeof err);
    if (st != RELAY_DB_OK)
        fail_msg("connect: %s", err);

    /* leased's parameters for the same URL (store_pg_connparams_init) */
    store_pg_connparams_t p;
    assert_int_equal(store_pg_connparams_init(&p, url, 10000, NULL, err, sizeof err), 0);
    int compared = 0;
    for (size_t i = 0; p.keywords[i]; i++) {
        const char *k = p.keywords[i];
        if (strcmp(k, "dbname") == 0 || strcmp(k, "fallback_application_name") == 0)
            continue;
        const char *got = option(db, k);
        if (strcmp(got, p.values[i]) != 0)
            fail_msg("relay session %s=%s, the store's %s", k, got, p.values[i]);
        compared++;
    }
    store_pg_connparams_free(&p);
    assert_true(compared >= 6);
    /* and what those are, spelled out */
    assert_string_equal(option(db, "keepalives"), "1");
    assert_string_equal(option(db, "keepalives_idle"), "5");
    assert_string_equal(option(db, "keepalives_interval"), "2");
    assert_string_equal(option(db, "keepalives_count"), "3");
    assert_string_equal(option(db, "tcp_user_timeout"), "10000");
    assert_string_equal(option(db, "connect_timeout"), "10");
    assert_string_equal(option(db, "application_name"), "leased-relay/sess-a");
    assert_string_equal(option(db, "password"), "(unset)"); /* never handed out */
    assert_int_equal(testpg_query_int(fx.http.db, "SELECT count(*) FROM pg_stat_activity "
                                                  "WHERE application_name = 'leased-relay/sess-a'"),
                     1);
    relay_db_free(db);

    /* the conninfo wins over a default, the relay's name over the URL's */
    char over[1024];
    snprintf(over, sizeof over, "%s%skeepalives_idle=9&application_name=not-this", url,
             strchr(url, '?') ? "&" : "?");
    db = relay_db_new(over, "sess-b", 30000);
    assert_int_equal(relay_db_connect(db, err, sizeof err), RELAY_DB_OK);
    assert_string_equal(option(db, "keepalives_idle"), "9");
    assert_string_equal(option(db, "tcp_user_timeout"), "10000");
    assert_string_equal(option(db, "application_name"), "leased-relay/sess-b");
    relay_db_free(db);
    free(url);
}

/* A running leased-relay names its session in pg_stat_activity. */
static void running_relay_shows_in_pg_stat_activity(void **state)
{
    (void)state;
    relay_proc_t *r = relay_proc_start(
        fx.http.db, (const char *[]){fx.exchange_env, "LEASE_RELAY_INSTANCE_ID=sess-proc", NULL});
    bool seen = relay_wait_sql(fx.http.db,
                               "SELECT count(*) FROM pg_stat_activity "
                               "WHERE application_name = 'leased-relay/sess-proc' "
                               "AND usename = 'leased_relay_app'",
                               1, 10000);
    if (!seen)
        relay_proc_dump_log(r);
    assert_true(seen);
    assert_int_equal(relay_proc_stop(r), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(same_options_as_the_store),
        cmocka_unit_test(running_relay_shows_in_pg_stat_activity),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
