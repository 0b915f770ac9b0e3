/*
 * http_trusted_proxies.c - LEASE_TRUSTED_PROXIES behind a real haproxy
 * (issue 19, finding 3).
 *
 * haproxy connects to leased from 127.0.0.9, the one trusted address, in
 * two ways: a TCP frontend that sends a PROXY protocol v2 header, and an
 * HTTP frontend that appends the client to X-Forwarded-For. leased must
 * see the real client (127.0.0.6, .7, .8) in the audit's source_address
 * and key the per-source connection limit on it; a client's own
 * X-Forwarded-For (spoofed, left of what the proxy appended) and the
 * header from a peer that is not trusted are ignored.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "free_port.h"
#include "http_common.h"
#include "raw_http.h"

static http_fx_t fx;
static const char *worker;     /* owned by fx */
static child_daemon_t haproxy; /* stopped by teardown, even after a failure */
static char cfg[128];          /* haproxy's configuration */

static int teardown(void **state)
{
    http_helper_stop(&haproxy);
    if (cfg[0])
        unlink(cfg);
    return http_fx_teardown(state);
}

static int setup(void **state)
{
    http_fx_open(&fx, state, "http_trusted_proxies");
    worker = http_fx_worker(&fx, "prn_proxied");
    return 0;
}

/* haproxy in front of leased: pp_port sends PROXY v2, http_port appends
 * X-Forwarded-For; both connect from 127.0.0.9. */
static void start_haproxy(char *cfg_path, int pp_port, int http_port, int leased_port)
{
    FILE *f = fopen(cfg_path, "w");
    assert_non_null(f);
    fprintf(f,
            "global\n  maxconn 256\n"
            "defaults\n  timeout connect 5s\n  timeout client 30s\n  timeout server 30s\n"
            "frontend pp\n  mode tcp\n  bind 127.0.0.1:%d\n  default_backend leased_pp\n"
            "backend leased_pp\n  mode tcp\n"
            "  server l1 127.0.0.1:%d send-proxy-v2 source 127.0.0.9\n"
            "frontend web\n  mode http\n  bind 127.0.0.1:%d\n  option forwardfor\n"
            "  default_backend leased_http\n"
            "backend leased_http\n  mode http\n  server l1 127.0.0.1:%d source 127.0.0.9\n",
            pp_port, leased_port, http_port, leased_port);
    fclose(f);
    char *argv[] = {"haproxy", "-db", "-f", cfg_path, NULL};
    http_helper_start(&haproxy, "http_trusted_proxies-haproxy", argv);
    /* ready when it accepts */
    for (int i = 0; i < 100; i++) {
        raw_conn_t *c = raw_connect(http_port, NULL);
        if (c) {
            raw_close(c);
            return;
        }
        usleep(50000);
    }
    fail_msg("haproxy did not start (its log follows the teardown)");
}

/* An inspect of target (audited with its source_address), with extra
 * header lines (may be ""). */
static char *inspect_text(const char *target, const char *extra)
{
    return http_inspect_text(worker, target, extra);
}

/* Audit events recorded with source address addr: lease.audit_log's rows
 * (Postgres), the audit Stream's entries whose source_address is addr
 * (Valkey; docs/backends.md "Audit events"). */
static long long audited_from(const char *addr)
{
    const char *match[] = {"source_address", addr, NULL};
    return fx.valkey ? http_fx_audit_count(&fx, match) : http_audited_from(fx.db, addr);
}

/* Inspects audited: lease.audit_log's rows (Postgres), the audit Stream's
 * entries (Valkey). */
static long long inspects_audited(void)
{
    if (!fx.valkey)
        return testpg_query_int(fx.db, "SELECT count(*) FROM lease.audit_log WHERE "
                                       "event_type = 'target_lease_inspect'");
    const char *match[] = {"event_type", "target_lease_inspect", NULL};
    return http_fx_audit_count(&fx, match);
}

static void inspect_via(int port, const char *src, const char *target, const char *extra)
{
    char *text = inspect_text(target, extra);
    raw_resp_t *r = raw_call(port, src, text);
    assert_non_null(r);
    /* nothing is held there: lease_not_found, audited like any inspect */
    if (r->status != 404)
        fprintf(stderr, "%s via %d: %s%s\n", src, port, r->head, r->body);
    assert_int_equal(r->status, 404);
    raw_resp_free(r);
    free(text);
}

