/*
 * http_concurrency.c - concurrent acquires of one identity over HTTP have
 * exactly one winner and allocate exactly one token per round; bounded
 * waiting acquires a lease freed during the wait and never outlives the
 * request's deadline.
 */
#include <pthread.h>
#include <time.h>

#include "http_common.h"

#define THREADS 12
#define ROUNDS 5

static http_fx_t fx;
static const char *tokens[4]; /* owned by fx */

static int setup(void **state)
{
    http_fx_open(&fx, state, "http_conc");
    for (int i = 0; i < 4; i++) {
        char principal[32];
        snprintf(principal, sizeof principal, "prn_racer_%d", i);
        tokens[i] = http_fx_worker(&fx, principal);
    }
    const char *env[] = {"LEASE_HTTP_THREADS=8", "LEASE_DB_POOL_SIZE=8", NULL};
    http_fx_serve(&fx, env);
    return 0;
}

typedef struct racer {
    int index, round;
    pthread_barrier_t *start;
    long status;
    char code[64];
    json_t *lease;
} racer_t;

static void *race(void *arg)
{
    racer_t *r = arg;
    http_client_t *c = http_client_new(fx.base, 20000);
    char rid[64];
    snprintf(rid, sizeof rid, "race-%d-%d", r->round, r->index);
    char *body = acquire_body(rid, "t-race");
    /* warm the connection so the race is between requests, not connects */
    http_resp_free(http_client_call(c, "GET", "/healthz", NULL, NULL, NULL, NULL));
    pthread_barrier_wait(r->start);
    http_resp_t *resp =
        http_client_call(c, "POST", "/v1/leases/acquire", tokens[r->index % 4], body, NULL, NULL);
    r->status = resp ? resp->status : 0;
    snprintf(r->code, sizeof r->code, "%s",
             resp && http_resp_str(resp, "code") ? http_resp_str(resp, "code") : "");
    if (resp && resp->status == 200)
        r->lease = json_deep_copy(lease_of(resp));
    http_resp_free(resp);
    free(body);
    http_client_free(c);
    return NULL;
}

static void test_one_winner(void **state)
{
    (void)state;
    long long last_token = 0;
    for (int round = 0; round < ROUNDS; round++) {
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, THREADS);
        racer_t racers[THREADS];
        pthread_t th[THREADS];
        for (int i = 0; i < THREADS; i++) {
            racers[i] = (racer_t){.index = i, .round = round, .start = &start};
            pthread_create(&th[i], NULL, race, &racers[i]);
        }
        for (int i = 0; i < THREADS; i++)
            pthread_join(th[i], NULL);
        pthread_barrier_destroy(&start);
        int winners = 0, losers = 0, winner = -1;
        for (int i = 0; i < THREADS; i++) {
            if (racers[i].status == 200 && strcmp(racers[i].code, "lease_acquired") == 0) {
                winners++;
                winner = i;
            } else if (racers[i].status == 409 && strcmp(racers[i].code, "lease_conflict") == 0) {
                losers++;
            } else {
                fprintf(stderr, "racer %d: %ld %s\n", i, racers[i].status, racers[i].code);
            }
        }
        assert_int_equal(winners, 1);
        assert_int_equal(losers, THREADS - 1);
        json_t *lease = racers[winner].lease;
        long long token = json_integer_value(json_object_get(lease, "fencing_token"));
        assert_true(token > last_token);
        last_token = token;
        /* one token per round: the durable counter equals the winner's token */
        assert_int_equal(testpg_query_int(fx.db, "SELECT fencing_counter FROM lease.locks "
                                                 "WHERE target_id = 't-race'"),
                         token);
        char rid[64];
        snprintf(rid, sizeof rid, "race-release-%d", round);
        http_resp_t *rel = call_owned(fx.base, "POST", "/v1/leases/release", tokens[winner % 4],
                                      owner_body(rid, "t-race", lease));
        check_reply(rel, 200, "lease_released", NULL);
        http_resp_free(rel);
        json_decref(lease);
    }
}

static long mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

typedef struct releaser {
    json_t *lease;
    int after_ms;
} releaser_t;

