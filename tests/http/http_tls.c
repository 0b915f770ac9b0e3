/*
 * http_tls.c - TLS on both sides of leased, with a certificate authority
 * made in the test (openssl):
 *
 * - to Postgres: a private cluster that accepts TCP over TLS only;
 *   `leasectl migrate` and leased connect with sslmode=verify-full and the
 *   test CA, and every leased session is encrypted (pg_stat_ssl); the wrong
 *   CA, or a host name the certificate does not name, is refused (leased
 *   stays not ready, migrate fails);
 * - leased behind a TLS-terminating proxy (socat, as docs/operators.md
 *   shows): the C client and leasectl over https:// trusting the test CA
 *   (LEASE_CA_FILE), a watch long-polled through it; a client without the
 *   CA is refused before anything is sent.
 *
 * With LEASE_TEST_STORE=valkey the terminator's case runs with leased on a
 * redis-server of the test's own (test_store.h); the case of TLS to
 * Postgres is PostgreSQL's own and is left out there (Valkey over TLS,
 * rediss://, is tests/valkey/valkey_tls.c).
 */
#include "free_port.h"
#include "exec_common.h"
#include "lease/client.h"
#include "pgprivate.h"

static char dir[64];         /* certificates */
static pg_private_t *pg;     /* TLS-only over TCP (Postgres) */
static child_daemon_t proxy; /* socat: stopped by group_teardown too */
static bool valkey;          /* LEASE_TEST_STORE=valkey */
static test_store_valkey_t vk;

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    if (system(cmd) != 0)
        fail_msg("command failed: %s", cmd);
}

/* A CA and a certificate for "localhost" it signed (no IP address in it);
 * another CA that signed nothing of ours. */
static void make_certificates(void)
{
    snprintf(dir, sizeof dir, "/tmp/leased-tls.XXXXXX");
    assert_non_null(mkdtemp(dir));
    const char *ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    sh("cd %s && openssl req -x509 %s -keyout ca.key -out ca.crt -days 2 -subj '/CN=leased test "
       "CA' 2>/dev/null",
       dir, ec);
    sh("cd %s && openssl req -x509 %s -keyout other-ca.key -out other-ca.crt -days 2 "
       "-subj '/CN=someone else' 2>/dev/null",
       dir, ec);
    sh("cd %s && openssl req %s -keyout server.key -out server.csr -subj '/CN=localhost' "
       "2>/dev/null && printf 'subjectAltName=DNS:localhost\\n' > san.ext && "
       "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
       "-out server.crt -days 2 -extfile san.ext 2>/dev/null",
       dir, ec);
    sh("cd %s && openssl req %s -keyout stray.key -out /dev/null -subj '/CN=x' 2>/dev/null", dir,
       ec);
    sh("chmod 644 %s/*.crt %s/*.key", dir, dir);
}

static int group_setup(void **state)
{
    (void)state;
    valkey = test_store_is_valkey();
    if (valkey) {
        make_certificates();
        test_store_valkey_start(&vk);
        return 0;
    }
    if (!pg_private_available()) {
        fprintf(stderr, "http_tls: needs a cluster the tests own\n");
        exit(77);
    }
    make_certificates();
    pg = pg_private_start(&(pg_private_opts_t){.ssl_dir = dir});
    char *super = pg_private_url(pg, "postgres", "postgres");
    assert_true(testpg_exec(super, "CREATE DATABASE leased"));
    free(super);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    http_helper_stop(&proxy); /* still running when the test failed */
    if (valkey)
        test_store_valkey_stop(&vk);
    else
        pg_private_stop(pg);
    sh("rm -rf %s", dir);
    return 0;
}

/* A TCP conninfo to the private cluster with TLS options. */
static void tls_url(char *out, size_t n, const char *host, const char *user, const char *ca,
                    const char *sslmode)
{
    snprintf(out, n, "host=%s port=%d dbname=leased user=%s sslmode=%s sslrootcert=%s/%s", host,
             pg->port, user, sslmode, dir, ca);
}

static int migrate(const char *url, char **err_out)
{
    const char *args[] = {"migrate", "--database-url", url, NULL};
    proc_t p = ctl_start(args, "http://127.0.0.1:1", NULL, NULL);
    int status = proc_wait(&p, 120000);
    *err_out = proc_file(&p, "err");
    proc_cleanup(&p);
    return status;
}

