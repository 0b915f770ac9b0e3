/*
 * test_server_routes.c - route matching (literal paths win over
 * {lease_id}, method and path misses are told apart), W3C traceparent
 * parsing, correlation id shape, metrics exposition, and log macros that
 * evaluate nothing below the level.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "server/http.h"
#include "server/request_ids.h"
#include "lease/log.h"
#include "lease/schema.h"
#include "server/metrics.h"
#include "server/routes.h"

static void test_match(void **state)
{
    (void)state;
    char param[LEASE_ID_MAX + 2];
    leased_route_miss_t miss;
    const leased_route_t *r =
        leased_routes_match("POST", "/v1/leases/acquire", param, sizeof param, &miss);
    assert_non_null(r);
    assert_int_equal(r->op, LEASED_OP_ACQUIRE);
    assert_int_equal(r->caps_any, LEASE_CAP_LEASE);
    r = leased_routes_match("GET", "/v1/leases/lease_abc", param, sizeof param, &miss);
    assert_non_null(r);
    assert_int_equal(r->op, LEASED_OP_GET);
    assert_string_equal(param, "lease_abc");
    /* GET of a literal route is a method miss, not a lease id */
    assert_null(leased_routes_match("GET", "/v1/leases/acquire", param, sizeof param, &miss));
    assert_int_equal(miss, LEASED_ROUTE_NO_METHOD);
    assert_null(leased_routes_match("DELETE", "/v1/leases/lease_abc", param, sizeof param, &miss));
    assert_int_equal(miss, LEASED_ROUTE_NO_METHOD);
    assert_null(leased_routes_match("GET", "/v1/leases/a/b", param, sizeof param, &miss));
    assert_int_equal(miss, LEASED_ROUTE_NO_PATH);
    /* the watch: one id segment, then "/watch"; read or lease capability */
    r = leased_routes_match("GET", "/v1/leases/lease_abc/watch", param, sizeof param, &miss);
    assert_non_null(r);
    assert_int_equal(r->op, LEASED_OP_WATCH);
    assert_string_equal(param, "lease_abc");
    assert_int_equal(r->caps_any, LEASE_CAP_READ | LEASE_CAP_LEASE);
    assert_false(r->on_event_thread);
    assert_null(
        leased_routes_match("POST", "/v1/leases/lease_abc/watch", param, sizeof param, &miss));
    assert_int_equal(miss, LEASED_ROUTE_NO_METHOD);
    assert_null(leased_routes_match("GET", "/v1/leases//watch", param, sizeof param, &miss));
    assert_null(leased_routes_match("GET", "/v1/leases/a/watch/x", param, sizeof param, &miss));
    assert_null(leased_routes_match("GET", "/v1/leases/", param, sizeof param, &miss));
    assert_int_equal(miss, LEASED_ROUTE_NO_PATH);
    assert_null(leased_routes_match("POST", "/v1/commits/", param, sizeof param, &miss));
    assert_int_equal(miss, LEASED_ROUTE_NO_PATH);
    /* sessions: a literal route and two with the session id segment */
    r = leased_routes_match("POST", "/v1/sessions", param, sizeof param, &miss);
    assert_non_null(r);
    assert_int_equal(r->op, LEASED_OP_SESSION_OPEN);
    assert_int_equal(r->caps_any, LEASE_CAP_LEASE);
    r = leased_routes_match("POST", "/v1/sessions/session_ab/keepalive", param, sizeof param,
                            &miss);
    assert_non_null(r);
    assert_int_equal(r->op, LEASED_OP_SESSION_KEEPALIVE);
    assert_string_equal(param, "session_ab");
    r = leased_routes_match("POST", "/v1/sessions/session_ab/close", param, sizeof param, &miss);
    assert_non_null(r);
    assert_int_equal(r->op, LEASED_OP_SESSION_CLOSE);
    assert_string_equal(param, "session_ab");
    assert_null(leased_routes_match("GET", "/v1/sessions/session_ab/close", param, sizeof param,
                                    &miss));
    assert_int_equal(miss, LEASED_ROUTE_NO_METHOD);
    assert_null(leased_routes_match("POST", "/v1/sessions/session_ab", param, sizeof param, &miss));
    assert_int_equal(miss, LEASED_ROUTE_NO_PATH);
    r = leased_routes_match("GET", "/healthz", param, sizeof param, &miss);
    assert_non_null(r);
    assert_true(r->on_event_thread);
    assert_int_equal(r->caps_any, 0);
    /* a long segment is cut one past the limit, so validation refuses it */
    char path[400] = "/v1/leases/";
    memset(path + 11, 'x', 300);
    path[311] = '\0';
    r = leased_routes_match("GET", path, param, sizeof param, &miss);
    assert_non_null(r);
    assert_int_equal(strlen(param), LEASE_ID_MAX + 1);
}

/* Every route runs on a worker unless it needs no credential (those must
 * never block), and each has a distinct name. */
static void test_table_invariants(void **state)
{
    (void)state;
    size_t n;
    const leased_route_t *t = leased_routes_table(&n);
    assert_int_equal(n, 18);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(t[i].on_event_thread, t[i].caps_any == 0);
        assert_non_null(t[i].handler);
        for (size_t j = i + 1; j < n; j++) {
            assert_string_not_equal(t[i].name, t[j].name);
            assert_false(strcmp(t[i].method, t[j].method) == 0 &&
                         strcmp(t[i].path, t[j].path) == 0);
        }
    }
}

