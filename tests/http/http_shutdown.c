/*
 * http_shutdown.c - SIGTERM drains: /readyz turns 503 first, requests in
 * flight are answered, every acknowledged acquire is in the database, and
 * leased exits 0. On Valkey (LEASE_TEST_STORE=valkey) the acknowledged
 * acquires are read in the store's keys (docs/backends.md "Keys"): each
 * identity record active with its lease and that lease's index key; the
 * renew a row lock holds inside the database on Postgres is held on its way
 * into the redis-server by the test proxy (tcp_proxy_hold: only the
 * connection whose request carries the renew's request id waits).
 */
#include <signal.h>
#include <time.h>

#include "http_common.h"
#include "tcp_proxy.h"

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
    int *stop;        /* __atomic */
    int *acked_total; /* __atomic: acknowledged acquires of all clients */
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
            __atomic_add_fetch(c->acked_total, 1, __ATOMIC_RELEASE);
        } else if (!r) {
            /* refused or cut: leased has closed its listener */
            c->refused++;
            break;
        } else if (r->status == 503) {
            /* draining: the answer closed the connection; open another
             * while leased still accepts them */
            c->refused++;
            http_client_free(h);
            h = http_client_new(c->base, 10000);
        } else {
            fprintf(stderr, "unexpected %ld %s\n", r->status, r->body);
            fail();
        }
        http_resp_free(r);
        if (__atomic_load_n(c->stop, __ATOMIC_ACQUIRE))
            break;
    }
    http_client_free(h);
    return NULL;
}

/* The identity records of the hammered targets (id: keys naming a
 * target "t-sd-..."): how many, then, a line each, the lease id of every
 * one that is active and whose lease's index key (l:<lease_id>) names that
 * record's identity (docs/backends.md "Keys"). ARGV[1]: the keys' prefix. */
#define SD_ACTIVE_LUA                                                                              \
    "local keys = redis.call('KEYS', ARGV[1] .. 'id:*\"t-sd-*') "                                  \
    "local out = {tostring(#keys)} "                                                               \
    "for _, k in ipairs(keys) do "                                                                 \
    "  local r = redis.call('HMGET', k, 'state', 'lease_id', 'c') "                                \
    "  if r[1] == 'active' and r[2] and redis.call('GET', ARGV[1] .. 'l:' .. r[2]) == r[3] then "  \
    "    out[#out + 1] = r[2] "                                                                    \
    "  end "                                                                                       \
    "end "                                                                                         \
    "return '\\n' .. table.concat(out, '\\n') .. '\\n'"

/* On Valkey: every lease id of ids (one a line, n of them) is active in
 * the store, as the query of lease.locks' state checks on Postgres;
 * returns how many identity records of the hammered targets it holds. */
static long long valkey_active_leases(const char *ids, int n)
{
    char prefix[64];
    http_fx_valkey_key(prefix, sizeof prefix, "");
    const char *args[] = {"EVAL", SD_ACTIVE_LUA, "0", prefix, NULL};
    char *text = test_store_valkey_cli(&fx.vk, args);
    assert_non_null(text);
    long long records = strtoll(text + 1, NULL, 10);
    int active = 0;
    for (const char *id = ids; id && *id;) {
        const char *nl = strchr(id, '\n');
        char needle[128];
        snprintf(needle, sizeof needle, "\n%.*s\n", (int)(nl - id), id);
        if (strstr(text, needle))
            active++;
        else
            fprintf(stderr, "acknowledged lease %.*s is not active in the store\n", (int)(nl - id),
                    id);
        id = nl + 1;
    }
    free(text);
    assert_int_equal(active, n);
    return records;
}

/* One /readyz on a new connection: its status, 0 when refused. On 503 it
 * must be the draining answer. */
static long readyz_on_new_connection(const char *base)
{
    http_resp_t *r = http_call(base, "GET", "/readyz", NULL, NULL);
    long status = r ? r->status : 0;
    if (status == 503) {
        assert_string_equal(http_resp_str(r, "reason"), "draining");
        assert_string_equal(http_resp_header(r, "Connection"), "close");
    } else if (status != 0 && status != 200) {
        fail_msg("/readyz answered %ld during shutdown", status);
    }
    http_resp_free(r);
    return status;
}

