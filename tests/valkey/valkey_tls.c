/*
 * valkey_tls.c - the Valkey backend over TLS (rediss://), against a
 * redis-server of the test's own that speaks TLS only (port 0, tls-port;
 * tests/harness/valkeyserver start-tls makes a throwaway CA and a server
 * certificate for the name localhost with the openssl CLI).
 *
 * leasectl migrate binds the namespace and makes a credential,
 * leased runs on rediss://localhost:PORT with LEASE_STORE_CACERT: acquire,
 * renew, release over HTTP, and a watch woken by the push of its end over
 * the TLS subscriber. Then the refusals, each a clear start-up error: a CA
 * that did not sign the server's certificate, the system's CAs (which do
 * not know the throwaway one), a host name the certificate does not carry,
 * plain redis:// against the TLS port, and TLS files that do not go with
 * the URL (bad settings, exit 2). Then a server that asks for a client
 * certificate: refused without one, served with LEASE_STORE_CERT/_KEY.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http_client.h"
#include "leased_proc.h"
#include "lease/clock.h"
#include "lease/store_valkey.h"
#include "valkey_service.h"

/* "NAME=<s's TLS directory>/file" */
static const char *tls_env(char *buf, size_t bufsz, const char *name, const vk_server_t *s,
                           const char *file)
{
    snprintf(buf, bufsz, "%s=%s/%s", name, s->tls, file);
    return buf;
}

/* A command on s through the real redis-cli over TLS (the fixture's
 * hiredis speaks none); the number it answers (-1: none). */
static long long cli_tls(const vk_server_t *s, const char *command)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "redis-cli --tls --cacert '%s/ca.crt' --cert '%s/client.crt' --key '%s/client.key' "
             "-h localhost -p %d %s",
             s->tls, s->tls, s->tls, s->port, command);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    long long n = -1;
    if (fscanf(p, "%lld", &n) != 1)
        n = -1;
    assert_int_equal(pclose(p), 0);
    return n;
}

/* Runs leased with env until it exits (it must refuse to start): its exit
 * status, and out contains want (and no password of this file's). */
static void leased_refuses(const char *const *env, int status, const char *want)
{
    const char *args[] = {NULL};
    char *out = NULL;
    int got = leased_proc_run_cli(args, env, &out);
    if (got != status || strstr(out ? out : "", want) == NULL ||
        strstr(out ? out : "", "secret-pw"))
        fail_msg("leased exited %d (want %d), wanted \"%s\" in: %s", got, status, want,
                 out ? out : "");
    free(out);
}

/* cmocka fixtures: a TLS-only server of the test's own (in *state), which
 * does not ask for a client certificate, or does; stopped by
 * vk_fixture_stop even when the test fails. */
static int tls_server(void **state, const char *auth_clients)
{
    vk_server_t *s = calloc(1, sizeof *s);
    *state = s;
    return s && vk_start_tls(s, auth_clients) ? 0 : -1;
}

static int tls_server_no_client_cert(void **state)
{
    return tls_server(state, "no");
}

static int tls_server_client_cert(void **state)
{
    return tls_server(state, "yes");
}

