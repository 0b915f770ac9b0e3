/*
 * http_shutdown.c - SIGTERM drains: /readyz turns 503 first, requests in
 * flight are answered, every acknowledged acquire is in the database, and
 * leased exits 0.
 */
#include <signal.h>
#include <time.h>

#include "http_common.h"

#define CLIENTS 6
#define MAX_ACKS 4096

/* Each test starts (and signals) a leased of its own. */
static http_fx_t fx;
static const char *worker; /* owned by fx */

static int setup(void **state)
{
    http_fx_open(&fx, state, "http_shutdown");
    worker = http_fx_worker(&fx, "prn_sd");
    return 0;
}

typedef struct client {
    int index;
    const char *base;
    volatile int *stop;
    int acked;
    char **lease_ids;
    int refused; /* 503 or transport failure after SIGTERM */
} client_t;

static void *hammer(void *arg)
{
    client_t *c = arg;
    http_client_t *h = http_client_new(c->base, 10000);
    c->lease_ids = calloc(MAX_ACKS, sizeof *c->lease_ids);
    for (int n = 0; c->acked < MAX_ACKS; n++) {
        char rid[64], target[64];
        snprintf(rid, sizeof rid, "sd-%d-%d", c->index, n);
        snprintf(target, sizeof target, "t-sd-%d-%d", c->index, n);
        char *body = acquire_body(rid, target);
        http_resp_t *r =
            http_client_call(h, "POST", "/v1/leases/acquire", worker, body, NULL, NULL);
        free(body);
        if (r && r->status == 200) {
            c->lease_ids[c->acked++] =
                strdup(http_resp_str(r, "code") && http_resp_get(r, "lease.lease_id")
                           ? json_string_value(http_resp_get(r, "lease.lease_id"))
                           : "");
        } else if (!r || r->status == 503) {
            c->refused++;
            /* the server is going away: reconnect until it is gone */
            http_client_free(h);
            h = http_client_new(c->base, 10000);
            usleep(10000);
        } else {
            fprintf(stderr, "unexpected %ld %s\n", r->status, r->body);
            fail();
        }
        http_resp_free(r);
        if (*c->stop)
            break;
    }
    http_client_free(h);
    return NULL;
}

static void test_no_acknowledged_operation_lost(void **state)
{
    (void)state;
    /* no rate limit in the way: the clients go as fast as they can */
    const char *env[] = {"LEASE_DRAIN_DELAY_MS=400", "LEASE_RATE_LIMIT=1000000/s", NULL};
    leased_proc_t *srv = leased_proc_start(fx.db, env);
    const char *base = leased_proc_url(srv);
    volatile int stop = 0;
    client_t clients[CLIENTS];
    pthread_t th[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        clients[i] = (client_t){.index = i, .base = base, .stop = &stop};
        pthread_create(&th[i], NULL, hammer, &clients[i]);
    }
    usleep(400000);
    leased_proc_signal(srv, SIGTERM);
    /* readiness turns false before the listener closes */
    usleep(100000);
    http_resp_t *r = http_call(base, "GET", "/readyz", NULL, NULL);
    assert_non_null(r);
    assert_int_equal(r->status, 503);
    assert_string_equal(http_resp_str(r, "reason"), "draining");
    assert_string_equal(http_resp_header(r, "Connection"), "close");
    http_resp_free(r);
    assert_int_equal(leased_proc_wait(srv, 30000), 0);
    stop = 1;
    int acked = 0;
    for (int i = 0; i < CLIENTS; i++) {
        pthread_join(th[i], NULL);
        for (int k = 0; k < clients[i].acked; k++) {
            char sql[256];
            snprintf(sql, sizeof sql,
                     "SELECT count(*) FROM lease.locks WHERE lease_id = '%s' AND state = 'active'",
                     clients[i].lease_ids[k]);
            if (testpg_query_int(fx.db, sql) != 1)
                fprintf(stderr, "acknowledged lease %s is missing\n", clients[i].lease_ids[k]);
            assert_int_equal(testpg_query_int(fx.db, sql), 1);
            free(clients[i].lease_ids[k]);
            acked++;
        }
        free(clients[i].lease_ids);
    }
    assert_true(acked > CLIENTS); /* the clients did get work done before the signal */
    /* and nothing was committed that was not acknowledged to somebody: the
     * database holds at most the acknowledged leases plus one in flight per
     * client whose reply was lost when the connection closed */
    long long in_db = testpg_query_int(fx.db, "SELECT count(*) FROM lease.locks "
                                              "WHERE target_id LIKE 't-sd-%'");
    assert_true(in_db >= acked && in_db <= acked + CLIENTS);
    leased_proc_free(srv);
}

/* A renew waiting on a row lock in the database when SIGTERM arrives is
 * answered (and takes effect) once the lock goes away; an acquire waiting
 * for a holder is cut short with its conflict. Both before leased exits 0. */
static void test_in_flight_answered(void **state)
{
    (void)state;
    leased_proc_t *srv = leased_proc_start(fx.db, NULL);
    const char *base = leased_proc_url(srv);
    json_t *lease = acquire_lease(base, worker, "inflight-acq", "t-inflight");
    http_resp_t *a = acquire_call(base, worker, "inflight-held", "t-held");
    check_reply(a, 200, "lease_acquired", NULL);
    http_resp_free(a);

    PGconn *blocker = http_block_target(fx.db, "t-inflight");

    json_t *rb = parse_owned(owner_body("inflight-renew", "t-inflight", lease));
    json_object_set_new(rb, "deadline_ms", json_integer(10000));
    http_pending_t renew = {
        .base = base, .path = "/v1/leases/renew", .token = worker, .body = dump(rb)};
    json_t *wb = parse_owned(acquire_body("inflight-wait", "t-held"));
    json_object_set_new(wb, "wait_ms", json_integer(8000));
    json_object_set_new(wb, "deadline_ms", json_integer(9000));
    http_pending_t waiter = {
        .base = base, .path = "/v1/leases/acquire", .token = worker, .body = dump(wb)};
    http_pending_start(&renew);
    http_pending_start(&waiter);
    /* the renew is inside the database, blocked */
    assert_int_equal(http_wait_lock_waiter(fx.db), 1);
    usleep(200000); /* and the waiter has seen its first conflict */

    leased_proc_signal(srv, SIGTERM);
    usleep(500000);
    http_unblock(blocker);
    http_pending_join(&renew);
    http_pending_join(&waiter);
    assert_int_equal(leased_proc_wait(srv, 30000), 0);
    check_reply(renew.resp, 200, "lease_renewed", NULL);
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM lease.idempotency WHERE request_id = 'inflight-renew'");
    assert_int_equal(testpg_query_int(fx.db, sql), 1);
    check_reply(waiter.resp, 409, "lease_conflict", NULL);
    http_resp_free(renew.resp);
    http_resp_free(waiter.resp);
    free(renew.body);
    free(waiter.body);
    json_decref(lease);
    leased_proc_free(srv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_acknowledged_operation_lost),
        cmocka_unit_test(test_in_flight_answered),
    };
    return cmocka_run_group_tests(tests, setup, http_fx_teardown);
}