static void test_no_acknowledged_operation_lost(void **state)
{
    (void)state;
    /* No rate limit in the way: the clients go as fast as they can. The
     * drain delay is the window in which /readyz answers 503 on new
     * connections before the listener closes; the probe below polls
     * without pausing, so only being descheduled for all of it could miss
     * it. */
    /* clients reconnect at once after each draining 503: no admission
     * limit of one address or credential may answer in leased's place */
    const char *env[] = {"LEASE_DRAIN_DELAY_MS=2000", "LEASE_RATE_LIMIT=1000000/s",
                         "LEASE_SOURCE_RATE_LIMIT=1000000/s", NULL};
    leased_proc_t *srv = http_fx_start_leased(&fx, env);
    const char *base = leased_proc_url(srv);
    int stop = 0, acked_total = 0;
    client_t clients[CLIENTS];
    pthread_t th[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        clients[i] =
            (client_t){.index = i, .base = base, .stop = &stop, .acked_total = &acked_total};
        pthread_create(&th[i], NULL, hammer, &clients[i]);
    }
    /* the clients get work done before the signal */
    assert_true(
        test_wait_until(30000, __atomic_load_n(&acked_total, __ATOMIC_ACQUIRE) > 2 * CLIENTS));
    leased_proc_signal(srv, SIGTERM);
    /* readiness turns false before the listener closes: 200 until leased
     * takes the signal, then 503 "draining", never refused first */
    long ready = 200;
    assert_true(test_wait_until(30000, (ready = readyz_on_new_connection(base)) != 200));
    assert_int_equal(ready, 503);
    assert_int_equal(leased_proc_wait(srv, 30000), 0);
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    /* every acknowledged lease is active in the store (one query, one
     * script) */
    int acked = 0;
    char *ids = NULL;
    size_t ids_len = 0;
    FILE *list = open_memstream(&ids, &ids_len);
    for (int i = 0; i < CLIENTS; i++) {
        pthread_join(th[i], NULL);
        for (int k = 0; k < clients[i].acked; k++) {
            if (fx.valkey)
                fprintf(list, "%s\n", clients[i].lease_ids[k]);
            else
                fprintf(list, "%s'%s'", acked ? "," : "", clients[i].lease_ids[k]);
            free(clients[i].lease_ids[k]);
            acked++;
        }
        free(clients[i].lease_ids);
    }
    fclose(list);
    long long in_db = 0;
    if (!fx.valkey) {
        char *sql = NULL;
        size_t sql_len = 0;
        FILE *q = open_memstream(&sql, &sql_len);
        fprintf(q, "SELECT count(*) FROM lease.locks WHERE state = 'active' AND lease_id IN (%s)",
                acked ? ids : "NULL");
        fclose(q);
        assert_int_equal(testpg_query_int(fx.db, sql), acked);
        free(sql);
        in_db = testpg_query_int(fx.db, "SELECT count(*) FROM lease.locks "
                                        "WHERE target_id LIKE 't-sd-%'");
    } else {
        in_db = valkey_active_leases(ids, acked);
    }
    free(ids);
    printf("acknowledged %d acquires, every one active; %lld records of their targets\n", acked,
           in_db);
    assert_true(acked > 2 * CLIENTS);
    /* and nothing was committed that was not acknowledged to somebody: the
     * store holds at most the acknowledged leases plus one in flight per
     * client whose reply was lost when the connection closed (the identity
     * records of the hammered targets: rows of lease.locks, id: keys) */
    assert_true(in_db >= acked && in_db <= acked + CLIENTS);
    leased_proc_free(srv);
}

/* A renew waiting on a row lock in the database when SIGTERM arrives is
 * answered (and takes effect) once the lock goes away; an acquire waiting
 * for a holder is cut short with its conflict; a connection opened before
 * the signal reads /readyz 503 while the renew holds shutdown open. All
 * before leased exits 0. Every step waits for the state it needs. */
