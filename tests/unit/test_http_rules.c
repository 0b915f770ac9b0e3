/*
 * test_http_rules.c - the rule on raw request targets (http_rules.h), as
 * libmicrohttpd hands them to the URI log callback before unescaping.
 * The head rules are exercised over real sockets in
 * tests/http/http_framing.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "server/http_rules.h"

static void test_targets_passed(void **state)
{
    (void)state;
    static const char *const ok[] = {
        "/healthz",
        "/v1/leases/lease_01H.x:y-z",
        "/v1/leases/abc/watch?wait_ms=100",
        "/healthz?a=%00&b=%zz", /* the query is the library's to parse */
        "/v1/leases/a%41b",     /* an escape of a visible character */
        "/",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        assert_null(leased_http_rules_target(ok[i]));
}

static void test_targets_refused(void **state)
{
    (void)state;
    static const struct {
        const char *target, *field;
    } bad[] = {
        {"/v1/leases/x%00y", "path"},  {"/v1/leases/x%00", "path"}, {"/v1/leases/x%0a", "path"},
        {"/v1/leases/x%0D%0A", "path"}, {"/v1/leases/x%7f", "path"}, {"/v1/leases/x%2fy", "path"},
        {"/v1/leases/x%2F", "path"},   {"/v1/leases/x%5c", "path"}, {"/v1/leases/x%zz", "path"},
        {"/v1/leases/x%4", "path"},    {"/v1/leases/x%", "path"},   {"/v1/leases/x%1F", "path"},
        {"/v1/leases/x\x01", "path"},  {"/v1/leases/\xc3\xa9", "path"},
        {"http://leased/healthz", "path"}, {"*", "path"}, {"", "path"},
        {"/v1/leases/x y", "request"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *got = leased_http_rules_target(bad[i].target);
        if (!got || strcmp(got, bad[i].field) != 0)
            fail_msg("%s: %s, expected %s", bad[i].target, got ? got : "passed", bad[i].field);
    }
    assert_string_equal(leased_http_rules_target(NULL), "path");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_targets_passed),
        cmocka_unit_test(test_targets_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
