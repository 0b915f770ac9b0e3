/*
 * valkey_race.c - the Valkey backend under concurrency and a crash, through
 * the adapter, one adapter (connection) per thread against one real
 * redis-server:
 *   - acquire-if-free has exactly one winner per round, and the winners'
 *     tokens strictly increase (race_acquire_once / race_cycles on Postgres);
 *   - kill -9 of the server under acquire/release load with appendfsync
 *     always: after the restart no acknowledged acquisition is missing from
 *     the identities' counters, no token was acknowledged twice, the
 *     namespace is sealed, and after the rebind every token is greater than
 *     every acknowledged one.
 * Threads record what they were told; the test compares it with what the
 * server holds.
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

#define THREADS 8
#define ROUNDS 40
#define CRASH_WORKERS 4
#define CRASH_TARGETS 4
#define MAX_ACKS 100000

static void make_acquire(lease_acquire_req_t *r, const char *principal, const char *rid,
                         const char *target)
{
    memset(r, 0, sizeof *r);
    snprintf(r->call.request_id, sizeof r->call.request_id, "%s", rid);
    /* the digest only has to be stable per request id: derive it from it */
    unsigned h = 2166136261u;
    for (const char *p = rid; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    for (int i = 0; i < 64; i++)
        r->call.request_digest[i] = "0123456789abcdef"[(h >> (i % 8) * 4) & 15];
    r->call.deadline = lease_deadline_in(2000);
    snprintf(r->call.principal.principal_id, sizeof r->call.principal.principal_id, "%s",
             principal);
    snprintf(r->call.principal.principal_class, sizeof r->call.principal.principal_class, "worker");
    vk_fill_race_acquire(r, target);
}

static lease_owner_req_t release_of(const lease_acquire_req_t *a, const lease_record_t *l,
                                    const char *rid)
{
    lease_owner_req_t r;
    memset(&r, 0, sizeof r);
    r.call = a->call;
    snprintf(r.call.request_id, sizeof r.call.request_id, "%s", rid);
    r.call.deadline = lease_deadline_in(2000);
    r.identity = l->identity;
    snprintf(r.lease_id, sizeof r.lease_id, "%s", l->lease_id);
    r.fencing_token = l->fencing_token;
    snprintf(r.service_instance_id, sizeof r.service_instance_id, "inst");
    return r;
}

/* ---- one winner per round ---------------------------------------------- */

typedef struct racer {
    vk_server_t *server;
    int id;
    pthread_barrier_t *barrier;
    lease_code_t codes[ROUNDS];
    lease_record_t won[ROUNDS];
    lease_acquire_req_t reqs[ROUNDS];
} racer_t;

static void *race(void *arg)
{
    racer_t *r = arg;
    lease_valkey_t *v = vk_open(r->server, "t");
    for (int round = 0; round < ROUNDS; round++) {
        char rid[32], who[16];
        snprintf(rid, sizeof rid, "t%d-r%d", r->id, round);
        snprintf(who, sizeof who, "p%d", r->id);
        make_acquire(&r->reqs[round], who, rid, "hot");
        pthread_barrier_wait(r->barrier);
        lease_result_t res;
        r->codes[round] = v ? lease_valkey_acquire(v, &r->reqs[round], &res) : LEASE_CODE_COUNT;
        if (r->codes[round] == LEASE_ACQUIRED)
            r->won[round] = res.lease;
        pthread_barrier_wait(r->barrier); /* everyone answered: the winner releases */
        if (r->codes[round] == LEASE_ACQUIRED) {
            char xid[40];
            snprintf(xid, sizeof xid, "%s-x", rid);
            lease_owner_req_t x = release_of(&r->reqs[round], &res.lease, xid);
            lease_result_t xr;
            r->codes[round] = lease_valkey_release(v, &x, &xr) == LEASE_RELEASED ? LEASE_ACQUIRED
                                                                                 : LEASE_CODE_COUNT;
        }
        pthread_barrier_wait(r->barrier);
    }
    lease_valkey_close(v);
    return NULL;
}

static void one_winner_per_round_tokens_increase(void **state)
{
    vk_server_t *s = *state;
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, THREADS);
    racer_t *racers = calloc(THREADS, sizeof *racers);
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        racers[i] = (racer_t){.server = s, .id = i, .barrier = &barrier};
        pthread_create(&th[i], NULL, race, &racers[i]);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    int64_t last = 0;
    for (int round = 0; round < ROUNDS; round++) {
        int winners = 0, conflicts = 0;
        int64_t token = 0;
        for (int i = 0; i < THREADS; i++) {
            if (racers[i].codes[round] == LEASE_ACQUIRED) {
                winners++;
                token = racers[i].won[round].fencing_token;
            } else if (racers[i].codes[round] == LEASE_CONFLICT) {
                conflicts++;
            }
        }
        if (winners != 1 || conflicts != THREADS - 1)
            fail_msg("round %d: %d winners, %d conflicts", round, winners, conflicts);
        if (token <= last)
            fail_msg("round %d: token %lld after %lld", round, (long long)token, (long long)last);
        last = token;
    }
    assert_int_equal(last, ROUNDS); /* one counter step per acquisition, none lost */
    free(racers);
    pthread_barrier_destroy(&barrier);
}

/* ---- kill -9 under load ------------------------------------------------- */

typedef struct worker {
    vk_server_t *server;
    int id;
    atomic_bool *stop;
    atomic_size_t *acked; /* all workers' acknowledged acquisitions */
    size_t n_acks;
    size_t lost_releases;
    int64_t acks[MAX_ACKS];  /* tokens acknowledged (lease_acquired answers) */
    int target_of[MAX_ACKS]; /* the identity of each */
} worker_t;

