/*
 * valkey_recover.c - `leasectl recover` on Valkey (docs/backends.md), the
 * real binaries: leased on a redis-server of the test's own, leases taken,
 * the server killed with -9 and restarted (every restart seals), acquisition
 * refused with 503 namespace_sealed and /readyz 503; `leasectl recover`
 * without --reason refused (nothing changes), with it the namespace rebound:
 * the epoch and token floor printed, the revocations and the rebind itself
 * in the audit Stream, and every token after it above every token before.
 * Then --floor: the epoch above a floor the operator knows; and a namespace
 * never bound: refused (65).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "child_proc.h"
#include "http_client.h"
#include "leased_proc.h"
#include "lease/clock.h"
#include "lease/result.h"
#include "lease/store_valkey.h"
#include "valkey_service.h"

#define AUDIT_KEY "lease:{leased}:audit"
#define SPAN 4294967296LL /* 2^32: tokens per epoch */

static long long int_member(const json_t *o, const char *name)
{
    json_t *v = json_object_get(o, name);
    if (!json_is_integer(v))
        fail_msg("no integer %s", name);
    return (long long)json_integer_value(v);
}

/* POST /v1/leases/acquire of target; the answer (an outcome_unknown, from
 * the connection a restart cut, is repeated with the same request id). */
static http_resp_t *acquire(const char *base, const char *token, const char *rid,
                            const char *target)
{
    json_t *o = vk_http_acquire(rid, target, "inst_a", 60000);
    char *body = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    http_resp_t *r = NULL;
    for (int i = 0; i < 3; i++) {
        http_resp_free(r);
        r = http_call(base, "POST", "/v1/leases/acquire", token, body);
        assert_non_null(r);
        const char *code = http_resp_str(r, "code");
        if (!code || strcmp(code, "lease_outcome_unknown") != 0)
            break;
    }
    free(body);
    return r;
}

static long long acquired_token(http_resp_t *r)
{
    if (r->status != 200)
        fail_msg("acquire: %ld %s", r->status, r->body);
    return vk_token_of(r);
}

static long readyz_settled(const char *base, long want)
{
    long status = 0;
    for (int i = 0; i < 50 && status != want; i++) {
        http_resp_t *r = http_call(base, "GET", "/readyz", NULL, NULL);
        status = r ? r->status : 0;
        http_resp_free(r);
        if (status != want)
            lease_sleep_ms(100);
    }
    return status;
}

