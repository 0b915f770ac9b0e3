/*
 * relay_couchdb.c - the CouchDB fence, against a CouchDB-compatible server
 * (express-pouchdb, installed from npm by tests/harness/couchdb-compat and
 * run as this test's child; or a real CouchDB named by LEASE_TEST_COUCHDB_URL):
 *  1. contrib/couchdb/lease_fencing.json makes the server itself refuse a
 *     write with a lower token than the stored document's (PUT, _bulk_docs),
 *     a write of another identity, a write without a fence, a deletion;
 *  2. the relay writes a couchdb: route's rows as documents carrying their
 *     lease (lease_fence), with _rev conditions, in order;
 *  3. a row whose document a higher token already wrote is refused for good
 *     and recorded so (last_error, leased_relay_refused_total), the document kept;
 *  4. a row delivered again (after a crash) is not applied twice: the
 *     document's revision does not move;
 *  5. a payload that is not a document write is quarantined (with its
 *     reason, leased_relay_quarantined_total) and its identity goes on;
 *  6. document ids are scoped per tenant ("<tenant_id>:<_id>"): tenant B's
 *     target-42 does not block tenant A's target-42;
 *  7. the fence takes only tokens 1..2^53-1 (1e308 is refused), and a
 *     planted lease_fence.outbox_id of 2^53-1 does not make the relay
 *     believe a row is already written.
 */
#include "relay_common.h"

#include <signal.h>
#include <sys/wait.h>

#define DB "targets"

static relay_fx_t fx;
static char couch_url[1024];
static pid_t couch_pid = -1; /* our child: it dies with this process (PR_SET_PDEATHSIG) */
static char couch_dir[64];

/* The path of server.js after `couchcompat install` (77: skipped by
 * request), or exits the test. */
static void install_server(char *server, size_t n)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' install", LEASE_TEST_COUCHCOMPAT);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char line[1024];
    server[0] = '\0';
    while (fgets(line, sizeof line, p))
        if (strncmp(line, "SERVER=", 7) == 0) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(server, n, "%s", line + 7);
        }
    int rc = pclose(p);
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77)
        exit(77); /* LEASE_TEST_NO_COUCHDB: reported as skipped by ctest */
    if (rc != 0 || !server[0]) {
        fprintf(stderr, "relay_couchdb: no CouchDB-compatible server (couchcompat install: %d)\n",
                rc);
        exit(1);
    }
}

/* Starts server.js on a free port as a child of this test. */
static void start_server(void)
{
    char server[1100];
    install_server(server, sizeof server);
    snprintf(couch_dir, sizeof couch_dir, "/tmp/leased-couch.XXXXXX");
    assert_non_null(mkdtemp(couch_dir));
    char out[128], log[128];
    snprintf(out, sizeof out, "%s/out", couch_dir);
    snprintf(log, sizeof log, "%s/pouchdb.log", couch_dir);
    char *argv[] = {"env", "node", server, "0", log, NULL};
    char **env = child_proc_env(NULL, NULL);
    couch_pid = child_proc_spawn("/usr/bin/env", argv, env, out);
    child_proc_env_free(env);
    assert_true(couch_pid > 0);
    long end = child_proc_now_ms() + 30000;
    for (;;) {
        char *text = child_proc_read_file(out);
        const char *at = strstr(text, "couchcompat listening on 127.0.0.1:");
        if (at)
            snprintf(couch_url, sizeof couch_url, "http://127.0.0.1:%d",
                     atoi(at + strlen("couchcompat listening on 127.0.0.1:")));
        int status;
        bool exited = !at && child_proc_reap(couch_pid, WNOHANG, &status);
        if (exited || (!at && child_proc_now_ms() > end)) {
            fprintf(stderr, "relay_couchdb: the CouchDB-compatible server did not start:\n%s\n",
                    text);
            free(text);
            exit(1);
        }
        free(text);
        if (at)
            return;
        child_proc_sleep_ms(50);
    }
}

