/*
 * test_pg_pool.c - the connection pool's bookkeeping without a server:
 * bounded slots, deadline-bounded waiting on the monotonic clock, wake-up on
 * check-in, in_use/waiting counts, and that no slot is ever held by two
 * threads at once under contention; and the adapter over a pool when no
 * server answers: a typed backend_unavailable after one reconnect, every
 * slot given back, deadline_exceeded without touching anything, and
 * connection strings that fail to parse rejected without echoing secrets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <string.h>

#include "lease/store_pg.h"
#include "store/pg_pool.h"

static void test_bounds(void **state)
{
    (void)state;
    assert_null(store_pg_pool_new(0));
    assert_null(store_pg_pool_new(-3));
    store_pg_pool_free(NULL);
    store_pg_pool_t *p = store_pg_pool_new(2);
    assert_non_null(p);
    store_pg_pool_stats_t st;
    store_pg_pool_stats(p, &st);
    assert_int_equal(st.size, 2);
    assert_int_equal(st.in_use, 0);
    assert_int_equal(st.waiting, 0);
    assert_int_equal(st.idle_connected, 0);

    lease_deadline_t d = lease_deadline_in(1000);
    store_pg_slot_t *a = store_pg_pool_checkout(p, &d);
    store_pg_slot_t *b = store_pg_pool_checkout(p, &d);
    assert_non_null(a);
    assert_non_null(b);
    assert_ptr_not_equal(a, b);
    assert_null(a->conn);
    store_pg_pool_stats(p, &st);
    assert_int_equal(st.in_use, 2);

    /* full: the wait ends at the deadline (it returns at all), not before
     * (how much after is the scheduler's business, not asserted) */
    lease_deadline_t shortd = lease_deadline_in(120);
    int64_t t0 = lease_mono_now_ns();
    assert_null(store_pg_pool_checkout(p, &shortd));
    int64_t waited_ms = (lease_mono_now_ns() - t0) / 1000000;
    assert_true(waited_ms >= 115);
    assert_true(lease_deadline_passed(&shortd));

    store_pg_pool_checkin(p, a, false);
    store_pg_pool_stats(p, &st);
    assert_int_equal(st.in_use, 1);

    /* a passed deadline gets nothing even with a free slot */
    lease_deadline_t past = lease_deadline_in(-1);
    assert_null(store_pg_pool_checkout(p, &past));
    store_pg_pool_stats(p, &st);
    assert_int_equal(st.in_use, 1);

    store_pg_pool_checkin(p, b, true);
    store_pg_pool_checkin(p, NULL, false);
    store_pg_pool_stats(p, &st);
    assert_int_equal(st.in_use, 0);
    store_pg_pool_free(p);
}

typedef struct waiter {
    store_pg_pool_t *pool;
    store_pg_slot_t *got;
    int64_t waited_ms;
} waiter_t;

static void *wait_for_slot(void *arg)
{
    waiter_t *w = arg;
    lease_deadline_t d = lease_deadline_in(5000);
    int64_t t0 = lease_mono_now_ns();
    w->got = store_pg_pool_checkout(w->pool, &d);
    w->waited_ms = (lease_mono_now_ns() - t0) / 1000000;
    return NULL;
}

static void test_checkin_wakes_waiter(void **state)
{
    (void)state;
    store_pg_pool_t *p = store_pg_pool_new(1);
    lease_deadline_t d = lease_deadline_in(1000);
    store_pg_slot_t *held = store_pg_pool_checkout(p, &d);
    assert_non_null(held);
    waiter_t w = {.pool = p};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_for_slot, &w), 0);
    store_pg_pool_stats_t st;
    for (int i = 0; i < 200; i++) {
        store_pg_pool_stats(p, &st);
        if (st.waiting == 1)
            break;
        lease_sleep_ms(5);
    }
    assert_int_equal(st.waiting, 1);
    lease_sleep_ms(50);
    store_pg_pool_checkin(p, held, false);
    pthread_join(t, NULL);
    /* woken by the check-in (it got the slot), not by its 5 s deadline */
    assert_ptr_equal(w.got, held);
    assert_true(w.waited_ms >= 45);
    store_pg_pool_stats(p, &st);
    assert_int_equal(st.waiting, 0);
    assert_int_equal(st.in_use, 1);
    store_pg_pool_checkin(p, w.got, false);
    store_pg_pool_free(p);
}

