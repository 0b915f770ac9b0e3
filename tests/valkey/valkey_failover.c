/*
 * valkey_failover.c - a lagging replica promoted (REPLICAOF NO ONE) after
 * its primary is killed: the acquisitions the replica never received are
 * lost with the primary, yet no token goes back. The promoted server is
 * another incarnation, so the namespace is sealed there; after the rebind
 * every token is greater than every token the primary acknowledged.
 * Through the adapter, against two real redis-servers: once step by step,
 * once under load, the workers' adapter behind one address (a TCP proxy
 * moved from the primary to the replica, as a virtual IP or a
 * Sentinel-aware proxy moves) that never learns of the failover.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lease/clock.h"
#include "lease/store_valkey.h"
#include "tcp_proxy.h"
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

/* ---- under load --------------------------------------------------------- */

#define LOAD_THREADS 8
#define IDS_PER_THREAD 3

/* The drill's phases, as a worker reads them BEFORE it sends a request:
 * a request begun in PROMOTED can reach no server but the promoted replica
 * (the primary is dead by then), which must not grant it. */
enum { ON_PRIMARY = 0, PROMOTED, REBOUND };

typedef struct load {
    lease_valkey_t *v; /* the workers' adapter, on the proxy's address */
    atomic_int phase;
    atomic_bool stop;
    atomic_long acquired, acquired_rebound, sealed, read_only, unavailable, unknown, conflict;
    atomic_long granted_while_promoted; /* epoch-0 grants by the promoted server: must stay 0 */
    atomic_long regressed;              /* must stay 0 */
    /* per identity, written by its one worker, read after the join */
    int64_t last[LOAD_THREADS][IDS_PER_THREAD];        /* its last acknowledged token */
    int64_t primary_max[LOAD_THREADS][IDS_PER_THREAD]; /* the highest the primary gave */
} load_t;

typedef struct worker {
    load_t *l;
    int index;
} worker_t;

static void load_target(char *out, size_t n, int thread, int k)
{
    snprintf(out, n, "L%d_%d", thread, k);
}

static void tally(load_t *l, lease_code_t c, const lease_result_t *r)
{
    if (c == LEASE_BACKEND_UNAVAILABLE && strcmp(r->reason, "namespace_sealed") == 0)
        atomic_fetch_add(&l->sealed, 1);
    else if (c == LEASE_BACKEND_UNAVAILABLE && strcmp(r->reason, "read_only") == 0)
        atomic_fetch_add(&l->read_only, 1);
    else if (c == LEASE_BACKEND_UNAVAILABLE || c == LEASE_DEADLINE_EXCEEDED)
        atomic_fetch_add(&l->unavailable, 1);
    else if (c == LEASE_OUTCOME_UNKNOWN)
        atomic_fetch_add(&l->unknown, 1);
    else if (c == LEASE_CONFLICT)
        atomic_fetch_add(&l->conflict, 1);
}

/* Acquire and release its own identities in turn until told to stop: every
 * token it is acknowledged must be above the last one it was acknowledged
 * for that identity, whatever server answered. */
