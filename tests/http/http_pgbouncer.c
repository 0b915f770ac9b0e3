/*
 * http_pgbouncer.c - leased and leasectl behind PgBouncer (the packaged
 * 1.18) in transaction mode, the way users run them:
 *
 * - the service's login role has NO role-level default isolation, so
 *   nothing may depend on session state: every answer of a mixed load must
 *   be a success (no 503 from a session that was not SERIALIZABLE);
 * - nothing leaks to the pool's other clients: a client of the very same
 *   pool (same database and user, another application_name), run all along,
 *   always sees the server defaults (default_transaction_isolation and
 *   transaction_isolation "read committed", client_min_messages "notice");
 * - no named prepared statements (PgBouncer 1.18 cannot carry them in
 *   transaction mode: a statement that used one would fail here);
 * - three concurrent `leasectl migrate` through the pooler apply each file
 *   once, and leave no setting behind;
 * - the watch: through the pooler LISTEN cannot work, leased notices the
 *   pooler and polls (and still wakes a watch); with
 *   LEASE_WATCH_DATABASE_URL pointing at the server directly it listens.
 */
#include <glob.h>

#include "exec_common.h"
#include "pgprivate.h"
#include "test_wait.h"

#define POOL 2 /* server connections per (database, user): shared by everyone */
#define LOAD_THREADS 4
#define LOAD_CYCLES 40

static pg_bouncer_t *bouncer;

static int group_setup(void **state)
{
    (void)state;
    if (!pg_private_available()) {
        fprintf(stderr, "http_pgbouncer: needs a cluster the tests own and pgbouncer\n");
        exit(77);
    }
    int port;
    const char *sock = testpg_socket(&port);
    /* the login role as a user would create it: no role-level settings */
    char *admin = testpg_create_db("pgb_roles");
    assert_true(testpg_exec(admin, "DO $$ BEGIN "
                                   "IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = "
                                   "'leased_pgb') THEN CREATE ROLE leased_pgb LOGIN IN ROLE "
                                   "lease_service; END IF; END $$; "
                                   "ALTER ROLE leased_pgb RESET ALL"));
    testpg_drop_db(admin);
    free(admin);
    const char *users[] = {"postgres", "leased_pgb", NULL};
    bouncer = pg_bouncer_start(sock, port, "transaction", POOL, users);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    pg_bouncer_stop(bouncer);
    return 0;
}

/* The database name of a testpg URL (heap). */
static char *db_name(const char *url)
{
    const char *path = strchr(strstr(url, "://") + 3, '/') + 1;
    size_t n = strcspn(path, "?");
    char *out = malloc(n + 1);
    memcpy(out, path, n);
    out[n] = '\0';
    return out;
}

/* Asks the pool's server connections, POOL * 4 times in separate
 * transactions, for setting; every answer must be want. */
static void assert_pool_setting(const char *url, const char *setting, const char *want)
{
    PGconn *c = PQconnectdb(url);
    assert_int_equal(PQstatus(c), CONNECTION_OK);
    char sql[128];
    snprintf(sql, sizeof sql, "SHOW %s", setting);
    for (int i = 0; i < POOL * 4; i++) {
        PGresult *r = PQexec(c, sql);
        assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
        if (strcmp(PQgetvalue(r, 0, 0), want) != 0)
            fail_msg("a client of the same pool sees %s = %s (leaked; want %s)", setting,
                     PQgetvalue(r, 0, 0), want);
        PQclear(r);
    }
    PQfinish(c);
}

