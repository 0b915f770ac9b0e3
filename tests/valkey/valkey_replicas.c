/*
 * valkey_replicas.c - LEASE_VALKEY_MIN_REPLICAS against a real primary and
 * a real replica (redis-server --replicaof, tests/harness/valkeyserver):
 * with the replica in sync an acquire is answered once WAIT confirms it (the
 * replica already has it); with the replica frozen (SIGSTOP) or stopped no
 * replica acknowledges, so writes answer 503 lease_outcome_unknown within
 * their deadline while the write is applied on the primary (inspect, a
 * read, shows it without waiting); repeating the request id after the
 * replica is back answers the stored result. And the setting is refused on
 * PostgreSQL.
 */
#include <setjmp.h>
#include <signal.h>
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

/* Whether the server holds key (EXISTS). */
static bool has_key(vk_server_t *s, const char *key)
{
    redisReply *r = vk_cmd(s, "EXISTS %s", key);
    bool yes = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    return yes;
}

static void writes_wait_for_a_replica(void **state)
{
    (void)state;
    vk_server_t primary, replica;
    memset(&primary, 0, sizeof primary);
    memset(&replica, 0, sizeof replica);
    assert_true(vk_start(&primary));
    assert_true(vk_start_replica(&replica, &primary));
    char *alice = vk_worker(&primary, "alice");

    const char *extra[] = {"LEASE_VALKEY_MIN_REPLICAS=1", NULL};
    leased_proc_t *srv = vk_leased_start(&primary, extra);
    const char *base = leased_proc_url(srv);

    /* in sync: answered after WAIT, so the replica has it already */
    http_resp_t *a = vk_post_within(base, "/v1/leases/acquire", alice,
                                    vk_http_acquire("r1", "t1", "inst_a", 60000), 3000);
    vk_expect_code(a, 200, "lease_acquired");
    char key[200];
    snprintf(key, sizeof key, "lease:{leased}:l:%s",
             json_string_value(http_resp_get(a, "lease.lease_id")));
    assert_true(has_key(&replica, key));

    /* the replica frozen: no acknowledgement within the deadline */
    pid_t rpid = vk_pid(&replica);
    assert_true(rpid > 0);
    assert_int_equal(kill(rpid, SIGSTOP), 0);
    int64_t began = lease_mono_now_ns();
    http_resp_t *r = vk_post_within(base, "/v1/leases/acquire", alice,
                                    vk_http_acquire("r2", "t2", "inst_a", 60000), 800);
    int64_t took_ms = (lease_mono_now_ns() - began) / 1000000;
    vk_expect_code(r, 503, "lease_outcome_unknown");
    assert_true(json_is_true(http_resp_get(r, "retryable")));
    /* it waited for the replica, and not past the request's deadline */
    if (took_ms < 500 || took_ms > 800 + 1500)
        fail_msg("the unconfirmed acquire took %lld ms (deadline 800)", (long long)took_ms);
    http_resp_free(r);
    /* ... but the write is on the primary: a read shows it, without waiting */
    began = lease_mono_now_ns();
    r = vk_post_within(base, "/v1/leases/inspect", alice,
                       json_pack("{s:o}", "lock_identity", vk_identity("t2")), 3000);
    vk_expect_code(r, 200, "lease_inspected");
    assert_string_equal(json_string_value(http_resp_get(r, "lease.state")), "active");
    assert_true((lease_mono_now_ns() - began) / 1000000 < 500);
    char *pending_id = strdup(json_string_value(http_resp_get(r, "lease.lease_id")));
    long long pending_token = json_integer_value(http_resp_get(r, "lease.fencing_token"));
    http_resp_free(r);
    /* the same request id again: still unconfirmed */
    r = vk_post_within(base, "/v1/leases/acquire", alice,
                       vk_http_acquire("r2", "t2", "inst_a", 60000), 600);
    vk_expect_code(r, 503, "lease_outcome_unknown");
    http_resp_free(r);
    /* a renew of the confirmed lease: unconfirmed too */
    json_t *renew = json_pack("{s:s, s:o, s:O, s:O, s:s}", "request_id", "r3", "lock_identity",
                              vk_identity("t1"), "lease_id", http_resp_get(a, "lease.lease_id"),
                              "fencing_token", http_resp_get(a, "lease.fencing_token"),
                              "service_instance_id", "inst_a");
    r = vk_post_within(base, "/v1/leases/renew", alice, renew, 600);
    vk_expect_code(r, 503, "lease_outcome_unknown");
    http_resp_free(r);

    /* the replica back: repeating the request id answers the stored result */
    assert_int_equal(kill(rpid, SIGCONT), 0);
    r = vk_post_within(base, "/v1/leases/acquire", alice,
                       vk_http_acquire("r2", "t2", "inst_a", 60000), 5000);
    vk_expect_code(r, 200, "lease_acquired");
    assert_true(json_is_true(http_resp_get(r, "replayed")));
    assert_string_equal(json_string_value(http_resp_get(r, "lease.lease_id")), pending_id);
    assert_int_equal(json_integer_value(http_resp_get(r, "lease.fencing_token")), pending_token);
    http_resp_free(r);
    snprintf(key, sizeof key, "lease:{leased}:l:%s", pending_id);
    assert_true(has_key(&replica, key));
    free(pending_id);

    /* the replica stopped for good: releases are unconfirmed, and applied */
    vk_stop(&replica);
    r = vk_post_within(base, "/v1/leases/release", alice, vk_http_owner("r4", "t1", a, "inst_a"),
                       600);
    vk_expect_code(r, 503, "lease_outcome_unknown");
    http_resp_free(r);
    char path[128];
    snprintf(path, sizeof path, "/v1/leases/%s",
             json_string_value(http_resp_get(a, "lease.lease_id")));
    r = http_call(base, "GET", path, alice, NULL);
    assert_non_null(r);
    vk_expect_code(r, 200, "lease_inspected");
    assert_string_equal(json_string_value(http_resp_get(r, "lease.state")), "released");
    http_resp_free(r);

    http_resp_free(a);
    assert_int_equal(leased_proc_stop(srv), 0);
    free(alice);
    vk_stop(&primary);
}

