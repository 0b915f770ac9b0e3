/*
 * http_transport.c - what every response carries and what the process
 * exposes: correlation ids (server-made, header equals body), W3C
 * traceparent as the default trace id, keep-alive, /healthz, /readyz,
 * /metrics, and JSON log lines that never hold a token or the database URL.
 * On either backend (LEASE_TEST_STORE=valkey): readiness there follows the
 * namespace record's seal and the loaded library's version.
 */
#include "http_common.h"

#include "lease/schema.h"

static http_fx_t fx;
static const char *worker; /* owned by fx */

static int setup(void **state)
{
    http_fx_open(&fx, state, "http_transport");
    worker = http_fx_worker(&fx, "prn_transport");
    http_fx_serve(&fx, NULL);
    return 0;
}

/* The library this build loads on Valkey (compiled in from this file,
 * CMakeLists.txt), as text (heap). */
static char *valkey_library_text(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/src/store/valkey/leased.lua", LEASE_TEST_SOURCE_DIR);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *text = calloc(1, 256 * 1024);
    assert_non_null(text);
    size_t n = fread(text, 1, 256 * 1024 - 1, f);
    fclose(f);
    assert_true(n > 0 && n < 256 * 1024 - 1);
    return text;
}

/* The schema version this build expects: its migrations' (Postgres), its
 * library's LIB_VERSION (Valkey; docs/backends.md). */
static int expected_schema_version(void)
{
    if (!fx.valkey)
        return LEASE_SCHEMA_VERSION;
    char *text = valkey_library_text();
    const char *at = strstr(text, "\nlocal LIB_VERSION = ");
    assert_non_null(at);
    int version = atoi(at + strlen("\nlocal LIB_VERSION = "));
    free(text);
    assert_true(version > 0);
    return version;
}

static void test_health_and_ready(void **state)
{
    (void)state;
    http_resp_t *r = call(fx.base, "GET", "/healthz", NULL, NULL);
    assert_int_equal(r->status, 200);
    assert_string_equal(http_resp_str(r, "status"), "ok");
    assert_string_equal(http_resp_header(r, "X-Correlation-Id"),
                        http_resp_str(r, "correlation_id"));
    http_resp_free(r);
    r = call(fx.base, "GET", "/readyz", NULL, NULL);
    assert_int_equal(r->status, 200);
    assert_string_equal(http_resp_str(r, "status"), "ready");
    assert_int_equal(http_resp_int(r, "schema_version"), expected_schema_version());
    http_resp_free(r);
}

static void test_correlation_ids(void **state)
{
    (void)state;
    json_t *seen = json_object();
    const char *mine[] = {"X-Correlation-Id: corr_chosen_by_the_client_00000", NULL};
    http_client_t *c = http_client_new(fx.base, 0);
    for (int i = 0; i < 20; i++) {
        http_resp_t *r = http_client_call(c, "POST", "/v1/leases/inspect", worker,
                                          "{\"lock_identity\":{\"tenant_id\":\"tenant-main\","
                                          "\"program_id\":\"program-a\",\"target_namespace\":"
                                          "\"n\",\"target_id\":\"none\",\"actor_name\":\"a\","
                                          "\"workflow_name\":\"w\"}}",
                                          mine, NULL);
        check_reply(r, 404, "lease_not_found", NULL);
        const char *corr = http_resp_str(r, "correlation_id");
        assert_string_not_equal(corr, "corr_chosen_by_the_client_00000");
        assert_null(json_object_get(seen, corr));
        json_object_set_new(seen, corr, json_true());
        http_resp_free(r);
    }
    /* twenty requests, one connection: keep-alive works */
    assert_int_equal(http_client_connects(c), 1);
    http_client_free(c);
    json_decref(seen);
}

