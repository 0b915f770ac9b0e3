/*
 * valkey_failover.c - a lagging replica promoted (REPLICAOF NO ONE) after
 * its primary is killed: the acquisitions the replica never received are
 * lost with the primary, yet no token goes back. The promoted server is
 * another incarnation, so the namespace is sealed there; after the rebind
 * every token is greater than every token the primary acknowledged.
 * Through the adapter, against two real redis-servers.
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

/* Which step the drill reached, on stderr at once: a crash (which cmocka
 * reports without a place) then names the last step begun. */
static void step(const char *what)
{
    fprintf(stderr, "valkey_failover: %s\n", what);
    fflush(stderr);
}

typedef struct pair {
    vk_server_t primary;
    vk_server_t replica;
} pair_t;

static int setup(void **state)
{
    step("setup: a primary, bound, and its replica");
    pair_t *p = calloc(1, sizeof *p);
    *state = p;
    if (!vk_start(&p->primary))
        return -1;
    lease_valkey_t *v = vk_open_bound(&p->primary, "t");
    bool ok = v != NULL;
    lease_valkey_close(v);
    return ok && vk_start_replica(&p->replica, &p->primary) ? 0 : -1;
}

static int teardown(void **state)
{
    pair_t *p = *state;
    step("teardown: stop both");
    vk_stop(&p->replica);
    vk_stop(&p->primary);
    free(p);
    return 0;
}

static lease_acquire_req_t acquire_req(const char *rid, char dg)
{
    lease_acquire_req_t r;
    memset(&r, 0, sizeof r);
    snprintf(r.call.request_id, sizeof r.call.request_id, "%s", rid);
    memset(r.call.request_digest, dg, 64);
    r.call.deadline = lease_deadline_in(3000);
    snprintf(r.call.principal.principal_id, sizeof r.call.principal.principal_id, "p1");
    snprintf(r.identity.tenant_id, sizeof r.identity.tenant_id, "tenant-main");
    snprintf(r.identity.program_id, sizeof r.identity.program_id, "program-a");
    snprintf(r.identity.target_namespace, sizeof r.identity.target_namespace, "ns");
    snprintf(r.identity.target_id, sizeof r.identity.target_id, "target_01");
    snprintf(r.identity.actor_name, sizeof r.identity.actor_name, "actor");
    snprintf(r.identity.workflow_name, sizeof r.identity.workflow_name, "wf");
    snprintf(r.identity.operation_class, sizeof r.identity.operation_class, "default");
    snprintf(r.service_instance_id, sizeof r.service_instance_id, "inst");
    snprintf(r.execution_id, sizeof r.execution_id, "exec");
    snprintf(r.job_id, sizeof r.job_id, "job");
    return r;
}

/* An acquisition and its release; returns the acknowledged token. */
static int64_t cycle(lease_valkey_t *v, int i)
{
    char rid[16];
    snprintf(rid, sizeof rid, "r%d", i);
    lease_acquire_req_t a = acquire_req(rid, "0123456789"[i % 10]);
    lease_result_t r;
    lease_code_t c = lease_valkey_acquire(v, &a, &r);
    if (c != LEASE_ACQUIRED)
        fail_msg("acquire %d: %s (%s)", i, lease_code_name(c), r.reason);
    lease_owner_req_t x;
    memset(&x, 0, sizeof x);
    x.call = a.call;
    x.identity = r.lease.identity;
    snprintf(x.lease_id, sizeof x.lease_id, "%s", r.lease.lease_id);
    x.fencing_token = r.lease.fencing_token;
    snprintf(x.service_instance_id, sizeof x.service_instance_id, "inst");
    lease_result_t xr;
    assert_int_equal(lease_valkey_release(v, &x, &xr), LEASE_RELEASED);
    return r.lease.fencing_token;
}

static void lagging_replica_promoted_never_regresses(void **state)
{
    pair_t *p = *state;
    step("open the primary; three cycles");
    lease_valkey_t *v = vk_open(&p->primary, "t");
    assert_non_null(v);
    int64_t token = 0;
    for (int i = 0; i < 3; i++)
        token = cycle(v, i);
    redisReply *w = vk_cmd(&p->primary, "WAIT 1 5000");
    assert_int_equal(w->integer, 1); /* the replica has tokens 1..3 */
    freeReplyObject(w);

    /* a replica refuses every write function (nothing is decided there) */
    step("a write function on the replica");
    lease_valkey_t *rv = vk_open(&p->replica, "t");
    assert_non_null(rv); /* the library came by replication, byte for byte */
    lease_acquire_req_t a = acquire_req("on-replica", 'a');
    lease_result_t r;
    assert_int_equal(lease_valkey_acquire(rv, &a, &r), LEASE_BACKEND_UNAVAILABLE);
    assert_string_equal(r.reason, "read_only");

    /* the replica lags: the primary acknowledges tokens it never receives */
    step("stop the replica, cut its link, three more cycles");
    int rpid = vk_pid(&p->replica);
    lease_valkey_close(rv);
    assert_int_equal(kill(rpid, SIGSTOP), 0);
    /* and its link is cut: what the kernel already holds for it was
     * acknowledged by WAIT above; nothing later reaches it */
    redisReply *k = vk_cmd(&p->primary, "CLIENT KILL TYPE replica");
    assert_int_equal(k->type, REDIS_REPLY_INTEGER);
    freeReplyObject(k);
    for (int i = 3; i < 6; i++)
        token = cycle(v, i);
    assert_int_equal(token, 6);
    lease_valkey_close(v);
    step("kill the primary, promote the replica");
    int ppid = vk_pid(&p->primary);
    assert_int_equal(kill(ppid, SIGKILL), 0);
    assert_int_equal(kill(rpid, SIGCONT), 0);
    redisReply *pr = vk_cmd(&p->replica, "REPLICAOF NO ONE");
    assert_int_equal(pr->type, REDIS_REPLY_STATUS);
    freeReplyObject(pr);

    /* the promoted replica holds the identity at token 3 only */
    pr = vk_cmd(&p->replica, "HGET lease:{t}:id:[\"v1\",\"tenant-main\",\"program-a\",\"ns\","
                             "\"target_01\",\"actor\",\"wf\",\"default\"] seq");
    assert_string_equal(pr->str, "3");
    freeReplyObject(pr);

    step("open the promoted replica; sealed, rebind, acquire");
    rv = vk_open(&p->replica, "t");
    assert_non_null(rv);
    a = acquire_req("after-1", 'b');
    assert_int_equal(lease_valkey_acquire(rv, &a, &r), LEASE_BACKEND_UNAVAILABLE);
    assert_string_equal(r.reason, "namespace_sealed"); /* not token 4 a second time */
    int64_t epoch = 0, revoked = 0;
    char err[256];
    assert_int_equal(
        lease_valkey_rebind(rv, "replica promoted", 0, &epoch, &revoked, err, sizeof err),
        LEASE_INSPECTED);
    assert_int_equal(epoch, 1);
    assert_int_equal(lease_valkey_acquire(rv, &a, &r), LEASE_ACQUIRED);
    assert_true(r.lease.fencing_token > token);
    step("close");
    lease_valkey_close(rv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(lagging_replica_promoted_never_regresses, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
