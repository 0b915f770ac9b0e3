/*
 * http_proxy_header.c - a trusted proxy's client address, read without
 * waiting on anyone (issue 34, finding 6).
 *
 * leased trusts 127.0.0.9 (LEASE_TRUSTED_PROXIES); the test speaks for the
 * proxy itself over raw sockets bound to that address:
 * - connections from the trusted peer that send nothing hold no one up:
 *   a client of another address is answered at once meanwhile (before,
 *   each such connection stalled the library's event thread for up to
 *   250 ms while its PROXY header was awaited);
 * - a PROXY v2 header with 1,103 bytes of TLVs (the format allows 64 KiB)
 *   is taken off the socket and names the client: the request behind it
 *   is answered and audited under that address (before: closed
 *   unanswered, the header did not fit a 1 KiB peek);
 * - an X-Forwarded-For that a client padded past 1 KiB still yields the
 *   rightmost address the proxy appended (before: the header was ignored
 *   and the request charged to the proxy);
 * - an X-Forwarded-For whose entries the proxy appended do not parse is
 *   refused 400 naming the header, not charged to the proxy in silence.
 */
#include <poll.h>

#include "../http/http_common.h"
#include "raw_http.h"

#define PROXY "127.0.0.9"
#define SILENT 12

static http_fx_t fx;
static const char *worker; /* owned by fx */

static int setup(void **state)
{
    http_fx_open(&fx, state, "http_proxy_header");
    worker = http_fx_worker(&fx, "prn_proxied");
    const char *env[] = {"LEASE_TRUSTED_PROXIES=" PROXY "/32", NULL};
    http_fx_serve(&fx, env);
    return 0;
}

/* An inspect with extra header lines (audited with its source). */
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

/* A PROXY v2 header (PROXY, TCP over IPv4) naming client, with tlv_bytes
 * of a no-op TLV (type 0x04, PP2_TYPE_NOOP) after the addresses. */
static size_t proxy_header(uint8_t *out, const uint8_t client[4], size_t tlv_bytes)
{
    static const uint8_t sig[12] = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D,
                                    0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};
    size_t body = 12 + tlv_bytes;
    memcpy(out, sig, sizeof sig);
    out[12] = 0x21;
    out[13] = 0x11;
    out[14] = (uint8_t)(body >> 8);
    out[15] = (uint8_t)(body & 0xff);
    memcpy(out + 16, client, 4);
    memcpy(out + 20, (uint8_t[]){127, 0, 0, 1}, 4);
    out[24] = 0x30;
    out[25] = 0x39;
    out[26] = 0x1F;
    out[27] = 0x90;
    if (tlv_bytes >= 3) {
        size_t v = tlv_bytes - 3;
        out[28] = 0x04;
        out[29] = (uint8_t)(v >> 8);
        out[30] = (uint8_t)(v & 0xff);
        memset(out + 31, 0, v);
    }
    return 16 + body;
}

static void test_silent_trusted_connections_stall_nobody(void **state)
{
    (void)state;
    int port = leased_proc_port(fx.srv);
    raw_conn_t *silent[SILENT];
    for (int i = 0; i < SILENT; i++) {
        silent[i] = raw_connect(port, PROXY);
        assert_non_null(silent[i]);
    }
    /* each answered within a second (the stall was 250 ms per silent
     * connection, 3 s in all) */
    for (int i = 0; i < 10; i++) {
        raw_conn_t *c = raw_connect(port, "127.0.0.2");
        assert_non_null(c);
        assert_true(raw_send(c, "GET /healthz HTTP/1.1\r\nHost: leased\r\n\r\n"));
        raw_resp_t *r = raw_read(c, 1000);
        assert_non_null(r);
        assert_int_equal(r->status, 200);
        raw_resp_free(r);
        raw_close(c);
    }
    for (int i = 0; i < SILENT; i++)
        raw_close(silent[i]);
}

static void test_long_proxy_header_names_the_client(void **state)
{
    (void)state;
    int port = leased_proc_port(fx.srv);
    uint8_t head[16 + 12 + 1103];
    size_t n = proxy_header(head, (uint8_t[]){198, 51, 100, 23}, 1103);
    assert_int_equal(n, sizeof head);
    raw_conn_t *c = raw_connect(port, PROXY);
    assert_non_null(c);
    /* in two pieces, as a segment boundary would cut it */
    assert_true(raw_send_bytes(c, head, 700));
    usleep(100000);
    assert_true(raw_send_bytes(c, head + 700, n - 700));
    char *text = inspect_text("t-proxied", "");
    assert_true(raw_send(c, text));
    raw_resp_t *r = raw_read(c, 10000);
    assert_non_null(r);
    assert_int_equal(r->status, 404); /* nothing held there: an answer */
    raw_resp_free(r);
    raw_close(c);
    free(text);
    assert_true(test_wait_until(10000, audited_from("198.51.100.23") >= 1));
}

static void test_padded_forwarded_for_names_the_client(void **state)
{
    (void)state;
    int port = leased_proc_port(fx.srv);
    char extra[2048];
    memset(extra, 0, sizeof extra);
    strcpy(extra, "X-Forwarded-For: ");
    size_t at = strlen(extra);
    for (int i = 0; i < 150; i++, at += 8)
        memcpy(extra + at, "6.6.6.6,", 8);
    snprintf(extra + at, sizeof extra - at, " 198.51.100.24\r\n");
    assert_true(strlen(extra) > 1024);
    char *text = inspect_text("t-padded", extra);
    raw_conn_t *c = raw_connect(port, PROXY);
    assert_true(raw_send(c, text));
    raw_resp_t *r = raw_read(c, 10000);
    assert_non_null(r);
    assert_int_equal(r->status, 404);
    raw_resp_free(r);
    raw_close(c);
    free(text);
    assert_true(test_wait_until(10000, audited_from("198.51.100.24") >= 1));
    assert_int_equal(audited_from("6.6.6.6"), 0);

    /* what the proxy appended does not parse: refused, naming the header */
    text = inspect_text("t-bad", "X-Forwarded-For: 198.51.100.25, not-an-address\r\n");
    c = raw_connect(port, PROXY);
    assert_true(raw_send(c, text));
    r = raw_read(c, 10000);
    assert_non_null(r);
    assert_int_equal(r->status, 400);
    assert_string_equal(raw_str(r, "code"), "invalid_lease_request");
    assert_string_equal(raw_str(r, "field"), "X-Forwarded-For");
    raw_resp_free(r);
    raw_close(c);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_silent_trusted_connections_stall_nobody),
        cmocka_unit_test(test_long_proxy_header_names_the_client),
        cmocka_unit_test(test_padded_forwarded_for_names_the_client),
    };
    return cmocka_run_group_tests(tests, setup, http_fx_teardown);
}