static void test_postgres_verify_full(void **state)
{
    (void)state;
    char url[512];
    char *err = NULL;
    /* refused: another CA; a name the certificate does not carry */
    tls_url(url, sizeof url, "localhost", "postgres", "other-ca.crt", "verify-full");
    assert_int_equal(migrate(url, &err), 69);
    assert_non_null(strstr(err, "certificate verify failed"));
    free(err);
    tls_url(url, sizeof url, "127.0.0.1", "postgres", "ca.crt", "verify-full");
    assert_int_equal(migrate(url, &err), 69);
    assert_non_null(strstr(err, "does not match host name"));
    free(err);
    /* and TCP without TLS is refused by the server */
    snprintf(url, sizeof url, "host=localhost port=%d dbname=leased user=postgres sslmode=disable",
             pg->port);
    assert_int_equal(migrate(url, &err), 69);
    free(err);

    tls_url(url, sizeof url, "localhost", "postgres", "ca.crt", "verify-full");
    if (migrate(url, &err) != 0)
        fail_msg("migrate over verify-full failed: %s", err);
    free(err);
    char *super = pg_private_url(pg, "leased", "postgres");
    assert_true(testpg_exec(super, "CREATE ROLE leased_app LOGIN IN ROLE lease_service; "
                                   "ALTER ROLE leased_app SET default_transaction_isolation = "
                                   "'serializable'"));

    /* leased over verify-full: ready, and every session it made is TLS */
    char setting[700];
    tls_url(url, sizeof url, "localhost", "leased_app", "ca.crt", "verify-full");
    snprintf(setting, sizeof setting, "LEASE_DATABASE_URL=%s", url);
    const char *env[] = {setting, NULL};
    leased_proc_t *srv = leased_proc_start(super, env);
    http_resp_t *r = call(leased_proc_url(srv), "GET", "/readyz", NULL, NULL);
    assert_int_equal(r->status, 200);
    http_resp_free(r);
    long long plain = testpg_query_int(
        super, "SELECT count(*) FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) "
               "WHERE a.usename = 'leased_app' AND NOT s.ssl");
    long long encrypted = testpg_query_int(
        super, "SELECT count(*) FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) "
               "WHERE a.usename = 'leased_app' AND s.ssl");
    assert_int_equal(plain, 0);
    assert_true(encrypted >= 2); /* the pool's and the watch session */
    assert_int_equal(leased_proc_stop(srv), 0);

    /* the wrong CA: leased starts, but never becomes ready */
    tls_url(url, sizeof url, "localhost", "leased_app", "other-ca.crt", "verify-full");
    snprintf(setting, sizeof setting, "LEASE_DATABASE_URL=%s", url);
    srv = leased_proc_start_unready(super, env);
    char reason[64];
    assert_int_equal(http_wait_ready(leased_proc_url(srv), 200, reason, sizeof reason, 20, true),
                     503);
    assert_string_equal(reason, "database_unreachable");
    char *log = leased_proc_log(srv);
    assert_non_null(strstr(log, "schema unknown: database unreachable"));
    free(log);
    assert_int_equal(leased_proc_stop(srv), 0);
    free(super);
}

/* socat terminating TLS on a free port in front of base_port (proxy). */
static void tls_terminator(int port, int base_port)
{
    char listen[256], target[64];
    snprintf(listen, sizeof listen,
             "OPENSSL-LISTEN:%d,bind=127.0.0.1,cert=%s/server.crt,key=%s/server.key,verify=0,"
             "fork,reuseaddr",
             port, dir, dir);
    snprintf(target, sizeof target, "TCP:127.0.0.1:%d", base_port);
    char *argv[] = {"socat", listen, target, NULL};
    http_helper_start(&proxy, "http_tls-socat", argv);
}

/* leased behind a TLS-terminating proxy (docs/operators.md, "TLS"): the C
 * client and leasectl over https:// trusting the test CA, a watch through
 * it, and a client without the CA refused before anything is sent. */
