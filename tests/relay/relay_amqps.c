/*
 * relay_amqps.c - leased-relay to RabbitMQ over TLS (amqps://), against the
 * fixture broker's TLS listener (tests/harness/rabbitcluster: a certificate
 * for "localhost" signed by a CA it made):
 *
 * - with that CA (LEASE_RELAY_AMQP_CACERT) the rows are delivered and
 *   marked published; also with a client certificate the CA signed;
 * - a broker the CA did not sign (another CA, made here with openssl), or
 *   a host name its certificate does not name (127.0.0.1), is refused: the
 *   relay says why, nothing arrives, the rows stay unpublished;
 * - a client certificate from another CA is refused by the broker;
 * - TLS settings that cannot work are bad settings (exit 2).
 */
#include "relay_common.h"

static relay_fx_t fx;
static char other[64]; /* a CA that signed nothing of the broker's */
static json_t *lease;
static char url_env[256];    /* amqps://...@localhost:TLS_PORT */
static char cacert_env[600]; /* the broker's CA */
static char cert_env[600];   /* a client certificate the broker's CA signed */
static char key_env[600];
static char other_ca_env[200];   /* the other CA */
static char other_cert_env[200]; /* a client certificate the other CA signed */
static char other_key_env[200];

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

static int setup(void **state)
{
    (void)state;
    if (!testbroker_tls_port()) {
        fprintf(stderr, "relay_amqps: needs the broker the tests own (its TLS listener)\n");
        exit(77);
    }
    relay_fx_open(&fx, "relay_amqps");
    const char *tls = testbroker_tls_dir();
    snprintf(url_env, sizeof url_env, "LEASE_RELAY_AMQP_URL=amqps://guest:guest@localhost:%d/",
             testbroker_tls_port());
    snprintf(cacert_env, sizeof cacert_env, "LEASE_RELAY_AMQP_CACERT=%s/ca.crt", tls);
    snprintf(cert_env, sizeof cert_env, "LEASE_RELAY_AMQP_CERT=%s/client.crt", tls);
    snprintf(key_env, sizeof key_env, "LEASE_RELAY_AMQP_KEY=%s/client.key", tls);

    snprintf(other, sizeof other, "/tmp/leased-amqps.XXXXXX");
    assert_non_null(mkdtemp(other));
    const char *ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    sh("cd %s && openssl req -x509 %s -keyout ca.key -out ca.crt -days 2 -subj '/CN=someone "
       "else' 2>/dev/null",
       other, ec);
    sh("cd %s && openssl req %s -keyout client.key -out client.csr -subj '/CN=intruder' "
       "2>/dev/null && openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key "
       "-CAcreateserial -out client.crt -days 2 2>/dev/null",
       other, ec);
    snprintf(other_ca_env, sizeof other_ca_env, "LEASE_RELAY_AMQP_CACERT=%s/ca.crt", other);
    snprintf(other_cert_env, sizeof other_cert_env, "LEASE_RELAY_AMQP_CERT=%s/client.crt", other);
    snprintf(other_key_env, sizeof other_key_env, "LEASE_RELAY_AMQP_KEY=%s/client.key", other);
    lease = relay_acquire(&fx, "t-amqps");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    json_decref(lease);
    relay_fx_close(&fx);
    sh("rm -rf %s", other);
    return 0;
}

/* leased-relay --once with env; its exit status, its output in *out. */
static int relay_once(const char *const *env, char **out)
{
    return relay_proc_run(fx.http.db, (const char *[]){"--once", NULL}, env, 60000, out);
}

/* n rows delivered over TLS by one --once run with env. */
static void delivers(const char *const *env, int n)
{
    relay_commit_ok(&fx, "t-amqps", lease, n, "results.tls");
    assert_true(relay_unpublished(&fx) == n);
    char *out = NULL;
    int rc = relay_once(env, &out);
    if (rc != 0)
        fprintf(stderr, "%s\n", out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "(TLS)"));
    free(out);
    assert_true(relay_unpublished(&fx) == 0);
    collector_t col;
    collector_init(&col);
    assert_true(collector_until(&col, fx.consumer, (size_t)n, 10000));
    collector_free(&col);
}

/* A --once run with env that must not deliver: exit 1, the output names
 * why (want), nothing arrives, the rows stay unpublished. */