static void test_client_address_from_a_trusted_proxy_only(void **state)
{
    (void)state;
    const char *env[] = {"LEASE_TRUSTED_PROXIES=127.0.0.9/32, ::1",
                         "LEASE_MAX_CONNECTIONS_PER_SOURCE=2", NULL};
    http_fx_serve(&fx, env);
    int leased_port = leased_proc_port(fx.srv);
    int pp_port = test_free_port(), http_port = test_free_port();
    snprintf(cfg, sizeof cfg, "/tmp/http_trusted_proxies_%d.cfg", (int)getpid());
    start_haproxy(cfg, pp_port, http_port, leased_port);

    /* HTTP through the proxy, with a spoofed X-Forwarded-For of the client's
     * own: the proxy appends 127.0.0.6, the rightmost untrusted address */
    inspect_via(http_port, "127.0.0.6", "tp-http", "X-Forwarded-For: 6.6.6.6\r\n");
    /* the PROXY v2 header names 127.0.0.7 */
    inspect_via(pp_port, "127.0.0.7", "tp-pp", "");
    /* straight from a peer that is not trusted: its X-Forwarded-For is ignored */
    inspect_via(leased_port, "127.0.0.5", "tp-direct", "X-Forwarded-For: 5.5.5.5\r\n");
    /* the audit of reads is written in batches: wait for all three */
    for (int i = 0; i < 100 && inspects_audited() < 3; i++)
        usleep(100000);
    long long from6 = audited_from("127.0.0.6"), from7 = audited_from("127.0.0.7"),
              from5 = audited_from("127.0.0.5"),
              spoofed = audited_from("6.6.6.6") + audited_from("5.5.5.5"),
              proxy = audited_from("127.0.0.9");
    printf("audit rows by source: 127.0.0.6 %lld, 127.0.0.7 %lld, 127.0.0.5 %lld, spoofed %lld, "
           "proxy %lld\n",
           from6, from7, from5, spoofed, proxy);
    assert_true(from6 >= 1);
    assert_true(from7 >= 1);
    assert_true(from5 >= 1);
    assert_int_equal(spoofed, 0);
    assert_int_equal(proxy, 0);

    /* a PROXY header from a peer that is not trusted is not a request:
     * its "QUIT" line is a request line without a target, which
     * libmicrohttpd closes without an answer (docs/contract.md); the
     * request behind it never runs */
    static const char sig[] = "\r\n\r\n\0\r\nQUIT\n\x21\x11\x00\x0c"
                              "\x01\x02\x03\x04\x05\x06\x07\x08\x00\x50\x00\x50";
    raw_conn_t *c = raw_connect(leased_port, "127.0.0.5");
    assert_true(raw_send_bytes(c, sig, sizeof sig - 1));
    (void)raw_send(c, "GET /healthz HTTP/1.1\r\nHost: leased\r\n\r\n");
    raw_resp_t *r = raw_read(c, 10000);
    assert_null(r);
    assert_true(raw_closed(c, 10000));
    raw_close(c);

    /* the per-source connection limit counts the client, not the proxy:
     * two held from 127.0.0.11 (each receiving a request: an idle one
     * would make room, race_idle_eviction), a third refused, 127.0.0.8
     * still served */
    raw_conn_t *held[2];
    for (int i = 0; i < 2; i++) {
        held[i] = raw_connect(pp_port, "127.0.0.11");
        assert_non_null(held[i]);
        assert_true(raw_send(held[i], "POST /v1/leases/inspect HTTP/1.1\r\nHost: leased\r\n"
                                      "Content-Length: 10\r\n\r\n{"));
    }
    usleep(200000); /* both heads reached leased */
    r = raw_call(pp_port, "127.0.0.11", "GET /healthz HTTP/1.1\r\nHost: leased\r\n\r\n");
    assert_non_null(r);
    assert_int_equal(r->status, 429);
    raw_resp_free(r);
    r = raw_call(pp_port, "127.0.0.8", "GET /healthz HTTP/1.1\r\nHost: leased\r\n\r\n");
    assert_non_null(r);
    assert_int_equal(r->status, 200);
    raw_resp_free(r);
    for (int i = 0; i < 2; i++)
        raw_close(held[i]);

    http_helper_stop(&haproxy);
    assert_int_equal(leased_proc_stop(fx.srv), 0);
    fx.srv = NULL;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_client_address_from_a_trusted_proxy_only),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
