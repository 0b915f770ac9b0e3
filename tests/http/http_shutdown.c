/*
 * http_shutdown.c - SIGTERM drains: /readyz turns 503 first, requests in
 * flight are answered, every acknowledged acquire is in the database, and
 * leased exits 0. On Valkey (LEASE_TEST_STORE=valkey) the acknowledged
 * acquires are read in the store's keys (docs/backends.md "Keys"): each
 * identity record active with its lease and that lease's index key; the
 * renew a row lock holds inside the database on Postgres is held on its way
 * into the redis-server by a proxy of the test's own (hold_proxy_t).
 */
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
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

/* ------------------------------------------------------------------ */
/* On Valkey: a request held on its way into the store                 */

/* A TCP proxy between leased and its redis-server that holds the bytes of
 * the first request carrying marker (a request id) until hold_release:
 * the store call sent and unanswered, as a row lock holds it inside the
 * database on Postgres, while every other call (on leased's other
 * connections) is answered. */
typedef struct hold_proxy {
    int listen_fd;
    uint16_t port, upstream;
    const char *marker;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int held; /* requests held now */
    bool released;
    pthread_t acceptor;
} hold_proxy_t;

typedef struct hold_pump {
    hold_proxy_t *px;
    int from, to;
    bool requests; /* leased -> server */
} hold_pump_t;

static void *hold_pump_main(void *arg)
{
    hold_pump_t *pu = arg;
    hold_proxy_t *px = pu->px;
    char buf[65536];
    ssize_t n;
    while ((n = read(pu->from, buf, sizeof buf)) > 0) {
        if (pu->requests && memmem(buf, (size_t)n, px->marker, strlen(px->marker))) {
            pthread_mutex_lock(&px->mu);
            px->held++;
            pthread_cond_broadcast(&px->cv);
            while (!px->released)
                pthread_cond_wait(&px->cv, &px->mu);
            px->held--;
            pthread_mutex_unlock(&px->mu);
        }
        /* MSG_NOSIGNAL: a peer gone mid-pump ends the pump, not the test */
        if (send(pu->to, buf, (size_t)n, MSG_NOSIGNAL) != n)
            break;
    }
    shutdown(pu->from, SHUT_RDWR);
    shutdown(pu->to, SHUT_RDWR);
    return NULL;
}

static void *hold_conn_main(void *arg)
{
    hold_pump_t *up = arg; /* from: leased */
    int server = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons(up->px->upstream),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (server >= 0 && connect(server, (struct sockaddr *)&a, sizeof a) == 0) {
        up->to = server;
        hold_pump_t down = {up->px, server, up->from, false};
        pthread_t t;
        if (pthread_create(&t, NULL, hold_pump_main, &down) == 0) {
            hold_pump_main(up);
            pthread_join(t, NULL);
        }
    }
    if (server >= 0)
        close(server);
    close(up->from);
    free(up);
    return NULL;
}

static void *hold_accept_main(void *arg)
{
    hold_proxy_t *px = arg;
    for (;;) {
        int c = accept4(px->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0 && errno == EINTR)
            continue;
        if (c < 0)
            break; /* the listener was shut down */
        hold_pump_t *up = calloc(1, sizeof *up);
        assert_non_null(up);
        *up = (hold_pump_t){px, c, -1, true};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, hold_conn_main, up), 0);
        pthread_detach(t);
    }
    return NULL;
}

/* Listens on 127.0.0.1 (a free port), forwarding to 127.0.0.1:upstream. */
static void hold_proxy_start(hold_proxy_t *px, uint16_t upstream, const char *marker)
{
    *px = (hold_proxy_t){.upstream = upstream, .marker = marker};
    pthread_mutex_init(&px->mu, NULL);
    pthread_cond_init(&px->cv, NULL);
    px->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(px->listen_fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    assert_int_equal(bind(px->listen_fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(px->listen_fd, 64), 0);
    assert_int_equal(getsockname(px->listen_fd, (struct sockaddr *)&a, &len), 0);
    px->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&px->acceptor, NULL, hold_accept_main, px), 0);
}

static int hold_proxy_held(hold_proxy_t *px)
{
    pthread_mutex_lock(&px->mu);
    int held = px->held;
    pthread_mutex_unlock(&px->mu);
    return held;
}

/* Lets the held request (and any later one) go on to the server. */
static void hold_release(hold_proxy_t *px)
{
    pthread_mutex_lock(&px->mu);
    px->released = true;
    pthread_cond_broadcast(&px->cv);
    pthread_mutex_unlock(&px->mu);
}

/* Stops accepting; the connections end with leased's (it has exited). */
static void hold_proxy_stop(hold_proxy_t *px)
{
    hold_release(px);
    shutdown(px->listen_fd, SHUT_RDWR);
    pthread_join(px->acceptor, NULL);
    close(px->listen_fd);
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
    /* on Valkey leased reaches its redis-server through the holding proxy
     * (static: its connections' threads end after this function) */
    static hold_proxy_t px;
    leased_proc_t *srv;
    if (fx.valkey) {
        hold_proxy_start(&px, (uint16_t)atoi(strrchr(fx.vk.url, ':') + 1), "inflight-renew");
        char store[96];
        snprintf(store, sizeof store, "LEASE_STORE_URL=redis://127.0.0.1:%u", px.port);
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
        assert_true(test_wait_until(30000, hold_proxy_held(&px) > 0));
        assert_int_equal(hold_proxy_held(&px), 1);
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
        hold_release(&px);
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
        hold_proxy_stop(&px);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_acknowledged_operation_lost),
        cmocka_unit_test(test_in_flight_answered),
    };
    return cmocka_run_group_tests(tests, setup, http_fx_teardown);
}
