/*
 * valkey_adapter.c - the hiredis adapter (include/lease/store_valkey.h)
 * called directly, with the store protocol's request and result structs,
 * against a real redis-server: the durability settings it refuses to run
 * without, the library it loads or checks, the typed results of every
 * operation it implements, a sealed namespace, and a frozen server (a
 * mutation whose answer never came is lease_outcome_unknown, resolved by
 * repeating the request id).
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

#include "lease/clock.h"
#include "lease/store_valkey.h"
#include "valkey_service.h"

typedef struct fixture {
    vk_server_t server;
    lease_valkey_t *v;
} fixture_t;

static lease_valkey_t *open_store(vk_server_t *s, char *err, size_t errlen)
{
    lease_valkey_config_t cfg = {.host = "127.0.0.1", .port = s->port, .ns = "t"};
    lease_valkey_t *v = NULL;
    lease_code_t c = lease_valkey_open(&cfg, &v, err, errlen);
    return c == LEASE_INSPECTED ? v : NULL;
}

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    char err[256] = "";
    if (!vk_start(&f->server))
        return -1;
    f->v = open_store(&f->server, err, sizeof err);
    if (f->v == NULL) {
        fprintf(stderr, "open: %s\n", err);
        return -1;
    }
    int64_t epoch = -1;
    if (lease_valkey_bind(f->v, 0, &epoch, err, sizeof err) != LEASE_INSPECTED || epoch != 0) {
        fprintf(stderr, "bind: %s\n", err);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    lease_valkey_close(f->v);
    vk_stop(&f->server);
    free(f);
    return 0;
}

/* The call of every request here: vk_fill_call, in the default class. */
static void fill_call(lease_call_t *c, const char *principal, const char *rid, char dg,
                      int64_t deadline_ms)
{
    vk_fill_call(c, principal, rid, dg, deadline_ms);
    snprintf(c->deadline_class, sizeof c->deadline_class, "default");
}

static void fill_identity(lease_identity_t *i, const char *target)
{
    memset(i, 0, sizeof *i);
    snprintf(i->tenant_id, sizeof i->tenant_id, "tenant-main");
    snprintf(i->program_id, sizeof i->program_id, "program-a");
    snprintf(i->target_namespace, sizeof i->target_namespace, "starintel-target");
    snprintf(i->target_id, sizeof i->target_id, "%s", target);
    snprintf(i->actor_name, sizeof i->actor_name, "usernamegen");
    snprintf(i->workflow_name, sizeof i->workflow_name, "default");
    snprintf(i->operation_class, sizeof i->operation_class, "default");
}

static lease_acquire_req_t acquire_req(const char *principal, const char *rid, char dg,
                                       const char *target, int64_t deadline_ms)
{
    lease_acquire_req_t r;
    memset(&r, 0, sizeof r);
    fill_call(&r.call, principal, rid, dg, deadline_ms);
    fill_identity(&r.identity, target);
    snprintf(r.service_instance_id, sizeof r.service_instance_id, "inst-1");
    snprintf(r.execution_id, sizeof r.execution_id, "exec-1");
    snprintf(r.job_id, sizeof r.job_id, "job-1");
    snprintf(r.trace_id, sizeof r.trace_id, "trace-1");
    snprintf(r.metadata_json, sizeof r.metadata_json, "{\"n\":9007199254740991,\"s\":\"x\"}");
    return r;
}

static lease_owner_req_t owner_req(const char *rid, char dg, const lease_record_t *l)
{
    lease_owner_req_t r;
    memset(&r, 0, sizeof r);
    fill_call(&r.call, "p1", rid, dg, 5000);
    r.identity = l->identity;
    snprintf(r.lease_id, sizeof r.lease_id, "%s", l->lease_id);
    r.fencing_token = l->fencing_token;
    snprintf(r.service_instance_id, sizeof r.service_instance_id, "%s", l->service_instance_id);
    return r;
}

static lease_admin_req_t admin_req(const char *rid, char dg, const lease_record_t *l,
                                   const char *reason, const char *incident)
{
    lease_admin_req_t r;
    memset(&r, 0, sizeof r);
    fill_call(&r.call, "admin", rid, dg, 5000);
    r.identity = l->identity;
    snprintf(r.lease_id, sizeof r.lease_id, "%s", l->lease_id);
    r.fencing_token = l->fencing_token;
    snprintf(r.reason, sizeof r.reason, "%s", reason);
    snprintf(r.incident_id, sizeof r.incident_id, "%s", incident);
    return r;
}

