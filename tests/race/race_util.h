/*
 * race_util.h - shared pieces of the store race tests (tests/race/race_*.c):
 * a database and a store per test, request builders that fill ids and
 * request digests the way the service does, SQL probes of the durable state,
 * a start barrier, and CHECK, which fails the whole test process.
 *
 * These tests observe results: what each thread was answered and what the
 * database holds afterwards, never merely that a call returned.
 *
 * Both backends (issue 38, docs/backends.md "Contract tests on both
 * backends"): with LEASE_TEST_STORE=valkey (test_store.h) race_setup opens
 * the Valkey adapter on a redis-server of the test's own instead of a
 * Postgres database; env.valkey says which, env.db_url is then NULL. The
 * race_env_* probes below read the durable state on either backend; the
 * SQL probes (race_counter, race_count, testpg_*) are Postgres's only.
 */
#ifndef LEASE_RACE_UTIL_H
#define LEASE_RACE_UTIL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lease/clock.h"
#include "lease/digest.h"
#include "lease/store.h"
#include "test_wait.h"
#include "lease/store_pg.h"
#include "lease/store_valkey.h"
#include "test_store.h"
#include "testpg.h"

/* The redis-server of a test on Valkey, stopped by CHECK before it exits:
 * _exit runs no atexit handler (test_store.c's), and a failed test must
 * not leave its server running. */
static test_store_valkey_t *race_valkey_server;

static inline void race_stop_valkey_server(void)
{
    if (race_valkey_server)
        test_store_valkey_stop(race_valkey_server);
    race_valkey_server = NULL;
}

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "CHECK failed at %s:%d: %s\n  ", __FILE__, __LINE__, #cond);           \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            fflush(stderr);                                                                        \
            race_stop_valkey_server();                                                             \
            _exit(1);                                                                              \
        }                                                                                          \
    } while (0)

#define CODE(c) lease_code_name(c)

typedef struct race_env {
    char *db_url;  /* superuser: probes and setup (NULL on Valkey) */
    char *svc_url; /* leased_app: what the store uses (NULL on Valkey) */
    lease_store_t *store;
    bool valkey;            /* LEASE_TEST_STORE=valkey */
    test_store_valkey_t vk; /* its redis-server, namespace bound by leasectl */
} race_env_t;

static inline lease_store_t *race_open_store(const char *url, int pool_size, const char *app)
{
    lease_store_pg_config_t cfg = {
        .conninfo = url,
        .pool_size = pool_size,
        .connect_timeout_ms = 5000,
        .application_name = app,
    };
    lease_store_t *s = NULL;
    char err[256] = "";
    int rc = lease_store_pg_open(&cfg, &s, err, sizeof err);
    CHECK(rc == 0 && s, "lease_store_pg_open: %s", err);
    return s;
}

/* The Valkey adapter on v's server, pool_size connections, as leased
 * opens it for LEASE_STORE_URL. */
static inline lease_store_t *race_open_valkey_store(const test_store_valkey_t *v, int pool_size)
{
    lease_valkey_url_t u;
    char err[256] = "";
    CHECK(lease_valkey_url_parse(v->url, &u, err, sizeof err), "store url: %s", err);
    lease_valkey_config_t cfg = {
        .host = u.host,
        .port = u.port,
        .ns = u.ns,
        .connect_timeout_ms = 5000,
        .pool_size = pool_size,
    };
    lease_store_t *s = NULL;
    lease_code_t rc = lease_valkey_store_open(&cfg, &s, err, sizeof err);
    lease_valkey_url_wipe(&u);
    CHECK(rc == LEASE_INSPECTED && s, "lease_valkey_store_open: %s (%s)", CODE(rc), err);
    return s;
}

static inline void race_setup(race_env_t *env, const char *name, int pool_size, const char *app)
{
    *env = (race_env_t){.valkey = test_store_is_valkey()};
    if (env->valkey) {
        test_store_valkey_start(&env->vk);
        race_valkey_server = &env->vk;
        env->store = race_open_valkey_store(&env->vk, pool_size);
        printf("backend: valkey (%s)\n", env->vk.url);
        return;
    }
    env->db_url = testpg_create_db(name);
    env->svc_url = testpg_service_url(env->db_url);
    env->store = race_open_store(env->svc_url, pool_size, app);
}

