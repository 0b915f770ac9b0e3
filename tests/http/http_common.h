/*
 * http_common.h - helpers shared by the http_*.c tests (header only; each
 * test file is its own program): request bodies, envelope checks and the
 * per-file fixture of a database, a leased and a few credentials.
 *
 *   static http_fx_t fx;
 *   static const char *worker;                 // owned by fx
 *   static int setup(void **state)             // cmocka group setup
 *   {
 *       http_fx_open(&fx, state, "http_mine");
 *       worker = http_fx_worker(&fx, "prn_mine");
 *       http_fx_serve(&fx, NULL);             // leased, fx.base
 *       return 0;
 *   }
 *   ... cmocka_run_group_tests(tests, setup, http_fx_teardown);
 */
#ifndef LEASE_TEST_HTTP_COMMON_H
#define LEASE_TEST_HTTP_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <pthread.h>

#include "child_proc.h"
#include "http_client.h"
#include "leased_proc.h"
#include "test_store.h"
#include "test_wait.h"
#include "testpg.h"

#define TENANT "tenant-main"
#define PROGRAM "program-a"
#define NAMESPACE "starintel-target"
#define ACTOR "usernamegen"
/* What a worker credential holds. */
#define WORKER_CAPS "targets:lease,targets:read"

/* A lock identity object of tenant (new reference). */
static inline json_t *identity_json_of(const char *tenant, const char *target)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "tenant_id", tenant, "program_id", PROGRAM,
                     "target_namespace", NAMESPACE, "target_id", target, "actor_name", ACTOR,
                     "workflow_name", "default");
}

/* A lock identity object of TENANT (new reference). */
static inline json_t *identity_json(const char *target)
{
    return identity_json_of(TENANT, target);
}

/* Serialises and frees obj. */
static inline char *dump(json_t *obj)
{
    char *s = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    return s;
}

/* Parses text (a body built by the helpers here) and frees it. */
static inline json_t *parse_owned(char *text)
{
    json_error_t jerr;
    json_t *o = json_loads(text, 0, &jerr);
    free(text);
    return o;
}

static inline char *acquire_body(const char *request_id, const char *target)
{
    return dump(json_pack("{s:s, s:o, s:s, s:s, s:s}", "request_id", request_id, "lock_identity",
                          identity_json(target), "service_instance_id", "inst_1", "execution_id",
                          "exec_1", "job_id", "job_1"));
}

/* renew/release body from an acquire reply (lease object). */
static inline char *owner_body(const char *request_id, const char *target, json_t *lease)
{
    return dump(json_pack("{s:s, s:o, s:O, s:O, s:s}", "request_id", request_id, "lock_identity",
                          identity_json(target), "lease_id", json_object_get(lease, "lease_id"),
                          "fencing_token", json_object_get(lease, "fencing_token"),
                          "service_instance_id", "inst_1"));
}

static inline char *admin_body(const char *request_id, const char *target, json_t *lease,
                               const char *reason)
{
    json_t *o = json_pack("{s:s, s:o, s:O, s:O}", "request_id", request_id, "lock_identity",
                          identity_json(target), "lease_id", json_object_get(lease, "lease_id"),
                          "fencing_token", json_object_get(lease, "fencing_token"));
    if (reason)
        json_object_set_new(o, "reason", json_string(reason));
    return dump(o);
}

/* A lookup by identity (inspect) in tenant's scope. */
static inline char *inspect_body_of(const char *tenant, const char *target)
{
    return dump(json_pack("{s:o}", "lock_identity", identity_json_of(tenant, target)));
}

/* A lookup by identity (inspect). */
static inline char *inspect_body(const char *target)
{
    return inspect_body_of(TENANT, target);
}

/* A list filter of TENANT and PROGRAM; by: "owner", "program". */
static inline char *list_body(const char *by)
{
    return dump(json_pack("{s:s, s:s, s:s}", "by", by, "tenant_id", TENANT, "program_id", PROGRAM));
}

