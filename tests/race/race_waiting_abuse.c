/*
 * race_waiting_abuse.c - what one tenant's idle or waiting connections may
 * take from another (issue 19, findings 1 and 2), against a real leased.
 *
 * - One credential opens many long polls on its own lease
 *   (GET /v1/leases/<id>/watch?wait_ms=60000) from four addresses, then
 *   closes the sockets (half of them with a reset). Waiting work is bounded
 *   per credential (LEASE_MAX_WAITING_PER_CREDENTIAL): the watches parked
 *   never exceed it, the rest are answered 429; once the sockets close,
 *   leased_watches_waiting and leased_http_connections_open drop back
 *   within seconds, not when wait_ms ends. Another tenant's inspect answers
 *   200 throughout, p99 under 50 ms.
 * - An acquire that waits for a held lease and whose client goes away
 *   acquires nothing when the lease is released.
 * - 1,040 idle keep-alive connections that never send a request, from five
 *   addresses, fill LEASE_MAX_CONNECTIONS (1024). Connections without a
 *   request head are the first to go: another client still gets 200, never
 *   503.
 *
 * Both backends (issue 38): on Valkey (LEASE_TEST_STORE=valkey) what the
 * gone acquire took is read through the API and the audit Stream, as it is
 * on PostgreSQL besides lease.locks.
 */
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

#include "../http/http_common.h"
#include "raw_http.h"

#define OTHER_TENANT "tenant-other"
#define WAITING_PER_CREDENTIAL 16 /* the default of LEASE_MAX_WAITING_PER_CREDENTIAL */

static http_fx_t fx;
static const char *attacker, *contender, *other; /* owned by fx */

static long long mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int setup(void **state)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    http_fx_open(&fx, state, "race_waiting_abuse");
    attacker = http_fx_worker(&fx, "prn_abuser");
    contender = http_fx_worker(&fx, "prn_contender");
    other = http_fx_worker_of(&fx, "prn_bystander", OTHER_TENANT);
    return 0;
}

/* A gauge of /metrics (-1 when absent). */
static long long metric(const char *base, const char *name)
{
    http_resp_t *r = call(base, "GET", "/metrics", NULL, NULL);
    char want[128];
    snprintf(want, sizeof want, "\n%s ", name);
    const char *at = strstr(r->body, want);
    long long v = at ? atoll(at + strlen(want)) : -1;
    http_resp_free(r);
    return v;
}

/* ---- the bystander: another tenant's inspect, in a loop -------------- */

typedef struct bystander {
    const char *base;
    char *body;
    bool stop; /* atomic */
    long long lat_us[20000];
    int n, not_ok;
    long first_bad_status;
    pthread_t thread;
} bystander_t;

static void *bystander_main(void *arg)
{
    bystander_t *b = arg;
    http_client_t *c = http_client_new(b->base, 10000);
    while (!__atomic_load_n(&b->stop, __ATOMIC_ACQUIRE) &&
           b->n < (int)(sizeof b->lat_us / sizeof b->lat_us[0])) {
        long long t0 = mono_us();
        http_resp_t *r =
            http_client_call(c, "POST", "/v1/leases/inspect", other, b->body, NULL, NULL);
        b->lat_us[b->n++] = mono_us() - t0;
        if (!r || r->status != 200) {
            if (b->not_ok++ == 0)
                b->first_bad_status = r ? r->status : -1;
        }
        http_resp_free(r);
        usleep(5000);
    }
    http_client_free(c);
    return NULL;
}