static void stop_server(void)
{
    if (couch_pid > 0) {
        kill(couch_pid, SIGTERM);
        int status;
        long end = child_proc_now_ms() + 5000;
        while (!child_proc_reap(couch_pid, WNOHANG, &status)) {
            if (child_proc_now_ms() > end) {
                kill(couch_pid, SIGKILL);
                (void)child_proc_reap(couch_pid, 0, &status);
                break;
            }
            child_proc_sleep_ms(20);
        }
        couch_pid = -1;
    }
    if (couch_dir[0]) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", couch_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "relay_couchdb: could not remove %s\n", couch_dir);
    }
}

static int setup(void **state)
{
    (void)state;
    const char *real = getenv("LEASE_TEST_COUCHDB_URL");
    if (real && *real)
        snprintf(couch_url, sizeof couch_url, "%s", real); /* a real CouchDB */
    else
        start_server();
    relay_fx_open(&fx, "relay_couchdb");
    /* a database of the test's own, with the fencing design document */
    http_resp_t *r = http_call(couch_url, "DELETE", "/" DB, NULL, NULL);
    http_resp_free(r);
    r = http_call(couch_url, "PUT", "/" DB, NULL, NULL);
    assert_non_null(r);
    assert_int_equal(r->status, 201);
    http_resp_free(r);
    char *design =
        child_proc_read_file(LEASE_TEST_SOURCE_DIR "/contrib/couchdb/lease_fencing.json");
    r = http_call(couch_url, "PUT", "/" DB "/_design/lease_fencing", NULL, design);
    free(design);
    assert_non_null(r);
    assert_int_equal(r->status, 201);
    http_resp_free(r);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    relay_fx_close(&fx);
    http_resp_free(http_call(couch_url, "DELETE", "/" DB, NULL, NULL));
    stop_server();
    return 0;
}

/* {"tenant_id": ..., target} as the relay writes it (all seven components). */
static json_t *fence_identity(const char *target)
{
    json_t *id = identity_json(target);
    json_object_set_new(id, "operation_class", json_string("default"));
    return id;
}

static json_t *fence(const char *target, json_int_t token)
{
    return json_pack("{s:I, s:o, s:s}", "fencing_token", token, "lock_identity",
                     fence_identity(target), "lease_id", "lease_outside");
}

/* PUT /targets/<id> of body (stolen) with rev (may be NULL). */
static http_resp_t *couch_put(const char *id, json_t *body, const char *rev)
{
    if (rev)
        json_object_set_new(body, "_rev", json_string(rev));
    char path[256];
    snprintf(path, sizeof path, "/" DB "/%s", id);
    char *text = dump(body);
    http_resp_t *r = http_call(couch_url, "PUT", path, NULL, text);
    free(text);
    assert_non_null(r);
    return r;
}

static json_t *couch_get(const char *id)
{
    char path[256];
    snprintf(path, sizeof path, "/" DB "/%s", id);
    http_resp_t *r = http_call(couch_url, "GET", path, NULL, NULL);
    assert_non_null(r);
    json_t *doc = r->status == 200 ? json_incref(r->json) : NULL;
    http_resp_free(r);
    return doc;
}

static void expect_forbidden(http_resp_t *r, const char *reason_part)
{
    if (r->status != 403 || !strstr(r->body, reason_part))
        fprintf(stderr, "expected 403 (%s): %ld %s\n", reason_part, r->status, r->body);
    assert_int_equal(r->status, 403);
    assert_string_equal(http_resp_str(r, "error"), "forbidden");
    assert_non_null(strstr(http_resp_str(r, "reason"), reason_part));
    http_resp_free(r);
}

