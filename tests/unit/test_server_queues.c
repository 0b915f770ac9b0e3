/*
 * test_server_queues.c - the audit queue (shared fairly per tenant: a full
 * queue refuses admission to the tenant that fills it and never drops an
 * admitted event; writes in batches of at most `batch`, falls back to the
 * log when the store refuses, flushes on stop) and the work queue (FIFO, delayed jobs in
 * due order, delayed jobs run at once when the pool is freed). Nothing here
 * sleeps to synchronise: threads are waited for on conditions.
 *
 * The audit queue is driven through a store of this file: a lease_store_t
 * whose record_audit counts batches and can be told to fail or to block.
 * Only the audit path is implemented; the real adapter is exercised by the
 * http tests (tests/http/http_outage.c sees the log fallback for real).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lease/clock.h"
#include "server/audit_queue.h"
#include "server/work_queue.h"
#include "test_wait.h"

typedef struct audit_sink {
    lease_store_t base;
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    bool fail;
    bool blocked; /* record_audit waits until unblocked */
    bool held;    /* record_audit is waiting (blocked) */
    size_t batches, events, largest_batch, foreign;
} audit_sink_t;

static lease_code_t sink_record(lease_store_t *s, const lease_audit_event_t *events, size_t n,
                                const lease_deadline_t *deadline)
{
    (void)deadline;
    audit_sink_t *k = (audit_sink_t *)(void *)s;
    pthread_mutex_lock(&k->mutex);
    while (k->blocked) {
        k->held = true;
        pthread_cond_wait(&k->cond, &k->mutex);
    }
    k->held = false;
    for (size_t i = 0; i < n; i++)
        if (strcmp(events[i].event_type, "target_lease_inspect") != 0)
            k->foreign++; /* checked by the test thread: no cmocka here */
    k->batches++;
    if (n > k->largest_batch)
        k->largest_batch = n;
    bool fail = k->fail;
    if (!fail)
        k->events += n;
    pthread_cond_broadcast(&k->cond);
    pthread_mutex_unlock(&k->mutex);
    return fail ? LEASE_BACKEND_UNAVAILABLE : LEASE_INSPECTED;
}

static const lease_store_ops_t sink_ops = {.record_audit = sink_record};

static void sink_init(audit_sink_t *k)
{
    memset(k, 0, sizeof *k);
    k->base.ops = &sink_ops;
    pthread_mutex_init(&k->mutex, NULL);
    pthread_cond_init(&k->cond, NULL);
}

static void sink_block(audit_sink_t *k, bool blocked)
{
    pthread_mutex_lock(&k->mutex);
    k->blocked = blocked;
    pthread_cond_broadcast(&k->cond);
    pthread_mutex_unlock(&k->mutex);
}

static bool sink_held(audit_sink_t *k)
{
    pthread_mutex_lock(&k->mutex);
    bool held = k->held;
    pthread_mutex_unlock(&k->mutex);
    return held;
}

static lease_audit_event_t event(void)
{
    lease_audit_event_t ev;
    memset(&ev, 0, sizeof ev);
    ev.event_type = "target_lease_inspect";
    ev.decision = "deny";
    ev.backend_health = "ok";
    ev.code = LEASE_NOT_FOUND;
    snprintf(ev.call.correlation_id, sizeof ev.call.correlation_id, "corr_test");
    return ev;
}

static void test_batches_and_flush(void **state)
{
    (void)state;
    audit_sink_t sink;
    sink_init(&sink);
    leased_audit_queue_t *q = leased_audit_queue_new(&sink.base, 1000, 7);
    assert_true(leased_audit_queue_start(q));
    sink_block(&sink, true);
    lease_audit_event_t ev = event();
    for (int i = 0; i < 100; i++)
        leased_audit_queue_push(q, "tenant-a", &ev);
    sink_block(&sink, false);
    leased_audit_queue_stop(q, 5000);
    leased_audit_stats_t st;
    leased_audit_queue_stats(q, &st);
    assert_int_equal(st.written, 100);
    assert_int_equal(st.dropped, 0);
    assert_int_equal(st.fallback, 0);
    assert_int_equal(st.depth, 0);
    assert_int_equal(sink.events, 100);
    assert_int_equal(sink.foreign, 0);
    assert_true(sink.largest_batch <= 7);
    assert_true(sink.batches >= 100 / 7);
    leased_audit_queue_free(q);
}