static void *load(void *arg)
{
    worker_t *w = arg;
    lease_valkey_t *v = vk_open(w->server, "t");
    for (long i = 0; v && !atomic_load(w->stop) && w->n_acks < MAX_ACKS; i++) {
        int t = (int)(i % CRASH_TARGETS);
        char rid[48], who[16], target[16];
        snprintf(rid, sizeof rid, "w%d-%ld", w->id, i);
        snprintf(who, sizeof who, "p%d", w->id);
        snprintf(target, sizeof target, "t%d", t);
        lease_acquire_req_t a;
        make_acquire(&a, who, rid, target);
        lease_result_t r;
        if (lease_valkey_acquire(v, &a, &r) != LEASE_ACQUIRED)
            continue;
        w->acks[w->n_acks] = r.lease.fencing_token;
        w->target_of[w->n_acks++] = t;
        atomic_fetch_add(w->acked, 1);
        char xid[56];
        snprintf(xid, sizeof xid, "%s-x", rid);
        lease_owner_req_t x = release_of(&a, &r.lease, xid);
        lease_result_t xr;
        if (lease_valkey_release(v, &x, &xr) != LEASE_RELEASED)
            w->lost_releases++; /* the crash: its TTL ends the lease */
    }
    lease_valkey_close(v);
    return NULL;
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void kill9_loses_no_acknowledged_token(void **state)
{
    vk_server_t *s = *state;
    atomic_bool stop = false;
    atomic_size_t acked = 0;
    worker_t *workers = calloc(CRASH_WORKERS, sizeof *workers);
    pthread_t th[CRASH_WORKERS];
    for (int i = 0; i < CRASH_WORKERS; i++) {
        workers[i].server = s;
        workers[i].id = i;
        workers[i].stop = &stop;
        workers[i].acked = &acked;
        pthread_create(&th[i], NULL, load, &workers[i]);
    }
    /* the crash comes under load: once 200 acquisitions were acknowledged
     * (or after 60 s, whatever this machine manages) */
    for (int waited = 0; atomic_load(&acked) < 200 && waited < 6000; waited++) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    int pid = vk_pid(s);
    assert_true(pid > 0);
    assert_int_equal(kill(pid, SIGKILL), 0);
    atomic_store(&stop, true);
    for (int i = 0; i < CRASH_WORKERS; i++)
        pthread_join(th[i], NULL);
    assert_true(vk_restart(s, NULL));

    /* per identity: every acknowledged token distinct, and the counter the
     * server recovered at least the highest acknowledged one */
    int64_t highest_all = 0;
    size_t total = 0;
    for (int t = 0; t < CRASH_TARGETS; t++) {
        int64_t *tokens = malloc(sizeof(int64_t) * MAX_ACKS * CRASH_WORKERS);
        size_t n = 0;
        for (int i = 0; i < CRASH_WORKERS; i++)
            for (size_t k = 0; k < workers[i].n_acks; k++)
                if (workers[i].target_of[k] == t)
                    tokens[n++] = workers[i].acks[k];
        qsort(tokens, n, sizeof *tokens, cmp64);
        for (size_t k = 1; k < n; k++)
            if (tokens[k] == tokens[k - 1])
                fail_msg("identity t%d: token %lld acknowledged twice", t, (long long)tokens[k]);
        int64_t highest = n ? tokens[n - 1] : 0;
        redisReply *r = vk_cmd(s,
                               "HGET lease:{t}:id:[\"v1\",\"tenant-main\",\"program-a\","
                               "\"ns\",\"t%d\",\"actor\",\"wf\",\"default\"] seq",
                               t);
        int64_t seq = r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
        freeReplyObject(r);
        if (seq < highest)
            fail_msg("identity t%d: counter %lld after the crash, %lld acknowledged", t,
                     (long long)seq, (long long)highest);
        if (highest > highest_all)
            highest_all = highest;
        total += n;
        free(tokens);
    }
    print_message("kill -9 after %zu acknowledged acquisitions\n", total);
    assert_true(total > 0);

    /* sealed until rebound, then above everything */
    lease_valkey_t *v = vk_open(s, "t");
    assert_non_null(v);
    lease_acquire_req_t a;
    make_acquire(&a, "p9", "after-1", "t0");
    lease_result_t r;
    assert_int_equal(lease_valkey_acquire(v, &a, &r), LEASE_BACKEND_UNAVAILABLE);
    assert_string_equal(r.reason, "namespace_sealed");
    int64_t epoch = 0, revoked = 0;
    char err[256];
    assert_int_equal(lease_valkey_rebind(v, "kill -9 drill", 0, &epoch, &revoked, err, sizeof err),
                     LEASE_INSPECTED);
    for (int t = 0; t < CRASH_TARGETS; t++) {
        char rid[16], target[8];
        snprintf(rid, sizeof rid, "after-%d", t + 2);
        snprintf(target, sizeof target, "t%d", t);
        make_acquire(&a, "p9", rid, target);
        assert_int_equal(lease_valkey_acquire(v, &a, &r), LEASE_ACQUIRED);
        assert_true(r.lease.fencing_token > highest_all);
    }
    lease_valkey_close(v);
    free(workers);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(one_winner_per_round_tokens_increase,
                                        vk_fixture_adapter_bound, vk_fixture_stop),
        cmocka_unit_test_setup_teardown(kill9_loses_no_acknowledged_token, vk_fixture_adapter_bound,
                                        vk_fixture_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