/* Without the setting nothing waits: the same frozen replica does not
 * delay an answer. */
static void no_wait_without_the_setting(void **state)
{
    (void)state;
    vk_server_t primary, replica;
    memset(&primary, 0, sizeof primary);
    memset(&replica, 0, sizeof replica);
    assert_true(vk_start(&primary));
    assert_true(vk_start_replica(&replica, &primary));
    char *alice = vk_worker(&primary, "alice");
    leased_proc_t *srv = vk_leased_start(&primary, NULL);
    pid_t rpid = vk_pid(&replica);
    assert_int_equal(kill(rpid, SIGSTOP), 0);
    int64_t began = lease_mono_now_ns();
    http_resp_t *r = vk_post_within(leased_proc_url(srv), "/v1/leases/acquire", alice,
                                    vk_http_acquire("n1", "t1", "inst_a", 60000), 800);
    vk_expect_code(r, 200, "lease_acquired");
    assert_true((lease_mono_now_ns() - began) / 1000000 < 500);
    http_resp_free(r);
    assert_int_equal(kill(rpid, SIGCONT), 0);
    assert_int_equal(leased_proc_stop(srv), 0);
    free(alice);
    vk_stop(&replica);
    vk_stop(&primary);

    /* the setting is the Valkey backend's: refused on PostgreSQL */
    const char *args[] = {NULL};
    const char *pg[] = {"LEASE_DATABASE_URL=postgresql:///x", "LEASE_VALKEY_MIN_REPLICAS=1", NULL};
    char *out = NULL;
    assert_int_equal(leased_proc_run_cli(args, pg, &out), LEASE_EXIT_USAGE);
    assert_non_null(strstr(out, "LEASE_VALKEY_MIN_REPLICAS"));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(writes_wait_for_a_replica),
        cmocka_unit_test(no_wait_without_the_setting),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