#define CONTENDERS 8
#define ROUNDS 2000
#define SLOTS 3

typedef struct contention {
    store_pg_pool_t *pool;
    store_pg_slot_t *slots[SLOTS];
    int owner[SLOTS]; /* __atomic: thread index + 1 while held */
    int holders;      /* __atomic */
    int max_holders;  /* __atomic */
    int violations;   /* __atomic */
    int timeouts;     /* __atomic */
    pthread_mutex_t mu;
} contention_t;

typedef struct contender {
    contention_t *c;
    int index;
} contender_t;

static int slot_index(contention_t *c, store_pg_slot_t *s)
{
    pthread_mutex_lock(&c->mu);
    int found = -1;
    for (int i = 0; i < SLOTS; i++) {
        if (c->slots[i] == s) {
            found = i;
            break;
        }
        if (!c->slots[i]) {
            c->slots[i] = s;
            found = i;
            break;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return found;
}

static void *contend(void *arg)
{
    contender_t *me = arg;
    contention_t *c = me->c;
    for (int r = 0; r < ROUNDS; r++) {
        lease_deadline_t d = lease_deadline_in(10000);
        store_pg_slot_t *s = store_pg_pool_checkout(c->pool, &d);
        if (!s) {
            __atomic_add_fetch(&c->timeouts, 1, __ATOMIC_SEQ_CST);
            continue;
        }
        int idx = slot_index(c, s);
        int expected = 0;
        if (idx < 0 || !__atomic_compare_exchange_n(&c->owner[idx], &expected, me->index + 1, false,
                                                    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
            __atomic_add_fetch(&c->violations, 1, __ATOMIC_SEQ_CST);
        int h = __atomic_add_fetch(&c->holders, 1, __ATOMIC_SEQ_CST);
        int m = __atomic_load_n(&c->max_holders, __ATOMIC_SEQ_CST);
        while (h > m && !__atomic_compare_exchange_n(&c->max_holders, &m, h, false,
                                                     __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
            ;
        if (r % 7 == 0)
            lease_sleep_ms(0);
        __atomic_sub_fetch(&c->holders, 1, __ATOMIC_SEQ_CST);
        if (idx >= 0)
            __atomic_store_n(&c->owner[idx], 0, __ATOMIC_SEQ_CST);
        store_pg_pool_checkin(c->pool, s, r % 11 == 0);
    }
    return NULL;
}

static void test_contention(void **state)
{
    (void)state;
    contention_t c;
    memset(&c, 0, sizeof c);
    pthread_mutex_init(&c.mu, NULL);
    c.pool = store_pg_pool_new(SLOTS);
    pthread_t t[CONTENDERS];
    contender_t who[CONTENDERS];
    for (int i = 0; i < CONTENDERS; i++) {
        who[i] = (contender_t){&c, i};
        assert_int_equal(pthread_create(&t[i], NULL, contend, &who[i]), 0);
    }
    for (int i = 0; i < CONTENDERS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(c.violations, 0);
    assert_int_equal(c.timeouts, 0);
    assert_true(c.max_holders >= 1);
    assert_true(c.max_holders <= SLOTS);
    store_pg_pool_stats_t st;
    store_pg_pool_stats(c.pool, &st);
    assert_int_equal(st.in_use, 0);
    assert_int_equal(st.waiting, 0);
    store_pg_pool_free(c.pool);
    pthread_mutex_destroy(&c.mu);
}

static lease_store_t *open_store(const char *conninfo, int pool_size)
{
    lease_store_pg_config_t cfg = {.conninfo = conninfo,
                                   .pool_size = pool_size,
                                   .connect_timeout_ms = 2000,
                                   .application_name = "test-offline"};
    lease_store_t *s = NULL;
    char err[256];
    assert_int_equal(lease_store_pg_open(&cfg, &s, err, sizeof err), 0);
    assert_non_null(s);
    return s;
}

static void test_store_open_rejects(void **state)
{
    (void)state;
    lease_store_t *s = (lease_store_t *)0x1;
    char err[256];
    lease_store_pg_config_t cfg = {.conninfo = "host=/tmp", .pool_size = 0};
    assert_int_equal(lease_store_pg_open(&cfg, &s, err, sizeof err), -1);
    assert_null(s);
    assert_true(strstr(err, "pool size") != NULL);
    cfg.pool_size = 2;
    cfg.conninfo = "postgresql://app:hunter2secret@/db?no_such_option=1";
    assert_int_equal(lease_store_pg_open(&cfg, &s, err, sizeof err), -1);
    assert_true(err[0] != '\0');
    assert_null(strstr(err, "hunter2secret"));
    cfg.conninfo = "host = 'unterminated";
    assert_int_equal(lease_store_pg_open(&cfg, &s, err, sizeof err), -1);
    cfg.conninfo = NULL;
    assert_int_equal(lease_store_pg_open(&cfg, &s, err, sizeof err), -1);
    lease_store_close(NULL);
}

static void test_store_unreachable(void **state)
{
    (void)state;
    /* a Unix socket folder that does not exist: every connect fails at once */
    lease_store_t *s = open_store("host=/nonexistent-leased-test port=1 dbname=x user=x", 2);
    lease_acquire_req_t req;
    memset(&req, 0, sizeof req);
    strcpy(req.call.request_id, "r1");
    strcpy(req.call.principal.principal_id, "p1");
    req.call.deadline = lease_deadline_in(3000);
    strcpy(req.identity.tenant_id, "t");
    lease_result_t res;
    int64_t t0 = lease_mono_now_ns();
    assert_int_equal(lease_store_acquire(s, &req, &res), LEASE_BACKEND_UNAVAILABLE);
    assert_int_equal(res.code, LEASE_BACKEND_UNAVAILABLE);
    assert_true(res.retry_after_ms > 0);
    assert_true((lease_mono_now_ns() - t0) / 1000000 < 2000);
    lease_store_stats_t st;
    lease_store_stats(s, &st);
    assert_int_equal(st.pool_size, 2);
    assert_int_equal(st.pool_in_use, 0);
    assert_int_equal(st.backend_errors, 2); /* the connect and one reconnect */
    assert_int_equal(st.outcome_unknown, 0);

    /* reads and health say the same, health adds unreachable */
    lease_health_t h;
    lease_deadline_t d = lease_deadline_in(3000);
    assert_int_equal(lease_store_health(s, &d, &h), LEASE_BACKEND_UNAVAILABLE);
    assert_false(h.reachable);
    lease_credential_t cred;
    bool found = true;
    assert_int_equal(lease_store_credential_lookup(s, "key_x", &d, &cred, &found),
                     LEASE_BACKEND_UNAVAILABLE);
    assert_false(found);

    /* a passed deadline touches nothing */
    req.call.deadline = lease_deadline_in(-1);
    assert_int_equal(lease_store_acquire(s, &req, &res), LEASE_DEADLINE_EXCEEDED);
    lease_store_stats(s, &st);
    assert_int_equal(st.backend_errors, 6);

    /* bad input is refused before any connection */
    strcpy(req.metadata_json, "{not json");
    req.call.deadline = lease_deadline_in(3000);
    assert_int_equal(lease_store_acquire(s, &req, &res), LEASE_INVALID_LEASE_REQUEST);
    assert_string_equal(res.field, "metadata");
    lease_sweep_result_t sw;
    assert_int_equal(lease_store_sweep(s, 0, &d, &sw), LEASE_INVALID_LEASE_REQUEST);
    assert_int_equal(lease_store_record_audit(s, NULL, 0, &d), LEASE_INSPECTED);
    lease_store_stats(s, &st);
    assert_int_equal(st.backend_errors, 6);
    lease_store_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_checkin_wakes_waiter),
        cmocka_unit_test(test_contention),
        cmocka_unit_test(test_store_open_rejects),
        cmocka_unit_test(test_store_unreachable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