/* Text that must never reach a client. */
static const char *const forbidden_always[] = {
    "starintel:target-lease",
    "select ",
    "insert ",
    "update ",
    "delete ",
    "sqlstate",
    "postgres",
    "pg_",
    "error:",
    "violat",
    "relation \"",
    "syntax",
    "stack",
    "lsk_",
    "lease.",
    "ls00",
    "plpgsql",
    "context:",
    NULL,
};

static inline bool contains_ci(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (const char *p = hay; *p; p++) {
        size_t i = 0;
        while (i < n && p[i] && (p[i] | 0x20) == (needle[i] | 0x20))
            i++;
        if (i == n)
            return true;
    }
    return false;
}

/*
 * Checks one reply: the expected status and code, an envelope of the
 * documented shape, the correlation id in body and header, Retry-After on
 * 429/503, and none of the forbidden texts nor any of `others` (other
 * owners' identities; NULL-terminated, may be NULL).
 */
static inline void check_reply(const http_resp_t *r, long status, const char *code,
                               const char *const *others)
{
    assert_non_null(r);
    if (r->status != status || !http_resp_str(r, "code") ||
        strcmp(http_resp_str(r, "code"), code) != 0)
        fprintf(stderr, "unexpected reply %ld: %s\n", r->status, r->body);
    assert_int_equal(r->status, status);
    assert_non_null(r->json);
    assert_string_equal(http_resp_str(r, "code"), code);
    const char *corr = http_resp_str(r, "correlation_id");
    assert_non_null(corr);
    assert_int_equal(strncmp(corr, "corr_", 5), 0);
    assert_int_equal(strlen(corr), 31);
    const char *hdr = http_resp_header(r, "X-Correlation-Id");
    assert_non_null(hdr);
    assert_string_equal(hdr, corr);
    const char *st = http_resp_str(r, "status");
    assert_non_null(st);
    if (status == 200) {
        assert_string_equal(st, "success");
    } else {
        assert_string_equal(st, "error");
        assert_non_null(http_resp_str(r, "msg"));
        assert_true(json_is_boolean(json_object_get(r->json, "retryable")));
    }
    if (status == 429 || status == 503) {
        assert_non_null(http_resp_header(r, "Retry-After"));
        assert_true(atoi(http_resp_header(r, "Retry-After")) >= 1);
        assert_true(http_resp_int(r, "retry_after_ms") > 0);
    }
    for (const char *const *f = forbidden_always; *f; f++) {
        if (contains_ci(r->body, *f))
            fprintf(stderr, "forbidden text '%s' in: %s\n", *f, r->body);
        assert_false(contains_ci(r->body, *f));
    }
    for (const char *const *o = others; o && *o; o++) {
        if (strstr(r->body, *o))
            fprintf(stderr, "another owner's identity '%s' in: %s\n", *o, r->body);
        assert_null(strstr(r->body, *o));
    }
}

/* One call that must reach the server. */
static inline http_resp_t *call(const char *base, const char *method, const char *path,
                                const char *token, const char *body)
{
    http_resp_t *r = http_call(base, method, path, token, body);
    assert_non_null(r);
    return r;
}

/* A call whose body is built by the caller and freed here. */
static inline http_resp_t *call_owned(const char *base, const char *method, const char *path,
                                      const char *token, char *body)
{
    http_resp_t *r = call(base, method, path, token, body);
    free(body);
    return r;
}

/* The "lease" object of a reply (borrowed from r). */
static inline json_t *lease_of(const http_resp_t *r)
{
    json_t *l = json_object_get(r->json, "lease");
    assert_true(json_is_object(l));
    return l;
}

/* An acquire of target (reply not checked). */
static inline http_resp_t *acquire_call(const char *base, const char *token, const char *request_id,
                                        const char *target)
{
    return call_owned(base, "POST", "/v1/leases/acquire", token, acquire_body(request_id, target));
}

/* An acquire that must answer lease_acquired; returns its lease (new
 * reference). */
static inline json_t *acquire_lease(const char *base, const char *token, const char *request_id,
                                    const char *target)
{
    http_resp_t *a = acquire_call(base, token, request_id, target);
    check_reply(a, 200, "lease_acquired", NULL);
    json_t *lease = json_deep_copy(lease_of(a));
    http_resp_free(a);
    return lease;
}