static void every_operation_typed(void **state)
{
    fixture_t *f = *state;
    lease_result_t a, r;
    lease_acquire_req_t aq = acquire_req("p1", "r1", 'a', "target_01", 5000);
    assert_int_equal(lease_valkey_acquire(f->v, &aq, &a), LEASE_ACQUIRED);
    assert_true(a.has_lease);
    assert_int_equal(a.lease.fencing_token, 1);
    assert_int_equal(a.lease.state, LEASE_STATE_ACTIVE);
    assert_string_equal(a.lease.identity.target_id, "target_01");
    assert_string_equal(a.lease.owner_principal_id, "p1");
    assert_string_equal(a.lease.owner_credential_id, "key_1");
    assert_string_equal(a.lease.trace_id, "trace-1");
    /* metadata comes back byte for byte, its 2^53 - 1 included */
    assert_string_equal(a.lease.metadata_json, "{\"n\":9007199254740991,\"s\":\"x\"}");
    assert_int_equal(a.lease.expires_at_ms - a.lease.acquired_at_ms, 30000);
    assert_false(a.replayed);

    lease_acquire_req_t other = acquire_req("p2", "r2", 'b', "target_01", 5000);
    assert_int_equal(lease_valkey_acquire(f->v, &other, &r), LEASE_CONFLICT);
    assert_true(r.retry_after_ms >= 50 && r.retry_after_ms <= 1000);
    assert_false(r.has_lease);

    lease_owner_req_t rn = owner_req("n1", 'c', &a.lease);
    rn.ttl_ms = 45000;
    assert_int_equal(lease_valkey_renew(f->v, &rn, &r), LEASE_RENEWED);
    assert_int_equal(r.lease.fencing_token, 1);
    assert_int_equal(r.lease.ttl_ms, 45000);

    lease_inspect_req_t iq;
    memset(&iq, 0, sizeof iq);
    fill_call(&iq.call, "p1", "", 'd', 5000);
    snprintf(iq.scope.tenant_id, sizeof iq.scope.tenant_id, "tenant-main");
    snprintf(iq.scope.program_id, sizeof iq.scope.program_id, "program-a");
    iq.scope.all_actors = true;
    snprintf(iq.lease_id, sizeof iq.lease_id, "%s", a.lease.lease_id);
    assert_int_equal(lease_valkey_inspect(f->v, &iq, &r), LEASE_INSPECTED);
    assert_int_equal(r.lease.state, LEASE_STATE_ACTIVE);
    assert_int_equal(r.lease.ttl_ms, 45000);
    iq.scope.all_actors = false;
    iq.scope.n_actors = 1;
    snprintf(iq.scope.actor_names[0], sizeof iq.scope.actor_names[0], "someone-else");
    assert_int_equal(lease_valkey_inspect(f->v, &iq, &r), LEASE_NOT_FOUND);

    lease_owner_req_t rl = owner_req("x1", 'e', &a.lease);
    assert_int_equal(lease_valkey_release(f->v, &rl, &r), LEASE_RELEASED);
    assert_int_equal(r.lease.state, LEASE_STATE_RELEASED);
    assert_true(r.lease.ended_at_ms > 0);
    assert_int_equal(lease_valkey_release(f->v, &rl, &r), LEASE_RELEASED);
    assert_true(r.replayed);
    assert_int_equal(r.current_state, LEASE_STATE_RELEASED);
    lease_owner_req_t rl2 = owner_req("x1", 'f', &a.lease);
    assert_int_equal(lease_valkey_release(f->v, &rl2, &r), LEASE_IDEMPOTENCY_CONFLICT);
    assert_int_equal(lease_valkey_renew(f->v, &rn, &r), LEASE_RENEWED); /* its stored answer */
    assert_true(r.replayed);
    lease_owner_req_t rn2 = owner_req("n2", 'c', &a.lease);
    assert_int_equal(lease_valkey_renew(f->v, &rn2, &r), LEASE_LOST);

    assert_int_equal(lease_valkey_acquire(f->v, &other, &a), LEASE_ACQUIRED);
    assert_int_equal(a.lease.fencing_token, 2);
    lease_admin_req_t fr = admin_req("f1", '1', &a.lease, "", "");
    assert_int_equal(lease_valkey_force_release(f->v, &fr, &r), LEASE_INVALID_LEASE_REQUEST);
    assert_string_equal(r.field, "reason");
    fr = admin_req("f1", '1', &a.lease, "stuck worker", "");
    assert_int_equal(lease_valkey_force_release(f->v, &fr, &r), LEASE_RELEASED);
    assert_string_equal(r.lease.end_reason, "stuck worker");

    aq = acquire_req("p1", "r3", '3', "target_01", 5000);
    assert_int_equal(lease_valkey_acquire(f->v, &aq, &a), LEASE_ACQUIRED);
    assert_int_equal(a.lease.fencing_token, 3);
    lease_admin_req_t rv = admin_req("v1", '4', &a.lease, "compromised", "inc-1");
    assert_int_equal(lease_valkey_revoke(f->v, &rv, &r), LEASE_REVOKED);
    assert_int_equal(r.lease.state, LEASE_STATE_REVOKED);
    assert_string_equal(r.lease.incident_id, "inc-1");

    aq = acquire_req("p1", "r4", '5', "bad target", 5000);
    assert_int_equal(lease_valkey_acquire(f->v, &aq, &r), LEASE_INVALID_LEASE_REQUEST);
    assert_string_equal(r.field, "lock_identity.target_id");

    /* batches */
    lease_acquire_req_t b1 = acquire_req("p1", "b1", '6', "target_11", 5000);
    lease_acquire_req_t b2 = acquire_req("p1", "b2", '7', "target_12", 5000);
    lease_result_t l1, l2;
    assert_int_equal(lease_valkey_acquire(f->v, &b1, &l1), LEASE_ACQUIRED);
    assert_int_equal(lease_valkey_acquire(f->v, &b2, &l2), LEASE_ACQUIRED);
    lease_owner_req_t items[2] = {owner_req("bn1", '8', &l1.lease),
                                  owner_req("bn2", '9', &l2.lease)};
    items[1].fencing_token = 99;
    lease_result_t out[2];
    lease_deadline_t dl = lease_deadline_in(5000);
    assert_int_equal(lease_valkey_renew_many(f->v, items, 2, &dl, out), LEASE_RENEWED);
    assert_int_equal(out[0].code, LEASE_RENEWED);
    assert_int_equal(out[0].lease.fencing_token, l1.lease.fencing_token);
    assert_int_equal(out[1].code, LEASE_LOST);
    items[0] = owner_req("bx1", 'a', &l1.lease);
    items[1] = owner_req("bx2", 'b', &l2.lease);
    assert_int_equal(lease_valkey_release_many(f->v, items, 2, &dl, out), LEASE_RELEASED);
    assert_int_equal(out[0].code, LEASE_RELEASED);
    assert_int_equal(out[1].code, LEASE_RELEASED);
    assert_int_equal(out[1].lease.state, LEASE_STATE_RELEASED);
    assert_int_equal(lease_valkey_release_many(f->v, items, 0, &dl, out),
                     LEASE_INVALID_LEASE_REQUEST);

    lease_health_t h;
    assert_int_equal(lease_valkey_health(f->v, NULL, &h), LEASE_INSPECTED);
    assert_true(h.reachable);
    assert_true(h.schema_current);
    assert_false(h.sealed);
    assert_int_equal(h.active_leases, 0);
}

