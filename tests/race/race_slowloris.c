/*
 * race_slowloris.c - connections that trickle (issue 10, defect 3).
 *
 * Many connections from one address send a header line now and then and
 * never finish their request. Meanwhile a client from another address
 * (127.0.0.2) must be served normally, /healthz included; connections past
 * the per-source cap are answered 429 and closed at once, past the global
 * cap 503 and closed at once (never left in the listen backlog); a trickled
 * request gets 408 once LEASE_RECEIVE_TIMEOUT_MS has passed since its first
 * byte, however slowly it kept sending. The tricklers change nothing in the
 * database. A client that closes its connections and reconnects at once is
 * not refused for connections it no longer has. LEASE_TEST_TRICKLERS sets
 * how many connections trickle (default 300; the measurement used
 * 1500).
 *
 * Both backends (issue 38): "the tricklers change nothing" is read from
 * the store itself, lease.locks and lease.idempotency on PostgreSQL, the
 * identity records and stored-result keys on Valkey (LEASE_TEST_STORE=
 * valkey); the rest is the door's alone.
 */
#include <poll.h>
#include <sys/resource.h>
#include <time.h>

#include "../http/http_common.h"
#include "raw_http.h"

#define PER_SOURCE 64
#define RECEIVE_TIMEOUT_MS 4000
#define ROUNDS 30 /* closes then a new connection at once */

static http_fx_t fx;
static const char *worker; /* owned by fx */

static long long mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int setup(void **state)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    http_fx_open(&fx, state, "race_slowloris");
    worker = http_fx_worker(&fx, "prn_slow");
    return 0;
}

/* The lock records of targets other than target: lease.locks' rows on
 * PostgreSQL; on Valkey the identity records lease:{leased}:id:<canonical
 * tuple> (never deleted, like a lease.locks row; the tuple's fifth member
 * is the target; docs/backends.md "Keys"), found by SCAN. */
static long long lock_records_except(const char *target)
{
    if (!fx.valkey) {
        char sql[256];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM lease.locks WHERE target_id <> '%s'",
                 target);
        return testpg_query_int(fx.db, sql);
    }
    static const char lua[] = "local n, cur = 0, '0' "
                              "repeat "
                              "  local r = redis.call('SCAN', cur, 'MATCH', ARGV[1] .. '*') "
                              "  cur = r[1] "
                              "  for _, k in ipairs(r[2]) do "
                              "    if cjson.decode(k:sub(#ARGV[1] + 1))[5] ~= ARGV[2] then "
                              "      n = n + 1 "
                              "    end "
                              "  end "
                              "until cur == '0' "
                              "return n";
    char prefix[64];
    http_fx_valkey_key(prefix, sizeof prefix, "id:");
    const char *args[] = {"EVAL", lua, "0", prefix, target, NULL};
    return test_store_valkey_cli_int(&fx.vk, args);
}

/* A JSON refusal of a connection: status, code, correlation id in both places. */
static void check_gate_reply(const raw_resp_t *r, int status, const char *code)
{
    assert_non_null(r);
    if (r->status != status)
        fprintf(stderr, "unexpected reply:\n%s%s\n", r->head, r->body);
    assert_int_equal(r->status, status);
    assert_string_equal(raw_str(r, "code"), code);
    const char *corr = raw_str(r, "correlation_id");
    assert_non_null(corr);
    assert_string_equal(raw_header(r, "X-Correlation-Id"), corr);
    if (status == 429 || status == 503)
        assert_non_null(raw_header(r, "Retry-After"));
}

typedef struct trickler {
    raw_conn_t *conn;
    bool refused;  /* answered at once (cap) */
    bool timedout; /* answered 408 */
    bool closed;
    int lines;
} trickler_t;

/* Opens n connections from 127.0.0.1 and sends each a request line. */
static trickler_t *open_tricklers(int port, int n)
{
    trickler_t *t = calloc((size_t)n, sizeof *t);
    assert_non_null(t);
    for (int i = 0; i < n; i++) {
        t[i].conn = raw_connect(port, "127.0.0.1");
        assert_non_null(t[i].conn);
        /* a refused connection may be closed before this lands: ignore */
        (void)raw_send(t[i].conn, "GET /healthz HTTP/1.1\r\nHost: leased\r\n");
    }
    return t;
}