/*
 * Polls /readyz until it answers want, at most tries times 50 ms apart;
 * returns the last status and copies its reason ("" without one) into
 * reason (n bytes). With check_not_ready, every 503 seen must also say
 * status "not_ready" and carry Retry-After.
 */
static inline long http_wait_ready(const char *base, long want, char *reason, size_t n, int tries,
                                   bool check_not_ready)
{
    long st = 0;
    for (int i = 0; i < tries; i++) {
        if (i)
            usleep(50000);
        http_resp_t *r = call(base, "GET", "/readyz", NULL, NULL);
        st = r->status;
        snprintf(reason, n, "%s", http_resp_str(r, "reason") ? http_resp_str(r, "reason") : "");
        if (check_not_ready && st == 503) {
            assert_string_equal(http_resp_str(r, "status"), "not_ready");
            assert_non_null(http_resp_header(r, "Retry-After"));
        }
        http_resp_free(r);
        if (st == want)
            break;
    }
    return st;
}

/* ------------------------------------------------------------------ */
/* Requests that block inside the database                             */

/* A session of its own holding target's lock row (FOR UPDATE, in an open
 * transaction) until http_unblock. */
static inline PGconn *http_block_target(const char *db, const char *target)
{
    PGconn *blocker = PQconnectdb(db);
    assert_int_equal(PQstatus(blocker), CONNECTION_OK);
    char sql[256];
    snprintf(sql, sizeof sql, "BEGIN; SELECT 1 FROM lease.locks WHERE target_id = '%s' FOR UPDATE",
             target);
    PGresult *res = PQexec(blocker, sql);
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    PQclear(res);
    return blocker;
}

/* Rolls the blocking transaction back and closes its session. */
static inline void http_unblock(PGconn *blocker)
{
    PQclear(PQexec(blocker, "ROLLBACK"));
    PQfinish(blocker);
}

/* Polls (at most 30 s) until one of leased's sessions waits on a lock;
 * returns how many do. */
static inline long long http_wait_lock_waiter(const char *db)
{
    long long waiting = 0;
    (void)test_wait_until(30000, (waiting = testpg_query_int(
                                      db, "SELECT count(*) FROM pg_stat_activity WHERE "
                                          "datname = current_database() AND application_name = "
                                          "'leased' AND wait_event_type = 'Lock'")) > 0);
    return waiting;
}

/* A POST sent from a thread of its own, for a request that blocks. */
typedef struct http_pending {
    const char *base, *path, *token;
    char *body;        /* borrowed */
    http_resp_t *resp; /* the reply after http_pending_join; NULL on a transport failure */
    int done;          /* __atomic: the reply (or failure) is in */
    pthread_t thread;
} http_pending_t;

