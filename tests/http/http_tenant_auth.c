/*
 * http_tenant_auth.c - what one tenant's credential can do to work in
 * flight and to other tenants, with default settings (one leased, the
 * credential cache at its default 2000 ms):
 *
 * - a credential revoked while its acquire waits (wait_ms) is answered 401
 *   within the cache window and is never granted the lease;
 * - a watch opened before the revocation answers 401 within the cache
 *   window (plus the watch's recheck period), not at its wait_ms;
 * - expires_at of the epoch or -infinity is expired;
 * - leasectl refuses an expiry it cannot represent;
 * - 64 clients of one tenant behind one address get no 429;
 * - one tenant's storm of refused, at-once retried waiting acquires does
 *   not make another tenant's requests from the same address 429;
 * - once the address's failure budget is spent, a wrong secret for a used
 *   id, an idle id and an unknown id get the same answer (no oracle).
 *   This one runs last: it leaves the address's budget spent.
 */
#include "http_common.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <time.h>

#define CACHE_MS 2000 /* LEASE_CREDENTIAL_CACHE_MS's default */
/* What a revocation may take: the cache window, the watch's recheck period
 * (a quarter of it) or an acquire's longest pause between attempts (500
 * ms), and a margin for a loaded machine. */
#define REVOKE_BOUND_MS (CACHE_MS + 500 + 1500)

static http_fx_t fx;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A credential whose token is owned by the caller (fx holds only 16). */
static char *credential(const char *principal, const char *tenant, char *id_out)
{
    return leased_proc_credential(fx.db,
                                  &(leased_cred_spec_t){.principal = principal,
                                                        .tenant = tenant,
                                                        .program = PROGRAM,
                                                        .capabilities = WORKER_CAPS},
                                  id_out);
}

/* Revokes a credential: lease.credential_revoke in a serializable
 * transaction (Postgres), `leasectl credential revoke` (Valkey: the
 * library's credential_revoke, as an operator revokes there). */
static void revoke_credential(const char *credential_id)
{
    if (fx.valkey) {
        http_fx_revoke_credential(&fx, credential_id);
        return;
    }
    char sql[256];
    snprintf(sql, sizeof sql,
             "BEGIN ISOLATION LEVEL SERIALIZABLE; SELECT lease.credential_revoke('%s'); COMMIT",
             credential_id);
    assert_true(testpg_exec(fx.db, sql));
}

/* An acquire body of tenant's identity, optionally waiting. */
static char *acquire_body_of(const char *tenant, const char *target, const char *request_id,
                             long wait_ms)
{
    json_t *id = identity_json_of(tenant, target);
    json_t *o =
        json_pack("{s:s, s:o, s:s, s:s, s:s}", "request_id", request_id, "lock_identity", id,
                  "service_instance_id", "inst_1", "execution_id", "exec_1", "job_id", "job_1");
    if (wait_ms > 0)
        json_object_set_new(o, "wait_ms", json_integer(wait_ms));
    return dump(o);
}

/* One call from a thread of its own (GET or POST), timed. */
typedef struct timed_call {
    const char *method, *path, *token;
    char *body; /* borrowed, may be NULL */
    http_resp_t *resp;
    int64_t answered_ms;
    int done;
    pthread_t thread;
} timed_call_t;