static void design_document_refuses_stale_writes(void **state)
{
    (void)state;
    http_resp_t *r = couch_put(
        TENANT ":doc-1", json_pack("{s:i, s:o}", "v", 1, "lease_fence", fence("t-x", 5)), NULL);
    assert_int_equal(r->status, 201);
    char rev[128];
    snprintf(rev, sizeof rev, "%s", http_resp_str(r, "rev"));
    http_resp_free(r);
    /* a lower token: refused, by the server itself, with the right revision */
    expect_forbidden(couch_put(TENANT ":doc-1",
                               json_pack("{s:i, s:o}", "v", 2, "lease_fence", fence("t-x", 4)),
                               rev),
                     "stale fencing token 4");
    /* the same through _bulk_docs */
    json_t *bulk = json_pack("{s:[{s:s, s:s, s:i, s:o}]}", "docs", "_id", TENANT ":doc-1", "_rev",
                             rev, "v", 3, "lease_fence", fence("t-x", 1));
    char *bulk_text = dump(bulk);
    r = http_call(couch_url, "POST", "/" DB "/_bulk_docs", NULL, bulk_text);
    free(bulk_text);
    assert_non_null(r);
    assert_true(r->status == 201 || r->status == 200);
    json_t *item = json_array_get(r->json, 0);
    assert_string_equal(json_string_value(json_object_get(item, "error")), "forbidden");
    http_resp_free(r);
    /* another identity, no fence, a malformed token, a deletion: refused */
    expect_forbidden(couch_put(TENANT ":doc-1",
                               json_pack("{s:i, s:o}", "v", 2, "lease_fence", fence("t-other", 9)),
                               rev),
                     "another lock identity");
    expect_forbidden(couch_put(TENANT ":doc-1", json_pack("{s:i}", "v", 2), rev), "lease_fence");
    json_t *bad = fence("t-x", 6);
    json_object_set_new(bad, "fencing_token", json_string("6"));
    expect_forbidden(
        couch_put(TENANT ":doc-1", json_pack("{s:i, s:o}", "v", 2, "lease_fence", bad), rev),
        "positive integer");
    /* a token no JavaScript number holds exactly would freeze the document */
    char huge[1024];
    snprintf(huge, sizeof huge,
             "{\"v\": 2, \"_rev\": \"%s\", \"lease_fence\": {\"fencing_token\": 1e308, "
             "\"lease_id\": \"x\", \"lock_identity\": {\"tenant_id\": \"" TENANT "\", "
             "\"program_id\": \"" PROGRAM "\", \"target_namespace\": \"" NAMESPACE "\", "
             "\"target_id\": \"t-x\", \"actor_name\": \"" ACTOR "\", \"workflow_name\": "
             "\"default\", \"operation_class\": \"default\"}}}",
             rev);
    r = http_call(couch_url, "PUT", "/" DB "/" TENANT ":doc-1", NULL, huge);
    assert_non_null(r);
    expect_forbidden(r, "at most 2^53-1");
    json_t *planted = fence("t-x", 5);
    json_object_set_new(planted, "outbox_id", json_real(1e300));
    expect_forbidden(
        couch_put(TENANT ":doc-1", json_pack("{s:i, s:o}", "v", 2, "lease_fence", planted), rev),
        "outbox_id");
    /* an id outside the writer's tenant */
    expect_forbidden(couch_put("tenant-other:doc-1",
                               json_pack("{s:i, s:o}", "v", 1, "lease_fence", fence("t-x", 5)),
                               NULL),
                     "must start with its tenant");
    char path[256];
    snprintf(path, sizeof path, "/" DB "/" TENANT ":doc-1?rev=%s", rev);
    expect_forbidden(http_call(couch_url, "DELETE", path, NULL, NULL), "not deleted");
    /* the same token and a higher one: accepted */
    r = couch_put(TENANT ":doc-1", json_pack("{s:i, s:o}", "v", 2, "lease_fence", fence("t-x", 5)),
                  rev);
    assert_int_equal(r->status, 201);
    snprintf(rev, sizeof rev, "%s", http_resp_str(r, "rev"));
    http_resp_free(r);
    r = couch_put(TENANT ":doc-1", json_pack("{s:i, s:o}", "v", 3, "lease_fence", fence("t-x", 6)),
                  rev);
    assert_int_equal(r->status, 201);
    http_resp_free(r);
    json_t *doc = couch_get(TENANT ":doc-1");
    assert_int_equal(json_integer_value(json_object_get(doc, "v")), 3);
    json_decref(doc);
}

static char routes_env[128] = "LEASE_RELAY_ROUTES=state.*=couchdb:" DB;
static char couch_env[1100];

static relay_proc_t *start_relay(void)
{
    snprintf(couch_env, sizeof couch_env, "LEASE_RELAY_COUCHDB_URL=%s", couch_url);
    return relay_proc_start(fx.http.db,
                            (const char *[]){fx.exchange_env, routes_env, couch_env,
                                             "LEASE_RELAY_RETRY_DELAY_MS=200",
                                             "LEASE_RELAY_INSTANCE_ID=relay-couch", NULL});
}