static inline void *http_pending_main(void *arg)
{
    http_pending_t *p = arg;
    http_client_t *c = http_client_new(p->base, 60000);
    p->resp = http_client_call(c, "POST", p->path, p->token, p->body, NULL, NULL);
    http_client_free(c);
    __atomic_store_n(&p->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Whether the request has its reply (a condition for test_wait_until). */
static inline bool http_pending_done(http_pending_t *p)
{
    return __atomic_load_n(&p->done, __ATOMIC_ACQUIRE) != 0;
}

static inline void http_pending_start(http_pending_t *p)
{
    pthread_create(&p->thread, NULL, http_pending_main, p);
}

static inline void http_pending_join(http_pending_t *p)
{
    pthread_join(p->thread, NULL);
}

/* ------------------------------------------------------------------ */
/* The per-file fixture                                                */

#define HTTP_FX_MAX_TOKENS 16

/* One test file's database, leased and credentials; http_fx_close frees
 * all of it. With LEASE_TEST_STORE=valkey (test_store.h) the store is a
 * redis-server of the file's own instead: db is then its redis:// URL
 * (leasectl takes it as --database-url), and a case that must read
 * Postgres's tables is named in its file's pg_only table
 * (http_fx_run_group), which leaves it out of the Valkey run. */
typedef struct http_fx {
    char *db;    /* superuser URL of the file's own database, or the redis:// URL */
    bool valkey; /* LEASE_TEST_STORE=valkey */
    test_store_valkey_t vk;
    leased_proc_t *srv; /* NULL until http_fx_serve */
    const char *base;   /* srv's "http://127.0.0.1:PORT" */
    char *tokens[HTTP_FX_MAX_TOKENS];
    size_t ntokens;
} http_fx_t;

/* Creates the file's database (named after prefix). group_state (a cmocka
 * group setup's state, or NULL) receives fx for http_fx_teardown. */
static inline void http_fx_open(http_fx_t *fx, void **group_state, const char *prefix)
{
    *fx = (http_fx_t){.valkey = test_store_is_valkey()};
    if (fx->valkey) {
        test_store_valkey_start(&fx->vk);
        fx->db = strdup(fx->vk.url);
    } else {
        fx->db = testpg_create_db(prefix);
    }
    if (group_state)
        *group_state = fx;
}

/* A credential in fx's database; the token is fx's (freed by
 * http_fx_close). credential_id as for leased_proc_credential. */
static inline const char *http_fx_credential_spec(http_fx_t *fx, const leased_cred_spec_t *spec,
                                                  char *credential_id)
{
    assert_true(fx->ntokens < HTTP_FX_MAX_TOKENS);
    char *token = leased_proc_credential(fx->db, spec, credential_id);
    fx->tokens[fx->ntokens++] = token;
    return token;
}

/* A credential of TENANT for program ("*" with admin), any actor. */
static inline const char *http_fx_credential(http_fx_t *fx, const char *principal,
                                             const char *program, const char *capabilities,
                                             bool admin)
{
    return http_fx_credential_spec(fx,
                                   &(leased_cred_spec_t){.principal = principal,
                                                         .tenant = TENANT,
                                                         .program = program,
                                                         .capabilities = capabilities,
                                                         .admin = admin},
                                   NULL);
}

/* A worker of TENANT and PROGRAM: may lease and read. */
static inline const char *http_fx_worker(http_fx_t *fx, const char *principal)
{
    return http_fx_credential(fx, principal, PROGRAM, WORKER_CAPS, false);
}

/* A worker of another tenant, for PROGRAM: may lease and read. */
static inline const char *http_fx_worker_of(http_fx_t *fx, const char *principal,
                                            const char *tenant)
{
    return http_fx_credential_spec(fx,
                                   &(leased_cred_spec_t){.principal = principal,
                                                         .tenant = tenant,
                                                         .program = PROGRAM,
                                                         .capabilities = WORKER_CAPS},
                                   NULL);
}

/* The raw text of an inspect of target by token, with extra header lines
 * (may be ""): for tests that send it from an address of their choice. */
static inline char *http_inspect_text(const char *token, const char *target, const char *extra)
{
    char *body = inspect_body(target);
    char *text = NULL;
    assert_true(asprintf(&text,
                         "POST /v1/leases/inspect HTTP/1.1\r\nHost: leased\r\n"
                         "Authorization: Bearer %s\r\n%sContent-Length: %zu\r\n\r\n%s",
                         token, extra, strlen(body), body) > 0);
    free(body);
    return text;
}

/* Audit events of db recorded with source_address addr. */
static inline long long http_audited_from(const char *db, const char *addr)
{
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM lease.audit_log WHERE source_address = '%s'",
             addr);
    return testpg_query_int(db, sql);
}

/* Another leased on fx's store (extra_env as for leased_proc_start), on
 * either backend; the caller stops it. */
static inline leased_proc_t *http_fx_start_leased(http_fx_t *fx, const char *const *extra_env)
{
    if (!fx->valkey)
        return leased_proc_start(fx->db, extra_env);
    const char *env[32] = {fx->vk.setting};
    size_t n = 1;
    for (const char *const *e = extra_env; e && *e && n < 31; e++)
        env[n++] = *e;
    env[n] = NULL;
    return leased_proc_start(NULL, env);
}

/* Starts leased on fx's store (extra_env as for leased_proc_start). */
static inline void http_fx_serve(http_fx_t *fx, const char *const *extra_env)
{
    fx->srv = http_fx_start_leased(fx, extra_env);
    assert_non_null(fx->srv);
    fx->base = leased_proc_url(fx->srv);
}

/* ------------------------------------------------------------------ */
/* Outcomes observed on either backend                                 */

/* The active lease of target as token's inspect answers it (new
 * reference), or NULL when it answers 404 lease_not_found: whether a
 * lease is held, through the API, on either backend. */
static inline json_t *http_active_lease(const char *base, const char *token, const char *target)
{
    http_resp_t *r = call_owned(base, "POST", "/v1/leases/inspect", token, inspect_body(target));
    json_t *lease = NULL;
    if (r->status == 404) {
        check_reply(r, 404, "lease_not_found", NULL);
    } else {
        check_reply(r, 200, "lease_inspected", NULL);
        lease = json_deep_copy(lease_of(r));
        assert_string_equal(json_string_value(json_object_get(lease, "state")), "active");
    }
    http_resp_free(r);
    return lease;
}

/* A key of the namespace leasectl migrate bound on the test's
 * redis-server (the default, "leased"; docs/backends.md "Keys"). */
static inline void http_fx_valkey_key(char *out, size_t n, const char *suffix)
{
    snprintf(out, n, "lease:{leased}:%s", suffix);
}

/* Counts the Stream's entries of which, for each name/value pair of
 * ARGV, a field has that name and value; name "*": any field's value
 * contains the text. */
#define HTTP_FX_AUDIT_COUNT_LUA                                                                    \
    TEST_STORE_AUDIT_FIELDS_LUA                                                                    \
    "local n = 0 "                                                                                 \
    "for _, e in ipairs(redis.call('XRANGE', KEYS[1], '-', '+')) do "                              \
    "  local f, ok = audit_fields(e), true "                                                       \
    "  for j = 1, #ARGV, 2 do "                                                                    \
    "    local hit = false "                                                                       \
    "    for i = 1, #f, 2 do "                                                                     \
    "      if ARGV[j] == '*' then "                                                                \
    "        if string.find(f[i + 1], ARGV[j + 1], 1, true) then hit = true end "                  \
    "      elseif f[i] == ARGV[j] and f[i + 1] == ARGV[j + 1] then hit = true end "                \
    "    end "                                                                                     \
    "    ok = ok and hit "                                                                         \
    "  end "                                                                                       \
    "  if ok then n = n + 1 end "                                                                  \
    "end "                                                                                         \
    "return n"

/*
 * The audit events of fx's store that match every pair of match (NULL-
 * terminated name, value, ...; names as lease.audit_events' columns:
 * event_type, result_code, principal_id, request_id, reason; name "*":
 * the event's text contains value). On Postgres a count of that view; on
 * Valkey of the audit Stream's entries (docs/backends.md "Audit events",
 * where result_code is "code"): the audit as each backend keeps it.
 * Values are the tests' own constants (no quotes).
 */
static inline long long http_fx_audit_count(http_fx_t *fx, const char *const *match)
{
    if (!fx->valkey) {
        char sql[1024] = "SELECT count(*) FROM lease.audit_events WHERE true";
        for (const char *const *m = match; m[0] && m[1]; m += 2) {
            size_t used = strlen(sql);
            if (strcmp(m[0], "*") == 0)
                snprintf(sql + used, sizeof sql - used, " AND strpos(audit_events::text, '%s') > 0",
                         m[1]);
            else
                snprintf(sql + used, sizeof sql - used, " AND %s = '%s'", m[0], m[1]);
        }
        return testpg_query_int(fx->db, sql);
    }
    char key[128];
    http_fx_valkey_key(key, sizeof key, "audit");
    const char *args[40] = {"EVAL", HTTP_FX_AUDIT_COUNT_LUA, "1", key};
    size_t n = 4;
    for (const char *const *m = match; m[0] && m[1] && n < 38; m += 2) {
        args[n++] = strcmp(m[0], "result_code") == 0 ? "code" : m[0];
        args[n++] = m[1];
    }
    args[n] = NULL;
    return test_store_valkey_cli_int(&fx->vk, args);
}

/* Revokes a credential of fx's store with the real `leasectl credential
 * revoke`, as an operator does, on either backend. */
static inline void http_fx_revoke_credential(http_fx_t *fx, const char *credential_id)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' credential revoke '%s' --database-url '%s' >&2",
             LEASE_TEST_LEASECTL, credential_id, fx->db);
    assert_int_equal(system(cmd), 0);
}