static void test_traceparent(void **state)
{
    (void)state;
    static const char trace[] = "4bf92f3577b34da6a3ce929d0e0e4736";
    char tp[128];
    snprintf(tp, sizeof tp, "traceparent: 00-%s-00f067aa0ba902b7-01", trace);
    const char *hdrs[] = {tp, NULL};
    http_client_t *c = http_client_new(fx.base, 0);
    char *body = acquire_body("tp-1", "t-trace-1");
    http_resp_t *r = http_client_call(c, "POST", "/v1/leases/acquire", worker, body, hdrs, NULL);
    free(body);
    check_reply(r, 200, "lease_acquired", NULL);
    assert_string_equal(json_string_value(http_resp_get(r, "lease.trace_id")), trace);
    http_resp_free(r);

    /* a body trace_id wins */
    json_t *b = parse_owned(acquire_body("tp-2", "t-trace-2"));
    json_object_set_new(b, "trace_id", json_string("trace_from_body"));
    body = dump(b);
    r = http_client_call(c, "POST", "/v1/leases/acquire", worker, body, hdrs, NULL);
    free(body);
    check_reply(r, 200, "lease_acquired", NULL);
    assert_string_equal(json_string_value(http_resp_get(r, "lease.trace_id")), "trace_from_body");
    http_resp_free(r);

    /* an invalid traceparent (all-zero trace id) is ignored */
    const char *bad[] = {"traceparent: 00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                         NULL};
    body = acquire_body("tp-3", "t-trace-3");
    r = http_client_call(c, "POST", "/v1/leases/acquire", worker, body, bad, NULL);
    free(body);
    check_reply(r, 200, "lease_acquired", NULL);
    assert_null(http_resp_get(r, "lease.trace_id"));
    http_resp_free(r);
    http_client_free(c);
}

static void test_metrics(void **state)
{
    (void)state;
    http_resp_t *a = acquire_call(fx.base, worker, "m-1", "t-metrics");
    check_reply(a, 200, "lease_acquired", NULL);
    http_resp_free(a);
    /* the active-lease gauge is refreshed by the health probe (200 ms in tests) */
    http_resp_t *r = NULL;
    for (int i = 0; i < 50; i++) {
        http_resp_free(r);
        r = call(fx.base, "GET", "/metrics", NULL, NULL);
        if (strstr(r->body, "\nleased_active_leases 0\n") == NULL &&
            strstr(r->body, "\nleased_active_leases ") != NULL)
            break;
        usleep(100000);
    }
    assert_int_equal(r->status, 200);
    assert_non_null(strstr(http_resp_header(r, "Content-Type"), "text/plain; version=0.0.4"));
    assert_non_null(
        strstr(r->body, "leased_http_requests_total{route=\"acquire\",code=\"lease_acquired\"} "));
    assert_non_null(strstr(
        r->body, "leased_http_request_duration_seconds_bucket{route=\"acquire\",le=\"+Inf\"} "));
    assert_non_null(
        strstr(r->body, "leased_http_request_duration_seconds_count{route=\"acquire\"} "));
    assert_non_null(strstr(r->body, "\nleased_db_pool_size "));
    assert_non_null(strstr(r->body, "\nleased_db_pool_in_use "));
    assert_non_null(strstr(r->body, "\nleased_db_serialization_retries_total "));
    assert_non_null(strstr(r->body, "\nleased_db_outcome_unknown_total 0\n"));
    assert_non_null(strstr(r->body, "\nleased_audit_queue_depth "));
    assert_non_null(strstr(r->body, "\nleased_audit_events_dropped_total 0\n"));
    assert_non_null(strstr(r->body, "\nleased_ready 1\n"));
    const char *active = strstr(r->body, "\nleased_active_leases ");
    assert_non_null(active);
    assert_true(atoi(active + strlen("\nleased_active_leases ")) >= 1);
    http_resp_free(r);
}

/* Log lines are JSON with the documented fields and no secrets. */
static void test_logs(void **state)
{
    (void)state;
    http_resp_t *r = acquire_call(fx.base, worker, "log-1", "t-log");
    check_reply(r, 200, "lease_acquired", NULL);
    char corr[64];
    snprintf(corr, sizeof corr, "%s", http_resp_str(r, "correlation_id"));
    http_resp_free(r);
    /* the access line is written when the reply is done: wait for it */
    assert_true(test_wait_until(30000, leased_proc_log_count(fx.srv, corr) > 0));
    char *log = leased_proc_log(fx.srv);
    assert_null(strstr(log, "lsk_"));
    assert_null(strstr(log, worker + 40)); /* not even part of the secret */
    assert_null(strstr(log, "postgresql://"));
    /* on Valkey: neither the store's URL nor any redis:// one */
    assert_null(strstr(log, "redis://"));
    assert_null(strstr(log, fx.db));
    assert_null(strstr(log, "starintel:target-lease"));
    bool found = false;
    for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n")) {
        json_error_t jerr;
        json_t *o = json_loads(line, 0, &jerr);
        if (!o)
            fprintf(stderr, "not a JSON log line: %s\n", line);
        assert_non_null(o);
        assert_non_null(json_object_get(o, "level"));
        const char *corr_field = json_string_value(json_object_get(o, "correlation_id"));
        if (corr_field && strcmp(corr_field, corr) == 0 && json_object_get(o, "latency_ms")) {
            found = true;
            assert_string_equal(json_string_value(json_object_get(o, "route")), "acquire");
            assert_string_equal(json_string_value(json_object_get(o, "code")), "lease_acquired");
            assert_non_null(json_object_get(o, "time"));
            assert_non_null(json_object_get(o, "msg"));
        }
        json_decref(o);
    }
    assert_true(found);
    free(log);
}