static inline void race_teardown(race_env_t *env)
{
    lease_store_close(env->store);
    if (env->valkey) {
        race_valkey_server = NULL;
        test_store_valkey_stop(&env->vk);
        return;
    }
    testpg_drop_db(env->db_url);
    free(env->svc_url);
    free(env->db_url);
}

static inline void race_identity(lease_identity_t *id, const char *target)
{
    memset(id, 0, sizeof *id);
    strcpy(id->tenant_id, "tenant-race");
    strcpy(id->program_id, "program-race");
    strcpy(id->target_namespace, "race-ns");
    snprintf(id->target_id, sizeof id->target_id, "%s", target);
    strcpy(id->actor_name, "racer");
    strcpy(id->workflow_name, "default");
    strcpy(id->operation_class, "default");
}

static inline void race_call(lease_call_t *c, const char *request_id, const char *principal,
                             int64_t deadline_ms)
{
    memset(c, 0, sizeof *c);
    snprintf(c->request_id, sizeof c->request_id, "%s", request_id);
    snprintf(c->correlation_id, sizeof c->correlation_id, "corr-%.58s", request_id);
    strcpy(c->deadline_class, "client");
    c->deadline = lease_deadline_in(deadline_ms);
    c->received_mono_ns = lease_mono_now_ns();
    snprintf(c->principal.principal_id, sizeof c->principal.principal_id, "%s", principal);
    strcpy(c->principal.client_id, "client-race");
    strcpy(c->principal.credential_id, "key_race");
    strcpy(c->principal.principal_class, "worker");
}

/* A unique request id: prefix, thread and sequence. */
static inline void race_rid(char *out, size_t n, const char *prefix, int who, int seq)
{
    snprintf(out, n, "%s-%d-%d-%lld", prefix, who, seq, (long long)lease_mono_now_ns());
}

static inline void race_acquire_req(lease_acquire_req_t *r, const lease_identity_t *id,
                                    const char *request_id, const char *principal,
                                    const char *instance, int64_t ttl_ms, int64_t deadline_ms)
{
    memset(r, 0, sizeof *r);
    race_call(&r->call, request_id, principal, deadline_ms);
    r->identity = *id;
    snprintf(r->service_instance_id, sizeof r->service_instance_id, "%s", instance);
    strcpy(r->execution_id, "exec-race");
    strcpy(r->job_id, "job-race");
    r->ttl_ms = ttl_ms;
    strcpy(r->metadata_json, "{}");
    lease_digest_acquire(r, r->call.request_digest);
}

/* An acquire of id (as principal and instance, 30 s) that must answer
 * lease_acquired; tag prefixes the request id and names a failure. */
static inline lease_record_t race_acquire_ok(lease_store_t *s, const lease_identity_t *id,
                                             const char *tag, const char *principal,
                                             const char *instance)
{
    char rid[128];
    race_rid(rid, sizeof rid, tag, 0, 0);
    lease_acquire_req_t req;
    race_acquire_req(&req, id, rid, principal, instance, 30000, 10000);
    lease_result_t res;
    CHECK(lease_store_acquire(s, &req, &res) == LEASE_ACQUIRED, "%s: %s", tag, CODE(res.code));
    return res.lease;
}

/* Sends req again while the backend is unavailable; the answer must be
 * lease_acquired. */
static inline lease_record_t race_acquire_retrying(lease_store_t *s, const lease_acquire_req_t *req)
{
    lease_result_t res;
    lease_code_t c;
    do
        c = lease_store_acquire(s, req, &res);
    while (c == LEASE_BACKEND_UNAVAILABLE);
    CHECK(c == LEASE_ACQUIRED, "acquire %s: %s", req->identity.target_id, CODE(c));
    return res.lease;
}

/* renew (ttl_ms > 0 or 0) or release, for the holder of `lease`. */
static inline void race_owner_req(lease_owner_req_t *r, const lease_record_t *lease,
                                  const char *request_id, const char *principal,
                                  const char *instance, int64_t ttl_ms, bool renew,
                                  int64_t deadline_ms)
{
    memset(r, 0, sizeof *r);
    race_call(&r->call, request_id, principal, deadline_ms);
    r->identity = lease->identity;
    snprintf(r->lease_id, sizeof r->lease_id, "%s", lease->lease_id);
    r->fencing_token = lease->fencing_token;
    snprintf(r->service_instance_id, sizeof r->service_instance_id, "%s", instance);
    r->ttl_ms = renew ? ttl_ms : 0;
    if (renew)
        lease_digest_renew(r, r->call.request_digest);
    else
        lease_digest_release(r, r->call.request_digest);
}