/* A case that needs the PostgreSQL backend, by its function's name, and
 * why (docs/backends.md). */
typedef struct http_pg_only {
    const char *test;
    const char *why;
} http_pg_only_t;

/* Runs the group as cmocka_run_group_tests does. Under LEASE_TEST_STORE=
 * valkey the cases named in pg_only (ended by {NULL, NULL}) are left out
 * of the run, each printed with its reason: never run, so never counted
 * as passed or skipped; on PostgreSQL every case runs. */
static inline int http_fx_run_group(const char *group, const struct CMUnitTest *tests, size_t n,
                                    CMFixtureFunction setup, CMFixtureFunction teardown,
                                    const http_pg_only_t *pg_only)
{
    struct CMUnitTest *kept = calloc(n ? n : 1, sizeof *kept);
    assert_non_null(kept);
    bool valkey = test_store_is_valkey();
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const http_pg_only_t *o = pg_only;
        while (valkey && o && o->test && strcmp(o->test, tests[i].name) != 0)
            o++;
        if (valkey && o && o->test)
            printf("not run on valkey: %s (%s)\n", o->test, o->why);
        else
            kept[k++] = tests[i];
    }
    int failed = _cmocka_run_group_tests(group, kept, k, setup, teardown);
    free(kept);
    return failed;
}