/* Pushes tenant's events while admission lets it; returns how many. */
static int push_while_admitted(leased_audit_queue_t *q, const char *tenant, int at_most)
{
    lease_audit_event_t ev = event();
    int64_t retry_ms = 0;
    int n = 0;
    while (n < at_most && leased_audit_queue_admit(q, tenant, &retry_ms)) {
        leased_audit_queue_push(q, tenant, &ev);
        n++;
    }
    return n;
}

/*
 * A full queue refuses new work of the tenant that fills it, not another
 * tenant's, and drops nothing: with the writer blocked, tenant A is
 * admitted until its events fill the capacity (16), then refused with a
 * retry hint; tenant B is still admitted, up to its half; events of A's
 * requests admitted before (pushed without asking) are kept too.
 */
static void test_full_queue_refuses_the_flooding_tenant(void **state)
{
    (void)state;
    audit_sink_t sink;
    sink_init(&sink);
    leased_audit_queue_t *q = leased_audit_queue_new(&sink.base, 16, 4);
    assert_true(leased_audit_queue_start(q));
    sink_block(&sink, true);
    /* the writer holds one event of another tenant in the blocked store:
     * from here on, everything pushed stays in the ring */
    lease_audit_event_t ev = event();
    leased_audit_queue_push(q, "tenant-z", &ev);
    assert_true(test_wait_until(10000, sink_held(&sink)));
    int a = push_while_admitted(q, "tenant-a", 100);
    assert_int_equal(a, 16);
    int64_t retry_ms = 0;
    assert_false(leased_audit_queue_admit(q, "tenant-a", &retry_ms));
    assert_true(retry_ms >= 50 && retry_ms <= 5000);
    /* B: a share of its own, half the capacity now that two tenants wait */
    int b = push_while_admitted(q, "tenant-b", 100);
    assert_int_equal(b, 8);
    assert_false(leased_audit_queue_admit(q, "tenant-b", &retry_ms));
    assert_false(leased_audit_queue_admit(q, "tenant-a", &retry_ms));
    /* A third tenant still gets in: 16 / 3 = 5 */
    assert_int_equal(push_while_admitted(q, "tenant-c", 100), 5);
    /* requests admitted before the queue filled still finish: their events
     * are kept (the ring grows), none dropped */
    for (int i = 0; i < 100; i++)
        leased_audit_queue_push(q, "tenant-a", &ev);
    leased_audit_stats_t st;
    leased_audit_queue_stats(q, &st);
    assert_int_equal(st.dropped, 0);
    assert_int_equal(st.refused, 6); /* each admit that answered false */
    assert_int_equal(st.depth, (size_t)(a + b + 5 + 100));
    sink_block(&sink, false);
    leased_audit_queue_stop(q, 5000);
    leased_audit_queue_stats(q, &st);
    assert_int_equal(st.written, (uint64_t)(1 + a + b + 5 + 100));
    assert_int_equal(st.dropped, 0);
    assert_int_equal(st.depth, 0);
    leased_audit_queue_free(q);
}

/* Events pushed while the queue stops are not dropped: the log keeps them. */
static void test_push_while_stopping_falls_back(void **state)
{
    (void)state;
    audit_sink_t sink;
    sink_init(&sink);
    leased_audit_queue_t *q = leased_audit_queue_new(&sink.base, 16, 4);
    assert_true(leased_audit_queue_start(q));
    leased_audit_queue_stop(q, 5000);
    lease_audit_event_t ev = event();
    leased_audit_queue_push(q, "tenant-a", &ev);
    leased_audit_stats_t st;
    leased_audit_queue_stats(q, &st);
    assert_int_equal(st.dropped, 0);
    assert_int_equal(st.fallback, 1);
    leased_audit_queue_free(q);
}