static void leases_and_a_watch_over_tls(void **state)
{
    vk_server_t *sp = *state, s = *sp;
    char url[160], ca[400];
    snprintf(url, sizeof url, "LEASE_STORE_URL=rediss://localhost:%d", s.port);
    tls_env(ca, sizeof ca, "LEASE_STORE_CACERT", &s, "ca.crt");

    /* leasectl migrate loads the library and binds the namespace */
    const char *env[] = {url, ca, NULL};
    const char *migrate[] = {"migrate", NULL};
    char *out = NULL;
    int rc = vk_leasectl(migrate, env, &out);
    if (rc != LEASE_EXIT_OK)
        fail_msg("leasectl migrate exited %d: %s", rc, out);
    json_t *o = vk_printed(out);
    assert_non_null(o);
    assert_true(json_is_true(json_object_get(o, "bound")));
    json_decref(o);
    free(out);

    /* leasectl credential create over TLS too: a worker credential */
    const char *create[] = {
        "credential",   "create",        "--principal",  "alice",        "--client", "cl_alice",
        "--tenant",     VK_TENANT,       "--program",    VK_PROGRAM,     "--actor",  "*",
        "--capability", "targets:lease", "--capability", "targets:read", NULL};
    rc = vk_leasectl(create, env, &out);
    if (rc != LEASE_EXIT_OK)
        fail_msg("leasectl credential create exited %d: %s", rc, out);
    o = vk_printed(out);
    assert_non_null(o);
    char *alice = strdup(json_string_value(json_object_get(o, "token")));
    json_decref(o);
    free(out);

    /* the periodic poll never comes within the watch's wait: its answer is
     * the push over the TLS subscriber */
    const char *leased_env[] = {url, ca, "LEASE_WATCH_POLL_MS=60000", NULL};
    leased_proc_t *srv = leased_proc_start(NULL, leased_env);
    assert_non_null(srv);
    const char *base = leased_proc_url(srv);
    http_resp_t *a =
        vk_post_expect(base, "/v1/leases/acquire", alice,
                       vk_http_acquire("r1", "t1", "inst_a", 30000), 200, "lease_acquired");
    json_t *renew = vk_http_owner("r2", "t1", a, "inst_a");
    json_object_set_new(renew, "ttl_ms", json_integer(45000));
    http_resp_t *r = vk_post_expect(base, "/v1/leases/renew", alice, renew, 200, "lease_renewed");
    assert_int_equal(json_integer_value(http_resp_get(r, "lease.ttl_ms")), 45000);
    http_resp_free(r);

    vk_wait_metric(base, "leased_watch_listening", 1);
    vk_watcher_t w;
    vk_watch_start(&w, base, alice, json_string_value(http_resp_get(a, "lease.lease_id")), 20000);
    vk_wait_metric(base, "leased_watches_waiting", 1);
    r = vk_post_expect(base, "/v1/leases/release", alice, vk_http_owner("r3", "t1", a, "inst_a"),
                       200, "lease_released");
    http_resp_free(r);
    char *st = vk_watch_state(&w);
    assert_string_equal(st, "released");
    free(st);
    assert_int_equal(vk_metric(base, "leased_watch_notifications_total"), 1);

    /* the server closes every idle TLS connection of the pool: the next
     * call finds its connection closed before sending on it and connects
     * again (not lease_outcome_unknown); the subscriber too, and the watch
     * feed subscribes again */
    assert_true(cli_tls(&s, "CLIENT KILL TYPE normal") >= 1);
    assert_true(cli_tls(&s, "CLIENT KILL TYPE pubsub") == 1);
    http_resp_t *b =
        vk_post_expect(base, "/v1/leases/acquire", alice,
                       vk_http_acquire("r4", "t2", "inst_a", 30000), 200, "lease_acquired");
    vk_wait_metric(base, "leased_watch_listening", 1);
    vk_watch_start(&w, base, alice, json_string_value(http_resp_get(b, "lease.lease_id")), 20000);
    vk_wait_metric(base, "leased_watches_waiting", 1);
    r = vk_post_expect(base, "/v1/leases/release", alice, vk_http_owner("r5", "t2", b, "inst_a"),
                       200, "lease_released");
    http_resp_free(r);
    st = vk_watch_state(&w);
    assert_string_equal(st, "released");
    free(st);
    http_resp_free(b);

    /* the store URL's password never reaches the log (there is none here:
     * the URL is logged nowhere either) */
    assert_int_equal(leased_proc_log_count(srv, "rediss://"), 0);
    http_resp_free(a);
    assert_int_equal(leased_proc_stop(srv), 0);
    free(alice);
}

