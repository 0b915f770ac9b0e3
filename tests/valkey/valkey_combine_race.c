/*
 * valkey_combine_race.c - the adapter's combiner (valkey_combiner.c,
 * docs/backends.md "Combined calls") under concurrency, against a real
 * redis-server: many threads share ONE adapter whose combining limit (one
 * call in flight) makes the requests that arrive meanwhile go together.
 *   - acquire/renew/release of overlapping identities: never two holders,
 *     every identity's tokens strictly increase (one counter step per
 *     acknowledged acquisition: none lost, none twice), every answer is
 *     one of the codes the sequence can give and well formed, and calls
 *     really carried more than one request (the adapter's counts);
 *   - requests queued behind a call the server does not answer (SIGSTOP)
 *     answer deadline_exceeded at their own deadline and are never sent;
 *   - with every pool connection busy, each request waits for one until
 *     its OWN deadline: one whose deadline passes answers deadline_exceeded,
 *     and a later one is not dragged down with it (it is sent once a
 *     connection comes free and gets its real answer).
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "lease/clock.h"
#include "lease/store_valkey.h"
#include "valkey_service.h"

#define THREADS 16
#define TARGETS 4
#define ITERATIONS 150

static lease_valkey_t *open_combining(const vk_server_t *s, int calls, int items)
{
    lease_valkey_config_t cfg = {.host = "127.0.0.1",
                                 .port = s->port,
                                 .ns = "t",
                                 .pool_size = THREADS,
                                 .combine_calls = calls,
                                 .combine_items = items};
    return vk_open_config(&cfg);
}

static void make_acquire(lease_acquire_req_t *r, const char *principal, const char *rid,
                         const char *target, int64_t deadline_ms)
{
    memset(r, 0, sizeof *r);
    vk_fill_call(&r->call, principal, rid, 'a', deadline_ms);
    vk_fill_race_acquire(r, target);
}

static lease_owner_req_t owner_of(const lease_acquire_req_t *a, const lease_record_t *l,
                                  const char *rid)
{
    lease_owner_req_t r;
    memset(&r, 0, sizeof r);
    vk_fill_call(&r.call, a->call.principal.principal_id, rid, 'b', 5000);
    r.identity = l->identity;
    snprintf(r.lease_id, sizeof r.lease_id, "%s", l->lease_id);
    r.fencing_token = l->fencing_token;
    snprintf(r.service_instance_id, sizeof r.service_instance_id, "inst");
    return r;
}

/* ---- overlapping identities ---------------------------------------------- */

typedef struct shared {
    lease_valkey_t *v;
    atomic_int holder[TARGETS]; /* 0: none; else the holding thread's id + 1 */
    pthread_mutex_t order[TARGETS];
    int64_t last_token[TARGETS];
    atomic_int bad;           /* answers that are not what the sequence can give */
    atomic_int double_holder; /* an acquisition while another held it */
    atomic_int out_of_order;  /* a token not one above the identity's last */
    atomic_int acquired, renewed, released, conflicts;
    char first_bad[160];
} shared_t;

typedef struct racer {
    shared_t *sh;
    int id;
} racer_t;

static void note_bad(shared_t *sh, const char *what, lease_code_t code)
{
    if (atomic_fetch_add(&sh->bad, 1) == 0)
        snprintf(sh->first_bad, sizeof sh->first_bad, "%s answered %s", what,
                 lease_code_name(code));
}

static bool well_formed(const lease_result_t *r, const char *target, int64_t token)
{
    return r->lease.fencing_token == token && r->lease.lease_id[0] != '\0' &&
           strcmp(r->lease.identity.target_id, target) == 0;
}

static void *race(void *arg)
{
    racer_t *me = arg;
    shared_t *sh = me->sh;
    char who[16];
    snprintf(who, sizeof who, "p%d", me->id);
    for (int i = 0; i < ITERATIONS; i++) {
        int t = (me->id + i) % TARGETS;
        char target[16], rid[48];
        snprintf(target, sizeof target, "t%d", t);
        snprintf(rid, sizeof rid, "a%d-%d", me->id, i);
        lease_acquire_req_t a;
        make_acquire(&a, who, rid, target, 5000);
        lease_result_t r;
        lease_code_t c = lease_valkey_acquire(sh->v, &a, &r);
        if (c == LEASE_CONFLICT) {
            atomic_fetch_add(&sh->conflicts, 1);
            continue;
        }
        if (c != LEASE_ACQUIRED || r.lease.fencing_token <= 0) {
            note_bad(sh, "acquire", c);
            continue;
        }
        int none = 0;
        if (!atomic_compare_exchange_strong(&sh->holder[t], &none, me->id + 1))
            atomic_fetch_add(&sh->double_holder, 1);
        pthread_mutex_lock(&sh->order[t]);
        if (r.lease.fencing_token != sh->last_token[t] + 1)
            atomic_fetch_add(&sh->out_of_order, 1);
        sh->last_token[t] = r.lease.fencing_token;
        pthread_mutex_unlock(&sh->order[t]);
        atomic_fetch_add(&sh->acquired, 1);
        lease_record_t held = r.lease;

        snprintf(rid, sizeof rid, "n%d-%d", me->id, i);
        lease_owner_req_t n = owner_of(&a, &held, rid);
        c = lease_valkey_renew(sh->v, &n, &r);
        if (c != LEASE_RENEWED || !well_formed(&r, target, held.fencing_token))
            note_bad(sh, "renew", c);
        else
            atomic_fetch_add(&sh->renewed, 1);

        /* given up before the release is sent: nobody can take it before
         * the release is decided */
        atomic_store(&sh->holder[t], 0);
        snprintf(rid, sizeof rid, "x%d-%d", me->id, i);
        lease_owner_req_t x = owner_of(&a, &held, rid);
        c = lease_valkey_release(sh->v, &x, &r);
        if (c != LEASE_RELEASED || !well_formed(&r, target, held.fencing_token))
            note_bad(sh, "release", c);
        else
            atomic_fetch_add(&sh->released, 1);
    }
    return NULL;
}