static void *release_later(void *arg)
{
    releaser_t *rl = arg;
    usleep((useconds_t)rl->after_ms * 1000);
    http_resp_t *r = call_owned(fx.base, "POST", "/v1/leases/release", tokens[0],
                                owner_body("wait-release", "t-wait", rl->lease));
    assert_int_equal(r->status, 200);
    http_resp_free(r);
    return NULL;
}

static void test_bounded_wait(void **state)
{
    (void)state;
    releaser_t rl = {acquire_lease(fx.base, tokens[0], "wait-hold", "t-wait"), 400};

    /* a wait shorter than the deadline allows: conflict within both */
    json_t *b = parse_owned(acquire_body("wait-short", "t-wait"));
    json_object_set_new(b, "wait_ms", json_integer(5000));
    json_object_set_new(b, "deadline_ms", json_integer(300));
    long t0 = mono_ms();
    http_resp_t *r = call_owned(fx.base, "POST", "/v1/leases/acquire", tokens[1], dump(b));
    long took = mono_ms() - t0;
    check_reply(r, 409, "lease_conflict", NULL);
    http_resp_free(r);
    assert_true(took >= 150);      /* it did wait */
    assert_true(took < 300 + 250); /* and not past the deadline (plus transport slack) */

    /* the holder releases after 400 ms; a waiter with 5 s gets the lease */
    pthread_t th;
    pthread_create(&th, NULL, release_later, &rl);
    b = parse_owned(acquire_body("wait-long", "t-wait"));
    json_object_set_new(b, "wait_ms", json_integer(5000));
    t0 = mono_ms();
    r = call_owned(fx.base, "POST", "/v1/leases/acquire", tokens[1], dump(b));
    took = mono_ms() - t0;
    pthread_join(th, NULL);
    check_reply(r, 200, "lease_acquired", NULL);
    assert_true(took >= 350 && took < 3000);
    assert_int_equal(json_integer_value(http_resp_get(r, "lease.fencing_token")),
                     json_integer_value(json_object_get(rl.lease, "fencing_token")) + 1);
    http_resp_free(r);
    json_decref(rl.lease);
}

typedef struct waiter {
    const char *base;
    http_resp_t *resp;
} waiter_t;

static void *wait_acquire(void *arg)
{
    waiter_t *w = arg;
    json_t *b = parse_owned(acquire_body("hold-wait", "t-hold"));
    json_object_set_new(b, "wait_ms", json_integer(1500));
    w->resp = call_owned(w->base, "POST", "/v1/leases/acquire", tokens[1], dump(b));
    return NULL;
}

/* With one worker thread, an acquire waiting for a held lease does not
 * hold that worker: other requests are served meanwhile. */
static void test_waiting_holds_no_worker(void **state)
{
    (void)state;
    const char *env[] = {"LEASE_HTTP_THREADS=1", NULL};
    leased_proc_t *srv = leased_proc_start(fx.db, env);
    const char *base = leased_proc_url(srv);
    http_resp_t *a = acquire_call(base, tokens[0], "hold-1", "t-hold");
    check_reply(a, 200, "lease_acquired", NULL);
    http_resp_free(a);
    waiter_t w = {base, NULL};
    pthread_t th;
    long t_start = mono_ms();
    pthread_create(&th, NULL, wait_acquire, &w);
    usleep(200000);
    for (int i = 0; i < 5; i++) {
        long t0 = mono_ms();
        http_resp_t *r =
            call_owned(base, "POST", "/v1/leases/inspect", tokens[2], inspect_body("t-hold"));
        check_reply(r, 200, "lease_inspected", NULL);
        http_resp_free(r);
        assert_true(mono_ms() - t0 < 400);
    }
    pthread_join(th, NULL);
    check_reply(w.resp, 409, "lease_conflict", NULL);
    assert_true(mono_ms() - t_start >= 1400); /* it did wait its 1.5 s */
    http_resp_free(w.resp);
    assert_int_equal(leased_proc_stop(srv), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_winner),
        cmocka_unit_test(test_bounded_wait),
        cmocka_unit_test(test_waiting_holds_no_worker),
    };
    return cmocka_run_group_tests(tests, setup, http_fx_teardown);
}
