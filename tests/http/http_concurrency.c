/*
 * http_concurrency.c - concurrent acquires of one identity over HTTP have
 * exactly one winner and allocate exactly one token per round; bounded
 * waiting acquires a lease freed during the wait, ends with its wait window
 * or its deadline, and holds no worker thread while it waits. The tests
 * assert outcomes and their order, never how long something took.
 */
#include <pthread.h>

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
        /* one token per round, through the API: each round's winner has
         * the next token, so no loser took one */
        assert_int_equal(token, last_token + 1);
        last_token = token;
        /* and on Postgres the durable counter equals the winner's token */
        if (!fx.valkey)
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

/*
 * The waiting tests run a leased of their own that logs at debug level:
 * each conflict a waiting acquire meets is logged ("acquire conflict,
 * attempt N, again in M ms"), which is how the test knows a request is
 * waiting, without sleeping and hoping. Long bounds (wait_ms, deadlines)
 * only keep a broken build from hanging; nothing asserts on elapsed time.
 */
#define WAIT_LOGGED "acquire conflict, attempt "

static leased_proc_t *start_waiting_server(const char *threads)
{
    const char *env[] = {"LEASE_LOG_LEVEL=debug", "LEASE_MAX_WAIT_MS=60000",
                         "LEASE_MAX_DEADLINE_MS=60000", threads, NULL};
    return http_fx_start_leased(&fx, env);
}

static int waits_logged(const leased_proc_t *srv)
{
    return leased_proc_log_count(srv, WAIT_LOGGED);
}

/* An acquire of target with wait_ms and deadline_ms (0: none), sent from a
 * thread of its own (http_pending_t; the caller frees p->body). */
static void start_waiting_acquire(http_pending_t *p, const char *base, const char *token,
                                  const char *rid, const char *target, int wait_ms, int deadline_ms)
{
    json_t *b = parse_owned(acquire_body(rid, target));
    json_object_set_new(b, "wait_ms", json_integer(wait_ms));
    if (deadline_ms)
        json_object_set_new(b, "deadline_ms", json_integer(deadline_ms));
    *p = (http_pending_t){
        .base = base, .path = "/v1/leases/acquire", .token = token, .body = dump(b)};
    http_pending_start(p);
}

static void test_bounded_wait(void **state)
{
    (void)state;
    leased_proc_t *srv = start_waiting_server("LEASE_HTTP_THREADS=4");
    const char *base = leased_proc_url(srv);
    json_t *held = acquire_lease(base, tokens[0], "wait-hold", "t-wait");

    /* wait_ms shorter than the deadline: the wait window ends it, after
     * more than one attempt, with the holder's conflict (1.5 s: room for a
     * second attempt even when the first is slow) */
    json_t *b = parse_owned(acquire_body("wait-window", "t-wait"));
    json_object_set_new(b, "wait_ms", json_integer(1500));
    json_object_set_new(b, "deadline_ms", json_integer(30000));
    int before = waits_logged(srv);
    http_resp_t *r = call_owned(base, "POST", "/v1/leases/acquire", tokens[1], dump(b));
    check_reply(r, 409, "lease_conflict", NULL);
    http_resp_free(r);
    assert_true(waits_logged(srv) > before); /* it did wait */

    /* a deadline shorter than wait_ms ends the wait instead: no attempt
     * starts past it (ATTEMPT_MARGIN_MS), so the answer is the conflict, or
     * deadline_exceeded when the last attempt, started in time, ran past
     * the deadline on a loaded machine; never a wait of wait_ms, which
     * would end in the lease released below */
    b = parse_owned(acquire_body("wait-deadline", "t-wait"));
    json_object_set_new(b, "wait_ms", json_integer(50000));
    json_object_set_new(b, "deadline_ms", json_integer(1500));
    before = waits_logged(srv);
    r = call_owned(base, "POST", "/v1/leases/acquire", tokens[1], dump(b));
    if (r->status == 409)
        check_reply(r, 409, "lease_conflict", NULL);
    else
        check_reply(r, lease_code_http_status(LEASE_DEADLINE_EXCEEDED), "deadline_exceeded", NULL);
    http_resp_free(r);
    assert_true(waits_logged(srv) > before);

    /* the holder releases while a waiter waits: the waiter gets the lease,
     * with the next token */
    before = waits_logged(srv);
    http_pending_t waiter;
    start_waiting_acquire(&waiter, base, tokens[1], "wait-long", "t-wait", 50000, 60000);
    assert_true(test_wait_until(30000, waits_logged(srv) > before));
    assert_false(http_pending_done(&waiter));
    r = call_owned(base, "POST", "/v1/leases/release", tokens[0],
                   owner_body("wait-release", "t-wait", held));
    check_reply(r, 200, "lease_released", NULL);
    http_resp_free(r);
    http_pending_join(&waiter);
    check_reply(waiter.resp, 200, "lease_acquired", NULL);
    assert_int_equal(json_integer_value(http_resp_get(waiter.resp, "lease.fencing_token")),
                     json_integer_value(json_object_get(held, "fencing_token")) + 1);
    http_resp_free(waiter.resp);
    free(waiter.body);
    json_decref(held);
    assert_int_equal(leased_proc_stop(srv), 0);
}

/* With one worker thread, an acquire waiting for a held lease does not
 * hold that worker: other requests are answered while it still waits
 * (ordering, not speed: the waiter has no answer until the lease is
 * released after them). */
static void test_waiting_holds_no_worker(void **state)
{
    (void)state;
    leased_proc_t *srv = start_waiting_server("LEASE_HTTP_THREADS=1");
    const char *base = leased_proc_url(srv);
    json_t *held = acquire_lease(base, tokens[0], "hold-1", "t-hold");
    http_pending_t waiter;
    start_waiting_acquire(&waiter, base, tokens[1], "hold-wait", "t-hold", 50000, 60000);
    assert_true(test_wait_until(30000, waits_logged(srv) > 0));
    for (int i = 0; i < 5; i++) {
        http_resp_t *r =
            call_owned(base, "POST", "/v1/leases/inspect", tokens[2], inspect_body("t-hold"));
        check_reply(r, 200, "lease_inspected", NULL);
        http_resp_free(r);
    }
    /* answered while the waiter was still waiting */
    assert_false(http_pending_done(&waiter));
    http_resp_t *r = call_owned(base, "POST", "/v1/leases/release", tokens[0],
                                owner_body("hold-release", "t-hold", held));
    check_reply(r, 200, "lease_released", NULL);
    http_resp_free(r);
    http_pending_join(&waiter);
    check_reply(waiter.resp, 200, "lease_acquired", NULL);
    http_resp_free(waiter.resp);
    free(waiter.body);
    json_decref(held);
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