static void test_migrate_through_pgbouncer(void **state)
{
    (void)state;
    char *direct = testpg_create_empty_db("pgb_migrate");
    char *name = db_name(direct);
    char *url = pg_bouncer_url(bouncer, name, "postgres", NULL);
    const char *args[] = {"migrate", "--database-url", url, NULL};
    proc_t runs[3];
    for (int i = 0; i < 3; i++)
        runs[i] = ctl_start(args, "http://127.0.0.1:1", NULL, NULL);
    for (int i = 0; i < 3; i++) {
        int status = proc_wait(&runs[i], 120000);
        if (status != 0) {
            char *err = proc_file(&runs[i], "err");
            pg_bouncer_dump_log(bouncer);
            fail_msg("leasectl migrate %d through pgbouncer exited %d:\n%s", i, status, err);
        }
        proc_cleanup(&runs[i]);
    }
    glob_t g;
    assert_int_equal(glob(LEASE_TEST_SOURCE_DIR "/migrations/*.sql", 0, NULL, &g), 0);
    char sql[128];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM lease.schema_migrations HAVING count(*) = count(DISTINCT "
             "version)");
    assert_int_equal(testpg_query_int(direct, sql), (long long)g.gl_pathc);
    globfree(&g);
    /* the pool's other clients see nothing of it */
    char *probe = pg_bouncer_url(bouncer, name, "postgres", "leak-probe");
    assert_pool_setting(probe, "client_min_messages", "notice");
    free(probe);
    free(url);
    free(name);
    testpg_drop_db(direct);
    free(direct);
}

/* ---- leased behind the pooler ------------------------------------------ */

typedef struct load {
    const char *base, *token;
    int id;
    int failures; /* answers other than the expected success */
} load_t;

static void *load_main(void *arg)
{
    load_t *l = arg;
    http_client_t *c = http_client_new(l->base, 30000);
    for (int i = 0; i < LOAD_CYCLES; i++) {
        char target[64], rid[64];
        snprintf(target, sizeof target, "pgb-%d-%d", l->id, i);
        snprintf(rid, sizeof rid, "pgb-a-%d-%d", l->id, i);
        char *body = acquire_body(rid, target);
        http_resp_t *r = http_client_call(c, "POST", "/v1/leases/acquire", l->token, body, NULL,
                                          NULL);
        free(body);
        if (!r || r->status != 200) {
            if (r)
                fprintf(stderr, "acquire through pgbouncer: %ld %s\n", r->status, r->body);
            l->failures++;
            http_resp_free(r);
            continue;
        }
        json_t *lease = json_deep_copy(json_object_get(r->json, "lease"));
        http_resp_free(r);
        static const char *const steps[] = {"/v1/leases/renew", "/v1/leases/release"};
        for (int s = 0; s < 2; s++) {
            snprintf(rid, sizeof rid, "pgb-%d-%d-%d", s, l->id, i);
            body = owner_body(rid, target, lease);
            r = http_client_call(c, "POST", steps[s], l->token, body, NULL, NULL);
            free(body);
            if (!r || r->status != 200) {
                if (r)
                    fprintf(stderr, "%s through pgbouncer: %ld %s\n", steps[s], r->status,
                            r->body);
                l->failures++;
            }
            http_resp_free(r);
        }
        json_decref(lease);
    }
    http_client_free(c);
    return NULL;
}

typedef struct checker {
    const char *url;
    volatile int stop;
    int checks, leaks;
    char seen[64];
} checker_t;

/* A client of the same pool (same database and user) asking, over and
 * over, what its transactions run at. */
static void *checker_main(void *arg)
{
    checker_t *k = arg;
    PGconn *c = PQconnectdb(k->url);
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "checker: %s", PQerrorMessage(c));
        k->leaks++;
        PQfinish(c);
        return NULL;
    }
    while (!__atomic_load_n(&k->stop, __ATOMIC_ACQUIRE)) {
        static const char *const sql[] = {"SHOW default_transaction_isolation",
                                          "SHOW transaction_isolation"};
        for (int i = 0; i < 2; i++) {
            PGresult *r = PQexec(c, sql[i]);
            if (PQresultStatus(r) == PGRES_TUPLES_OK) {
                k->checks++;
                if (strcmp(PQgetvalue(r, 0, 0), "read committed") != 0) {
                    k->leaks++;
                    snprintf(k->seen, sizeof k->seen, "%s", PQgetvalue(r, 0, 0));
                }
            }
            PQclear(r);
        }
        usleep(2000);
    }
    PQfinish(c);
    return NULL;
}