static void *load_worker(void *arg)
{
    worker_t *w = arg;
    load_t *l = w->l;
    for (long i = 0; !atomic_load(&l->stop); i++) {
        int k = (int)(i % IDS_PER_THREAD);
        int phase = atomic_load(&l->phase);
        char rid[32], target[16];
        snprintf(rid, sizeof rid, "w%d-%ld", w->index, i);
        load_target(target, sizeof target, w->index, k);
        lease_acquire_req_t a;
        memset(&a, 0, sizeof a);
        vk_fill_call(&a.call, "p1", rid, 'a', 1000);
        vk_fill_race_acquire(&a, target);
        lease_result_t r;
        lease_code_t c = lease_valkey_acquire(l->v, &a, &r);
        if (c != LEASE_ACQUIRED) {
            tally(l, c, &r);
            lease_sleep_ms(5); /* a server away: do not spin */
            continue;
        }
        int64_t token = r.lease.fencing_token;
        atomic_fetch_add(&l->acquired, 1);
        /* begun after the promotion, so answered by the promoted server:
         * before the rebind (the namespace's epoch still 0) it must have
         * refused; a request that waited past the rebind is granted in
         * epoch 1 */
        if (phase == PROMOTED && token >> 32 == 0)
            atomic_fetch_add(&l->granted_while_promoted, 1);
        if (phase == REBOUND)
            atomic_fetch_add(&l->acquired_rebound, 1);
        if (phase == ON_PRIMARY && token > l->primary_max[w->index][k])
            l->primary_max[w->index][k] = token;
        if (token <= l->last[w->index][k]) {
            atomic_fetch_add(&l->regressed, 1);
            fprintf(stderr, "valkey_failover: %s token %lld after %lld (phase %d)\n", target,
                    (long long)token, (long long)l->last[w->index][k], phase);
        }
        l->last[w->index][k] = token;
        lease_owner_req_t x;
        memset(&x, 0, sizeof x);
        snprintf(rid, sizeof rid, "w%d-%ld-x", w->index, i);
        vk_fill_call(&x.call, "p1", rid, 'b', 1000);
        x.identity = r.lease.identity;
        snprintf(x.lease_id, sizeof x.lease_id, "%s", r.lease.lease_id);
        x.fencing_token = token;
        snprintf(x.service_instance_id, sizeof x.service_instance_id, "inst");
        lease_result_t xr;
        lease_code_t xc = lease_valkey_release(l->v, &x, &xr);
        if (xc != LEASE_RELEASED)
            tally(l, xc, &xr);
    }
    return NULL;
}

/* Waits (up to 15 s) until *counter reaches at least want. */
static bool reaches(atomic_long *counter, long want)
{
    lease_deadline_t until = lease_deadline_in(15000);
    while (atomic_load(counter) < want) {
        if (lease_deadline_passed(&until))
            return false;
        lease_sleep_ms(10);
    }
    return true;
}