static void *timed_call_main(void *arg)
{
    timed_call_t *t = arg;
    http_client_t *c = http_client_new(fx.base, 60000);
    t->resp = http_client_call(c, t->method, t->path, t->token, t->body, NULL, NULL);
    t->answered_ms = now_ms();
    http_client_free(c);
    __atomic_store_n(&t->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static bool timed_done(timed_call_t *t)
{
    return __atomic_load_n(&t->done, __ATOMIC_ACQUIRE) != 0;
}

/* Counts the identity records (each identity's last lease, live or
 * ended) and history records (ended leases) whose owner credential is
 * ARGV[1] (docs/backends.md "Keys"): an ended lease counts twice, which
 * "never granted" (0) does not mind. */
#define VALKEY_OWNED_BY_LUA                                                                        \
    "local n = 0 "                                                                                 \
    "for _, pattern in ipairs({KEYS[1] .. 'id:*', KEYS[1] .. 'h:*'}) do "                          \
    "  for _, k in ipairs(redis.call('KEYS', pattern)) do "                                        \
    "    if redis.call('HGET', k, 'owner_cred') == ARGV[1] then n = n + 1 end "                    \
    "  end "                                                                                       \
    "end "                                                                                         \
    "return n"

/* Whether credential_id was ever granted a lease, live or ended (0: never):
 * rows of lease.locks and lease.history (Postgres), identity and history
 * records (Valkey). */
static long long owned_by(const char *credential_id)
{
    if (fx.valkey) {
        char prefix[64];
        http_fx_valkey_key(prefix, sizeof prefix, "");
        const char *args[] = {"EVAL", VALKEY_OWNED_BY_LUA, "1", prefix, credential_id, NULL};
        char *out = test_store_valkey_cli(&fx.vk, args);
        assert_non_null(out);
        long long n = atoll(out);
        free(out);
        return n;
    }
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT (SELECT count(*) FROM lease.locks WHERE owner_credential_id = '%s') + "
             "(SELECT count(*) FROM lease.history WHERE owner_credential_id = '%s')",
             credential_id, credential_id);
    return testpg_query_int(fx.db, sql);
}

static int setup(void **state)
{
    http_fx_open(&fx, state, "http_tenant_auth");
    http_fx_serve(&fx, NULL); /* defaults throughout */
    return 0;
}

/* Finding: an acquire waiting on a held lock, its credential revoked
 * mid-wait, was granted the lock when it came free. */
static void test_revoked_while_waiting_acquire(void **state)
{
    (void)state;
    char holder_id[32], waiter_id[32];
    char *holder = credential("prn_holder", TENANT, holder_id);
    char *waiter = credential("prn_waiter", TENANT, waiter_id);
    json_t *lease = acquire_lease(fx.base, holder, "wait-hold", "t-wait");

    timed_call_t t = {.method = "POST", .path = "/v1/leases/acquire", .token = waiter};
    t.body = acquire_body_of(TENANT, "t-wait", "wait-1", 10000);
    pthread_create(&t.thread, NULL, timed_call_main, &t);
    usleep(400000); /* it is waiting: the lock is held */
    assert_false(timed_done(&t));
    revoke_credential(waiter_id);
    int64_t revoked_ms = now_ms();

    /* the lock comes free once the cache window has passed (and a margin
     * for an attempt that began just before its end): from then on the
     * waiter's credential is known revoked everywhere */
    while (!timed_done(&t) && now_ms() - revoked_ms < CACHE_MS + 500)
        usleep(10000);
    http_resp_t *r = call_owned(fx.base, "POST", "/v1/leases/release", holder,
                                owner_body("wait-rel", "t-wait", lease));
    check_reply(r, 200, "lease_released", NULL);
    http_resp_free(r);

    pthread_join(t.thread, NULL);
    assert_non_null(t.resp);
    int64_t took = t.answered_ms - revoked_ms;
    fprintf(stderr, "revoked waiting acquire answered %ld %s %lld ms after the revocation\n",
            t.resp->status, t.resp->json ? http_resp_str(t.resp, "code") : "?", (long long)took);
    check_reply(t.resp, 401, "invalid_credential", NULL);
    assert_true(took < REVOKE_BOUND_MS);
    /* nothing was ever granted to it */
    assert_int_equal(owned_by(waiter_id), 0);
    http_resp_free(t.resp);
    free(t.body);
    json_decref(lease);
    free(holder);
    free(waiter);
}

/* Finding: a watch opened before the revocation answered at its wait_ms. */
static void test_revoked_while_watching(void **state)
{
    (void)state;
    char id[32];
    char *watcher = credential("prn_watcher", TENANT, id);
    json_t *lease = acquire_lease(fx.base, watcher, "watch-acq", "t-watch");
    char path[256];
    snprintf(path, sizeof path, "/v1/leases/%s/watch?wait_ms=20000",
             json_string_value(json_object_get(lease, "lease_id")));

    timed_call_t t = {.method = "GET", .path = path, .token = watcher};
    pthread_create(&t.thread, NULL, timed_call_main, &t);
    usleep(400000); /* parked: the lease is active */
    assert_false(timed_done(&t));
    revoke_credential(id);
    int64_t revoked_ms = now_ms();
    pthread_join(t.thread, NULL);
    assert_non_null(t.resp);
    int64_t took = t.answered_ms - revoked_ms;
    fprintf(stderr, "watch of a revoked credential answered %ld %s %lld ms after the revocation\n",
            t.resp->status, t.resp->json ? http_resp_str(t.resp, "code") : "?", (long long)took);
    check_reply(t.resp, 401, "invalid_credential", NULL);
    assert_true(took < REVOKE_BOUND_MS);
    http_resp_free(t.resp);
    json_decref(lease);
    free(watcher);
}

/* Sets a credential's expiry as the store holds it: expires_at of lease.
 * credentials (Postgres: an instant's text), of the credential's record
 * (Valkey: Unix ms). */
static void set_credential_expiry(const char *credential_id, const char *pg, const char *valkey)
{
    if (fx.valkey) {
        char key[128], suffix[64];
        snprintf(suffix, sizeof suffix, "cred:%s", credential_id);
        http_fx_valkey_key(key, sizeof key, suffix);
        const char *set[] = {"HSET", key, "expires_at", valkey, NULL};
        char *out = test_store_valkey_cli(&fx.vk, set);
        assert_non_null(out);
        assert_string_equal(out, "0\n"); /* a member the record has */
        free(out);
        return;
    }
    char sql[256];
    snprintf(sql, sizeof sql,
             "UPDATE lease.credentials SET expires_at = '%s' WHERE credential_id = '%s'", pg,
             credential_id);
    assert_true(testpg_exec(fx.db, sql));
}

/* How many credential records the store holds: rows of lease.credentials
 * (Postgres), credential hashes (Valkey, whose set of ids must agree). */
static long long credential_records(void)
{
    if (!fx.valkey)
        return testpg_query_int(fx.db, "SELECT count(*) FROM lease.credentials");
    char pattern[64], index[64];
    http_fx_valkey_key(pattern, sizeof pattern, "cred:*");
    http_fx_valkey_key(index, sizeof index, "creds");
    const char *args[] = {"EVAL",
                          "local n = #redis.call('KEYS', ARGV[1]) "
                          "if n ~= redis.call('SCARD', KEYS[1]) then return -1 end "
                          "return n",
                          "1",
                          index,
                          pattern,
                          NULL};
    char *out = test_store_valkey_cli(&fx.vk, args);
    assert_non_null(out);
    long long n = atoll(out);
    free(out);
    assert_true(n >= 0);
    return n;
}

/* Finding: the epoch (0 ms, once "no expiry") and -infinity did not expire. */
static void test_past_instants_are_expired(void **state)
{
    (void)state;
    const char *past[] = {"1970-01-01T00:00:00Z", "-infinity", "2000-01-01T00:00:00Z"};
    /* the same instants in Unix ms (Valkey's records; Lua reads -inf) */
    const char *past_ms[] = {"0", "-inf", "946684800000"};
    for (size_t i = 0; i < sizeof past / sizeof past[0]; i++) {
        char id[32], principal[32];
        snprintf(principal, sizeof principal, "prn_past_%zu", i);
        char *token = credential(principal, TENANT, id);
        /* set before its first use: nothing is cached */
        set_credential_expiry(id, past[i], past_ms[i]);
        http_resp_t *r = acquire_call(fx.base, token, "past-1", "t-past");
        if (r->status != 401)
            fprintf(stderr, "expires_at %s answered %ld\n", past[i], r->status);
        check_reply(r, 401, "invalid_credential", NULL);
        http_resp_free(r);
        free(token);
    }
    assert_int_equal(http_fx_lock_records(&fx, "t-past"), 0);
}

/* leasectl credential create with an expiry beyond what can be stored:
 * a typed refusal (exit 65 or 2), nothing created. */
static void test_leasectl_refuses_out_of_range_expiry(void **state)
{
    (void)state;
    long long before = credential_records();
    const char *spans[] = {"3651d", "99999999999d", "106751991167301d"};
    for (size_t i = 0; i < sizeof spans / sizeof spans[0]; i++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            int devnull = open("/dev/null", O_WRONLY);
            dup2(devnull, STDOUT_FILENO);
            dup2(devnull, STDERR_FILENO);
            execl(LEASE_TEST_LEASECTL, LEASE_TEST_LEASECTL, "credential", "create", "--principal",
                  "prn_far", "--client", "cl_far", "--tenant", TENANT, "--program", PROGRAM,
                  "--capability", "targets:lease", "--expires-in", spans[i], "--database-url",
                  fx.db, (char *)NULL);
            _exit(127);
        }
        int st = 0;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st));
        assert_true(WEXITSTATUS(st) == 65 || WEXITSTATUS(st) == 2);
    }
    assert_int_equal(credential_records(), before);
}