static void test_store_failure_falls_back(void **state)
{
    (void)state;
    audit_sink_t sink;
    sink_init(&sink);
    sink.fail = true;
    leased_audit_queue_t *q = leased_audit_queue_new(&sink.base, 100, 10);
    assert_true(leased_audit_queue_start(q));
    lease_audit_event_t ev = event();
    for (int i = 0; i < 25; i++)
        leased_audit_queue_push(q, "tenant-a", &ev);
    leased_audit_queue_stop(q, 5000);
    leased_audit_stats_t st;
    leased_audit_queue_stats(q, &st);
    assert_int_equal(st.written, 0);
    assert_int_equal(st.fallback, 25);
    assert_int_equal(sink.events, 0);
    leased_audit_queue_free(q);
}

typedef struct order {
    pthread_mutex_t mutex;
    int seen[8];
    int n;
    int64_t at_ns[8];
} order_t;

typedef struct item {
    order_t *order;
    int id;
} item_t;

static void record(void *arg)
{
    item_t *it = arg;
    pthread_mutex_lock(&it->order->mutex);
    it->order->at_ns[it->order->n] = lease_mono_now_ns();
    it->order->seen[it->order->n++] = it->id;
    pthread_mutex_unlock(&it->order->mutex);
}

static int recorded(order_t *o)
{
    pthread_mutex_lock(&o->mutex);
    int n = o->n;
    pthread_mutex_unlock(&o->mutex);
    return n;
}

/* A job that holds its worker until the test opens it. */
typedef struct gate {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    bool entered, open;
} gate_t;

static void gate_job(void *arg)
{
    gate_t *g = arg;
    pthread_mutex_lock(&g->mutex);
    g->entered = true;
    pthread_cond_broadcast(&g->cond);
    while (!g->open)
        pthread_cond_wait(&g->cond, &g->mutex);
    pthread_mutex_unlock(&g->mutex);
}

static bool gate_entered(gate_t *g)
{
    pthread_mutex_lock(&g->mutex);
    bool entered = g->entered;
    pthread_mutex_unlock(&g->mutex);
    return entered;
}

static void gate_open(gate_t *g)
{
    pthread_mutex_lock(&g->mutex);
    g->open = true;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->mutex);
}

/*
 * The order is made certain, not likely: the only worker is held in a gate
 * while the jobs are queued, so when it comes back the ready job is already
 * first in line and the delayed ones follow in due order, however long the
 * machine kept the test thread away.
 */
static void test_work_queue_delays(void **state)
{
    (void)state;
    order_t order = {.n = 0};
    pthread_mutex_init(&order.mutex, NULL);
    item_t items[3] = {{&order, 1}, {&order, 2}, {&order, 3}};
    gate_t gate = {.entered = false};
    pthread_mutex_init(&gate.mutex, NULL);
    pthread_cond_init(&gate.cond, NULL);
    leased_work_queue_t *q = leased_work_queue_new(1, 0);
    assert_non_null(q);
    leased_job_t jobs[4] = {{0}}; /* zeroed: delayed in the flow "" */
    assert_int_equal(leased_work_queue_push(q, &jobs[3], gate_job, &gate, NULL, 1), LEASED_PUSH_OK);
    assert_true(test_wait_until(10000, gate_entered(&gate)));
    int64_t t0 = lease_mono_now_ns();
    leased_work_queue_push_after(q, &jobs[0], record, &items[0], 300);
    leased_work_queue_push_after(q, &jobs[1], record, &items[1], 100);
    assert_int_equal(leased_work_queue_push(q, &jobs[2], record, &items[2], NULL, 1), LEASED_PUSH_OK);
    gate_open(&gate);
    assert_true(test_wait_until(10000, recorded(&order) == 3));
    pthread_mutex_lock(&order.mutex);
    assert_int_equal(order.seen[0], 3);
    assert_int_equal(order.seen[1], 2);
    assert_int_equal(order.seen[2], 1);
    /* never sooner than asked (a lower bound the queue guarantees) */
    assert_true(order.at_ns[1] - t0 >= 100 * INT64_C(1000000));
    assert_true(order.at_ns[2] - t0 >= 300 * INT64_C(1000000));
    order.n = 0;
    pthread_mutex_unlock(&order.mutex);

    /* freeing runs delayed jobs at once rather than dropping them or
     * waiting for them: the job ran long before it was due */
    int64_t due = lease_mono_now_ns() + 600000 * INT64_C(1000000);
    leased_work_queue_push_after(q, &jobs[0], record, &items[0], 600000);
    leased_work_queue_free(q);
    assert_int_equal(order.n, 1);
    assert_int_equal(order.seen[0], 1);
    assert_true(order.at_ns[0] < due);
    pthread_cond_destroy(&gate.cond);
    pthread_mutex_destroy(&gate.mutex);
    pthread_mutex_destroy(&order.mutex);
}