/* A commit of document writes for the relay: each payload a document. */
static void commit_docs(const char *target, json_t *lease, json_t *payloads)
{
    static int calls;
    json_t *writes = json_array();
    size_t i;
    json_t *p;
    json_array_foreach(payloads, i, p)
        json_array_append_new(writes, json_pack("{s:s, s:s, s:O}", "kind", "publication", "topic",
                                                "state.target", "payload", p));
    json_decref(payloads);
    char rid[64];
    snprintf(rid, sizeof rid, "couch-commit-%d", ++calls);
    json_t *body =
        json_pack("{s:s, s:o, s:O, s:O, s:s, s:s, s:o}", "request_id", rid, "lock_identity",
                  identity_json(target), "lease_id", json_object_get(lease, "lease_id"),
                  "fencing_token", json_object_get(lease, "fencing_token"), "execution_id",
                  "exec_1", "trace_id", "trace-couch", "writes", writes);
    http_resp_t *r = call_owned(fx.http.base, "POST", "/v1/commits", fx.worker, dump(body));
    check_reply(r, 200, "commit_accepted", NULL);
    http_resp_free(r);
}

static bool wait_all_published(void)
{
    return relay_wait_sql(fx.http.db,
                          "SELECT count(*) FROM lease.outbox WHERE published_at IS NULL", 0, 30000);
}

static void relay_writes_documents_with_their_lease(void **state)
{
    (void)state;
    json_t *l1 = relay_acquire(&fx, "t-c1");
    commit_docs("t-c1", l1,
                json_pack("[{s:s, s:s, s:i}, {s:s, s:s, s:i}]", "_id", "target-c1", "state",
                          "scanned", "n", 1, "_id", "target-c1", "state", "enriched", "n", 2));
    relay_release(&fx, "t-c1", l1);
    json_t *l2 = relay_acquire(&fx, "t-c1");
    commit_docs("t-c1", l2,
                json_pack("[{s:s, s:s, s:i}]", "_id", "target-c1", "state", "done", "n", 3));
    relay_proc_t *relay = start_relay();
    if (!wait_all_published())
        relay_proc_dump_log(relay);
    json_t *doc = couch_get(TENANT ":target-c1");
    assert_non_null(doc);
    assert_string_equal(json_string_value(json_object_get(doc, "state")), "done");
    assert_int_equal(json_integer_value(json_object_get(doc, "n")), 3);
    json_t *f = json_object_get(doc, "lease_fence");
    assert_int_equal(json_integer_value(json_object_get(f, "fencing_token")),
                     json_integer_value(json_object_get(l2, "fencing_token")));
    assert_string_equal(json_string_value(json_object_get(f, "lease_id")),
                        json_string_value(json_object_get(l2, "lease_id")));
    json_t *want_identity = fence_identity("t-c1");
    assert_true(json_equal(json_object_get(f, "lock_identity"), want_identity));
    json_decref(want_identity);
    assert_int_equal(json_integer_value(json_object_get(f, "outbox_id")),
                     testpg_query_int(fx.http.db, "SELECT max(outbox_id) FROM lease.outbox"));
    assert_string_equal(json_string_value(json_object_get(f, "trace_id")), "trace-couch");
    /* three writes, in order: revision 3 */
    assert_int_equal(strncmp(json_string_value(json_object_get(doc, "_rev")), "3-", 2), 0);
    assert_true(
        relay_wait_metric(relay, "leased_relay_published_total{destination=\"couchdb\"}", 3, 5000));
    assert_int_equal(testpg_query_int(fx.http.db, "SELECT count(*) FROM lease.outbox WHERE "
                                                  "published_by = 'relay-couch' AND last_error "
                                                  "IS NULL"),
                     3);
    assert_int_equal(relay_proc_stop(relay), 0);
    json_decref(doc);
    json_decref(l1);
    json_decref(l2);
}

