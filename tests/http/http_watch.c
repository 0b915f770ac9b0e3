/*
 * http_watch.c - GET /v1/leases/{lease_id}/watch against a real leased and
 * its store, on either backend (LEASE_TEST_STORE; registered twice,
 * tests/CMakeLists.txt): a watch waits while its lease is active and
 * answers as soon as it ended (force-release, revoke: heard on LISTEN, or
 * on Valkey's SUBSCRIBE; ordinary release and expiry: found by the batched
 * poll, or pushed on Valkey; an end made in psql, not through leased at
 * all, on PostgreSQL), or with the active lease when its wait is over; the
 * polling-only mode and a listening session that is killed (the Postgres
 * backend terminated, the Valkey subscriber CLIENT KILLed) still wake it;
 * who may watch what; bad queries; the watch limit; a drain answers parked
 * watches at once. (A Valkey message lost while the subscriber is down:
 * tests/valkey/valkey_watch.c.)
 *
 * Nothing here asserts how fast: each test waits for the condition it
 * expects with a deadline far above any plausible latency, and the
 * measured latencies are printed (docs/scaling.md reports them).
 */
#include "http_common.h"

#include <signal.h>
#include <time.h>

static http_fx_t fx;
static const char *worker, *admin, *other_worker, *lease_only;

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A watch running on a thread of its own. */
typedef struct watcher {
    const char *base, *token;
    char path[256];
    http_resp_t *resp;
    int64_t answered_ms; /* monotonic, when the answer arrived */
    pthread_t thread;
} watcher_t;

static void *watcher_main(void *arg)
{
    watcher_t *w = arg;
    http_client_t *c = http_client_new(w->base, 120000);
    w->resp = http_client_call(c, "GET", w->path, w->token, NULL, NULL, NULL);
    w->answered_ms = mono_ms();
    http_client_free(c);
    return NULL;
}

static void watch_start(watcher_t *w, const char *base, const char *token, const char *lease_id,
                        long wait_ms)
{
    memset(w, 0, sizeof *w);
    w->base = base;
    w->token = token;
    snprintf(w->path, sizeof w->path, "/v1/leases/%s/watch?wait_ms=%ld", lease_id, wait_ms);
    assert_int_equal(pthread_create(&w->thread, NULL, watcher_main, w), 0);
}

static http_resp_t *watch_join(watcher_t *w)
{
    pthread_join(w->thread, NULL);
    assert_non_null(w->resp);
    return w->resp;
}

/* Waits (at most 10 s) until leased has `n` watches parked, from /metrics. */
static void wait_parked(const char *base, long n)
{
    char want[64];
    snprintf(want, sizeof want, "\nleased_watches_waiting %ld\n", n);
    for (int i = 0; i < 1000; i++) {
        http_resp_t *r = call(base, "GET", "/metrics", NULL, NULL);
        bool ok = strstr(r->body, want) != NULL;
        if (!ok && i == 999) {
            const char *at = strstr(r->body, "leased_watch");
            fprintf(stderr, "metrics: %.600s\n", at ? at : r->body);
        }
        http_resp_free(r);
        if (ok)
            return;
        usleep(10000);
    }
    fail_msg("leased never had %ld watches waiting", n);
}

static const char *lease_id_of(json_t *lease)
{
    return json_string_value(json_object_get(lease, "lease_id"));
}

static int setup(void **state)
{
    http_fx_open(&fx, state, "http_watch");
    worker = http_fx_worker(&fx, "prn_watch_worker");
    other_worker = http_fx_worker(&fx, "prn_watch_other");
    lease_only = http_fx_credential(&fx, "prn_watch_leaseonly", PROGRAM, "targets:lease", false);
    admin = http_fx_credential(&fx, "prn_watch_admin", "*",
                               "targets:read,targets:force-release,targets:revoke", true);
    const char *env[] = {"LEASE_WATCH_POLL_MS=200", NULL};
    http_fx_serve(&fx, env);
    return 0;
}

/* A parked watch, woken by an administrator's end of its lease. */
static void admin_end_wakes(const char *path, const char *code, const char *state_name,
                            const char *target)
{
    json_t *lease = acquire_lease(fx.base, worker, "w-acq", target);
    watcher_t w;
    watch_start(&w, fx.base, worker, lease_id_of(lease), 60000);
    wait_parked(fx.base, 1);
    int64_t sent = mono_ms();
    http_resp_t *a = call_owned(fx.base, "POST", path, admin,
                                admin_body("w-admin", target, lease, "watch test"));
    int64_t answered = mono_ms();
    check_reply(a, 200, code, NULL);
    http_resp_free(a);
    http_resp_t *r = watch_join(&w);
    check_reply(r, 200, "lease_inspected", NULL);
    json_t *l = lease_of(r);
    assert_string_equal(json_string_value(json_object_get(l, "lease_id")), lease_id_of(lease));
    assert_string_equal(json_string_value(json_object_get(l, "state")), state_name);
    printf("watch woke %lld ms after the %s was sent, %lld ms after its 200\n",
           (long long)(w.answered_ms - sent), code, (long long)(w.answered_ms - answered));
    http_resp_free(r);
    json_decref(lease);
}