/* ---- many clients behind one address ----------------------------------- */

#define CLIENTS 64
#define RUN_MS 3000
/* Each client sends one request every PACE_MS: 64 of them send 4,000 a
 * second, a busy fleet, above the old per-address budget (1,000/s) and the
 * old per-credential rate (200/s) these tests were written for, and below
 * today's default per-credential rate (LEASE_RATE_LIMIT, 5,000/s): unpaced,
 * a fast enough machine outran the default rate itself, which is the limit
 * doing its job, not the finding. */
#define PACE_MS 16

typedef struct client_run {
    const char *token;
    char lease_path[160];
    long ok, limited, other;
    pthread_t thread;
} client_run_t;

static void *client_main(void *arg)
{
    client_run_t *c = arg;
    http_client_t *h = http_client_new(fx.base, 30000);
    int64_t start = now_ms(), end = start + RUN_MS;
    for (long i = 0; now_ms() < end; i++) {
        int64_t due = start + i * PACE_MS, early = due - now_ms();
        if (early > 0)
            nanosleep(&(struct timespec){.tv_sec = early / 1000,
                                         .tv_nsec = (early % 1000) * 1000000L},
                      NULL);
        /* its own lease (a database read), and every other time a lease id
         * that cannot exist (400, answered without the database: a client
         * as fast as the address's old budget per second) */
        const char *path = i % 2 ? "/v1/leases/bad~id" : c->lease_path;
        long want = i % 2 ? 400 : 200;
        http_resp_t *r = http_client_call(h, "GET", path, c->token, NULL, NULL, NULL);
        long st = r ? r->status : 0;
        if (st == want)
            c->ok++;
        else if (st == 429 && c->limited++ == 0)
            /* the first refusal's reason, for whoever reads a failure */
            fprintf(stderr, "429 for %s: %s\n", path, r->body ? r->body : "");
        else if (st != 429 && c->other++ == 0)
            fprintf(stderr, "unexpected %ld for %s: %s\n", st, path, r ? r->body : "(none)");
        http_resp_free(r);
    }
    http_client_free(h);
    return NULL;
}

