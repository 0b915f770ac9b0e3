/*
 * valkey_audit.c - audit events on Valkey are a Stream (docs/backends.md):
 * leased on a real redis-server; a mutation's event is in the Stream when
 * its answer arrives (the function appended it in the same call), the
 * service's events (a conflict, an inspect) arrive through the audit queue,
 * nothing falls back to the log (leased_audit_events_fallback_total 0), and
 * entries older than the audit retention are trimmed by the next append.
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
#include "lease/hex.h"
#include "lease/store_valkey.h"
#include "lease/token.h"
#include "valkey_fixture.h"

#define TENANT "tenant-main"
#define PROGRAM "program-a"
#define AUDIT_KEY "lease:{leased}:audit"

static char *make_credential(lease_valkey_t *v, const char *principal)
{
    char id[LEASE_CREDENTIAL_ID_LEN + 1];
    unsigned char secret[LEASE_SECRET_BYTES], digest[32];
    char token[LEASE_TOKEN_MAX + 1], hex[65];
    assert_true(lease_token_generate(id, secret, token));
    lease_token_digest(secret, NULL, digest);
    lease_hex_encode(digest, sizeof digest, hex);
    char req[1024];
    snprintf(req, sizeof req,
             "{\"credential_id\":\"%s\",\"principal_id\":\"%s\",\"client_id\":\"cl_%s\","
             "\"tenant_id\":\"" TENANT "\",\"program_id\":\"" PROGRAM "\",\"actor_names\":[\"*\"],"
             "\"capabilities\":[\"targets:lease\",\"targets:read\"],\"secret_digest\":\"%s\"}",
             id, principal, principal, hex);
    char *row = NULL;
    char err[256] = "";
    if (lease_valkey_credential_create(v, req, &row, err, sizeof err) != LEASE_INSPECTED)
        fail_msg("credential: %s", err);
    free(row);
    return strdup(token);
}

static json_t *identity(const char *target)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "tenant_id", TENANT, "program_id", PROGRAM,
                     "target_namespace", "starintel-target", "target_id", target, "actor_name",
                     "usernamegen", "workflow_name", "default");
}

static http_resp_t *post(const char *base, const char *path, const char *token, json_t *obj,
                         long status, const char *code)
{
    char *body = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    http_resp_t *r = http_call(base, "POST", path, token, body);
    free(body);
    assert_non_null(r);
    if (r->status != status || !http_resp_str(r, "code") ||
        strcmp(http_resp_str(r, "code"), code) != 0)
        fail_msg("%s: expected %ld %s, got %ld %s", path, status, code, r->status, r->body);
    return r;
}

static json_t *acquire_req(const char *rid, const char *target, const char *instance)
{
    return json_pack("{s:s, s:o, s:s, s:s, s:s, s:i}", "request_id", rid, "lock_identity",
                     identity(target), "service_instance_id", instance, "execution_id", "exec_1",
                     "job_id", "job_1", "ttl_ms", 30000);
}

static json_t *owner_req(const char *rid, const char *target, const http_resp_t *held)
{
    return json_pack("{s:s, s:o, s:O, s:O, s:s}", "request_id", rid, "lock_identity",
                     identity(target), "lease_id", http_resp_get(held, "lease.lease_id"),
                     "fencing_token", http_resp_get(held, "lease.fencing_token"),
                     "service_instance_id", "inst_a");
}

static long long xlen(vk_server_t *s)
{
    redisReply *r = vk_cmd(s, "XLEN " AUDIT_KEY);
    long long n = r->integer;
    freeReplyObject(r);
    return n;
}

/* How many entries have field = value (and, when given, f2 = v2). */
static int count_entries(vk_server_t *s, const char *field, const char *value, const char *f2,
                         const char *v2)
{
    redisReply *r = vk_cmd(s, "XRANGE " AUDIT_KEY " - +");
    int n = 0;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *fields = r->element[i]->element[1];
        const char *v = vk_str(fields, field);
        const char *w = f2 ? vk_str(fields, f2) : NULL;
        if (v && strcmp(v, value) == 0 && (!f2 || (w && strcmp(w, v2) == 0)))
            n++;
    }
    freeReplyObject(r);
    return n;
}

/* The value of a counter in /metrics, or -1. */
static long long metric(const char *base, const char *name)
{
    http_resp_t *r = http_call(base, "GET", "/metrics", NULL, NULL);
    assert_non_null(r);
    char needle[128];
    snprintf(needle, sizeof needle, "\n%s ", name);
    const char *m = strstr(r->body, needle);
    long long v = m ? atoll(m + strlen(needle)) : -1;
    http_resp_free(r);
    return v;
}