static void test_force_release_wakes_watch(void **state)
{
    (void)state;
    admin_end_wakes("/v1/leases/force-release", "lease_released", "released", "watch_force");
}

static void test_revoke_wakes_watch(void **state)
{
    (void)state;
    admin_end_wakes("/v1/leases/revoke", "lease_revoked", "revoked", "watch_revoke");
}

/* An ordinary release sends no notification on PostgreSQL (migration
 * 0013): the batched poll finds it. (On Valkey it is published too.) */
static void test_release_found_by_poll(void **state)
{
    (void)state;
    json_t *lease = acquire_lease(fx.base, worker, "w-acq", "watch_release");
    watcher_t w;
    watch_start(&w, fx.base, worker, lease_id_of(lease), 60000);
    wait_parked(fx.base, 1);
    http_resp_t *rel = call_owned(fx.base, "POST", "/v1/leases/release", worker,
                                  owner_body("w-rel", "watch_release", lease));
    check_reply(rel, 200, "lease_released", NULL);
    http_resp_free(rel);
    http_resp_t *r = watch_join(&w);
    check_reply(r, 200, "lease_inspected", NULL);
    assert_string_equal(json_string_value(json_object_get(lease_of(r), "state")), "released");
    http_resp_free(r);
    json_decref(lease);
}

/* Ended in psql by an operator, no leased involved: heard all the same. */
static void test_end_in_psql_wakes_watch(void **state)
{
    (void)state;
    json_t *lease = acquire_lease(fx.base, worker, "w-acq", "watch_psql");
    watcher_t w;
    watch_start(&w, fx.base, worker, lease_id_of(lease), 60000);
    wait_parked(fx.base, 1);
    char sql[256];
    snprintf(sql, sizeof sql,
             "BEGIN ISOLATION LEVEL SERIALIZABLE; "
             "SELECT lease.admin_revoke('%s', 'operator in psql', 'INC-1'); COMMIT",
             lease_id_of(lease));
    assert_true(testpg_exec(fx.db, sql));
    http_resp_t *r = watch_join(&w);
    check_reply(r, 200, "lease_inspected", NULL);
    assert_string_equal(json_string_value(json_object_get(lease_of(r), "state")), "revoked");
    http_resp_free(r);
    json_decref(lease);
}

/* A lease that expires: the watch answers "expired" (the poll sees it
 * past expires_at; nobody has to sweep it first). */
static void test_expiry_wakes_watch(void **state)
{
    (void)state;
    http_resp_t *a = call_owned(
        fx.base, "POST", "/v1/leases/acquire", worker,
        dump(json_pack("{s:s, s:o, s:s, s:s, s:s, s:i}", "request_id", "w-exp", "lock_identity",
                       identity_json("watch_expiry"), "service_instance_id", "inst_1",
                       "execution_id", "exec_1", "job_id", "job_1", "ttl_ms", 1500)));
    check_reply(a, 200, "lease_acquired", NULL);
    watcher_t w;
    watch_start(&w, fx.base, worker, json_string_value(http_resp_get(a, "lease.lease_id")), 60000);
    http_resp_free(a);
    http_resp_t *r = watch_join(&w);
    check_reply(r, 200, "lease_inspected", NULL);
    assert_string_equal(json_string_value(json_object_get(lease_of(r), "state")), "expired");
    http_resp_free(r);
}

/* Nothing happens: the active lease comes back when the wait is over; a
 * lease that has already ended answers at once; wait_ms=0 is an inspect. */