static inline void race_admin_req(lease_admin_req_t *r, const lease_record_t *lease,
                                  const char *request_id, bool revoke, int64_t deadline_ms)
{
    memset(r, 0, sizeof *r);
    race_call(&r->call, request_id, "prn-admin", deadline_ms);
    strcpy(r->call.principal.principal_class, "admin");
    r->identity = lease->identity;
    snprintf(r->lease_id, sizeof r->lease_id, "%s", lease->lease_id);
    r->fencing_token = lease->fencing_token;
    strcpy(r->reason, revoke ? "race test revoke" : "race test force-release");
    if (revoke)
        strcpy(r->incident_id, "inc-race");
    lease_digest_admin(r, revoke, r->call.request_digest);
}

static inline void race_inspect_req(lease_inspect_req_t *r, const lease_identity_t *id,
                                    const char *lease_id)
{
    memset(r, 0, sizeof *r);
    race_call(&r->call, "", "prn-reader", 10000);
    strcpy(r->scope.tenant_id, "tenant-race");
    strcpy(r->scope.program_id, "*");
    r->scope.all_actors = true;
    if (id) {
        r->by_identity = true;
        r->identity = *id;
    } else {
        /* (never NULL here; the fallback keeps -Wformat-truncation quiet
         * where inlining makes both branches look possible) */
        snprintf(r->lease_id, sizeof r->lease_id, "%s", lease_id ? lease_id : "");
    }
}

/* The lease a store sees now for an identity (code LEASE_INSPECTED or
 * LEASE_NOT_FOUND). */
static inline lease_code_t race_inspect(lease_store_t *s, const lease_identity_t *id,
                                        lease_result_t *res)
{
    lease_inspect_req_t r;
    race_inspect_req(&r, id, NULL);
    return lease_store_inspect(s, &r, res);
}

static inline lease_code_t race_inspect_id(lease_store_t *s, const char *lease_id,
                                           lease_result_t *res)
{
    lease_inspect_req_t r;
    race_inspect_req(&r, NULL, lease_id);
    return lease_store_inspect(s, &r, res);
}

/* SQL text of the identity's lock key expression. */
static inline void race_key_sql(const lease_identity_t *id, char *out, size_t n)
{
    snprintf(out, n, "lease.lock_key('%s','%s','%s','%s','%s','%s','%s')", id->tenant_id,
             id->program_id, id->target_namespace, id->target_id, id->actor_name, id->workflow_name,
             id->operation_class);
}

/* The identity's durable fencing counter (0 when it has no row yet). */
static inline long long race_counter(const char *db_url, const lease_identity_t *id)
{
    CHECK(db_url, "a Postgres probe (lease.locks) on a store without Postgres");
    char key[512], sql[1024];
    race_key_sql(id, key, sizeof key);
    snprintf(sql, sizeof sql,
             "SELECT coalesce((SELECT fencing_counter FROM lease.locks WHERE lock_key = %s), 0)",
             key);
    return testpg_query_int(db_url, sql);
}

/* Rows of `table` for the identity matching an extra condition. */
static inline long long race_count(const char *db_url, const char *table,
                                   const lease_identity_t *id, const char *extra)
{
    CHECK(db_url, "a Postgres probe (%s) on a store without Postgres", table);
    char key[512], sql[1400];
    race_key_sql(id, key, sizeof key);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s WHERE lock_key = %s%s%s", table, key,
             extra && *extra ? " AND " : "", extra ? extra : "");
    return testpg_query_int(db_url, sql);
}

/* What redis-cli printed for args on env's server (heap); fails the test
 * when it could not run. */
static inline char *race_valkey_cli(const race_env_t *env, const char *const *args)
{
    char *out = test_store_valkey_cli(&env->vk, args);
    CHECK(out, "redis-cli %s failed", args[0]);
    return out;
}

/* The key of an identity's record on Valkey (the namespace leasectl
 * migrate bound, "leased"; docs/backends.md "Keys"): the durable counter
 * and the live lease, never deleted, like a lease.locks row. */
static inline void race_valkey_ident_key(const lease_identity_t *id, char *out, size_t n)
{
    snprintf(out, n, "lease:{leased}:id:[\"v1\",\"%s\",\"%s\",\"%s\",\"%s\",\"%s\",\"%s\",\"%s\"]",
             id->tenant_id, id->program_id, id->target_namespace, id->target_id, id->actor_name,
             id->workflow_name, id->operation_class);
}