static void lagging_replica_promoted_under_load(void **state)
{
    pair_t *p = *state;
    tcp_proxy_t px;
    assert_true(tcp_proxy_start(&px, (uint16_t)p->primary.port));
    load_t *l = calloc(1, sizeof *l);
    assert_non_null(l);
    lease_valkey_config_t cfg = {
        .host = "127.0.0.1", .port = px.port, .ns = "t", .pool_size = LOAD_THREADS};
    l->v = vk_open_config(&cfg);
    assert_non_null(l->v);

    step("load: workers on the primary, through the proxy");
    worker_t w[LOAD_THREADS];
    pthread_t th[LOAD_THREADS];
    for (int i = 0; i < LOAD_THREADS; i++) {
        w[i] = (worker_t){.l = l, .index = i};
        assert_int_equal(pthread_create(&th[i], NULL, load_worker, &w[i]), 0);
    }
    assert_true(reaches(&l->acquired, 200));

    step("the replica falls behind: stopped, its link cut, the load goes on");
    int rpid = vk_pid(&p->replica);
    assert_int_equal(kill(rpid, SIGSTOP), 0);
    redisReply *k = vk_cmd(&p->primary, "CLIENT KILL TYPE replica");
    assert_int_equal(k->type, REDIS_REPLY_INTEGER);
    freeReplyObject(k);
    assert_true(reaches(&l->acquired, atomic_load(&l->acquired) + 300));

    step("kill -9 the primary mid-load, the address moved to the replica, promoted");
    assert_int_equal(kill(vk_pid(&p->primary), SIGKILL), 0);
    atomic_store(&l->phase, PROMOTED);
    tcp_proxy_retarget(&px, (uint16_t)p->replica.port);
    assert_int_equal(kill(rpid, SIGCONT), 0);
    redisReply *pr = vk_cmd(&p->replica, "REPLICAOF NO ONE");
    assert_int_equal(pr->type, REDIS_REPLY_STATUS);
    freeReplyObject(pr);
    /* the workers' requests reach the promoted server and are refused */
    assert_true(reaches(&l->sealed, 50));

    /* what the promoted server holds of each identity, read before the
     * rebind moves the epoch (compared with the primary's after the join) */
    int64_t promoted_seq[LOAD_THREADS][IDS_PER_THREAD];
    for (int t = 0; t < LOAD_THREADS; t++)
        for (int i = 0; i < IDS_PER_THREAD; i++) {
            char target[16];
            load_target(target, sizeof target, t, i);
            redisReply *q = vk_cmd(&p->replica,
                                   "HGET lease:{t}:id:[\"v1\",\"tenant-main\",\"program-a\","
                                   "\"ns\",\"%s\",\"actor\",\"wf\",\"default\"] seq",
                                   target);
            promoted_seq[t][i] = q->type == REDIS_REPLY_STRING ? strtoll(q->str, NULL, 10) : 0;
            freeReplyObject(q);
        }

    step("rebind the promoted server; the load goes on");
    lease_valkey_t *admin = vk_open(&p->replica, "t");
    assert_non_null(admin);
    atomic_store(&l->phase, REBOUND);
    int64_t epoch = 0, revoked = 0;
    char err[256];
    assert_int_equal(lease_valkey_rebind(admin, "replica promoted under load", 0, &epoch, &revoked,
                                         err, sizeof err),
                     LEASE_INSPECTED);
    assert_int_equal(epoch, 1);
    lease_valkey_close(admin);
    assert_true(reaches(&l->acquired_rebound, 200));

    atomic_store(&l->stop, true);
    for (int i = 0; i < LOAD_THREADS; i++)
        pthread_join(th[i], NULL);
    fprintf(stderr,
            "valkey_failover: acquired %ld (after the rebind %ld), sealed %ld, read_only %ld, "
            "unavailable %ld, unknown %ld, conflict %ld\n",
            atomic_load(&l->acquired), atomic_load(&l->acquired_rebound), atomic_load(&l->sealed),
            atomic_load(&l->read_only), atomic_load(&l->unavailable), atomic_load(&l->unknown),
            atomic_load(&l->conflict));
    /* the lag was real: tokens the primary acknowledged that the promoted
     * server never had */
    int behind = 0;
    for (int t = 0; t < LOAD_THREADS; t++)
        for (int i = 0; i < IDS_PER_THREAD; i++)
            if (l->primary_max[t][i] > promoted_seq[t][i])
                behind++;
    fprintf(stderr, "valkey_failover: %d of %d identities behind on the promoted server\n", behind,
            LOAD_THREADS * IDS_PER_THREAD);
    assert_true(behind > 0);
    /* sealed: the promoted server granted nothing before the rebind */
    assert_int_equal(atomic_load(&l->granted_while_promoted), 0);
    /* 0 regressed tokens, and every identity's last token is the rebind's epoch */
    assert_int_equal(atomic_load(&l->regressed), 0);
    for (int t = 0; t < LOAD_THREADS; t++)
        for (int i = 0; i < IDS_PER_THREAD; i++)
            if (l->last[t][i] >> 32 != 1)
                fail_msg("L%d_%d: last token %lld, not of epoch 1", t, i, (long long)l->last[t][i]);
    lease_valkey_close(l->v);
    tcp_proxy_stop(&px);
    free(l);
}

int main(void)
{
    /* as leased itself runs the adapter (leased_main.c): a server killed
     * under load is a lost connection, not a signal that ends the process
     * (a CI run died of SIGPIPE at the kill -9 step: the test's own proxy
     * wrote to the killed primary, now with MSG_NOSIGNAL) */
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(lagging_replica_promoted_never_regresses, setup, teardown),
        cmocka_unit_test_setup_teardown(lagging_replica_promoted_under_load, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