/* Stops leased (it must exit 0), drops the database, frees the tokens. */
static inline void http_fx_close(http_fx_t *fx)
{
    if (fx->srv)
        assert_int_equal(leased_proc_stop(fx->srv), 0);
    if (fx->valkey)
        test_store_valkey_stop(&fx->vk);
    else
        testpg_drop_db(fx->db);
    free(fx->db);
    for (size_t i = 0; i < fx->ntokens; i++)
        free(fx->tokens[i]);
    *fx = (http_fx_t){0};
}

/* A cmocka group teardown for the fixture http_fx_open put in the state. */
static inline int http_fx_teardown(void **state)
{
    http_fx_close(*state);
    return 0;
}

/* ------------------------------------------------------------------ */
/* Stored results on either backend (race_starvation, race_slowloris)  */

/* Counts the keys lease:{ns}:i:<op>:<principal>:<request_id>:<canonical>
 * whose request id begins with ARGV[2] (ARGV[1]: the keys' common
 * prefix), found by SCAN. */
#define HTTP_FX_STORED_RESULTS_LUA                                                                 \
    "local n, cur = 0, '0' "                                                                       \
    "repeat "                                                                                      \
    "  local r = redis.call('SCAN', cur, 'MATCH', ARGV[1] .. '*', 'COUNT', 1000) "                 \
    "  cur = r[1] "                                                                                \
    "  for _, k in ipairs(r[2]) do "                                                               \
    "    local rid = string.match(k:sub(#ARGV[1] + 1), '^[^:]*:[^:]*:([^:]*):') "                  \
    "    if rid and rid:sub(1, #ARGV[2]) == ARGV[2] then n = n + 1 end "                           \
    "  end "                                                                                       \
    "until cur == '0' "                                                                            \
    "return n"

/*
 * The stored results (idempotency records) of fx's store whose request id
 * begins with prefix ("": every one): lease.idempotency's rows on
 * Postgres; on Valkey the keys lease:{leased}:i:<op>:<principal>:
 * <request_id>:<canonical> (docs/backends.md "Keys"). Whether a request
 * changed anything it would answer again. prefix is a test's own constant
 * (no quotes, no LIKE wildcards, no ':').
 */
static inline long long http_fx_stored_results(http_fx_t *fx, const char *prefix)
{
    if (!fx->valkey) {
        char sql[256];
        snprintf(sql, sizeof sql,
                 "SELECT count(*) FROM lease.idempotency WHERE request_id LIKE '%s%%'", prefix);
        return testpg_query_int(fx->db, sql);
    }
    char keys[64];
    http_fx_valkey_key(keys, sizeof keys, "i:");
    const char *args[] = {"EVAL", HTTP_FX_STORED_RESULTS_LUA, "0", keys, prefix, NULL};
    return test_store_valkey_cli_int(&fx->vk, args);
}