static void bystander_start(bystander_t *b, const char *base)
{
    memset(b, 0, sizeof *b);
    b->base = base;
    /* its own lease, inspected again and again */
    json_t *id = identity_json("bystander-target");
    json_object_set_new(id, "tenant_id", json_string(OTHER_TENANT));
    char *acq = dump(json_pack("{s:s, s:O, s:s, s:s, s:s}", "request_id", "bystander-acq",
                               "lock_identity", id, "service_instance_id", "inst_b", "execution_id",
                               "exec_b", "job_id", "job_b"));
    http_resp_t *r = call(base, "POST", "/v1/leases/acquire", other, acq);
    free(acq);
    assert_true(r->status == 200);
    http_resp_free(r);
    b->body = dump(json_pack("{s:o}", "lock_identity", id));
    assert_int_equal(pthread_create(&b->thread, NULL, bystander_main, b), 0);
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

/* Stops the loop; every answer must have been 200 (latency printed). */
static void bystander_check(bystander_t *b, const char *what)
{
    __atomic_store_n(&b->stop, true, __ATOMIC_RELEASE);
    pthread_join(b->thread, NULL);
    free(b->body);
    assert_true(b->n > 10);
    qsort(b->lat_us, (size_t)b->n, sizeof b->lat_us[0], cmp_ll);
    long long p50 = b->lat_us[b->n / 2], p99 = b->lat_us[(b->n * 99) / 100];
    printf("%s: other tenant's inspect: %d calls, %d not 200 (first %ld), p50 %.2f ms, "
           "p99 %.2f ms\n",
           what, b->n, b->not_ok, b->first_bad_status, p50 / 1000.0, p99 / 1000.0);
    assert_int_equal(b->not_ok, 0);
    /* the latency (target: p99 under 50 ms) is printed, not asserted:
     * tests observe results, benchmarks time, and a loaded CI machine or a
     * sanitizer build moves it by several times */
}

/* ---- 1. watches whose clients go away ------------------------------- */

#define WATCHERS 200
#define SOURCES 4

static void test_closed_watches_are_released(void **state)
{
    (void)state;
    const char *env[] = {"LEASE_WATCH_POLL_MS=1000", NULL};
    http_fx_serve(&fx, env);
    json_t *lease = acquire_lease(fx.base, attacker, "abuse-acq", "abuse-target");
    const char *lease_id = json_string_value(json_object_get(lease, "lease_id"));
    char request[1024];
    snprintf(request, sizeof request,
             "GET /v1/leases/%s/watch?wait_ms=60000 HTTP/1.1\r\nHost: leased\r\n"
             "Authorization: Bearer %s\r\n\r\n",
             lease_id, attacker);
    bystander_t *b = calloc(1, sizeof *b);
    assert_non_null(b);
    bystander_start(b, fx.base);
    usleep(200000);

    int port = leased_proc_port(fx.srv);
    raw_conn_t *conns[WATCHERS];
    for (int i = 0; i < WATCHERS; i++) {
        char src[32];
        snprintf(src, sizeof src, "127.0.0.%d", 2 + i % SOURCES);
        conns[i] = raw_connect(port, src);
        assert_non_null(conns[i]);
        assert_true(raw_send(conns[i], request));
    }
    /* every watch parked or answered; the parked ones stay within the
     * credential's bound */
    long long parked = -1, most = 0;
    for (int i = 0; i < 30; i++) {
        usleep(100000);
        parked = metric(fx.base, "leased_watches_waiting");
        most = parked > most ? parked : most;
    }
    printf("watches parked after %d requests of one credential: %lld (most seen %lld)\n", WATCHERS,
           parked, most);
    assert_true(most > 0);

    /* the clients go away: half with FIN, half with RST */
    long long closed_at = mono_us();
    for (int i = 0; i < WATCHERS; i++) {
        if (i % 2) {
            struct linger lg = {1, 0};
            setsockopt(raw_fd(conns[i]), SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        }
        raw_close(conns[i]);
    }
    long long waiting = -1, open = -1;
    while (mono_us() - closed_at < 10000000) {
        waiting = metric(fx.base, "leased_watches_waiting");
        open = metric(fx.base, "leased_http_connections_open");
        /* the metrics call itself and the bystander's connection */
        if (waiting == 0 && open <= 2)
            break;
        usleep(50000);
    }
    long long took_ms = (mono_us() - closed_at) / 1000;
    printf("after the close: %lld watches waiting, %lld connections open, after %lld ms\n", waiting,
           open, took_ms);
    assert_int_equal(waiting, 0);
    assert_true(open <= 2);
    assert_true(took_ms < 5000);
    assert_true(most <= WAITING_PER_CREDENTIAL);
    bystander_check(b, "watch flood");
    free(b);
    json_decref(lease);
    assert_int_equal(leased_proc_stop(fx.srv), 0);
    fx.srv = NULL;
}

/* ---- 2. an acquire that waits, whose client goes away --------------- */

static void test_gone_acquire_takes_nothing(void **state)
{
    (void)state;
    http_fx_serve(&fx, NULL);
    json_t *held = acquire_lease(fx.base, attacker, "gone-hold", "t-gone");
    json_t *b = parse_owned(acquire_body("gone-wait", "t-gone"));
    json_object_set_new(b, "wait_ms", json_integer(8000));
    json_object_set_new(b, "deadline_ms", json_integer(20000));
    char *body = dump(b);
    char *req = NULL;
    assert_true(asprintf(&req,
                         "POST /v1/leases/acquire HTTP/1.1\r\nHost: leased\r\n"
                         "Authorization: Bearer %s\r\nContent-Length: %zu\r\n\r\n%s",
                         contender, strlen(body), body) > 0);
    raw_conn_t *c = raw_connect(leased_proc_port(fx.srv), "127.0.0.2");
    assert_non_null(c);
    assert_true(raw_send(c, req));
    usleep(600000); /* it conflicts and waits */
    struct pollfd pfd = {raw_fd(c), POLLIN, 0};
    assert_int_equal(poll(&pfd, 1, 0), 0); /* still waiting: nothing answered */
    raw_close(c);
    usleep(200000);
    http_resp_t *r = call_owned(fx.base, "POST", "/v1/leases/release", attacker,
                                owner_body("gone-release", "t-gone", held));
    check_reply(r, 200, "lease_released", NULL);
    http_resp_free(r);
    /* longer than the acquire's longest pause between attempts (0.5 s) */
    usleep(1500000);
    if (!fx.valkey) {
        long long taken = testpg_query_int(
            fx.db,
            "SELECT count(*) FROM lease.locks WHERE target_id = 't-gone' AND state = 'active'");
        printf("active leases on t-gone after the waiting client left and the holder released: "
               "%lld\n",
               taken);
        assert_int_equal(taken, 0);
    }
    /* on either backend: no lease is held on t-gone, and the gone request
     * acquired nothing, as the audit records each acquisition (the
     * holder's own is its control) */
    json_t *active = http_active_lease(fx.base, attacker, "t-gone");
    if (active)
        fprintf(stderr, "t-gone held after the waiting client left: %s\n",
                json_string_value(json_object_get(active, "lease_id")));
    assert_null(active);
    const char *const held_acquired[] = {
        "request_id",  "gone-hold",      "event_type", "target_lease_acquire",
        "result_code", "lease_acquired", NULL};
    assert_int_equal(http_fx_audit_count(&fx, held_acquired), 1);
    const char *const gone_acquired[] = {
        "request_id",  "gone-wait",      "event_type", "target_lease_acquire",
        "result_code", "lease_acquired", NULL};
    assert_int_equal(http_fx_audit_count(&fx, gone_acquired), 0);
    free(req);
    free(body);
    json_decref(held);
    assert_int_equal(leased_proc_stop(fx.srv), 0);
    fx.srv = NULL;
}

/* ---- 3. idle connections that never send a request ------------------ */

#define IDLERS 1040

static void test_idle_connections_do_not_crowd_out(void **state)
{
    (void)state;
    const char *env[] = {"LEASE_MAX_CONNECTIONS=1024", NULL};
    http_fx_serve(&fx, env);
    int port = leased_proc_port(fx.srv);
    bystander_t *b = calloc(1, sizeof *b);
    assert_non_null(b);
    bystander_start(b, fx.base);
    usleep(200000);
    raw_conn_t **idle = calloc(IDLERS, sizeof *idle);
    assert_non_null(idle);
    int opened = 0;
    for (int i = 0; i < IDLERS; i++) {
        char src[32];
        snprintf(src, sizeof src, "127.0.0.%d", 2 + i % 5);
        idle[i] = raw_connect(port, src);
        if (idle[i])
            opened++;
    }
    printf("idle connections opened: %d\n", opened);
    /* a fresh client while they sit there: served, never 503 */
    for (int i = 0; i < 20; i++) {
        http_resp_t *r = call(fx.base, "GET", "/healthz", NULL, NULL);
        if (r->status != 200)
            fprintf(stderr, "fresh client: %ld %s\n", r->status, r->body);
        assert_int_equal(r->status, 200);
        http_resp_free(r);
        usleep(50000);
    }
    /* and while they are held */
    usleep(2000000);
    bystander_check(b, "idle flood");
    free(b);
    for (int i = 0; i < IDLERS; i++)
        if (idle[i])
            raw_close(idle[i]);
    free(idle);
    assert_int_equal(leased_proc_stop(fx.srv), 0);
    fx.srv = NULL;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_closed_watches_are_released),
        cmocka_unit_test(test_gone_acquire_takes_nothing),
        cmocka_unit_test(test_idle_connections_do_not_crowd_out),
    };
    return cmocka_run_group_tests(tests, setup, http_fx_teardown);
}