static void a_stale_row_is_refused_and_recorded(void **state)
{
    (void)state;
    /* a writer outside leased wrote the document with token 50 */
    http_resp_t *r = couch_put(
        TENANT ":target-c2",
        json_pack("{s:s, s:o}", "state", "from-elsewhere", "lease_fence", fence("t-c2", 50)), NULL);
    assert_int_equal(r->status, 201);
    http_resp_free(r);
    json_t *l = relay_acquire(&fx, "t-c2");
    commit_docs("t-c2", l, json_pack("[{s:s, s:s}]", "_id", "target-c2", "state", "stale"));
    relay_proc_t *relay = start_relay();
    assert_true(wait_all_published());
    assert_int_equal(testpg_query_int(fx.http.db,
                                      "SELECT count(*) FROM lease.outbox o JOIN lease.locks k "
                                      "USING (lock_key) WHERE k.target_id = 't-c2' AND "
                                      "o.last_error LIKE 'refused: stale%'"),
                     1);
    assert_true(relay_wait_metric(relay, "leased_relay_refused_total", 1, 5000));
    json_t *doc = couch_get(TENANT ":target-c2");
    assert_string_equal(json_string_value(json_object_get(doc, "state")), "from-elsewhere");
    json_decref(doc);
    assert_int_equal(relay_proc_stop(relay), 0);
    json_decref(l);
}

static void a_row_delivered_again_is_not_applied_twice(void **state)
{
    (void)state;
    json_t *before = couch_get(TENANT ":target-c1");
    assert_non_null(before);
    /* as if the relay had died after writing and before marking */
    assert_true(testpg_exec(fx.http.db,
                            "UPDATE lease.outbox o SET published_at = NULL FROM lease.locks k "
                            "WHERE k.lock_key = o.lock_key AND k.target_id = 't-c1'"));
    relay_proc_t *relay = start_relay();
    assert_true(wait_all_published());
    json_t *after = couch_get(TENANT ":target-c1");
    assert_string_equal(json_string_value(json_object_get(after, "_rev")),
                        json_string_value(json_object_get(before, "_rev")));
    assert_int_equal(json_integer_value(json_object_get(after, "n")), 3);
    assert_int_equal(relay_proc_stop(relay), 0);
    json_decref(before);
    json_decref(after);
}

static void a_bad_payload_is_quarantined(void **state)
{
    (void)state;
    json_t *l = relay_acquire(&fx, "t-c3");
    long long first = testpg_query_int(fx.http.db, "SELECT coalesce(max(outbox_id), 0) + 1 FROM "
                                                   "lease.outbox");
    commit_docs(
        "t-c3", l,
        json_pack("[{s:s}, {s:s, s:s}]", "state", "no id", "_id", "target-c3", "state", "fine"));
    relay_proc_t *relay = start_relay();
    if (!wait_all_published())
        relay_proc_dump_log(relay);
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM lease.outbox WHERE outbox_id = %lld AND published_at IS NULL "
             "AND quarantined_at IS NOT NULL AND quarantine_reason LIKE '%%_id%%'",
             first);
    assert_int_equal(testpg_query_int(fx.http.db, sql), 1);
    json_t *doc = couch_get(TENANT ":target-c3"); /* the row behind it went out */
    assert_non_null(doc);
    json_decref(doc);
    assert_true(relay_wait_metric(relay, "leased_relay_quarantined_total", 1, 5000));
    /* an operator gives up on it */
    snprintf(sql, sizeof sql,
             "SET ROLE lease_admin; SELECT lease.outbox_discard(%lld, 'no document id: INC-7')",
             first);
    assert_true(testpg_exec(fx.http.db, sql));
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM lease.outbox WHERE outbox_id = %lld AND last_error = "
             "'discarded: no document id: INC-7' AND published_by = 'operator:postgres'",
             first);
    assert_int_equal(testpg_query_int(fx.http.db, sql), 1);
    assert_int_equal(relay_proc_stop(relay), 0);
    json_decref(l);
}

/* An identity of tenant (the fixture's worker is of TENANT). */
static json_t *identity_of(const char *tenant, const char *target)
{
    json_t *id = identity_json(target);
    json_object_set_new(id, "tenant_id", json_string(tenant));
    return id;
}