static void test_leased_through_pgbouncer(void **state)
{
    (void)state;
    http_fx_t fx;
    http_fx_open(&fx, NULL, "pgb_leased");
    const char *worker = http_fx_worker(&fx, "prn_pgb");
    const char *admin = http_fx_credential(&fx, "prn_pgb_admin", "*",
                                           "targets:force-release,targets:read", true);
    char *name = db_name(fx.db);
    char *pooled = pg_bouncer_url(bouncer, name, "leased_pgb", NULL);
    char setting[600];
    snprintf(setting, sizeof setting, "LEASE_DATABASE_URL=%s", pooled);
    const char *env[] = {setting, "LEASE_DB_POOL_SIZE=4", "LEASE_WATCH_POLL_MS=200",
                         "LEASE_RATE_LIMIT=100000/s", NULL};
    http_fx_serve(&fx, env);
    char *log = leased_proc_log(fx.srv);
    assert_non_null(strstr(log, "goes through a pooler")); /* no LISTEN through it */
    free(log);

    checker_t k = {.url = NULL};
    char *probe = pg_bouncer_url(bouncer, name, "leased_pgb", "psql-probe");
    k.url = probe;
    pthread_t kt;
    assert_int_equal(pthread_create(&kt, NULL, checker_main, &k), 0);
    load_t loads[LOAD_THREADS];
    pthread_t lt[LOAD_THREADS];
    for (int i = 0; i < LOAD_THREADS; i++) {
        loads[i] = (load_t){fx.base, worker, i, 0};
        assert_int_equal(pthread_create(&lt[i], NULL, load_main, &loads[i]), 0);
    }
    int failures = 0;
    for (int i = 0; i < LOAD_THREADS; i++) {
        pthread_join(lt[i], NULL);
        failures += loads[i].failures;
    }
    __atomic_store_n(&k.stop, 1, __ATOMIC_RELEASE);
    pthread_join(kt, NULL);
    printf("through pgbouncer: %d cycles, %d failed answers; probe: %d checks, %d leaked (%s)\n",
           LOAD_THREADS * LOAD_CYCLES, failures, k.checks, k.leaks, k.seen);
    assert_int_equal(failures, 0);
    assert_true(k.checks > 0);
    assert_int_equal(k.leaks, 0);
    assert_int_equal(
        testpg_query_int(fx.db, "SELECT count(*) FROM lease.history WHERE state = 'released'"),
        LOAD_THREADS * LOAD_CYCLES);

    /* a watch through the pooled instance: woken by the poll */
    json_t *lease = acquire_lease(fx.base, worker, "pgb-watch", "pgb-watch");
    char path[256];
    snprintf(path, sizeof path, "/v1/leases/%s/watch?wait_ms=0",
             json_string_value(json_object_get(lease, "lease_id")));
    http_resp_t *r = call(fx.base, "GET", path, worker, NULL);
    check_reply(r, 200, "lease_inspected", NULL);
    http_resp_free(r);
    r = call_owned(fx.base, "POST", "/v1/leases/force-release", admin,
                   admin_body("pgb-fr", "pgb-watch", lease, "through the pooler"));
    check_reply(r, 200, "lease_released", NULL);
    http_resp_free(r);
    snprintf(path, sizeof path, "/v1/leases/%s/watch?wait_ms=30000",
             json_string_value(json_object_get(lease, "lease_id")));
    r = call(fx.base, "GET", path, worker, NULL);
    check_reply(r, 200, "lease_inspected", NULL);
    assert_string_equal(json_string_value(http_resp_get(r, "lease.state")), "released");
    http_resp_free(r);
    json_decref(lease);

    /* the watch session given a direct connection: it listens */
    char *direct = testpg_url_as(fx.db, "leased_pgb");
    char watch_setting[600];
    snprintf(watch_setting, sizeof watch_setting, "LEASE_WATCH_DATABASE_URL=%s", direct);
    const char *env2[] = {setting, watch_setting, NULL};
    leased_proc_t *listening = leased_proc_start(fx.db, env2);
    /* the listener connects on its own thread, after leased is ready */
    assert_true(test_wait_until(
        30000, leased_proc_log_count(listening, "watch: listening on lease_ended") > 0));
    assert_int_equal(leased_proc_stop(listening), 0);

    free(direct);
    free(probe);
    free(pooled);
    free(name);
    http_fx_close(&fx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_migrate_through_pgbouncer),
        cmocka_unit_test(test_leased_through_pgbouncer),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