/* Finding: with defaults, one authenticated worker host got 429 on half
 * its requests: the address's bucket before authentication paid for them. */
static void test_many_clients_one_address(void **state)
{
    (void)state;
    static client_run_t runs[CLIENTS];
    static char *tokens[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        char principal[32], target[32];
        snprintf(principal, sizeof principal, "prn_fleet_%d", i);
        snprintf(target, sizeof target, "t-fleet-%d", i);
        tokens[i] = credential(principal, TENANT, NULL);
        json_t *lease = acquire_lease(fx.base, tokens[i], "fleet-acq", target);
        runs[i].token = tokens[i];
        snprintf(runs[i].lease_path, sizeof runs[i].lease_path, "/v1/leases/%s",
                 json_string_value(json_object_get(lease, "lease_id")));
        json_decref(lease);
    }
    for (int i = 0; i < CLIENTS; i++)
        pthread_create(&runs[i].thread, NULL, client_main, &runs[i]);
    long ok = 0, limited = 0, other = 0;
    for (int i = 0; i < CLIENTS; i++) {
        pthread_join(runs[i].thread, NULL);
        ok += runs[i].ok;
        limited += runs[i].limited;
        other += runs[i].other;
        free(tokens[i]);
    }
    fprintf(stderr, "%d clients of one tenant, one address, %d ms: %ld ok, %ld 429, %ld other\n",
            CLIENTS, RUN_MS, ok, limited, other);
    assert_int_equal(limited, 0);
    assert_int_equal(other, 0);
    assert_true(ok > CLIENTS);
}

/* The same fleet sharing one credential (the usual deployment: one
 * credential per program): with defaults, its per-credential rate must not
 * refuse it either (LEASE_RATE_LIMIT was 200/s: most of these were 429). */
static void test_many_clients_one_credential(void **state)
{
    (void)state;
    static client_run_t runs[CLIENTS];
    char *token = credential("prn_fleet_shared", TENANT, NULL);
    for (int i = 0; i < CLIENTS; i++) {
        char target[32], request_id[32];
        snprintf(target, sizeof target, "t-shared-%d", i);
        snprintf(request_id, sizeof request_id, "shared-acq-%d", i);
        json_t *lease = acquire_lease(fx.base, token, request_id, target);
        runs[i].token = token;
        snprintf(runs[i].lease_path, sizeof runs[i].lease_path, "/v1/leases/%s",
                 json_string_value(json_object_get(lease, "lease_id")));
        json_decref(lease);
    }
    for (int i = 0; i < CLIENTS; i++)
        pthread_create(&runs[i].thread, NULL, client_main, &runs[i]);
    long ok = 0, limited = 0, other = 0;
    for (int i = 0; i < CLIENTS; i++) {
        pthread_join(runs[i].thread, NULL);
        ok += runs[i].ok;
        limited += runs[i].limited;
        other += runs[i].other;
    }
    free(token);
    fprintf(stderr,
            "%d clients sharing one credential, one address, %d ms: %ld ok, %ld 429, %ld other\n",
            CLIENTS, RUN_MS, ok, limited, other);
    assert_int_equal(limited, 0);
    assert_int_equal(other, 0);
    assert_true(ok > CLIENTS);
}