/* The identity's durable fencing counter on either backend, as the token
 * its last acquisition was given (0 when it has none yet): lease.locks'
 * fencing_counter on Postgres; on Valkey the identity record's epoch and
 * seq (token = epoch * 2^32 + seq, docs/backends.md "Fencing tokens"). */
static inline long long race_env_counter(const race_env_t *env, const lease_identity_t *id)
{
    if (!env->valkey)
        return race_counter(env->db_url, id);
    char key[512];
    race_valkey_ident_key(id, key, sizeof key);
    const char *args[] = {"HMGET", key, "epoch", "seq", NULL};
    char *out = race_valkey_cli(env, args);
    long long epoch = 0, seq = 0;
    char *nl = strchr(out, '\n');
    if (nl && nl != out) { /* an absent record prints two empty lines */
        epoch = atoll(out);
        seq = atoll(nl + 1);
    }
    free(out);
    return epoch * 4294967296LL + seq;
}

/* The store's audit events of event_type (NULL: any), optionally only
 * those of request_id (NULL: any): lease.audit_events on Postgres, the
 * namespace's audit Stream on Valkey (docs/backends.md "Audit events"). */
static inline long long race_env_audit_count(const race_env_t *env, const char *event_type,
                                             const char *request_id)
{
    if (!env->valkey) {
        char sql[512];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM lease.audit_events WHERE true%s%s%s%s%s%s",
                 event_type ? " AND event_type = '" : "", event_type ? event_type : "",
                 event_type ? "'" : "", request_id ? " AND request_id = '" : "",
                 request_id ? request_id : "", request_id ? "'" : "");
        return testpg_query_int(env->db_url, sql);
    }
    static const char lua[] = TEST_STORE_AUDIT_FIELDS_LUA
        "local n = 0 "
        "for _, e in ipairs(redis.call('XRANGE', KEYS[1], '-', '+')) do "
        "  local f, t, r = audit_fields(e), ARGV[1] == '', ARGV[2] == '' "
        "  for i = 1, #f, 2 do "
        "    if f[i] == 'event_type' and f[i + 1] == ARGV[1] then t = true end "
        "    if f[i] == 'request_id' and f[i + 1] == ARGV[2] then r = true end "
        "  end "
        "  if t and r then n = n + 1 end "
        "end "
        "return n";
    const char *args[] = {"EVAL",
                          lua,
                          "1",
                          "lease:{leased}:audit",
                          event_type ? event_type : "",
                          request_id ? request_id : "",
                          NULL};
    char *out = race_valkey_cli(env, args);
    char *end = NULL;
    long long n = strtoll(out, &end, 10);
    CHECK(end != out, "audit count: redis-cli printed %s", out);
    free(out);
    return n;
}

/* The redis-server's process id (INFO server), to freeze it (SIGSTOP)
 * as a Postgres test stops a backend. */
static inline int race_valkey_pid(const race_env_t *env)
{
    const char *args[] = {"INFO", "server", NULL};
    char *out = race_valkey_cli(env, args);
    const char *p = strstr(out, "process_id:");
    int pid = p ? atoi(p + strlen("process_id:")) : -1;
    free(out);
    CHECK(pid > 0, "no process_id in INFO server");
    return pid;
}

/* The server's ordinary client connections other than redis-cli's own
 * (CLIENT LIST TYPE normal, one line each): the adapter's pooled ones. */
static inline int race_valkey_clients(const race_env_t *env)
{
    const char *args[] = {"CLIENT", "LIST", "TYPE", "normal", NULL};
    char *out = race_valkey_cli(env, args);
    int lines = 0;
    for (const char *p = out; (p = strchr(p, '\n')) != NULL; p++)
        lines++;
    free(out);
    return lines - 1; /* redis-cli's */
}

/* Closes every ordinary client connection but redis-cli's own (CLIENT
 * KILL TYPE normal; SKIPME yes is its default): the adapter's, as
 * pg_terminate_backend ends its sessions. Returns how many it closed. */
static inline int race_valkey_kill_clients(const race_env_t *env)
{
    const char *args[] = {"CLIENT", "KILL", "TYPE", "normal", NULL};
    char *out = race_valkey_cli(env, args);
    char *end = NULL;
    long n = strtol(out, &end, 10);
    CHECK(end != out, "CLIENT KILL: redis-cli printed %s", out);
    free(out);
    return (int)n;
}