/* ------------------------------------------------------------------ */
/* "Nothing changed", on either backend                                */

/* Every key of the test's redis-server but the audit Stream (KEYS[1]),
 * sorted, each with its type and a SHA-1 of its whole value in a
 * canonical order (hash fields, set members sorted; a sorted set with its
 * scores; the TTL left aside, which runs on by itself). */
#define HTTP_FX_VALKEY_DIGEST_LUA                                                                  \
    "local keys = redis.call('KEYS', '*') "                                                        \
    "table.sort(keys) "                                                                            \
    "local out = {} "                                                                              \
    "for _, k in ipairs(keys) do "                                                                 \
    "  if k ~= KEYS[1] then "                                                                      \
    "    local t = redis.call('TYPE', k)['ok'] "                                                   \
    "    local v "                                                                                 \
    "    if t == 'string' then v = {redis.call('GET', k)} "                                        \
    "    elseif t == 'hash' then "                                                                 \
    "      local h, f = redis.call('HGETALL', k), {} "                                             \
    "      for i = 1, #h, 2 do f[#f + 1] = h[i] .. '\\0' .. h[i + 1] end "                         \
    "      table.sort(f) v = f "                                                                   \
    "    elseif t == 'set' then v = redis.call('SMEMBERS', k) table.sort(v) "                      \
    "    elseif t == 'zset' then v = redis.call('ZRANGE', k, 0, -1, 'WITHSCORES') "                \
    "    elseif t == 'list' then v = redis.call('LRANGE', k, 0, -1) "                              \
    "    else v = {redis.call('DUMP', k)} end "                                                    \
    "    out[#out + 1] = k .. ' ' .. t .. ' ' .. redis.sha1hex(table.concat(v, '\\1')) "           \
    "  end "                                                                                       \
    "end "                                                                                         \
    "return table.concat(out, '\\n')"

/* What a refused request may not change (heap): the tables of
 * testpg_state_digest (Postgres), every key but the audit Stream
 * (Valkey); a refused request's one allowed trace is its audit event. */
static inline char *http_fx_state_digest(http_fx_t *fx)
{
    if (!fx->valkey)
        return testpg_state_digest(fx->db);
    char audit[128];
    http_fx_valkey_key(audit, sizeof audit, "audit");
    const char *args[] = {"EVAL", HTTP_FX_VALKEY_DIGEST_LUA, "1", audit, NULL};
    char *d = test_store_valkey_cli(&fx->vk, args);
    assert_non_null(d);
    assert_non_null(strstr(d, ":ns hash ")); /* the namespace record is in it */
    return d;
}

/* How many records of target's identity (any tenant) fx's store holds,
 * live or ended: rows of lease.locks (Postgres), keys naming target
 * (Valkey: its identity record, idempotency records, documents;
 * docs/backends.md "Keys"). target has no glob characters. */
static inline long long http_fx_lock_records(http_fx_t *fx, const char *target)
{
    if (!fx->valkey) {
        char sql[256];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM lease.locks WHERE target_id = '%s'",
                 target);
        return testpg_query_int(fx->db, sql);
    }
    const char *args[] = {"EVAL", "return #redis.call('KEYS', '*\"' .. ARGV[1] .. '\"*')", "0",
                          target, NULL};
    return test_store_valkey_cli_int(&fx->vk, args);
}

/* ------------------------------------------------------------------ */
/* Audit entries counted and summed on Valkey (http_audit_flood,       */
/* http_audit_fair_share)                                              */

/* Over the Stream's entries of which, for each name/value pair of
 * ARGV[2..], the field of that name has that value (a value ending in
 * '%': begins with the rest, as LIKE 'x%'): ARGV[1] "count" how many,
 * "sum" the sum of their event_count (absent: 1), "max" its largest. */