static void refused(const char *const *env, const char *want)
{
    long long before = relay_unpublished(&fx);
    assert_true(before > 0);
    char *out = NULL;
    int rc = relay_once(env, &out);
    if (rc != 1 || !strstr(out, want))
        fprintf(stderr, "expected exit 1 and \"%s\":\n%s\n", want, out);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, want));
    assert_null(strstr(out, "guest:guest"));
    const char *line = strstr(out, want);
    while (line > out && line[-1] != '\n')
        line--;
    fprintf(stderr, "relay_amqps: refused as expected: %.*s\n", (int)strcspn(line, "\n"),
            line); /* the line an operator sees */
    free(out);
    assert_true(relay_unpublished(&fx) == before);
    testbroker_msg_t *m = testbroker_next(fx.consumer, 1000);
    if (m)
        fail_msg("a message arrived: %s", m->message_id);
}

static void delivers_with_the_ca(void **state)
{
    (void)state;
    delivers((const char *[]){fx.exchange_env, url_env, cacert_env, NULL}, 3);
}

static void delivers_with_a_client_certificate(void **state)
{
    (void)state;
    delivers((const char *[]){fx.exchange_env, url_env, cacert_env, cert_env, key_env, NULL}, 2);
}

static void refuses_what_cannot_be_verified(void **state)
{
    (void)state;
    relay_commit_ok(&fx, "t-amqps", lease, 2, "results.tls");
    /* a CA that did not sign the broker's certificate */
    refused((const char *[]){fx.exchange_env, url_env, other_ca_env, NULL},
            "the broker's certificate is not trusted");
    /* the right CA, but the certificate names localhost, not 127.0.0.1 */
    char by_ip[256];
    snprintf(by_ip, sizeof by_ip, "LEASE_RELAY_AMQP_URL=amqps://guest:guest@127.0.0.1:%d/",
             testbroker_tls_port());
    refused((const char *[]){fx.exchange_env, by_ip, cacert_env, NULL},
            "the broker's certificate is not trusted");
    /* the system's CAs (the default) do not know the test CA either */
    refused((const char *[]){fx.exchange_env, url_env, NULL},
            "the broker's certificate is not trusted");
    /* a client certificate the broker's CA did not sign: the broker refuses */
    refused(
        (const char *[]){fx.exchange_env, url_env, cacert_env, other_cert_env, other_key_env, NULL},
        "unavailable");
    /* and with the CA it is delivered after all */
    char *out = NULL;
    assert_int_equal(relay_once((const char *[]){fx.exchange_env, url_env, cacert_env, NULL}, &out),
                     0);
    free(out);
    assert_true(relay_unpublished(&fx) == 0);
    collector_t col;
    collector_init(&col);
    assert_true(collector_until(&col, fx.consumer, 2, 10000));
    collector_free(&col);
}

/* exit 2, want in the output, the password never */
static void bad_setting(const char *const *env, const char *want)
{
    char *out = NULL;
    int rc = relay_proc_run(fx.http.db, NULL, env, 10000, &out);
    if (rc != 2 || !strstr(out, want))
        fprintf(stderr, "expected exit 2 and \"%s\":\n%s\n", want, out);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, want));
    assert_null(strstr(out, "s3cr3t-pw"));
    free(out);
}

static void tls_settings_that_cannot_work(void **state)
{
    (void)state;
    bad_setting(
        (const char *[]){"LEASE_RELAY_AMQP_URL=amqp://u:s3cr3t-pw@h:5672/", cacert_env, NULL},
        "amqps://");
    bad_setting(
        (const char *[]){"LEASE_RELAY_AMQP_URL=amqps://u:s3cr3t-pw@h:5671/", cert_env, NULL},
        "LEASE_RELAY_AMQP_KEY");
    bad_setting((const char *[]){"LEASE_RELAY_AMQP_URL=amqps://u:s3cr3t-pw@h:5671/",
                                 "LEASE_RELAY_AMQP_CACERT=/nonexistent/ca.crt", NULL},
                "cannot read /nonexistent/ca.crt");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(delivers_with_the_ca),
        cmocka_unit_test(delivers_with_a_client_certificate),
        cmocka_unit_test(refuses_what_cannot_be_verified),
        cmocka_unit_test(tls_settings_that_cannot_work),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