static void test_traceparent(void **state)
{
    (void)state;
    char out[33];
    assert_true(leased_traceparent_trace_id(
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", out));
    assert_string_equal(out, "4bf92f3577b34da6a3ce929d0e0e4736");
    /* a later version may append fields */
    assert_true(leased_traceparent_trace_id(
        "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", out));
    static const char *const bad[] = {
        NULL,
        "",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", /* v00 is exact */
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", /* upper case */
        "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x",
        "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_false(leased_traceparent_trace_id(bad[i], out));
        assert_string_equal(out, "");
    }
}

static void test_correlation_id(void **state)
{
    (void)state;
    char a[32], b[32];
    leased_correlation_id(a);
    leased_correlation_id(b);
    assert_int_equal(strlen(a), 31);
    assert_int_equal(strncmp(a, "corr_", 5), 0);
    for (const char *p = a + 5; *p; p++)
        assert_true((*p >= 'a' && *p <= 'z') || (*p >= '2' && *p <= '7'));
    assert_string_not_equal(a, b);
}

static void test_metrics_render(void **state)
{
    (void)state;
    const char *names[] = {"acquire", "renew"};
    leased_metrics_t *m = leased_metrics_new(2, names);
    leased_metrics_observe(m, 0, LEASE_ACQUIRED, 3000000);   /* 3 ms */
    leased_metrics_observe(m, 0, LEASE_ACQUIRED, 700000000); /* 700 ms */
    leased_metrics_observe(m, 0, LEASE_CONFLICT, 1000000);
    leased_metrics_observe(m, 2, LEASE_INVALID_LEASE_REQUEST, 1000); /* unmatched */
    assert_int_equal(leased_metrics_requests(m, 0, LEASE_ACQUIRED), 2);
    leased_metrics_gauges_t g;
    memset(&g, 0, sizeof g);
    g.store.pool_size = 4;
    g.store.pool_in_use = 1;
    g.health_known = true;
    g.health.active_leases = 17;
    g.audit_dropped = 3;
    char *text = leased_metrics_render(m, &g);
    assert_non_null(
        strstr(text, "leased_http_requests_total{route=\"acquire\",code=\"lease_acquired\"} 2\n"));
    assert_non_null(
        strstr(text, "leased_http_requests_total{route=\"acquire\",code=\"lease_conflict\"} 1\n"));
    assert_non_null(strstr(
        text,
        "leased_http_requests_total{route=\"unmatched\",code=\"invalid_lease_request\"} 1\n"));
    /* cumulative buckets: 2 of 3 within 5 ms, all 3 within 1 s */
    assert_non_null(strstr(
        text, "leased_http_request_duration_seconds_bucket{route=\"acquire\",le=\"0.005\"} 2\n"));
    assert_non_null(strstr(
        text, "leased_http_request_duration_seconds_bucket{route=\"acquire\",le=\"0.5\"} 2\n"));
    assert_non_null(strstr(
        text, "leased_http_request_duration_seconds_bucket{route=\"acquire\",le=\"1\"} 3\n"));
    assert_non_null(
        strstr(text, "leased_http_request_duration_seconds_count{route=\"acquire\"} 3\n"));
    assert_non_null(strstr(text, "\nleased_db_pool_size 4\n"));
    assert_non_null(strstr(text, "\nleased_active_leases 17\n"));
    assert_non_null(strstr(text, "\nleased_audit_events_dropped_total 3\n"));
    assert_non_null(strstr(text, "# TYPE leased_http_request_duration_seconds histogram\n"));
    /* the same requests by HTTP status: 2 acquired (200), 1 conflict (409) */
    assert_non_null(
        strstr(text, "leased_http_responses_total{route=\"acquire\",status=\"200\"} 2\n"));
    assert_non_null(
        strstr(text, "leased_http_responses_total{route=\"acquire\",status=\"409\"} 1\n"));
    assert_non_null(
        strstr(text, "leased_http_responses_total{route=\"unmatched\",status=\"400\"} 1\n"));
    assert_null(strstr(text, "leased_http_responses_total{route=\"renew\""));
    char info[128];
    snprintf(info, sizeof info, "\nleased_build_info{version=\"%s\",schema=\"%d\"} 1\n",
             LEASE_TEST_VERSION, LEASE_SCHEMA_VERSION);
    assert_non_null(strstr(text, info));
    assert_non_null(strstr(text, "\nprocess_start_time_seconds "));
    free(text);
    leased_metrics_free(m);
}

static int evaluations;
static const char *counted(void)
{
    evaluations++;
    return "x";
}

static void test_log_levels(void **state)
{
    (void)state;
    lease_log_init(LEASE_LOG_WARN, LEASE_LOG_JSON);
    LOG_DEBUG("%s", counted());
    LOG_INFO("%s", counted());
    assert_int_equal(evaluations, 0); /* nothing below the level is evaluated */
    LOG_WARN("%s", counted());
    assert_int_equal(evaluations, 1);
    lease_log_level_t level;
    assert_true(lease_log_parse_level("error", &level));
    assert_int_equal(level, LEASE_LOG_ERROR);
    assert_false(lease_log_parse_level("trace", &level));
    lease_log_init(LEASE_LOG_INFO, LEASE_LOG_JSON);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_match),          cmocka_unit_test(test_table_invariants),
        cmocka_unit_test(test_traceparent),    cmocka_unit_test(test_correlation_id),
        cmocka_unit_test(test_metrics_render), cmocka_unit_test(test_log_levels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