/* One round over every trickler: reads what came back and sends one more
 * header line on those still open. */
static void trickle_round(trickler_t *t, int n)
{
    for (int i = 0; i < n; i++) {
        if (t[i].closed)
            continue;
        struct pollfd pfd = {raw_fd(t[i].conn), POLLIN, 0};
        if (poll(&pfd, 1, 0) > 0) {
            raw_resp_t *r = raw_read(t[i].conn, 2000);
            if (r && r->status == 429) {
                check_gate_reply(r, 429, "lease_rate_limited");
                t[i].refused = true;
            } else if (r && r->status == 408) {
                check_gate_reply(r, 408, "deadline_exceeded");
                t[i].timedout = true;
            } else if (r) {
                fprintf(stderr, "trickler %d: %d %s\n", i, r->status, r->body);
                fail();
            }
            raw_resp_free(r);
            t[i].closed = true;
            continue;
        }
        char line[64];
        snprintf(line, sizeof line, "X-Trickle-%d: %d\r\n", t[i].lines, i);
        if (!raw_send(t[i].conn, line))
            t[i].closed = true;
        t[i].lines++;
    }
}

static void test_trickling_source_cannot_starve_others(void **state)
{
    (void)state;
    const char *env[] = {"LEASE_MAX_CONNECTIONS_PER_SOURCE=64", "LEASE_RECEIVE_TIMEOUT_MS=4000",
                         "LEASE_MAX_CONNECTIONS=4096", NULL};
    http_fx_serve(&fx, env);
    int port = leased_proc_port(fx.srv);
    int n = getenv("LEASE_TEST_TRICKLERS") ? atoi(getenv("LEASE_TEST_TRICKLERS")) : 300;
    assert_true(n > PER_SOURCE);

    long long t0 = mono_ms();
    trickler_t *t = open_tricklers(port, n);
    long long opened = mono_ms();

    /* a client of another address: served while the tricklers trickle */
    http_client_t *legit_http = NULL;
    int served = 0;
    long long worst_ms = 0, sum_ms = 0;
    for (int round = 0; round < 3; round++) {
        trickle_round(t, n);
        for (int k = 0; k < 5; k++) {
            raw_conn_t *c = raw_connect(port, "127.0.0.2");
            assert_non_null(c);
            long long s = mono_ms();
            assert_true(raw_send(c, "GET /healthz HTTP/1.1\r\nHost: leased\r\n\r\n"));
            raw_resp_t *r = raw_read(c, 10000);
            long long took = mono_ms() - s;
            assert_non_null(r);
            assert_int_equal(r->status, 200);
            raw_resp_free(r);
            raw_close(c);
            served++;
            sum_ms += took;
            worst_ms = took > worst_ms ? took : worst_ms;
        }
        (void)legit_http;
        usleep(300000); /* the attack's own pace: a line every ~0.3 s */
    }
    /* a whole lease cycle from the other address */
    raw_conn_t *c = raw_connect(port, "127.0.0.2");
    char *body = acquire_body("legit-1", "t-legit");
    char *req = NULL;
    assert_true(asprintf(&req,
                         "POST /v1/leases/acquire HTTP/1.1\r\nHost: leased\r\n"
                         "Authorization: Bearer %s\r\nContent-Length: %zu\r\n\r\n%s",
                         worker, strlen(body), body) > 0);
    assert_true(raw_send(c, req));
    raw_resp_t *r = raw_read(c, 10000);
    assert_non_null(r);
    assert_int_equal(r->status, 200);
    assert_string_equal(raw_str(r, "code"), "lease_acquired");
    char *rel = owner_body("legit-2", "t-legit", json_object_get(r->json, "lease"));
    raw_resp_free(r);
    free(req);
    free(body);
    assert_true(asprintf(&req,
                         "POST /v1/leases/release HTTP/1.1\r\nHost: leased\r\n"
                         "Authorization: Bearer %s\r\nContent-Length: %zu\r\n\r\n%s",
                         worker, strlen(rel), rel) > 0);
    assert_true(raw_send(c, req));
    r = raw_read(c, 10000);
    assert_non_null(r);
    assert_int_equal(r->status, 200);
    raw_resp_free(r);
    raw_close(c);
    free(req);
    free(rel);

    /* the tricklers past the cap were answered 429 at once; the others
     * get 408 when their receive time is up, however much they send */
    long long until = mono_ms() + RECEIVE_TIMEOUT_MS + 10000;
    int open_left = n;
    while (open_left > 0 && mono_ms() < until) {
        trickle_round(t, n);
        open_left = 0;
        for (int i = 0; i < n; i++)
            open_left += !t[i].closed;
        usleep(200000);
    }
    int refused = 0, timedout = 0;
    for (int i = 0; i < n; i++) {
        refused += t[i].refused;
        timedout += t[i].timedout;
        raw_close(t[i].conn);
    }
    fprintf(stderr,
            "slowloris: %d trickling connections from 127.0.0.1 (opened in %lld ms): "
            "%d answered 429 at once, %d answered 408; 127.0.0.2 served %d/%d health checks "
            "(mean %lld ms, worst %lld ms) and a lease cycle; %lld ms in all\n",
            n, opened - t0, refused, timedout, served, served, sum_ms / served, worst_ms,
            mono_ms() - t0);
    assert_int_equal(open_left, 0);
    assert_int_equal(refused, n - PER_SOURCE);
    assert_int_equal(timedout, PER_SOURCE);
    free(t);

    /* the tricklers changed nothing: only the legit client's lease exists,
     * and only its two requests have stored results (the probes' controls:
     * they find the legit client's record and results) */
    assert_int_equal(lock_records_except("t-none"), 1);
    assert_int_equal(lock_records_except("t-legit"), 0);
    assert_int_equal(http_fx_stored_results(&fx, "legit-"), 2);
    assert_int_equal(http_fx_stored_results(&fx, ""), 2);
    assert_int_equal(leased_proc_stop(fx.srv), 0);
    fx.srv = NULL;
}