static void audit_events_are_a_stream(void **state)
{
    (void)state;
    vk_server_t s;
    memset(&s, 0, sizeof s);
    assert_true(vk_start(&s));
    char err[256] = "";
    lease_valkey_config_t cfg = {.host = "127.0.0.1", .port = s.port, .ns = "leased"};
    lease_valkey_t *v = NULL;
    assert_int_equal(lease_valkey_open(&cfg, &v, err, sizeof err), LEASE_INSPECTED);
    int64_t epoch = -1;
    assert_int_equal(lease_valkey_bind(v, 0, &epoch, err, sizeof err), LEASE_INSPECTED);
    char *alice = make_credential(v, "alice");
    char *bob = make_credential(v, "bob");
    lease_valkey_close(v);
    char url[128];
    snprintf(url, sizeof url, "LEASE_STORE_URL=redis://127.0.0.1:%d", s.port);
    const char *env[] = {url, NULL};
    leased_proc_t *srv = leased_proc_start(NULL, env);
    const char *base = leased_proc_url(srv);
    assert_int_equal(xlen(&s), 0);

    /* a mutation's event is there when its answer is: the same call */
    http_resp_t *a = post(base, "/v1/leases/acquire", alice, acquire_req("r1", "t1", "inst_a"), 200,
                          "lease_acquired");
    const char *lease_id = json_string_value(http_resp_get(a, "lease.lease_id"));
    assert_int_equal(count_entries(&s, "event_type", "target_lease_acquire", "lease_id", lease_id),
                     1);
    redisReply *x = vk_cmd(&s, "XRANGE " AUDIT_KEY " - +");
    const redisReply *ev = NULL;
    for (size_t i = 0; i < x->elements && !ev; i++)
        if (vk_str(x->element[i]->element[1], "lease_id"))
            ev = x->element[i]->element[1];
    assert_non_null(ev);
    assert_string_equal(vk_str(ev, "code"), "lease_acquired");
    assert_string_equal(vk_str(ev, "decision"), "allow");
    assert_string_equal(vk_str(ev, "source"), "function");
    assert_string_equal(vk_str(ev, "principal_id"), "alice");
    assert_string_equal(vk_str(ev, "request_id"), "r1");
    assert_string_equal(vk_str(ev, "target_id"), "t1");
    assert_string_equal(vk_str(ev, "fencing_token"), "1");
    assert_string_equal(vk_str(ev, "resulting_state"), "active");
    assert_string_equal(vk_str(ev, "service_instance_id"), "inst_a");
    freeReplyObject(x);

    /* refusals and reads: the service's events, through the audit queue */
    http_resp_t *r = post(base, "/v1/leases/acquire", bob, acquire_req("b1", "t1", "inst_b"), 409,
                          "lease_conflict");
    http_resp_free(r);
    r = post(base, "/v1/leases/inspect", alice, json_pack("{s:o}", "lock_identity", identity("t1")),
             200, "lease_inspected");
    http_resp_free(r);
    r = post(base, "/v1/leases/renew", alice, owner_req("r2", "t1", a), 200, "lease_renewed");
    http_resp_free(r);
    r = post(base, "/v1/leases/release", alice, owner_req("r3", "t1", a), 200, "lease_released");
    http_resp_free(r);
    /* a replay: audited by the service (the function wrote nothing) */
    r = post(base, "/v1/leases/release", alice, owner_req("r3", "t1", a), 200, "lease_released");
    http_resp_free(r);
    for (int i = 0;
         i < 100 &&
         (count_entries(&s, "code", "lease_conflict", NULL, NULL) == 0 ||
          count_entries(&s, "event_type", "target_lease_inspect", NULL, NULL) == 0 ||
          count_entries(&s, "source", "service", "event_type", "target_lease_release") == 0);
         i++)
        lease_sleep_ms(50);
    assert_int_equal(count_entries(&s, "code", "lease_conflict", "principal_id", "bob"), 1);
    assert_int_equal(count_entries(&s, "event_type", "target_lease_inspect", NULL, NULL), 1);
    assert_int_equal(count_entries(&s, "source", "function", "event_type", "target_lease_renew"),
                     1);
    assert_int_equal(count_entries(&s, "source", "function", "event_type", "target_lease_release"),
                     1);
    assert_int_equal(count_entries(&s, "source", "service", "event_type", "target_lease_release"),
                     1);
    assert_int_equal(metric(base, "leased_audit_events_fallback_total"), 0);
    assert_true(metric(base, "leased_audit_events_written_total") >= 3);
    assert_int_equal(leased_proc_log_count(srv, "audit_fallback"), 0);

    /* retention: entries older than audit_retention_ms go at the next append */
    long long before = xlen(&s);
    assert_int_equal(before, 6); /* 3 by the functions, 3 by the service */
    freeReplyObject(vk_cmd(&s, "HSET lease:{leased}:ns audit_retention_ms 1000"));
    lease_sleep_ms(1200);
    http_resp_t *b = post(base, "/v1/leases/acquire", alice, acquire_req("r4", "t2", "inst_a"), 200,
                          "lease_acquired");
    assert_int_equal(xlen(&s), 1);
    assert_int_equal(count_entries(&s, "request_id", "r4", NULL, NULL), 1);
    http_resp_free(b);

    http_resp_free(a);
    assert_int_equal(leased_proc_stop(srv), 0);
    free(alice);
    free(bob);
    vk_stop(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(audit_events_are_a_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