static void test_in_flight_answered(void **state)
{
    (void)state;
    /* debug: the waiter's conflicts are logged ("acquire conflict, attempt
     * N"). The long bounds only keep a broken build from hanging: each step
     * below waits for the state it needs, not for time to pass. */
    const char *env[] = {"LEASE_LOG_LEVEL=debug", "LEASE_MAX_WAIT_MS=60000",
                         "LEASE_MAX_DEADLINE_MS=60000", "LEASE_SHUTDOWN_GRACE_MS=60000", NULL};
    /* on Valkey leased reaches its redis-server through a proxy that holds
     * the renew's call (the only one carrying its request id) on its way
     * into the store: sent and unanswered, as a row lock holds it inside
     * the database on Postgres, while leased's other calls are answered
     * (static: its connections' threads may outlive this function) */
    static tcp_proxy_t px;
    leased_proc_t *srv;
    if (fx.valkey) {
        assert_true(tcp_proxy_start(&px, (uint16_t)atoi(strrchr(fx.vk.url, ':') + 1)));
        tcp_proxy_hold(&px, "inflight-renew");
        char store[96];
        snprintf(store, sizeof store, "LEASE_STORE_URL=redis://127.0.0.1:%u",
                 (unsigned)tcp_proxy_port(&px));
        const char *venv[8] = {store};
        for (size_t i = 0; env[i]; i++)
            venv[i + 1] = env[i];
        srv = leased_proc_start(NULL, venv);
    } else {
        srv = leased_proc_start(fx.db, env);
    }
    const char *base = leased_proc_url(srv);
    json_t *lease = acquire_lease(base, worker, "inflight-acq", "t-inflight");
    http_resp_t *a = acquire_call(base, worker, "inflight-held", "t-held");
    check_reply(a, 200, "lease_acquired", NULL);
    http_resp_free(a);

    PGconn *blocker = fx.valkey ? NULL : http_block_target(fx.db, "t-inflight");

    json_t *rb = parse_owned(owner_body("inflight-renew", "t-inflight", lease));
    json_object_set_new(rb, "deadline_ms", json_integer(60000));
    http_pending_t renew = {
        .base = base, .path = "/v1/leases/renew", .token = worker, .body = dump(rb)};
    json_t *wb = parse_owned(acquire_body("inflight-wait", "t-held"));
    json_object_set_new(wb, "wait_ms", json_integer(50000));
    json_object_set_new(wb, "deadline_ms", json_integer(60000));
    http_pending_t waiter = {
        .base = base, .path = "/v1/leases/acquire", .token = worker, .body = dump(wb)};
    http_pending_start(&renew);
    http_pending_start(&waiter);
    /* the renew is inside the database, blocked; on Valkey sent to the
     * store, held on the way, and not yet done there (no stored answer) */
    if (fx.valkey) {
        assert_true(test_wait_until(30000, tcp_proxy_held(&px) > 0));
        assert_int_equal(tcp_proxy_held(&px), 1);
        assert_int_equal(http_fx_stored_results(&fx, "inflight-renew"), 0);
    } else {
        assert_int_equal(http_wait_lock_waiter(fx.db), 1);
    }
    /* and the waiter has seen its first conflict */
    assert_true(
        test_wait_until(30000, leased_proc_log_count(srv, "acquire conflict, attempt 1,") == 1));
    /* a connection that exists before the signal */
    http_client_t *kept = http_client_new(base, 20000);
    http_resp_t *h = http_client_call(kept, "GET", "/healthz", NULL, NULL, NULL, NULL);
    assert_non_null(h);
    assert_int_equal(h->status, 200);
    http_resp_free(h);

    leased_proc_signal(srv, SIGTERM);
    /* shutdown cuts the wait short (after the drain delay, before waiting
     * for requests in flight) */
    assert_true(test_wait_until(30000, http_pending_done(&waiter)));
    assert_false(http_pending_done(&renew));
    assert_int_equal(leased_proc_log_count(srv, "received: draining"), 1);
    /* the blocked renew keeps leased serving the connections it has */
    h = http_client_call(kept, "GET", "/readyz", NULL, NULL, NULL, NULL);
    assert_non_null(h);
    assert_int_equal(h->status, 503);
    assert_string_equal(http_resp_str(h, "reason"), "draining");
    assert_string_equal(http_resp_header(h, "Connection"), "close");
    http_resp_free(h);
    http_client_free(kept);

    if (fx.valkey)
        tcp_proxy_release(&px);
    else
        http_unblock(blocker);
    http_pending_join(&renew);
    http_pending_join(&waiter);
    assert_int_equal(leased_proc_wait(srv, 30000), 0);
    check_reply(renew.resp, 200, "lease_renewed", NULL);
    if (fx.valkey) {
        /* taken effect: its answer stored (the i: key of its request id) */
        assert_int_equal(http_fx_stored_results(&fx, "inflight-renew"), 1);
    } else {
        char sql[256];
        snprintf(sql, sizeof sql,
                 "SELECT count(*) FROM lease.idempotency WHERE request_id = 'inflight-renew'");
        assert_int_equal(testpg_query_int(fx.db, sql), 1);
    }
    check_reply(waiter.resp, 409, "lease_conflict", NULL);
    http_resp_free(renew.resp);
    http_resp_free(waiter.resp);
    free(renew.body);
    free(waiter.body);
    json_decref(lease);
    leased_proc_free(srv);
    if (fx.valkey)
        tcp_proxy_stop(&px);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_acknowledged_operation_lost),
        cmocka_unit_test(test_in_flight_answered),
    };
    return cmocka_run_group_tests(tests, setup, http_fx_teardown);
}