static void gate_init(gate_t *g)
{
    *g = (gate_t){.entered = false};
    pthread_mutex_init(&g->mutex, NULL);
    pthread_cond_init(&g->cond, NULL);
}

static void gate_destroy(gate_t *g)
{
    pthread_cond_destroy(&g->cond);
    pthread_mutex_destroy(&g->mutex);
}

/*
 * While another tenant has work, a tenant's share of the workers counts
 * what its requests cost: batches of 100 run one at a time (each would
 * fill a share of single requests), where single requests run as many as
 * the share. Eight workers, so the batches are not held back by a lack of
 * them: a third flow's job runs at once, and still the second batch waits
 * until the first is done.
 */
static void test_work_queue_shares_count_cost(void **state)
{
    (void)state;
    order_t order = {.n = 0};
    pthread_mutex_init(&order.mutex, NULL);
    item_t item = {&order, 1};
    gate_t b, a[3];
    gate_init(&b);
    for (int i = 0; i < 3; i++)
        gate_init(&a[i]);
    leased_work_queue_t *q = leased_work_queue_new(8, 0);
    assert_non_null(q);
    leased_job_t jb, ja[3], jc;
    assert_int_equal(leased_work_queue_push(q, &jb, gate_job, &b, "t:b", 1), LEASED_PUSH_OK);
    assert_true(test_wait_until(10000, gate_entered(&b)));
    for (int i = 0; i < 3; i++)
        assert_int_equal(leased_work_queue_push(q, &ja[i], gate_job, &a[i], "t:a", 100),
                         LEASED_PUSH_OK);
    assert_true(test_wait_until(10000, gate_entered(&a[0])));
    assert_int_equal(leased_work_queue_push(q, &jc, record, &item, "t:c", 1), LEASED_PUSH_OK);
    assert_true(test_wait_until(10000, recorded(&order) == 1));
    assert_false(gate_entered(&a[1]));
    assert_false(gate_entered(&a[2]));
    gate_open(&a[0]);
    assert_true(test_wait_until(10000, gate_entered(&a[1])));
    assert_false(gate_entered(&a[2]));
    gate_open(&a[1]);
    assert_true(test_wait_until(10000, gate_entered(&a[2])));
    gate_open(&a[2]);
    gate_open(&b);
    leased_work_queue_free(q);
    gate_destroy(&b);
    for (int i = 0; i < 3; i++)
        gate_destroy(&a[i]);
    pthread_mutex_destroy(&order.mutex);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batches_and_flush),
        cmocka_unit_test(test_full_queue_refuses_the_flooding_tenant),
        cmocka_unit_test(test_push_while_stopping_falls_back),
        cmocka_unit_test(test_store_failure_falls_back),
        cmocka_unit_test(test_work_queue_delays),
        cmocka_unit_test(test_work_queue_shares_count_cost),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
