/*
 * test_trusted_proxies.c - LEASE_TRUSTED_PROXIES parsing, the client
 * address from X-Forwarded-For, and the PROXY protocol v2 header.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "server/trusted_proxies.h"

static void test_parse(void **state)
{
    (void)state;
    leased_trusted_proxies_t tp;
    assert_true(leased_trusted_proxies_parse("", &tp));
    assert_int_equal(tp.n, 0);
    assert_true(leased_trusted_proxies_parse("10.0.0.0/8, 127.0.0.9 ,::1/128", &tp));
    assert_int_equal(tp.n, 3);
    assert_true(leased_trusted_proxies_has(&tp, "10.200.3.4"));
    assert_true(leased_trusted_proxies_has(&tp, "127.0.0.9"));
    assert_true(leased_trusted_proxies_has(&tp, "::ffff:127.0.0.9")); /* mapped */
    assert_true(leased_trusted_proxies_has(&tp, "::1"));
    assert_false(leased_trusted_proxies_has(&tp, "11.0.0.1"));
    assert_false(leased_trusted_proxies_has(&tp, "127.0.0.8"));
    assert_false(leased_trusted_proxies_has(&tp, "::2"));
    assert_false(leased_trusted_proxies_has(&tp, "unknown"));
    assert_true(leased_trusted_proxies_parse("192.168.1.128/25", &tp));
    assert_true(leased_trusted_proxies_has(&tp, "192.168.1.200"));
    assert_false(leased_trusted_proxies_has(&tp, "192.168.1.100"));
    const char *bad[] = {"10.0.0.0/33",      "10.0.0.0/", "host.example", ",",
                         "1.2.3.4,,5.6.7.8", "::1/129",   "10.0.0.1/-1",  "10.0.0.1/8x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_false(leased_trusted_proxies_parse(bad[i], &tp));
}

/* want NULL: the header is refused (a malformed entry where it is read) */
static void client(const leased_trusted_proxies_t *tp, const char *peer, const char *xff,
                   const char *want)
{
    char out[64];
    bool ok = leased_trusted_proxies_client(tp, peer, xff, out);
    assert_int_equal(ok, want != NULL);
    assert_string_equal(out, want ? want : peer);
}

static void test_forwarded_for(void **state)
{
    (void)state;
    leased_trusted_proxies_t tp;
    assert_true(leased_trusted_proxies_parse("10.0.0.0/8", &tp));
    /* untrusted peer: the header is not read */
    client(&tp, "192.0.2.1", "198.51.100.7", "192.0.2.1");
    /* trusted peer: the rightmost untrusted address */
    client(&tp, "10.0.0.1", "198.51.100.7", "198.51.100.7");
    client(&tp, "10.0.0.1", "6.6.6.6, 198.51.100.7", "198.51.100.7");  /* spoofed left part */
    client(&tp, "10.0.0.1", "198.51.100.7, 10.1.1.1", "198.51.100.7"); /* two proxies */
    client(&tp, "10.0.0.1", "garbage, 198.51.100.7", "198.51.100.7");  /* left is not read */
    client(&tp, "10.0.0.1", "10.2.2.2, 10.1.1.1", "10.2.2.2");         /* all trusted: leftmost */
    client(&tp, "10.0.0.1", "198.51.100.7, nonsense", NULL);           /* malformed on the way */
    /* a client's padding on the left, however long, hides nothing */
    char padded[4096];
    memset(padded, 'x', 3000);
    snprintf(padded + 3000, sizeof padded - 3000, ", 198.51.100.8, 10.1.1.1");
    client(&tp, "10.0.0.1", padded, "198.51.100.8");
    client(&tp, "10.0.0.1", "", "10.0.0.1");
    client(&tp, "10.0.0.1", NULL, "10.0.0.1");
    client(&tp, "10.0.0.1", "2001:db8::1", "2001:db8::1");
    client(&tp, "10.0.0.1", "::ffff:198.51.100.9", "198.51.100.9");
}

static void test_proxy_v2(void **state)
{
    (void)state;
    uint8_t h[28] = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49,
                     0x54, 0x0A, 0x21, 0x11, 0x00, 0x0C, 198,  51,   100,  7,
                     10,   0,    0,    1,    0x30, 0x39, 0x1F, 0x90};
    struct sockaddr_storage ss;
    socklen_t len = 0;
    assert_int_equal(leased_proxy_v2_parse(h, sizeof h, &ss, &len), 28);
    assert_int_equal(len, sizeof(struct sockaddr_in));
    const struct sockaddr_in *a4 = (const struct sockaddr_in *)&ss;
    char text[64];
    inet_ntop(AF_INET, &a4->sin_addr, text, sizeof text);
    assert_string_equal(text, "198.51.100.7");
    assert_int_equal(ntohs(a4->sin_port), 12345);
    /* more needed */
    assert_int_equal(leased_proxy_v2_parse(h, 5, &ss, &len), 0);
    assert_int_equal(leased_proxy_v2_parse(h, 20, &ss, &len), 0);
    /* not a PROXY header: an HTTP request */
    const uint8_t get[] = "GET / HTTP/1.1\r\n";
    assert_int_equal(leased_proxy_v2_parse(get, sizeof get - 1, &ss, &len), -1);
    /* LOCAL (health checks of the proxy): no address */
    h[12] = 0x20;
    assert_int_equal(leased_proxy_v2_parse(h, sizeof h, &ss, &len), 28);
    assert_int_equal(len, 0);
    /* version 1 in the version nibble: refused */
    h[12] = 0x11;
    assert_int_equal(leased_proxy_v2_parse(h, sizeof h, &ss, &len), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_forwarded_for),
        cmocka_unit_test(test_proxy_v2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