static void refuses_weak_durability_and_foreign_library(void **state)
{
    fixture_t *f = *state;
    char err[256] = "";
    redisReply *r = vk_cmd(&f->server, "CONFIG SET appendfsync everysec");
    freeReplyObject(r);
    assert_null(open_store(&f->server, err, sizeof err));
    assert_non_null(strstr(err, "appendfsync always"));
    r = vk_cmd(&f->server, "CONFIG SET appendfsync always");
    freeReplyObject(r);
    r = vk_cmd(&f->server, "CONFIG SET maxmemory-policy allkeys-lru");
    freeReplyObject(r);
    assert_null(open_store(&f->server, err, sizeof err));
    assert_non_null(strstr(err, "maxmemory-policy noeviction"));
    r = vk_cmd(&f->server, "CONFIG SET maxmemory-policy noeviction");
    freeReplyObject(r);

    /* the same library loaded again: accepted */
    lease_valkey_t *again = open_store(&f->server, err, sizeof err);
    assert_non_null(again);
    lease_valkey_close(again);
    /* another text under this version's name: refused */
    r = vk_cmd(&f->server, "FUNCTION LOAD REPLACE %s",
               "#!lua name=leased_v1\nredis.register_function('leased_v1_acquire', "
               "function() return {'code','lease_acquired'} end)");
    freeReplyObject(r);
    assert_null(open_store(&f->server, err, sizeof err));
    assert_non_null(strstr(err, "different leased_v1"));
}