/* Holds every write command, FCALL of a write function among them, at
 * the server (CLIENT PAUSE ... WRITE) until race_valkey_unpause: a store
 * call stays inside the backend, as behind a Postgres row lock. */
static inline void race_valkey_pause_writes(const race_env_t *env)
{
    const char *args[] = {"CLIENT", "PAUSE", "30000", "WRITE", NULL};
    char *out = race_valkey_cli(env, args);
    CHECK(strncmp(out, "OK", 2) == 0, "CLIENT PAUSE: %s", out);
    free(out);
}

static inline void race_valkey_unpause(const race_env_t *env)
{
    const char *args[] = {"CLIENT", "UNPAUSE", NULL};
    free(race_valkey_cli(env, args));
}

/* Waits until n clients are held at the server (INFO clients'
 * blocked_clients: a write command postponed by race_valkey_pause_writes
 * counts there), as race_wait_for_lock_waiters waits for a lock wait. */
static inline void race_valkey_wait_blocked(const race_env_t *env, int n)
{
    const char *args[] = {"INFO", "clients", NULL};
    for (int i = 0; i < 500; i++) {
        char *out = race_valkey_cli(env, args);
        const char *p = strstr(out, "blocked_clients:");
        int blocked = p ? atoi(p + strlen("blocked_clients:")) : 0;
        free(out);
        if (blocked >= n)
            return;
        lease_sleep_ms(10);
    }
    CHECK(false, "no call of the store was held at the server");
}

/* HSET key field value on env's server (a test's change behind the
 * store's back: a seal, a corrupted record). */
static inline void race_valkey_hset(const race_env_t *env, const char *key, const char *field,
                                    const char *value)
{
    const char *args[] = {"HSET", key, field, value, NULL};
    free(race_valkey_cli(env, args));
}

/* The stored results (idempotency records) of op for the identity:
 * lease.idempotency rows on Postgres; on Valkey the keys
 * lease:{leased}:i:<op>:<principal>:<request_id>:<canonical> (docs/backends.md
 * "Keys"), found by SCAN and compared by their tail (the canonical tuple's
 * brackets are glob characters). */
static inline long long race_env_stored_results(const race_env_t *env, const lease_identity_t *id,
                                                const char *op)
{
    if (!env->valkey) {
        char extra[64];
        snprintf(extra, sizeof extra, "operation = '%s'", op);
        return race_count(env->db_url, "lease.idempotency", id, extra);
    }
    char key[512], pattern[64];
    race_valkey_ident_key(id, key, sizeof key);
    const char *canonical = strstr(key, ":id:") + 4;
    snprintf(pattern, sizeof pattern, "lease:{leased}:i:%s:*", op);
    static const char lua[] =
        "local n, cur = 0, '0' "
        "repeat "
        "  local r = redis.call('SCAN', cur, 'MATCH', ARGV[1], 'COUNT', 1000) "
        "  cur = r[1] "
        "  for _, k in ipairs(r[2]) do "
        "    if k:sub(-#ARGV[2]) == ARGV[2] then n = n + 1 end "
        "  end "
        "until cur == '0' "
        "return n";
    const char *args[] = {"EVAL", lua, "0", pattern, canonical, NULL};
    char *out = race_valkey_cli(env, args);
    char *end = NULL;
    long long n = strtoll(out, &end, 10);
    CHECK(end != out, "stored results: redis-cli printed %s", out);
    free(out);
    return n;
}

/* A reusable start line for N threads. */
typedef struct race_barrier {
    pthread_barrier_t b;
} race_barrier_t;

static inline void race_barrier_init(race_barrier_t *b, unsigned n)
{
    CHECK(pthread_barrier_init(&b->b, NULL, n) == 0, "barrier");
}

static inline void race_barrier_wait(race_barrier_t *b)
{
    pthread_barrier_wait(&b->b);
}

static inline void race_barrier_destroy(race_barrier_t *b)
{
    pthread_barrier_destroy(&b->b);
}

/* Equal leases as the wire would show them. */
static inline bool race_same_lease(const lease_record_t *a, const lease_record_t *b)
{
    return strcmp(a->lease_id, b->lease_id) == 0 && a->fencing_token == b->fencing_token &&
           a->acquired_at_ms == b->acquired_at_ms && a->expires_at_ms == b->expires_at_ms &&
           a->renewed_at_ms == b->renewed_at_ms &&
           strcmp(a->owner_principal_id, b->owner_principal_id) == 0;
}

#endif