static void test_wait_over_and_ended_already(void **state)
{
    (void)state;
    json_t *lease = acquire_lease(fx.base, worker, "w-acq", "watch_idle");
    char path[256];
    snprintf(path, sizeof path, "/v1/leases/%s/watch?wait_ms=300", lease_id_of(lease));
    int64_t start = mono_ms();
    http_resp_t *r = call(fx.base, "GET", path, worker, NULL);
    int64_t took = mono_ms() - start;
    check_reply(r, 200, "lease_inspected", NULL);
    assert_string_equal(json_string_value(json_object_get(lease_of(r), "state")), "active");
    assert_true(took >= 300); /* it did wait: the lease stayed active all along */
    http_resp_free(r);

    snprintf(path, sizeof path, "/v1/leases/%s/watch?wait_ms=0", lease_id_of(lease));
    r = call(fx.base, "GET", path, worker, NULL);
    check_reply(r, 200, "lease_inspected", NULL);
    assert_string_equal(json_string_value(json_object_get(lease_of(r), "state")), "active");
    http_resp_free(r);

    http_resp_t *rel = call_owned(fx.base, "POST", "/v1/leases/release", worker,
                                  owner_body("w-rel", "watch_idle", lease));
    check_reply(rel, 200, "lease_released", NULL);
    http_resp_free(rel);
    snprintf(path, sizeof path, "/v1/leases/%s/watch?wait_ms=60000", lease_id_of(lease));
    r = call(fx.base, "GET", path, worker, NULL);
    check_reply(r, 200, "lease_inspected", NULL);
    assert_string_equal(json_string_value(json_object_get(lease_of(r), "state")), "released");
    http_resp_free(r);
    json_decref(lease);
}

/* Authorised like inspect; a targets:lease-only credential watches only
 * its own leases; bad queries and ids are invalid requests. */