static void overlapping_identities_one_holder_tokens_increase(void **state)
{
    vk_server_t *s = *state;
    shared_t *sh = calloc(1, sizeof *sh);
    sh->v = open_combining(s, 1, 16);
    assert_non_null(sh->v);
    for (int t = 0; t < TARGETS; t++)
        pthread_mutex_init(&sh->order[t], NULL);
    racer_t racers[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        racers[i] = (racer_t){.sh = sh, .id = i};
        pthread_create(&th[i], NULL, race, &racers[i]);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    lease_valkey_combine_stats_t st;
    lease_valkey_combine_stats(sh->v, &st);
    fprintf(stderr,
            "combine race: %d acquired, %d conflicts, %d renewed, %d released; %llu calls, "
            "%llu combined carrying %llu requests\n",
            atomic_load(&sh->acquired), atomic_load(&sh->conflicts), atomic_load(&sh->renewed),
            atomic_load(&sh->released), (unsigned long long)st.calls,
            (unsigned long long)st.combined_calls, (unsigned long long)st.combined_items);
    if (atomic_load(&sh->bad) != 0)
        fail_msg("%d answers not well formed; first: %s", atomic_load(&sh->bad), sh->first_bad);
    assert_int_equal(atomic_load(&sh->double_holder), 0);
    assert_int_equal(atomic_load(&sh->out_of_order), 0);
    assert_true(atomic_load(&sh->acquired) > 0);
    assert_int_equal(atomic_load(&sh->renewed), atomic_load(&sh->acquired));
    assert_int_equal(atomic_load(&sh->released), atomic_load(&sh->acquired));
    assert_int_equal(atomic_load(&sh->acquired) + atomic_load(&sh->conflicts),
                     THREADS * ITERATIONS);
    /* every request was one call's, or one of a combined call's */
    assert_int_equal(st.calls - st.combined_calls + st.combined_items,
                     (uint64_t)(THREADS * ITERATIONS + 2 * atomic_load(&sh->acquired)));
    /* combined for real: calls that carried more than one request */
    assert_true(st.combined_calls > 0);
    assert_true(st.combined_items > st.combined_calls);
    /* the server's counters agree: one step per acknowledged acquisition */
    int64_t total = 0;
    for (int t = 0; t < TARGETS; t++)
        total += sh->last_token[t];
    assert_int_equal(total, atomic_load(&sh->acquired));
    redisReply *r = vk_cmd(s, "SCARD lease:{t}:act");
    assert_int_equal(r->integer, 0);
    freeReplyObject(r);
    lease_valkey_close(sh->v);
    for (int t = 0; t < TARGETS; t++)
        pthread_mutex_destroy(&sh->order[t]);
    free(sh);
}

/* ---- deadlines of queued requests ------------------------------------------ */

typedef struct queued {
    lease_valkey_t *v;
    int id;
    int64_t deadline_ms;
    lease_code_t code;
    int64_t took_ms;
} queued_t;

static void *acquire_once(void *arg)
{
    queued_t *q = arg;
    char rid[16], target[16];
    snprintf(rid, sizeof rid, "q%d", q->id);
    snprintf(target, sizeof target, "q%d", q->id);
    lease_acquire_req_t a;
    make_acquire(&a, "p1", rid, target, q->deadline_ms);
    lease_result_t r;
    int64_t t0 = lease_mono_now_ns();
    q->code = lease_valkey_acquire(q->v, &a, &r);
    q->took_ms = (lease_mono_now_ns() - t0) / 1000000;
    return NULL;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static void queued_request_past_its_deadline_is_never_sent(void **state)
{
    vk_server_t *s = *state;
    lease_valkey_t *v = open_combining(s, 1, 16);
    assert_non_null(v);
    int pid = vk_pid(s);
    assert_true(pid > 0);
    /* the one call in flight hangs on a frozen server ... */
    kill(pid, SIGSTOP);
    queued_t first = {.v = v, .id = 0, .deadline_ms = 4000};
    pthread_t th0;
    pthread_create(&th0, NULL, acquire_once, &first);
    sleep_ms(200);
    /* ... so these wait in the queue, until their own deadlines */
    queued_t q[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        q[i] = (queued_t){.v = v, .id = i + 1, .deadline_ms = 300 + 100 * i};
        pthread_create(&th[i], NULL, acquire_once, &q[i]);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    kill(pid, SIGCONT);
    pthread_join(th0, NULL);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(q[i].code, LEASE_DEADLINE_EXCEEDED);
        /* answered at its deadline (they were all answered before the
         * server was let go, so not by the call ahead of them ending) */
        assert_true(q[i].took_ms >= q[i].deadline_ms - 5);
    }
    assert_int_equal(first.code, LEASE_ACQUIRED);
    /* none of the queued requests reached the server: one acquisition, one
     * idempotency record, the first's */
    redisReply *r = vk_cmd(s, "KEYS lease:{t}:i:*");
    assert_int_equal(r->elements, 1);
    freeReplyObject(r);
    r = vk_cmd(s, "SCARD lease:{t}:act");
    assert_int_equal(r->integer, 1);
    freeReplyObject(r);
    lease_valkey_combine_stats_t st;
    lease_valkey_combine_stats(v, &st);
    assert_int_equal(st.calls, 1);
    lease_valkey_close(v);
}

/* One pool connection, two calls in flight: A holds the connection on a
 * frozen server until its deadline (2 s), B leads the second call and waits
 * for the connection, C (deadline at 1.7 s) and E (8 s) queue behind it.
 * When B's and then C's deadlines pass, each answers deadline_exceeded on
 * its own; E must still be waiting for the connection when A's call gives it
 * back (2 s), and be answered by the server once it is let go (2.6 s). */
static void pool_wait_keeps_each_requests_deadline(void **state)
{
    vk_server_t *s = *state;
    lease_valkey_config_t cfg = {.host = "127.0.0.1",
                                 .port = s->port,
                                 .ns = "t",
                                 .pool_size = 1,
                                 .combine_calls = 2,
                                 .combine_items = 16};
    lease_valkey_t *v = vk_open_config(&cfg);
    assert_non_null(v);
    int pid = vk_pid(s);
    assert_true(pid > 0);
    kill(pid, SIGSTOP);
    int64_t t0 = lease_mono_now_ns();
    queued_t a = {.v = v, .id = 10, .deadline_ms = 2000};
    queued_t b = {.v = v, .id = 11, .deadline_ms = 900};
    queued_t c = {.v = v, .id = 12, .deadline_ms = 1500};
    queued_t e = {.v = v, .id = 13, .deadline_ms = 8000};
    pthread_t ta, tb, tc, te;
    pthread_create(&ta, NULL, acquire_once, &a);
    sleep_ms(100);
    pthread_create(&tb, NULL, acquire_once, &b);
    sleep_ms(100);
    pthread_create(&tc, NULL, acquire_once, &c);
    sleep_ms(50);
    pthread_create(&te, NULL, acquire_once, &e);
    sleep_ms(2600 - (lease_mono_now_ns() - t0) / 1000000);
    kill(pid, SIGCONT);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    pthread_join(tc, NULL);
    pthread_join(te, NULL);
    /* sent, unanswered by its deadline */
    assert_int_equal(a.code, LEASE_OUTCOME_UNKNOWN);
    /* never sent, each at its own deadline */
    assert_int_equal(b.code, LEASE_DEADLINE_EXCEEDED);
    assert_true(b.took_ms >= b.deadline_ms - 5);
    assert_int_equal(c.code, LEASE_DEADLINE_EXCEEDED);
    assert_true(c.took_ms >= c.deadline_ms - 5);
    /* not refused with C's deadline: sent once A's call gave the connection
     * back, and answered by the server once it ran again */
    if (e.code != LEASE_ACQUIRED)
        fail_msg("E answered %s after %lld ms", lease_code_name(e.code), (long long)e.took_ms);
    assert_true(e.took_ms >= 2000);
    /* B's and C's requests never reached the server, E's did (A's may or
     * may not have: its connection was closed before the server read it) */
    const char *ran[] = {"q11", "q12", "q13"};
    for (int i = 0; i < 3; i++) {
        redisReply *r = vk_cmd(s, "KEYS lease:{t}:i:acquire:p1:%s:*", ran[i]);
        assert_int_equal(r->elements, i == 2 ? 1 : 0);
        freeReplyObject(r);
    }
    lease_valkey_close(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(overlapping_identities_one_holder_tokens_increase,
                                        vk_fixture_adapter_bound, vk_fixture_stop),
        cmocka_unit_test_setup_teardown(queued_request_past_its_deadline_is_never_sent,
                                        vk_fixture_adapter_bound, vk_fixture_stop),
        cmocka_unit_test_setup_teardown(pool_wait_keeps_each_requests_deadline,
                                        vk_fixture_adapter_bound, vk_fixture_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