#define HTTP_FX_AUDIT_STAT_LUA                                                                     \
    TEST_STORE_AUDIT_FIELDS_LUA                                                                    \
    "local n, sum, max = 0, 0, 0 "                                                                 \
    "for _, e in ipairs(redis.call('XRANGE', KEYS[1], '-', '+')) do "                              \
    "  local h, f, ok = {}, audit_fields(e), true "                                                \
    "  for i = 1, #f, 2 do h[f[i]] = f[i + 1] end "                                                \
    "  for j = 2, #ARGV, 2 do "                                                                    \
    "    local v, want = h[ARGV[j]], ARGV[j + 1] "                                                 \
    "    if want:sub(-1) == '%' then "                                                             \
    "      ok = ok and v ~= nil and v:sub(1, #want - 1) == want:sub(1, -2) "                       \
    "    else ok = ok and v == want end "                                                          \
    "  end "                                                                                       \
    "  if ok then "                                                                                \
    "    local c = tonumber(h['event_count'] or '1') "                                             \
    "    n = n + 1 sum = sum + c "                                                                 \
    "    if c > max then max = c end "                                                             \
    "  end "                                                                                       \
    "end "                                                                                         \
    "if ARGV[1] == 'sum' then return sum elseif ARGV[1] == 'max' then return max end "             \
    "return n"

/*
 * On Valkey (fx->valkey), over the audit Stream's entries that match every
 * pair of match (NULL-terminated name, value, ...; the Stream's field
 * names, docs/backends.md "Audit events"; a value ending in '%' is a
 * prefix): stat "count" how many entries, "sum" their event_count summed
 * (an entry without one stands for 1), "max" the largest event_count (0
 * without an entry): what lease.audit_log's count(*), sum(event_count)
 * and max(event_count) are on Postgres. Values are the tests' constants.
 */
static inline long long http_fx_valkey_audit_stat(http_fx_t *fx, const char *stat,
                                                  const char *const *match)
{
    assert_true(fx->valkey);
    char key[128];
    http_fx_valkey_key(key, sizeof key, "audit");
    const char *args[40] = {"EVAL", HTTP_FX_AUDIT_STAT_LUA, "1", key, stat};
    size_t n = 5;
    for (const char *const *m = match; m[0] && m[1] && n < 38; m += 2) {
        args[n++] = m[0];
        args[n++] = m[1];
    }
    args[n] = NULL;
    return test_store_valkey_cli_int(&fx->vk, args);
}

/*
 * A helper program a test starts beside leased (a proxy: socat, haproxy),
 * started as the harness starts leased (child_proc.h): its output in a log
 * of its own, never the test's stdout or stderr (ctest reads those until
 * every process holding them has closed them, so a helper left running
 * after a failed assertion held the test until its timeout), and killed by
 * the kernel should the test process die. Keep d in a static and call
 * http_helper_stop from the (group) teardown as well as at the end of the
 * test: a failed assertion longjmps out of the test, and cmocka then runs
 * the teardowns. argv[0] is the program, looked up in PATH.
 */
static inline void http_helper_start(child_daemon_t *d, const char *name, char *const *argv)
{
    char *env_argv[32] = {"env"};
    size_t n = 0;
    for (; argv[n]; n++) {
        assert_true(n + 2 < sizeof env_argv / sizeof env_argv[0]);
        env_argv[n + 1] = argv[n];
    }
    env_argv[n + 1] = NULL;
    child_daemon_init(d, name, name, "out.log");
    char **env = child_proc_env(NULL, NULL);
    child_daemon_spawn(d, "/usr/bin/env", env_argv, env);
    child_proc_env_free(env);
}

/* Stops a helper of http_helper_start: SIGTERM, up to 10 s to exit (then
 * SIGKILL), its log on stderr when it wrote anything, the log removed.
 * Nothing when it was not started or is stopped already. */
static inline void http_helper_stop(child_daemon_t *d)
{
    if (!d->name)
        return;
    child_daemon_signal(d, SIGTERM);
    (void)child_daemon_wait(d, 10000);
    char *log = child_proc_read_file(d->log_path);
    if (log[0])
        child_daemon_dump_log(d);
    free(log);
    child_daemon_release(d);
    memset(d, 0, sizeof *d);
}

#endif