static void test_who_may_watch(void **state)
{
    (void)state;
    json_t *lease = acquire_lease(fx.base, worker, "w-acq", "watch_auth");
    json_t *own = acquire_lease(fx.base, lease_only, "w-acq-own", "watch_auth_own");
    char path[256];
    snprintf(path, sizeof path, "/v1/leases/%s/watch?wait_ms=0", lease_id_of(lease));

    http_resp_t *r = call(fx.base, "GET", path, NULL, NULL);
    check_reply(r, 401, "invalid_credential", NULL);
    http_resp_free(r);
    r = call(fx.base, "GET", path, other_worker, NULL); /* targets:read in scope */
    check_reply(r, 200, "lease_inspected", NULL);
    http_resp_free(r);
    r = call(fx.base, "GET", path, lease_only, NULL); /* someone else's lease */
    check_reply(r, 404, "lease_not_found", NULL);
    http_resp_free(r);
    snprintf(path, sizeof path, "/v1/leases/%s/watch?wait_ms=0", lease_id_of(own));
    r = call(fx.base, "GET", path, lease_only, NULL); /* its own */
    check_reply(r, 200, "lease_inspected", NULL);
    http_resp_free(r);
    r = call(fx.base, "GET", "/v1/leases/lease_doesnotexist/watch?wait_ms=0", worker, NULL);
    check_reply(r, 404, "lease_not_found", NULL);
    http_resp_free(r);

    static const struct {
        const char *query, *field;
    } bad[] = {
        {"?wait_ms=abc", "wait_ms"},        {"?wait_ms=-1", "wait_ms"},
        {"?wait_ms=3600001", "wait_ms"},    {"?wait_ms=", "wait_ms"},
        {"?wait=5", "query"},               {"?wait_ms=1&wait_ms=2", "query"},
        {"?wait_ms=1&other=x", "query"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(path, sizeof path, "/v1/leases/%s/watch%s", lease_id_of(lease), bad[i].query);
        r = call(fx.base, "GET", path, worker, NULL);
        check_reply(r, 400, "invalid_lease_request", NULL);
        assert_string_equal(http_resp_str(r, "field"), bad[i].field);
        http_resp_free(r);
    }
    r = call(fx.base, "GET", "/v1/leases/bad%20id/watch", worker, NULL);
    check_reply(r, 400, "invalid_lease_request", NULL);
    assert_string_equal(http_resp_str(r, "field"), "lease_id");
    http_resp_free(r);
    r = call(fx.base, "POST", path, worker, "{}");
    check_reply(r, 400, "invalid_lease_request", NULL);
    assert_string_equal(http_resp_str(r, "field"), "method");
    http_resp_free(r);
    json_decref(lease);
    json_decref(own);
}

/* Kills leased's listening connection: the Postgres backend of its watch
 * session (pg_terminate_backend), or on Valkey its subscriber (CLIENT KILL
 * TYPE pubsub, through the real redis-cli). Returns how many were killed. */
static long long kill_listener(void)
{
    if (!fx.valkey)
        return testpg_terminate_backends(fx.db, "leased-watch");
    char cmd[256];
    snprintf(cmd, sizeof cmd, "redis-cli -u '%s' CLIENT KILL TYPE pubsub", fx.db);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    long long killed = -1;
    if (fscanf(p, "%lld", &killed) != 1)
        killed = -1;
    assert_int_equal(pclose(p), 0);
    return killed;
}

/* The listening session dies (an operator's pg_terminate_backend or CLIENT
 * KILL, a failover): leased makes it again, and a watch parked across the
 * gap still wakes on the next end (heard on the new session, or found by
 * the poll that follows it). */
static void test_listener_killed(void **state)
{
    (void)state;
    json_t *lease = acquire_lease(fx.base, worker, "w-acq", "watch_killed");
    watcher_t w;
    watch_start(&w, fx.base, worker, lease_id_of(lease), 60000);
    wait_parked(fx.base, 1);
    assert_true(kill_listener() >= 1);
    http_resp_t *a = call_owned(fx.base, "POST", "/v1/leases/force-release", admin,
                                admin_body("w-admin", "watch_killed", lease, "after the kill"));
    check_reply(a, 200, "lease_released", NULL);
    http_resp_free(a);
    http_resp_t *r = watch_join(&w);
    check_reply(r, 200, "lease_inspected", NULL);
    assert_string_equal(json_string_value(json_object_get(lease_of(r), "state")), "released");
    http_resp_free(r);
    /* and the session is back: leased listens again */
    bool listening = false;
    for (int i = 0; i < 1000 && !listening; i++) {
        http_resp_t *m = call(fx.base, "GET", "/metrics", NULL, NULL);
        listening = strstr(m->body, "\nleased_watch_listening 1\n") != NULL;
        http_resp_free(m);
        if (!listening)
            usleep(10000);
    }
    assert_true(listening);
    json_decref(lease);
}

/* LEASE_WATCH_LISTEN=false: polling only, still woken; the limit of
 * parked watches answers 429; a drain answers parked watches at once
 * (active, as they are) and leased exits 0. */
static void test_polling_only_limit_and_drain(void **state)
{
    (void)state;
    const char *env[] = {"LEASE_WATCH_LISTEN=false", "LEASE_WATCH_POLL_MS=100",
                         "LEASE_MAX_WATCHES=1", NULL};
    leased_proc_t *srv = http_fx_start_leased(&fx, env);
    const char *base = leased_proc_url(srv);
    char *log = leased_proc_log(srv);
    assert_non_null(strstr(log, "polling only"));
    free(log);

    json_t *lease = acquire_lease(base, worker, "w-acq", "watch_poll_only");
    watcher_t w;
    watch_start(&w, base, worker, lease_id_of(lease), 60000);
    wait_parked(base, 1);
    http_resp_t *m = call(base, "GET", "/metrics", NULL, NULL);
    assert_non_null(strstr(m->body, "\nleased_watch_listening 0\n"));
    assert_non_null(strstr(m->body, "\nleased_watch_session_up 1\n"));
    http_resp_free(m);
    /* the second watch finds the limit */
    json_t *second = acquire_lease(base, worker, "w-acq-2", "watch_poll_only_2");
    char path[256];
    snprintf(path, sizeof path, "/v1/leases/%s/watch?wait_ms=60000", lease_id_of(second));
    http_resp_t *r = call(base, "GET", path, worker, NULL);
    check_reply(r, 429, "lease_rate_limited", NULL);
    http_resp_free(r);

    http_resp_t *a = call_owned(base, "POST", "/v1/leases/force-release", admin,
                                admin_body("w-admin", "watch_poll_only", lease, "poll"));
    check_reply(a, 200, "lease_released", NULL);
    http_resp_free(a);
    r = watch_join(&w);
    check_reply(r, 200, "lease_inspected", NULL);
    assert_string_equal(json_string_value(json_object_get(lease_of(r), "state")), "released");
    http_resp_free(r);

    /* drain with a watch parked: it answers the active lease at once */
    watch_start(&w, base, worker, lease_id_of(second), 60000);
    wait_parked(base, 1);
    leased_proc_signal(srv, SIGTERM);
    r = watch_join(&w);
    check_reply(r, 200, "lease_inspected", NULL);
    assert_string_equal(json_string_value(json_object_get(lease_of(r), "state")), "active");
    http_resp_free(r);
    assert_int_equal(leased_proc_wait(srv, 30000), 0);
    leased_proc_free(srv);
    json_decref(lease);
    json_decref(second);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_force_release_wakes_watch),
        cmocka_unit_test(test_revoke_wakes_watch),
        cmocka_unit_test(test_release_found_by_poll),
        cmocka_unit_test(test_end_in_psql_wakes_watch),
        cmocka_unit_test(test_expiry_wakes_watch),
        cmocka_unit_test(test_wait_over_and_ended_already),
        cmocka_unit_test(test_who_may_watch),
        cmocka_unit_test(test_listener_killed),
        cmocka_unit_test(test_polling_only_limit_and_drain),
    };
    static const http_pg_only_t pg_only[] = {
        {"test_end_in_psql_wakes_watch",
         "ends the lease in psql (on Valkey every end goes through a leased_v1 function: "
         "tests/valkey/valkey_watch.c)"},
        {NULL, NULL},
    };
    return http_fx_run_group("http_watch", tests, sizeof tests / sizeof tests[0], setup,
                             http_fx_teardown, pg_only);
}