/* ---- one tenant's storm, another tenant's requests ---------------------- */

/* Below LEASE_MAX_CONNECTIONS_PER_SOURCE (256): the storm is about the
 * request budget, not the connection cap. */
#define STORMERS 200

typedef struct storm {
    const char *token;
    int64_t end_ms;
    long sent, limited;
    pthread_t thread;
} storm_t;

static void *storm_main(void *arg)
{
    storm_t *s = arg;
    http_client_t *h = http_client_new(fx.base, 30000);
    char *body = acquire_body_of("tenant-a", "t-storm", "storm-1", 2000);
    while (now_ms() < s->end_ms) {
        /* a waiting acquire of a held lock: refused with 429 past the
         * waiting shares, and retried at once */
        http_resp_t *r =
            http_client_call(h, "POST", "/v1/leases/acquire", s->token, body, NULL, NULL);
        s->sent++;
        if (r && r->status == 429)
            s->limited++;
        http_resp_free(r);
    }
    free(body);
    http_client_free(h);
    return NULL;
}

/* Finding: tenant A's retry storm made tenant B's acquires from the same
 * address answer 429. */
static void test_storm_spares_other_tenant(void **state)
{
    (void)state;
    char *a_holder = credential("prn_a_holder", "tenant-a", NULL);
    char *a_storm = credential("prn_a_storm", "tenant-a", NULL);
    char *b = credential("prn_b", "tenant-b", NULL);
    http_resp_t *r = call_owned(fx.base, "POST", "/v1/leases/acquire", a_holder,
                                acquire_body_of("tenant-a", "t-storm", "storm-hold", 0));
    check_reply(r, 200, "lease_acquired", NULL);
    http_resp_free(r);
    /* b is known to the cache before the storm, as a working client is */
    r = call_owned(fx.base, "POST", "/v1/leases/acquire", b,
                   acquire_body_of("tenant-b", "t-b-warm", "b-warm", 0));
    check_reply(r, 200, "lease_acquired", NULL);
    http_resp_free(r);

    static storm_t storm[STORMERS];
    int64_t end = now_ms() + 4000;
    for (int i = 0; i < STORMERS; i++) {
        storm[i] = (storm_t){.token = a_storm, .end_ms = end};
        pthread_create(&storm[i].thread, NULL, storm_main, &storm[i]);
    }
    usleep(500000); /* the storm is on */
    int b_ok = 0, b_limited = 0;
    http_client_t *h = http_client_new(fx.base, 30000);
    for (int i = 0; i < 20; i++) {
        char target[32], rid[32];
        snprintf(target, sizeof target, "t-b-%d", i);
        snprintf(rid, sizeof rid, "b-%d", i);
        char *body = acquire_body_of("tenant-b", target, rid, 0);
        r = http_client_call(h, "POST", "/v1/leases/acquire", b, body, NULL, NULL);
        free(body);
        assert_non_null(r);
        if (r->status == 200)
            b_ok++;
        else if (r->status == 429)
            b_limited++;
        else
            fprintf(stderr, "tenant b: %ld %s\n", r->status, r->body);
        http_resp_free(r);
        usleep(100000);
    }
    http_client_free(h);
    long sent = 0, limited = 0;
    for (int i = 0; i < STORMERS; i++) {
        pthread_join(storm[i].thread, NULL);
        sent += storm[i].sent;
        limited += storm[i].limited;
    }
    fprintf(stderr,
            "tenant a's storm: %ld requests, %ld answered 429; tenant b: %d of 20 ok, %d "
            "answered 429\n",
            sent, limited, b_ok, b_limited);
    assert_true(limited > 1000); /* it was a storm of refusals */
    assert_int_equal(b_limited, 0);
    assert_int_equal(b_ok, 20);
    free(a_holder);
    free(a_storm);
    free(b);
}

/* ---- no oracle once the failure budget is spent -------------------------- */