/* /readyz answering want within about 5 s; every 503 on the way has the
 * not-ready shape. */
static long wait_ready_status(long want, char *reason, size_t n)
{
    return http_wait_ready(fx.base, want, reason, n, 100, true);
}

/* One command on the test's redis-server (args NULL-terminated); what it
 * printed must be want. */
static void valkey_expect(const char *const *args, const char *want)
{
    char *out = test_store_valkey_cli(&fx.vk, args);
    assert_non_null(out);
    if (strcmp(out, want) != 0)
        fprintf(stderr, "%s: %s, want %s\n", args[0], out, want);
    assert_string_equal(out, want);
    free(out);
}

/* Seals or unseals fx's namespace as the store records it: lease.
 * namespace_state (Postgres), the seal members of the namespace record
 * (Valkey, docs/backends.md "Keys" and "Sealing"). */
static void set_sealed(bool sealed)
{
    if (!fx.valkey) {
        assert_true(testpg_exec(fx.db, sealed ? "UPDATE lease.namespace_state SET sealed = true, "
                                                "sealed_reason = 'test', sealed_at = now()"
                                              : "UPDATE lease.namespace_state SET sealed = false, "
                                                "sealed_reason = NULL, sealed_at = NULL"));
        return;
    }
    char ns[128];
    http_fx_valkey_key(ns, sizeof ns, "ns");
    const char *seal[] = {"HSET", ns, "sealed", "1", "sealed_reason", "test", "sealed_at_ms",
                          "1", NULL};
    const char *unseal[] = {"HSET", ns, "sealed", "0", "sealed_reason", "", NULL};
    free(test_store_valkey_cli(&fx.vk, sealed ? seal : unseal));
    const char *read[] = {"HMGET", ns, "sealed", "sealed_reason", NULL};
    valkey_expect(read, sealed ? "1\ntest\n" : "0\n\n");
}

/* Makes the store's schema one this build does not expect, or restores
 * it: a migration of a version to come (Postgres), the library loaded
 * again with a LIB_VERSION to come (Valkey). */
static void set_schema_from_the_future(bool future)
{
    if (!fx.valkey) {
        assert_true(testpg_exec(fx.db, future ? "INSERT INTO lease.schema_migrations "
                                                "(version, name, checksum) "
                                                "VALUES (9999, 'future', 'x')"
                                              : "DELETE FROM lease.schema_migrations "
                                                "WHERE version = 9999"));
        return;
    }
    char *text = valkey_library_text();
    if (future) {
        static const char line[] = "\nlocal LIB_VERSION = ";
        char *at = strstr(text, line);
        assert_non_null(at);
        at += strlen(line);
        assert_true(at[0] >= '1' && at[0] <= '8' && (at[1] < '0' || at[1] > '9'));
        at[0] = '9'; /* the same library, a version this build does not know */
    }
    const char *args[] = {"FUNCTION", "LOAD", "REPLACE", text, NULL};
    valkey_expect(args, "leased_v1\n");
    free(text);
}

/* Readiness follows the database: a sealed namespace and a schema other
 * than the one this build expects both make /readyz 503 with their reason. */
static void test_not_ready_reasons(void **state)
{
    (void)state;
    char reason[64];
    set_sealed(true);
    assert_int_equal(wait_ready_status(503, reason, sizeof reason), 503);
    assert_string_equal(reason, "sealed");
    /* a sealed namespace refuses acquisition */
    http_resp_t *r = acquire_call(fx.base, worker, "sealed-1", "t-sealed");
    check_reply(r, 503, "lease_backend_unavailable", NULL);
    http_resp_free(r);
    set_sealed(false);
    assert_int_equal(wait_ready_status(200, reason, sizeof reason), 200);

    set_schema_from_the_future(true);
    assert_int_equal(wait_ready_status(503, reason, sizeof reason), 503);
    assert_string_equal(reason, "schema_outdated");
    set_schema_from_the_future(false);
    assert_int_equal(wait_ready_status(200, reason, sizeof reason), 200);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_health_and_ready),
        cmocka_unit_test(test_correlation_ids),
        cmocka_unit_test(test_traceparent),
        cmocka_unit_test(test_metrics),
        cmocka_unit_test(test_logs),
        cmocka_unit_test(test_not_ready_reasons),
    };
    return http_fx_run_group("http_transport", tests, sizeof tests / sizeof tests[0], setup,
                             http_fx_teardown, NULL);
}