/* A connection from addr that leased has admitted: an answered request
 * proves it. */
static raw_conn_t *admitted(int port, const char *addr)
{
    raw_conn_t *c = raw_connect(port, addr);
    assert_non_null(c);
    assert_true(raw_send(c, "GET /healthz HTTP/1.1\r\nHost: leased\r\n\r\n"));
    raw_resp_t *r = raw_read(c, 10000);
    assert_non_null(r);
    assert_int_equal(r->status, 200);
    raw_resp_free(r);
    return c;
}

/* A connection whose request head arrived and whose body is still coming
 * (within its receive deadline): eviction never takes it. The head asks
 * for 100 Continue, so its answer proves leased has read the head (a head
 * still unread would look like a connection that sent nothing). */
static raw_conn_t *receiving(int port, const char *addr)
{
    raw_conn_t *c = raw_connect(port, addr);
    assert_non_null(c);
    assert_true(raw_send(c, "POST /v1/leases/inspect HTTP/1.1\r\nHost: leased\r\n"
                            "Expect: 100-continue\r\nContent-Length: 10\r\n\r\n"));
    raw_resp_t *r = raw_read(c, 10000);
    assert_non_null(r);
    assert_int_equal(r->status, 100);
    raw_resp_free(r);
    assert_true(raw_send(c, "{"));
    return c;
}

/* Past LEASE_MAX_CONNECTIONS, when every connection is receiving a request
 * (none idle, none that sent nothing, none trickling its head: those make
 * room, race_idle_eviction), a connection is answered 503 and closed at
 * once, from any address. */