static void test_https_through_a_terminator(void **state)
{
    (void)state;
    /* the store: Postgres over verify-full as leased_app, or the
     * redis-server (where the credential is made too) */
    char *super = valkey ? strdup(vk.url) : pg_private_url(pg, "leased", "postgres");
    char url[512], setting[700], ca[128];
    snprintf(ca, sizeof ca, "%s/ca.crt", dir);
    if (valkey) {
        snprintf(setting, sizeof setting, "%s", vk.setting);
    } else {
        tls_url(url, sizeof url, "localhost", "leased_app", "ca.crt", "verify-full");
        snprintf(setting, sizeof setting, "LEASE_DATABASE_URL=%s", url);
    }
    const char *env[] = {setting, NULL};
    leased_proc_t *srv = leased_proc_start(valkey ? NULL : super, env);
    int port = test_free_port();
    tls_terminator(port, leased_proc_port(srv));
    char base[64];
    snprintf(base, sizeof base, "https://localhost:%d", port);

    /* the C client, trusting the test CA (the proxy may take a moment) */
    lease_client_t *c = lease_client_new(base, NULL);
    assert_true(lease_client_set_ca_file(c, ca));
    lease_code_t code = LEASE_BACKEND_UNAVAILABLE;
    lease_client_health_t h;
    for (int i = 0; i < 200 && code != LEASE_INSPECTED; i++) {
        lease_client_call_t call = {.deadline_ms = 2000};
        if ((code = lease_client_health(c, true, &call, &h)) != LEASE_INSPECTED)
            lease_sleep_ms(50);
    }
    assert_int_equal(code, LEASE_INSPECTED);
    assert_string_equal(h.status, "ready");
    lease_client_free(c);
    /* without the CA: refused by the client, nothing sent */
    c = lease_client_new(base, NULL);
    lease_client_call_t call = {.deadline_ms = 2000};
    assert_int_equal(lease_client_health(c, true, &call, &h), LEASE_BACKEND_UNAVAILABLE);
    lease_client_free(c);

    /* leasectl with LEASE_CA_FILE: a real lease over HTTPS, then a watch */
    char *token = leased_proc_credential(super,
                                         &(leased_cred_spec_t){.principal = "prn_tls",
                                                               .tenant = TENANT,
                                                               .program = PROGRAM,
                                                               .capabilities = WORKER_CAPS},
                                         NULL);
    char ca_env[160];
    snprintf(ca_env, sizeof ca_env, "LEASE_CA_FILE=%s", ca);
    const char *ctl_env[] = {ca_env, NULL};
    const char *args[] = {"acquire",     "--tenant",   TENANT,     "--program", PROGRAM,
                          "--namespace", NAMESPACE,    "--target", "tls-1",     "--actor",
                          ACTOR,         "--workflow", "default",  NULL};
    json_t *answer = NULL;
    assert_int_equal(ctl(args, base, token, ctl_env, &answer), 0);
    assert_string_equal(json_string_value(json_object_get(answer, "code")), "lease_acquired");
    const char *lease_id =
        json_string_value(json_object_get(json_object_get(answer, "lease"), "lease_id"));
    c = lease_client_new(base, token);
    assert_true(lease_client_set_ca_file(c, ca));
    lease_result_t res;
    lease_client_call_t wcall = {0};
    assert_int_equal(lease_client_watch(c, lease_id, 200, -1, &wcall, &res), LEASE_INSPECTED);
    assert_int_equal(res.lease.state, LEASE_STATE_ACTIVE);
    lease_client_free(c);
    json_decref(answer);

    http_helper_stop(&proxy);
    assert_int_equal(leased_proc_stop(srv), 0);
    free(token);
    free(super);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_postgres_verify_full),
        cmocka_unit_test(test_https_through_a_terminator),
    };
    static const http_pg_only_t pg_only[] = {
        {"test_postgres_verify_full",
         "TLS to PostgreSQL itself: sslmode=verify-full, pg_stat_ssl, a private cluster; "
         "Valkey over TLS (rediss://, the wrong CA, a name not in the certificate) is "
         "tests/valkey/valkey_tls.c"},
        {NULL, NULL},
    };
    return http_fx_run_group("http_tls", tests, sizeof tests / sizeof tests[0], group_setup,
                             group_teardown, pg_only);
}
