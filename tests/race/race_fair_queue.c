/*
 * race_fair_queue.c - admission and fair queuing before the workers
 * (issue 34, finding 3).
 *
 * Tenant A keeps more requests outstanding than there are workers, each
 * stuck in the database (its target's lock row held by a session of the
 * test, so each runs until the lock is released). Tenant B's request must
 * still be answered at once, while every one of A's is still stuck: a
 * worker is never taken by one flow's backlog from another flow (with one
 * FIFO in front of the workers, B's request waited behind all of A's).
 * A's requests past its flow's queue bound are answered 429
 * lease_rate_limited at once, with a retry hint, instead of queueing; once
 * the queue is full, from their head, before their body is read.
 *
 * Nothing here measures time: B's answer either comes while A's requests
 * are stuck (read with a 5 s bound, A's deadline is 20 s) or not at all.
 *
 * Both backends (issue 38): on PostgreSQL A's acquire is stuck behind the
 * target's lock row; on Valkey (LEASE_TEST_STORE=valkey) behind CLIENT
 * PAUSE ... WRITE, which holds every write function call at the server
 * while B's inspect and the credential lookups (no-writes functions) pass.
 */
#include <poll.h>

#include "../http/http_common.h"
#include "raw_http.h"

#define THREADS 2
#define QUEUED_PER_FLOW 4
#define A_REQUESTS 12

static http_fx_t fx;
static const char *token_a, *token_b;

static int setup(void **state)
{
    http_fx_open(&fx, state, "race_fair_queue");
    token_a = http_fx_worker(&fx, "prn_flood");
    token_b = http_fx_worker_of(&fx, "prn_other", "tenant-b");
    return 0;
}

/* ---- A's acquires held inside the store ----------------------------- */

/* What holds A's acquires: a session of the test on PostgreSQL; on
 * Valkey the server's write pause. */
typedef struct stuck {
    PGconn *blocker;       /* PostgreSQL */
    long long held_before; /* Valkey: clients held at the server before A's */
} stuck_t;

/* Clients held at the server (INFO clients' blocked_clients: a write call
 * postponed by CLIENT PAUSE ... WRITE counts there). */
static long long valkey_held_clients(void)
{
    const char *args[] = {"INFO", "clients", NULL};
    char *out = test_store_valkey_cli(&fx.vk, args);
    assert_non_null(out);
    const char *p = strstr(out, "blocked_clients:");
    assert_non_null(p);
    long long n = atoll(p + strlen("blocked_clients:"));
    free(out);
    return n;
}

static void valkey_cli_ok(const char *const *args)
{
    char *out = test_store_valkey_cli(&fx.vk, args);
    assert_non_null(out);
    if (strncmp(out, "OK", 2) != 0)
        fprintf(stderr, "%s: %s\n", args[0], out);
    assert_int_equal(strncmp(out, "OK", 2), 0);
    free(out);
}

/* From now on every acquire of t-stuck stays inside the store, as long as
 * the test's own lock is held. On Valkey the pause (30 s, longer than the
 * test holds it; it ends by itself if the test dies) holds any write:
 * what it already holds (a housekeeping step) is counted first, so that
 * only A's acquire makes the count grow. */
static void stuck_begin(stuck_t *s)
{
    *s = (stuck_t){0};
    if (!fx.valkey) {
        s->blocker = http_block_target(fx.db, "t-stuck");
        return;
    }
    const char *pause[] = {"CLIENT", "PAUSE", "30000", "WRITE", NULL};
    valkey_cli_ok(pause);
    s->held_before = valkey_held_clients();
}

/* How many of leased's store calls are stuck, once at least one is
 * (polled for at most 30 s): on PostgreSQL sessions waiting on a lock
 * (only t-stuck's row is locked), on Valkey clients held by the pause
 * beyond those held before A's first acquire. */
static long long stuck_wait(const stuck_t *s)
{
    if (!fx.valkey)
        return http_wait_lock_waiter(fx.db);
    long long held = 0;
    (void)test_wait_until(30000, (held = valkey_held_clients() - s->held_before) > 0);
    return held;
}

/* The number stuck now, without waiting. */
static long long stuck_now(const stuck_t *s)
{
    if (!fx.valkey)
        return testpg_query_int(fx.db, "SELECT count(*) FROM pg_stat_activity WHERE datname = "
                                       "current_database() AND application_name = 'leased' AND "
                                       "wait_event_type = 'Lock'");
    return valkey_held_clients() - s->held_before;
}

static void stuck_end(stuck_t *s)
{
    if (!fx.valkey) {
        http_unblock(s->blocker);
        return;
    }
    const char *unpause[] = {"CLIENT", "UNPAUSE", NULL};
    valkey_cli_ok(unpause);
}

/* An inspect in tenant B's own scope. */
static char *inspect_b(void)
{
    return inspect_body_of("tenant-b", "t-b");
}

/* One request on a connection of its own; its answer's status. */
static int one_call(int port, const char *addr, const char *req, raw_resp_t **out)
{
    raw_conn_t *c = raw_connect(port, addr);
    assert_non_null(c);
    assert_true(raw_send(c, req));
    raw_resp_t *r = raw_read(c, 5000);
    int status = r ? r->status : 0;
    if (out)
        *out = r;
    else
        raw_resp_free(r);
    raw_close(c);
    return status;
}

