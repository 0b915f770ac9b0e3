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
#include "lease/store_valkey.h"
#include "valkey_service.h"

#define AUDIT_KEY "lease:{leased}:audit"

static long long xlen(vk_server_t *s)
{
    redisReply *r = vk_cmd(s, "XLEN " AUDIT_KEY);
    long long n = r->integer;
    freeReplyObject(r);
    return n;
}

static void audit_events_are_a_stream(void **state)
{
    (void)state;
    vk_server_t s;
    memset(&s, 0, sizeof s);
    assert_true(vk_start(&s));
    char *alice = vk_worker(&s, "alice");
    char *bob = vk_worker(&s, "bob");
    leased_proc_t *srv = vk_leased_start(&s, NULL);
    const char *base = leased_proc_url(srv);
    /* the two credentials, audited when they were made */
    assert_int_equal(xlen(&s), 2);
    assert_int_equal(vk_audit_count(&s, AUDIT_KEY, "event_type", "credential_create", NULL, NULL),
                     2);

    /* a mutation's event is there when its answer is: the same call */
    http_resp_t *a =
        vk_post_expect(base, "/v1/leases/acquire", alice,
                       vk_http_acquire("r1", "t1", "inst_a", 30000), 200, "lease_acquired");
    const char *lease_id = json_string_value(http_resp_get(a, "lease.lease_id"));
    assert_int_equal(
        vk_audit_count(&s, AUDIT_KEY, "event_type", "target_lease_acquire", "lease_id", lease_id),
        1);
    redisReply *x = vk_audit(&s, AUDIT_KEY, false);
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
    http_resp_t *r =
        vk_post_expect(base, "/v1/leases/acquire", bob,
                       vk_http_acquire("b1", "t1", "inst_b", 30000), 409, "lease_conflict");
    http_resp_free(r);
    r = vk_post_expect(base, "/v1/leases/inspect", alice,
                       json_pack("{s:o}", "lock_identity", vk_identity("t1")), 200,
                       "lease_inspected");
    http_resp_free(r);
    r = vk_post_expect(base, "/v1/leases/renew", alice, vk_http_owner("r2", "t1", a, "inst_a"), 200,
                       "lease_renewed");
    http_resp_free(r);
    r = vk_post_expect(base, "/v1/leases/release", alice, vk_http_owner("r3", "t1", a, "inst_a"),
                       200, "lease_released");
    http_resp_free(r);
    /* a replay: audited by the service (the function wrote nothing) */
    r = vk_post_expect(base, "/v1/leases/release", alice, vk_http_owner("r3", "t1", a, "inst_a"),
                       200, "lease_released");
    http_resp_free(r);
    for (int i = 0;
         i < 100 &&
         (vk_audit_count(&s, AUDIT_KEY, "code", "lease_conflict", NULL, NULL) == 0 ||
          vk_audit_count(&s, AUDIT_KEY, "event_type", "target_lease_inspect", NULL, NULL) == 0 ||
          vk_audit_count(&s, AUDIT_KEY, "source", "service", "event_type",
                         "target_lease_release") == 0);
         i++)
        lease_sleep_ms(50);
    assert_int_equal(vk_audit_count(&s, AUDIT_KEY, "code", "lease_conflict", "principal_id", "bob"),
                     1);
    assert_int_equal(
        vk_audit_count(&s, AUDIT_KEY, "event_type", "target_lease_inspect", NULL, NULL), 1);
    assert_int_equal(
        vk_audit_count(&s, AUDIT_KEY, "source", "function", "event_type", "target_lease_renew"), 1);
    assert_int_equal(
        vk_audit_count(&s, AUDIT_KEY, "source", "function", "event_type", "target_lease_release"),
        1);
    assert_int_equal(
        vk_audit_count(&s, AUDIT_KEY, "source", "service", "event_type", "target_lease_release"),
        1);
    assert_int_equal(vk_metric(base, "leased_audit_events_fallback_total"), 0);
    assert_true(vk_metric(base, "leased_audit_events_written_total") >= 3);
    assert_int_equal(leased_proc_log_count(srv, "audit_fallback"), 0);

    /* retention: entries older than audit_retention_ms go at the next append */
    long long before = xlen(&s);
    assert_int_equal(before, 8); /* 2 credentials, 3 by the functions, 3 by the service */
    freeReplyObject(vk_cmd(&s, "HSET lease:{leased}:ns audit_retention_ms 1000"));
    lease_sleep_ms(1200);
    http_resp_t *b =
        vk_post_expect(base, "/v1/leases/acquire", alice,
                       vk_http_acquire("r4", "t2", "inst_a", 30000), 200, "lease_acquired");
    assert_int_equal(xlen(&s), 1);
    assert_int_equal(vk_audit_count(&s, AUDIT_KEY, "request_id", "r4", NULL, NULL), 1);
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