static void recover_after_kill_9(void **state)
{
    (void)state;
    vk_server_t s;
    memset(&s, 0, sizeof s);
    assert_true(vk_start(&s));
    char url[128], store_env[160];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", s.port);
    snprintf(store_env, sizeof store_env, "LEASE_STORE_URL=%s", url);
    const char *env[] = {store_env, NULL};
    const char *none[] = {NULL};
    char *out = NULL;
    const char *migrate[] = {"migrate", NULL};
    assert_int_equal(vk_leasectl(migrate, env, &out), LEASE_EXIT_OK);
    free(out);

    lease_valkey_t *v = vk_open(&s, "leased");
    assert_non_null(v);
    char *alice = vk_make_credential(v, "alice", NULL);
    lease_valkey_close(v);

    const char *lenv[] = {store_env, "LEASE_HEALTH_INTERVAL_MS=200", NULL};
    leased_proc_t *srv = leased_proc_start(NULL, lenv);
    const char *base = leased_proc_url(srv);
    /* three leases held before the crash: the rebind revokes them */
    long long before_max = 0;
    char held_ids[3][64];
    const char *targets[] = {"t1", "t2", "t3"};
    for (int i = 0; i < 3; i++) {
        char rid[16];
        snprintf(rid, sizeof rid, "a%d", i);
        http_resp_t *r = acquire(base, alice, rid, targets[i]);
        long long t = acquired_token(r);
        before_max = t > before_max ? t : before_max;
        snprintf(held_ids[i], sizeof held_ids[i], "%s",
                 json_string_value(http_resp_get(r, "lease.lease_id")));
        http_resp_free(r);
    }
    assert_int_equal(before_max, 1);

    /* kill -9: the restarted server is another incarnation, sealed */
    assert_true(vk_restart(&s, NULL));
    http_resp_t *r = acquire(base, alice, "b1", "t4");
    assert_int_equal(r->status, 503);
    assert_non_null(strstr(r->body, "namespace_sealed"));
    http_resp_free(r);
    assert_int_equal(readyz_settled(base, 503), 503);

    /* no --reason: refused, and nothing changed (still sealed) */
    const char *bare[] = {"recover", "--database-url", url, NULL};
    assert_int_equal(vk_leasectl(bare, none, &out), LEASE_EXIT_USAGE);
    assert_non_null(strstr(out, "--reason is required"));
    free(out);
    r = acquire(base, alice, "b2", "t4");
    assert_int_equal(r->status, 503);
    assert_non_null(strstr(r->body, "namespace_sealed"));
    http_resp_free(r);

    /* verify still needs PostgreSQL */
    const char *verify[] = {"verify", NULL};
    assert_int_equal(vk_leasectl(verify, env, &out), LEASE_EXIT_USAGE);
    assert_non_null(strstr(out, "needs the PostgreSQL backend"));
    free(out);

    /* the rebind, through LEASE_STORE_URL */
    const char *rec[] = {"recover", "--reason", "kill -9 drill INC-7", NULL};
    assert_int_equal(vk_leasectl(rec, env, &out), LEASE_EXIT_OK);
    json_t *o = vk_printed(out);
    assert_non_null(o);
    free(out);
    assert_string_equal(json_string_value(json_object_get(o, "backend")), "valkey");
    assert_string_equal(json_string_value(json_object_get(o, "namespace")), "leased");
    assert_int_equal(int_member(o, "epoch"), 1);
    assert_int_equal(int_member(o, "token_floor"), SPAN);
    assert_int_equal(int_member(o, "first_token"), SPAN + 1);
    assert_int_equal(int_member(o, "leases_revoked"), 3);
    long long floor = int_member(o, "token_floor");
    json_decref(o);

    /* audited: the rebind (high priority, by leasectl's user) and each
     * revocation it implied */
    assert_int_equal(
        vk_audit_count(&s, AUDIT_KEY, "event_type", "target_lease_recover", NULL, NULL), 1);
    for (int i = 0; i < 3; i++)
        assert_int_equal(vk_audit_count(&s, AUDIT_KEY, "event_type", "target_lease_revoke",
                                        "lease_id", held_ids[i]),
                         1);
    redisReply *x = vk_audit(&s, AUDIT_KEY, false);
    const redisReply *ev = NULL;
    for (size_t i = 0; i < x->elements; i++) {
        const char *t = vk_str(x->element[i]->element[1], "event_type");
        if (t && strcmp(t, "target_lease_recover") == 0)
            ev = x->element[i]->element[1];
    }
    assert_non_null(ev);
    assert_string_equal(vk_str(ev, "priority"), "high");
    assert_string_equal(vk_str(ev, "reason"), "epoch rebind: kill -9 drill INC-7");
    assert_string_equal(vk_str(ev, "epoch"), "1");
    assert_string_equal(vk_str(ev, "previous_epoch"), "0");
    assert_string_equal(vk_str(ev, "leases_revoked"), "3");
    assert_non_null(vk_str(ev, "principal_id"));
    assert_true(strncmp(vk_str(ev, "principal_id"), "leasectl:", 9) == 0);
    freeReplyObject(x);

    /* tokens above every token given before, and above the floor printed */
    assert_int_equal(readyz_settled(base, 200), 200);
    const char *after_targets[] = {"t1", "t2", "t3", "t4"};
    for (int i = 0; i < 4; i++) {
        char rid[16];
        snprintf(rid, sizeof rid, "c%d", i);
        r = acquire(base, alice, rid, after_targets[i]);
        long long t = acquired_token(r);
        assert_true(t > before_max);
        assert_true(t > floor);
        assert_int_equal(t, SPAN + 1);
        http_resp_free(r);
    }

    /* --floor: the epoch above a token the operator knows was given */
    assert_true(vk_restart(&s, NULL));
    char floor_arg[32];
    snprintf(floor_arg, sizeof floor_arg, "%lld", 4 * SPAN + 17);
    const char *rec_floor[] = {"recover", "--reason",       "restore", "--floor",
                               floor_arg, "--database-url", url,       NULL};
    assert_int_equal(vk_leasectl(rec_floor, none, &out), LEASE_EXIT_OK);
    o = vk_printed(out);
    assert_non_null(o);
    free(out);
    assert_int_equal(int_member(o, "epoch"), 5);
    assert_int_equal(int_member(o, "leases_revoked"), 4);
    json_decref(o);
    r = acquire(base, alice, "d1", "t1");
    assert_int_equal(acquired_token(r), 5 * SPAN + 1);
    http_resp_free(r);

    /* a namespace never bound: the function refuses (65), says why */
    char other[160];
    snprintf(other, sizeof other, "%s?namespace=never-bound", url);
    const char *rec_other[] = {"recover", "--reason", "x", "--database-url", other, NULL};
    assert_int_equal(vk_leasectl(rec_other, none, &out), LEASE_EXIT_INVALID);
    assert_non_null(strstr(out, "not bound"));
    free(out);

    assert_int_equal(leased_proc_stop(srv), 0);
    free(alice);
    vk_stop(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(recover_after_kill_9),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