static void test_one_tenants_backlog_does_not_hold_another(void **state)
{
    (void)state;
    char threads[64], queued[64];
    snprintf(threads, sizeof threads, "LEASE_HTTP_THREADS=%d", THREADS);
    snprintf(queued, sizeof queued, "LEASE_MAX_QUEUED_PER_FLOW=%d", QUEUED_PER_FLOW);
    const char *env[] = {threads, queued, "LEASE_DB_POOL_SIZE=8", NULL};
    http_fx_serve(&fx, env);
    int port = leased_proc_port(fx.srv);

    /* the target's lock row exists (one cycle), both credentials cached */
    json_t *lease = acquire_lease(fx.base, token_a, "warm-1", "t-stuck");
    http_resp_t *rel = call_owned(fx.base, "POST", "/v1/leases/release", token_a,
                                  owner_body("warm-2", "t-stuck", lease));
    assert_int_equal(rel->status, 200);
    http_resp_free(rel);
    json_decref(lease);
    char *inspect = inspect_b();
    char *req_b = raw_post_text("/v1/leases/inspect", token_b, inspect);
    free(inspect);
    assert_int_equal(one_call(port, "127.0.0.3", req_b, NULL), 404); /* nothing held there */

    /* A's backlog: every acquire stuck on the held row */
    stuck_t stuck;
    stuck_begin(&stuck);
    raw_conn_t *a[A_REQUESTS];
    for (int i = 0; i < A_REQUESTS; i++) {
        char rid[32];
        snprintf(rid, sizeof rid, "stuck-%d", i);
        json_t *body = parse_owned(acquire_body(rid, "t-stuck"));
        json_object_set_new(body, "deadline_ms", json_integer(20000));
        char *text = dump(body);
        char *req = raw_post_text("/v1/leases/acquire", token_a, text);
        free(text);
        a[i] = raw_connect(port, "127.0.0.2");
        assert_non_null(a[i]);
        assert_true(raw_send(a[i], req));
        free(req);
        /* the first one runs (stuck in the database) before the others
         * queue behind it, however slowly a worker picks it up */
        if (i == 0)
            assert_true(stuck_wait(&stuck) >= 1);
    }

    /* B is answered while every one of A's is still stuck */
    for (int i = 0; i < 3; i++)
        assert_int_equal(one_call(port, "127.0.0.3", req_b, NULL), 404); /* nothing held there */
    assert_true(stuck_now(&stuck) >= 1);

    /* A's requests past its queue's bound: 429 at once, with a hint */
    int refused = 0;
    for (int i = 0; i < A_REQUESTS; i++) {
        struct pollfd p = {raw_fd(a[i]), POLLIN, 0};
        if (poll(&p, 1, 1000) <= 0)
            continue;
        raw_resp_t *r = raw_read(a[i], 1000);
        assert_non_null(r);
        assert_int_equal(r->status, 429);
        assert_string_equal(raw_str(r, "code"), "lease_rate_limited");
        assert_true(json_integer_value(json_object_get(r->json, "retry_after_ms")) > 0);
        assert_non_null(raw_header(r, "Retry-After"));
        raw_resp_free(r);
        raw_close(a[i]);
        a[i] = NULL;
        refused++;
    }
    /* at most one of A's runs (the other worker is B's to take) and
     * QUEUED_PER_FLOW wait: the rest were refused */
    assert_int_equal(refused, A_REQUESTS - (THREADS - 1) - QUEUED_PER_FLOW);

    /* while A's queue is full, A's next request is refused from its head:
     * its body (announced, never sent) is not waited for */
    raw_conn_t *head_only = raw_connect(port, "127.0.0.2");
    assert_non_null(head_only);
    char head[512];
    snprintf(head, sizeof head,
             "POST /v1/leases/acquire HTTP/1.1\r\nHost: leased\r\nAuthorization: Bearer %s\r\n"
             "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n",
             token_a);
    assert_true(raw_send(head_only, head));
    raw_resp_t *early = raw_read(head_only, 5000);
    assert_non_null(early);
    assert_int_equal(early->status, 429);
    assert_string_equal(raw_str(early, "code"), "lease_rate_limited");
    raw_resp_free(early);
    raw_close(head_only);

    /* released: A's admitted requests run, each answered */
    stuck_end(&stuck);
    int answered = 0;
    for (int i = 0; i < A_REQUESTS; i++) {
        if (!a[i])
            continue;
        raw_resp_t *r = raw_read(a[i], 30000);
        assert_non_null(r);
        answered++;
        raw_resp_free(r);
        raw_close(a[i]);
    }
    assert_int_equal(answered, (THREADS - 1) + QUEUED_PER_FLOW);
    free(req_b);
    assert_int_equal(leased_proc_stop(fx.srv), 0);
    fx.srv = NULL;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_tenants_backlog_does_not_hold_another),
    };
    return cmocka_run_group_tests(tests, setup, http_fx_teardown);
}