static void sealed_after_restart_then_rebind(void **state)
{
    fixture_t *f = *state;
    lease_result_t a, r;
    lease_acquire_req_t aq = acquire_req("p1", "r1", 'a', "target_01", 5000);
    assert_int_equal(lease_valkey_acquire(f->v, &aq, &a), LEASE_ACQUIRED);
    assert_true(vk_restart(&f->server, NULL));
    /* the adapter reconnects by itself after the lost connection */
    lease_acquire_req_t bq = acquire_req("p1", "r2", 'b', "target_02", 5000);
    lease_code_t c = lease_valkey_acquire(f->v, &bq, &r);
    if (c != LEASE_BACKEND_UNAVAILABLE || strcmp(r.reason, "namespace_sealed") != 0)
        c = lease_valkey_acquire(f->v, &bq, &r); /* the first call found the old socket dead */
    assert_int_equal(c, LEASE_BACKEND_UNAVAILABLE);
    assert_string_equal(r.reason, "namespace_sealed");
    lease_health_t h;
    assert_int_equal(lease_valkey_health(f->v, NULL, &h), LEASE_INSPECTED);
    assert_true(h.sealed);

    int64_t epoch = 0, revoked = 0;
    char err[256] = "";
    assert_int_equal(
        lease_valkey_rebind(f->v, "restart drill", 0, &epoch, &revoked, err, sizeof err),
        LEASE_INSPECTED);
    assert_int_equal(epoch, 1);
    assert_int_equal(revoked, 1);
    assert_int_equal(lease_valkey_acquire(f->v, &bq, &r), LEASE_ACQUIRED);
    assert_true(r.lease.fencing_token > a.lease.fencing_token);
    assert_int_equal(r.lease.fencing_token, 4294967297LL);
}

/* The server frozen (SIGSTOP) while an acquire waits for its answer: the
 * outcome is unknown, not "unavailable" (it may have run); a read is
 * unavailable. Repeating the request id once the server is back answers
 * what happened. */
static void frozen_server_outcome_unknown(void **state)
{
    fixture_t *f = *state;
    int pid = vk_pid(&f->server);
    assert_true(pid > 0);
    assert_int_equal(kill(pid, SIGSTOP), 0);
    lease_result_t r;
    lease_acquire_req_t aq = acquire_req("p1", "r1", 'a', "target_01", 300);
    lease_code_t c = lease_valkey_acquire(f->v, &aq, &r);
    lease_inspect_req_t iq;
    memset(&iq, 0, sizeof iq);
    fill_call(&iq.call, "p1", "", 'd', 300);
    snprintf(iq.scope.tenant_id, sizeof iq.scope.tenant_id, "tenant-main");
    snprintf(iq.scope.program_id, sizeof iq.scope.program_id, "*");
    iq.scope.all_actors = true;
    iq.by_identity = true;
    fill_identity(&iq.identity, "target_01");
    lease_code_t ci = lease_valkey_inspect(f->v, &iq, &r);
    assert_int_equal(kill(pid, SIGCONT), 0);
    assert_int_equal(c, LEASE_OUTCOME_UNKNOWN);
    assert_int_equal(ci, LEASE_BACKEND_UNAVAILABLE);

    /* resolved by the request id: the frozen call did not run (its
     * deadline passed at server TIME before the server read it), so the
     * repeat acquires; had it run, the repeat would be its replay */
    aq = acquire_req("p1", "r1", 'a', "target_01", 5000);
    assert_int_equal(lease_valkey_acquire(f->v, &aq, &r), LEASE_ACQUIRED);
    assert_int_equal(r.lease.fencing_token, 1);
    assert_false(r.replayed);
    lease_result_t again;
    assert_int_equal(lease_valkey_acquire(f->v, &aq, &again), LEASE_ACQUIRED);
    assert_true(again.replayed);
    assert_string_equal(again.lease.lease_id, r.lease.lease_id);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(every_operation_typed, setup, teardown),
        cmocka_unit_test_setup_teardown(refuses_weak_durability_and_foreign_library, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(sealed_after_restart_then_rebind, setup, teardown),
        cmocka_unit_test_setup_teardown(frozen_server_outcome_unknown, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