static void certificates_that_do_not_fit_are_refused_at_start(void **state)
{
    vk_server_t *sp = *state, s = *sp;
    char url[160], ip_url[160], plain_url[160], ca[400], other_ca[400], missing[400];
    snprintf(url, sizeof url, "LEASE_STORE_URL=rediss://localhost:%d", s.port);
    snprintf(ip_url, sizeof ip_url, "LEASE_STORE_URL=valkeys://127.0.0.1:%d", s.port);
    snprintf(plain_url, sizeof plain_url, "LEASE_STORE_URL=redis://localhost:%d", s.port);
    tls_env(ca, sizeof ca, "LEASE_STORE_CACERT", &s, "ca.crt");
    tls_env(other_ca, sizeof other_ca, "LEASE_STORE_CACERT", &s, "other-ca.crt");
    tls_env(missing, sizeof missing, "LEASE_STORE_CACERT", &s, "no-such.crt");

    /* a CA that did not sign the server's certificate */
    const char *wrong_ca[] = {url, other_ca, "LEASE_LISTEN=127.0.0.1:0", NULL};
    leased_refuses(wrong_ca, LEASE_EXIT_FAILURE, "certificate is not trusted");
    /* verification is on without a CA file: the system's CAs */
    const char *system_cas[] = {url, "LEASE_LISTEN=127.0.0.1:0", NULL};
    leased_refuses(system_cas, LEASE_EXIT_FAILURE, "certificate is not trusted");
    /* the right CA, but the certificate names localhost, not 127.0.0.1 */
    const char *wrong_name[] = {ip_url, ca, "LEASE_LISTEN=127.0.0.1:0", NULL};
    leased_refuses(wrong_name, LEASE_EXIT_FAILURE, "does not name 127.0.0.1");
    /* plain redis:// to the TLS port: never a plaintext session */
    const char *plain[] = {plain_url, "LEASE_LISTEN=127.0.0.1:0", NULL};
    leased_refuses(plain, LEASE_EXIT_FAILURE, "then the URL is rediss://");

    /* bad settings (exit 2): TLS files with a plain URL, a file that
     * cannot be read, a certificate without its key */
    const char *ca_plain[] = {plain_url, ca, NULL};
    leased_refuses(ca_plain, LEASE_EXIT_USAGE, "for rediss://");
    const char *unreadable[] = {url, missing, NULL};
    leased_refuses(unreadable, LEASE_EXIT_USAGE, "cannot read");
    char cert[400];
    tls_env(cert, sizeof cert, "LEASE_STORE_CERT", &s, "client.crt");
    const char *no_key[] = {url, ca, cert, NULL};
    leased_refuses(no_key, LEASE_EXIT_USAGE, "LEASE_STORE_KEY");

    /* a password over TLS: AUTH in the session, never in a message */
    (void)cli_tls(&s, "CONFIG SET requirepass tls-secret-pw");
    char pw_url[200], bad_pw_url[200];
    snprintf(pw_url, sizeof pw_url, "LEASE_STORE_URL=rediss://:tls-secret-pw@localhost:%d", s.port);
    snprintf(bad_pw_url, sizeof bad_pw_url,
             "LEASE_STORE_URL=rediss://:wrong-secret-pw@localhost:%d", s.port);
    const char *migrate[] = {"migrate", NULL};
    const char *pw_env[] = {pw_url, ca, NULL};
    char *said = NULL;
    int rc = vk_leasectl(migrate, pw_env, &said);
    if (rc != LEASE_EXIT_OK || strstr(said, "secret-pw"))
        fail_msg("leasectl migrate with the password exited %d: %s", rc, said);
    free(said);
    const char *bad_pw_env[] = {bad_pw_url, ca, NULL};
    rc = vk_leasectl(migrate, bad_pw_env, &said);
    if (rc != LEASE_EXIT_UNAVAILABLE || !strstr(said, "WRONGPASS") || strstr(said, "secret-pw"))
        fail_msg("leasectl migrate with a wrong password exited %d: %s", rc, said);
    free(said);
    const char *bad_pw_leased[] = {bad_pw_url, ca, "LEASE_LISTEN=127.0.0.1:0", NULL};
    leased_refuses(bad_pw_leased, LEASE_EXIT_FAILURE, "WRONGPASS");

    /* leasectl the same: unavailable (69), said why */
    const char *ctl_env[] = {url, other_ca, NULL};
    const char *status[] = {"migrate", "--status", NULL};
    char *out = NULL;
    assert_int_equal(vk_leasectl(status, ctl_env, &out), LEASE_EXIT_UNAVAILABLE);
    assert_non_null(strstr(out, "certificate is not trusted"));
    free(out);
}

static void a_server_that_asks_for_a_client_certificate(void **state)
{
    vk_server_t *sp = *state, s = *sp;
    char url[160], ca[400], cert[400], key[400];
    snprintf(url, sizeof url, "LEASE_STORE_URL=rediss://localhost:%d", s.port);
    tls_env(ca, sizeof ca, "LEASE_STORE_CACERT", &s, "ca.crt");
    tls_env(cert, sizeof cert, "LEASE_STORE_CERT", &s, "client.crt");
    tls_env(key, sizeof key, "LEASE_STORE_KEY", &s, "client.key");
    const char *migrate[] = {"migrate", NULL};
    char *out = NULL;
    int rc;
    /* without one: the server ends the session (TLS 1.3 says so after the
     * handshake, at the first read: an alert, or a reset), and the message
     * names the settings */
    const char *without[] = {url, ca, NULL};
    rc = vk_leasectl(migrate, without, &out);
    if (rc != LEASE_EXIT_UNAVAILABLE || !strstr(out, "client certificate? LEASE_STORE_CERT"))
        fail_msg("leasectl migrate without a client certificate exited %d: %s", rc, out);
    free(out);
    const char *with[] = {url, ca, cert, key, NULL};
    rc = vk_leasectl(migrate, with, &out);
    if (rc != LEASE_EXIT_OK)
        fail_msg("leasectl migrate with a client certificate exited %d: %s", rc, out);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(leases_and_a_watch_over_tls, tls_server_no_client_cert,
                                        vk_fixture_stop),
        cmocka_unit_test_setup_teardown(certificates_that_do_not_fit_are_refused_at_start,
                                        tls_server_no_client_cert, vk_fixture_stop),
        cmocka_unit_test_setup_teardown(a_server_that_asks_for_a_client_certificate,
                                        tls_server_client_cert, vk_fixture_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