static void test_global_cap_answers_at_once(void **state)
{
    (void)state;
    const char *env[] = {"LEASE_MAX_CONNECTIONS=16", "LEASE_MAX_CONNECTIONS_PER_SOURCE=16", NULL};
    http_fx_serve(&fx, env);
    int port = leased_proc_port(fx.srv);
    raw_conn_t *held[16];
    for (int i = 0; i < 16; i++)
        held[i] = receiving(port, "127.0.0.1");
    for (int k = 0; k < 3; k++) {
        /* nothing sent: the answer comes unasked */
        raw_conn_t *c = raw_connect(port, "127.0.0.2");
        assert_non_null(c);
        raw_resp_t *r = raw_read(c, 10000);
        check_gate_reply(r, 503, "lease_backend_unavailable");
        assert_string_equal(raw_header(r, "Connection"), "close");
        raw_resp_free(r);
        assert_true(raw_closed(c, 10000));
        raw_close(c);
    }
    /* one held connection closes: a new one is admitted again */
    raw_close(held[0]);
    long long until = mono_ms() + 10000;
    bool admitted = false;
    while (!admitted && mono_ms() < until) {
        raw_conn_t *c = raw_connect(port, "127.0.0.2");
        assert_non_null(c);
        assert_true(raw_send(c, "GET /healthz HTTP/1.1\r\nHost: leased\r\n\r\n") || true);
        raw_resp_t *r = raw_read(c, 10000);
        admitted = r && r->status == 200;
        raw_resp_free(r);
        raw_close(c);
        if (!admitted)
            usleep(50000); /* the close reaches the server asynchronously */
    }
    assert_true(admitted);
    for (int i = 1; i < 16; i++)
        raw_close(held[i]);
    http_resp_t *m = call(fx.base, "GET", "/metrics", NULL, NULL);
    assert_non_null(strstr(m->body, "leased_http_connections_refused_capacity_total"));
    http_resp_free(m);
    assert_int_equal(leased_proc_stop(fx.srv), 0);
    fx.srv = NULL;
}

/* leased_http_connections_open, read over a connection of its own from
 * 127.0.0.2 (which that gauge counts); -1 when unreadable. */
static long long open_connections(int port)
{
    raw_conn_t *c = raw_connect(port, "127.0.0.2");
    long long v = -1;
    if (c && raw_send(c, "GET /metrics HTTP/1.1\r\nHost: leased\r\n\r\n")) {
        raw_resp_t *r = raw_read(c, 10000);
        const char *at = r && r->body ? strstr(r->body, "\nleased_http_connections_open ") : NULL;
        if (at)
            v = atoll(at + strlen("\nleased_http_connections_open "));
        raw_resp_free(r);
    }
    raw_close(c);
    return v;
}

/* A client that closes its connections and opens a new one at once keeps
 * its per-source slots: the closes and the new connection often reach the
 * library's thread in one round, which admits the newcomer before it reads
 * the closes. Connections already shut down must not count against their
 * source, nor hung-up ones whose close is still unread. */
static void test_closed_connections_give_their_slots_back(void **state)
{
    (void)state;
    const char *env[] = {"LEASE_MAX_CONNECTIONS_PER_SOURCE=4", NULL};
    http_fx_serve(&fx, env);
    int port = leased_proc_port(fx.srv);
    int refused = 0;
    for (int round = 0; round < ROUNDS; round++) {
        raw_conn_t *held[4];
        for (int i = 0; i < 4; i++)
            held[i] = admitted(port, "127.0.0.1");
        for (int i = 0; i < 4; i++)
            raw_close(held[i]);
        raw_conn_t *c = raw_connect(port, "127.0.0.1");
        assert_non_null(c);
        assert_true(raw_send(c, "GET /healthz HTTP/1.1\r\nHost: leased\r\n\r\n"));
        raw_resp_t *r = raw_read(c, 10000);
        assert_non_null(r);
        if (r->status != 200)
            refused++;
        raw_resp_free(r);
        raw_close(c);
        /* the next round starts with the four slots free: wait for them */
        long long until = mono_ms() + 10000;
        while (mono_ms() < until && open_connections(port) != 1)
            usleep(2000);
    }
    fprintf(stderr, "closed then reconnected at once: %d of %d rounds refused\n", refused, ROUNDS);
    assert_int_equal(refused, 0);
    assert_int_equal(leased_proc_stop(fx.srv), 0);
    fx.srv = NULL;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trickling_source_cannot_starve_others),
        cmocka_unit_test(test_global_cap_answers_at_once),
        cmocka_unit_test(test_closed_connections_give_their_slots_back),
    };
    return cmocka_run_group_tests(tests, setup, http_fx_teardown);
}