/* The reply's status, code and body without what differs per request. */
static char *answer_of(const http_resp_t *r)
{
    json_t *copy = json_deep_copy(r->json);
    json_object_del(copy, "correlation_id");
    json_object_del(copy, "retry_after_ms");
    json_object_set_new(copy, "http_status", json_integer(r->status));
    char *s = json_dumps(copy, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(copy);
    return s;
}

/* token with its secret's first character changed (still well-formed) */
static char *wrong_secret(const char *token)
{
    char *t = strdup(token);
    size_t at = strlen(t) - 43;
    t[at] = t[at] == 'A' ? 'B' : 'A';
    return t;
}

/* Spends the address's failure budget (10/s, burst 10, by default) with
 * ids never seen before, back to back. */
static void spend_budget(http_client_t *h, int n)
{
    for (int i = 0; i < n; i++) {
        char tok[96];
        snprintf(tok, sizeof tok, "lsk_key_%c%c%.24s_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
                 'a' + i % 26, 'a' + i / 26, "bcdefghijklmnopqrstuvwxyz");
        char *body = acquire_body("oracle-spend", "t-oracle");
        http_resp_t *r = http_client_call(h, "POST", "/v1/leases/acquire", tok, body, NULL, NULL);
        free(body);
        assert_non_null(r);
        assert_true(r->status == 401 || r->status == 429);
        http_resp_free(r);
    }
}

/* Finding: a wrong secret on a recently used id answered 401, an idle or
 * unknown id 429.
 *
 * The budget refills (one failure per 100 ms by default), so a probe may
 * find a token that came back while the machine was slow and answer 401
 * where the one before it answered 429: that says nothing about the
 * credential. An oracle answers differently for the used id every time;
 * so each attempt spends the budget again and sends the three probes back
 * to back, and the test fails only if no attempt of ATTEMPTS answered the
 * three alike. */
#define ATTEMPTS 5
static void test_no_oracle_when_budget_spent(void **state)
{
    (void)state;
    char *used = credential("prn_used", TENANT, NULL);
    char *idle = credential("prn_idle", TENANT, NULL);
    http_resp_t *r = acquire_call(fx.base, used, "oracle-warm", "t-oracle");
    check_reply(r, 200, "lease_acquired", NULL); /* in the cache now */
    http_resp_free(r);

    char *used_wrong = wrong_secret(used);
    char *idle_wrong = wrong_secret(idle);
    const char *unknown =
        "lsk_key_zzzzzzzzzzzzzzzzzzzzzzzzzz_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
    http_client_t *h = http_client_new(fx.base, 30000);
    const char *probes[] = {used_wrong, idle_wrong, unknown};
    const char *names[] = {"wrong secret, used id", "wrong secret, idle id", "unknown id"};
    bool alike = false;
    for (int attempt = 0; attempt < ATTEMPTS && !alike; attempt++) {
        spend_budget(h, 20);
        char *answers[3];
        for (size_t i = 0; i < 3; i++) {
            char *body = acquire_body("oracle-probe", "t-oracle");
            r = http_client_call(h, "POST", "/v1/leases/acquire", probes[i], body, NULL, NULL);
            free(body);
            assert_non_null(r);
            assert_non_null(r->json);
            answers[i] = answer_of(r);
            fprintf(stderr, "attempt %d, budget spent, %s: %s\n", attempt + 1, names[i],
                    answers[i]);
            assert_true(r->status == 401 || r->status == 429);
            check_reply(r, r->status,
                        r->status == 401 ? "invalid_credential" : "lease_rate_limited", NULL);
            http_resp_free(r);
        }
        alike = strcmp(answers[0], answers[1]) == 0 && strcmp(answers[1], answers[2]) == 0;
        for (size_t i = 0; i < 3; i++)
            free(answers[i]);
    }
    assert_true(alike);
    http_client_free(h);
    free(used_wrong);
    free(idle_wrong);
    free(used);
    free(idle);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_revoked_while_waiting_acquire),
        cmocka_unit_test(test_revoked_while_watching),
        cmocka_unit_test(test_past_instants_are_expired),
        cmocka_unit_test(test_leasectl_refuses_out_of_range_expiry),
        cmocka_unit_test(test_many_clients_one_address),
        cmocka_unit_test(test_many_clients_one_credential),
        cmocka_unit_test(test_storm_spares_other_tenant),
        cmocka_unit_test(test_no_oracle_when_budget_spent),
    };
    return http_fx_run_group("http_tenant_auth", tests, sizeof tests / sizeof tests[0], setup,
                             http_fx_teardown, NULL);
}