static void tenants_do_not_share_document_ids(void **state)
{
    (void)state;
    /* tenant B, with a credential of its own, writes its target-42 first */
    const char *worker_b =
        http_fx_credential_spec(&fx.http,
                                &(leased_cred_spec_t){.principal = "prn_b",
                                                      .tenant = "tenant-b",
                                                      .program = PROGRAM,
                                                      .capabilities = WORKER_CAPS,
                                                      .admin = false},
                                NULL);
    json_t *acq = json_pack("{s:s, s:o, s:s, s:s, s:s}", "request_id", "acq-b-42", "lock_identity",
                            identity_of("tenant-b", "t-42"), "service_instance_id", "inst_1",
                            "execution_id", "exec_1", "job_id", "job_1");
    http_resp_t *r = call_owned(fx.http.base, "POST", "/v1/leases/acquire", worker_b, dump(acq));
    check_reply(r, 200, "lease_acquired", NULL);
    json_t *lb = json_deep_copy(lease_of(r));
    http_resp_free(r);
    json_t *body = json_pack(
        "{s:s, s:o, s:O, s:O, s:s, s:s, s:[{s:s, s:s, s:{s:s, s:s}}]}", "request_id", "commit-b-42",
        "lock_identity", identity_of("tenant-b", "t-42"), "lease_id",
        json_object_get(lb, "lease_id"), "fencing_token", json_object_get(lb, "fencing_token"),
        "execution_id", "exec_1", "trace_id", "trace-b", "writes", "kind", "publication", "topic",
        "state.target", "payload", "_id", "target-42", "state", "b");
    r = call_owned(fx.http.base, "POST", "/v1/commits", worker_b, dump(body));
    check_reply(r, 200, "commit_accepted", NULL);
    http_resp_free(r);
    /* then tenant A (the fixture's tenant) writes its own target-42 */
    json_t *la = relay_acquire(&fx, "t-42");
    commit_docs("t-42", la, json_pack("[{s:s, s:s}]", "_id", "target-42", "state", "a"));
    relay_proc_t *relay = start_relay();
    if (!wait_all_published())
        relay_proc_dump_log(relay);
    assert_int_equal(testpg_query_int(fx.http.db,
                                      "SELECT count(*) FROM lease.outbox o JOIN lease.locks k "
                                      "USING (lock_key) WHERE k.target_id = 't-42' AND "
                                      "o.last_error IS NULL AND o.published_at IS NOT NULL"),
                     2);
    json_t *da = couch_get(TENANT ":target-42");
    json_t *db = couch_get("tenant-b:target-42");
    assert_non_null(da);
    assert_non_null(db);
    assert_string_equal(json_string_value(json_object_get(da, "state")), "a");
    assert_string_equal(json_string_value(json_object_get(db, "state")), "b");
    assert_int_equal(relay_proc_stop(relay), 0);
    json_decref(da);
    json_decref(db);
    json_decref(la);
    json_decref(lb);
}

static void a_planted_marker_is_not_believed(void **state)
{
    (void)state;
    /* a database member plants a marker naming the highest outbox id */
    json_t *planted = fence("t-c5", 1);
    json_object_set_new(planted, "outbox_id", json_integer(INT64_C(9007199254740991)));
    http_resp_t *r =
        couch_put(TENANT ":target-c5",
                  json_pack("{s:s, s:o}", "state", "planted", "lease_fence", planted), NULL);
    assert_int_equal(r->status, 201);
    http_resp_free(r);
    json_t *l = relay_acquire(&fx, "t-c5");
    commit_docs("t-c5", l, json_pack("[{s:s, s:s}]", "_id", "target-c5", "state", "written"));
    relay_proc_t *relay = start_relay();
    if (!wait_all_published())
        relay_proc_dump_log(relay);
    json_t *doc = couch_get(TENANT ":target-c5");
    assert_non_null(doc);
    /* the row was really written, not marked published on the marker's word */
    assert_string_equal(json_string_value(json_object_get(doc, "state")), "written");
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(doc, "lease_fence"), "outbox_id")),
        testpg_query_int(fx.http.db, "SELECT max(outbox_id) FROM lease.outbox"));
    assert_int_equal(relay_proc_stop(relay), 0);
    json_decref(doc);
    json_decref(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(design_document_refuses_stale_writes),
        cmocka_unit_test(relay_writes_documents_with_their_lease),
        cmocka_unit_test(a_stale_row_is_refused_and_recorded),
        cmocka_unit_test(a_row_delivered_again_is_not_applied_twice),
        cmocka_unit_test(a_bad_payload_is_quarantined),
        cmocka_unit_test(tenants_do_not_share_document_ids),
        cmocka_unit_test(a_planted_marker_is_not_believed),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
