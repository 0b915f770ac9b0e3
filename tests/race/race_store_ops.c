/*
 * race_store_ops.c - every store operation against the real schema, so the
 * adapter's JSON and the SQL functions agree field by field: inspect (by
 * identity, by lease id, live and terminal, out of scope), the three lists
 * with paging (and while other threads acquire and release), credential
 * lookup, audit batches, sweep and health.
 * On Valkey (race_util.h) the same operations through the Valkey adapter:
 * the credential created by the library's credential_create (what leasectl
 * credential create calls there), the audit batch found in the Stream, and
 * the expiry by the housekeeping's expire step; lease_store_sweep, sessions
 * and a commit's publications, which the Valkey backend refuses by design
 * (docs/backends.md "What needs PostgreSQL"), are asserted as their typed
 * refusals, nothing written.
 */
#include "race_util.h"

#define CHURNERS 2
#define LISTERS 3

static lease_record_t acquire_as(lease_store_t *s, const lease_identity_t *id,
                                 const char *principal, int64_t ttl)
{
    char rid[128];
    race_rid(rid, sizeof rid, "ops-acq", 0, 0);
    lease_acquire_req_t req;
    race_acquire_req(&req, id, rid, principal, "inst-ops", ttl, 10000);
    strcpy(req.metadata_json, "{\"attempt\":1,\"source\":\"race\"}");
    lease_digest_acquire(&req, req.call.request_digest);
    return race_acquire_retrying(s, &req);
}

static void list_req(lease_list_req_t *l, lease_list_by_t by, const char *target, const char *owner,
                     int page_size)
{
    memset(l, 0, sizeof *l);
    race_call(&l->call, "", owner ? owner : "prn-reader", 10000);
    strcpy(l->scope.tenant_id, "tenant-race");
    strcpy(l->scope.program_id, "*");
    l->scope.all_actors = true;
    l->by = by;
    strcpy(l->tenant_id, "tenant-race");
    strcpy(l->program_id, "program-race");
    if (target) {
        strcpy(l->target_namespace, "race-ns");
        snprintf(l->target_id, sizeof l->target_id, "%s", target);
    }
    if (owner)
        snprintf(l->owner_principal_id, sizeof l->owner_principal_id, "%s", owner);
    l->page_size = page_size;
}

/* Pages through a list; returns how many leases it saw, in stable order. */
static size_t list_all(lease_store_t *s, lease_list_req_t *l, char seen[][LEASE_ID_MAX + 1],
                       size_t max)
{
    size_t n = 0;
    for (int pages = 0; pages < 100; pages++) {
        lease_list_result_t res;
        lease_code_t c = lease_store_list(s, l, &res);
        CHECK(c == LEASE_LISTED, "list: %s", CODE(c));
        CHECK(res.count <= (size_t)(l->page_size ? l->page_size : 100), "page too long");
        for (size_t i = 0; i < res.count; i++) {
            CHECK(res.leases[i].state == LEASE_STATE_ACTIVE, "lists show active leases");
            CHECK(strcmp(res.leases[i].identity.tenant_id, "tenant-race") == 0, "tenant");
            if (seen && n < max)
                snprintf(seen[n], LEASE_ID_MAX + 1, "%s", res.leases[i].lease_id);
            n++;
        }
        bool more = res.next_page_token[0] != '\0';
        snprintf(l->page_token, sizeof l->page_token, "%s", res.next_page_token);
        lease_list_result_free(&res);
        if (!more)
            return n;
        l->call.deadline = lease_deadline_in(10000);
    }
    CHECK(false, "paging did not end");
    return n;
}

typedef struct churn {
    lease_store_t *store;
    int index;
    int stop; /* __atomic */
} churn_t;

static void *churner(void *arg)
{
    churn_t *c = arg;
    char target[32], principal[32];
    snprintf(target, sizeof target, "churn-%d", c->index);
    snprintf(principal, sizeof principal, "prn-churn-%d", c->index);
    lease_identity_t id;
    race_identity(&id, target);
    for (int n = 0; !__atomic_load_n(&c->stop, __ATOMIC_SEQ_CST); n++) {
        lease_record_t l = acquire_as(c->store, &id, principal, 30000);
        char rid[128];
        race_rid(rid, sizeof rid, "churn-rel", c->index, n);
        lease_owner_req_t rel;
        race_owner_req(&rel, &l, rid, principal, "inst-ops", 0, false, 10000);
        lease_result_t res;
        lease_code_t code;
        do
            code = lease_store_release(c->store, &rel, &res);
        while (code == LEASE_BACKEND_UNAVAILABLE);
        CHECK(code == LEASE_RELEASED, "churn release: %s", CODE(code));
    }
    return NULL;
}

typedef struct lister {
    lease_store_t *store;
    int pages_ok; /* __atomic */
} lister_t;

static void *lister(void *arg)
{
    lister_t *l = arg;
    for (int i = 0; i < 25; i++) {
        lease_list_req_t req;
        list_req(&req, LEASE_LIST_BY_PROGRAM, NULL, NULL, 2);
        size_t n = list_all(l->store, &req, NULL, 0);
        /* five standing leases, plus up to one per churner */
        CHECK(n >= 5 && n <= 5 + CHURNERS, "program list saw %zu leases", n);
        __atomic_add_fetch(&l->pages_ok, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

/* The audit Stream's entries of request_id with decision and target_id
 * (Valkey's lease.audit_events). */
static long long valkey_audit_entries(const race_env_t *env, const char *request_id,
                                      const char *decision, const char *target_id)
{
    static const char lua[] = TEST_STORE_AUDIT_FIELDS_LUA
        "local n = 0 "
        "for _, e in ipairs(redis.call('XRANGE', KEYS[1], '-', '+')) do "
        "  local f, m = audit_fields(e), {} "
        "  for i = 1, #f, 2 do m[f[i]] = f[i + 1] end "
        "  if m.request_id == ARGV[1] and m.decision == ARGV[2] "
        "     and m.target_id == ARGV[3] then n = n + 1 end "
        "end "
        "return n";
    const char *args[] = {"EVAL",     lua,      "1",       "lease:{leased}:audit",
                          request_id, decision, target_id, NULL};
    char *out = race_valkey_cli(env, args);
    long long n = atoll(out);
    free(out);
    return n;
}

/* The credential race_store_ops looks up, created as each backend's
 * operator tool creates it. */
static void create_credential(const race_env_t *env)
{
    if (!env->valkey) {
        CHECK(
            testpg_exec(env->db_url,
                        "INSERT INTO lease.credentials (credential_id, principal_id, client_id, "
                        "tenant_id, program_id, actor_names, capabilities, admin, secret_digest) "
                        "VALUES ('key_abcdefghijklmnopqrstuvwxyz', 'prn-c', 'client-c', "
                        "'tenant-race', 'program-race', '{racer,other}', "
                        "'{targets:lease,targets:read}', false, decode(repeat('ab', 32), 'hex'))"),
            "insert credential");
        return;
    }
    char json[512], digest[65], err[256] = "";
    for (int i = 0; i < 64; i += 2)
        memcpy(digest + i, "ab", 2);
    digest[64] = '\0';
    snprintf(json, sizeof json,
             "{\"credential_id\":\"key_abcdefghijklmnopqrstuvwxyz\",\"principal_id\":\"prn-c\","
             "\"client_id\":\"client-c\",\"tenant_id\":\"tenant-race\","
             "\"program_id\":\"program-race\",\"actor_names\":[\"racer\",\"other\"],"
             "\"capabilities\":[\"targets:lease\",\"targets:read\"],\"admin\":false,"
             "\"secret_digest\":\"%s\"}",
             digest);
    char *row = NULL;
    CHECK(lease_valkey_credential_create(lease_valkey_of(env->store), json, &row, err,
                                         sizeof err) == LEASE_INSPECTED,
          "credential create: %s", err);
    free(row);
}

/* Valkey's refusals by design: sessions (refused as the caller's request,
 * field session_id, before the backend sees it) and a commit's
 * publications (the outbox: lease_backend_unavailable, the commit refused
 * whole); nothing of either is written. */
static void refused_on_valkey(race_env_t *env, const lease_record_t *held)
{
    lease_session_req_t sr;
    memset(&sr, 0, sizeof sr);
    race_call(&sr.call, "ops-session", "prn-a", 5000);
    strcpy(sr.tenant_id, "tenant-race");
    strcpy(sr.service_instance_id, "inst-ops");
    strcpy(sr.session_id, "sess_race");
    lease_result_t res;
    CHECK(lease_store_session_open(env->store, &sr, &res) == LEASE_INVALID_LEASE_REQUEST &&
              strcmp(res.field, "session_id") == 0,
          "session_open: %s (%s)", CODE(res.code), res.field);
    CHECK(lease_store_session_keepalive(env->store, &sr, &res) == LEASE_INVALID_LEASE_REQUEST &&
              strcmp(res.field, "session_id") == 0,
          "session_keepalive: %s", CODE(res.code));
    CHECK(lease_store_session_close(env->store, &sr, &res) == LEASE_INVALID_LEASE_REQUEST &&
              strcmp(res.field, "session_id") == 0,
          "session_close: %s", CODE(res.code));
    lease_identity_t id;
    race_identity(&id, "ops-in-session");
    char rid[128];
    race_rid(rid, sizeof rid, "ops-sess-acq", 0, 0);
    lease_acquire_req_t req;
    race_acquire_req(&req, &id, rid, "prn-a", "inst-ops", 30000, 5000);
    strcpy(req.session_id, "sess_race");
    lease_digest_acquire(&req, req.call.request_digest);
    CHECK(lease_store_acquire(env->store, &req, &res) == LEASE_INVALID_LEASE_REQUEST &&
              strcmp(res.field, "session_id") == 0,
          "an acquire in a session: %s", CODE(res.code));
    CHECK(race_env_counter(env, &id) == 0, "an acquire in a session wrote its identity");

    lease_commit_req_t c;
    memset(&c, 0, sizeof c);
    race_rid(rid, sizeof rid, "ops-commit", 0, 0);
    race_call(&c.call, rid, held->owner_principal_id, 5000);
    c.identity = held->identity;
    snprintf(c.lease_id, sizeof c.lease_id, "%s", held->lease_id);
    c.fencing_token = held->fencing_token;
    snprintf(c.execution_id, sizeof c.execution_id, "%s", held->execution_id);
    c.n_writes = 2;
    c.writes[0].kind = LEASE_WRITE_DOCUMENT;
    strcpy(c.writes[0].key, "ops-doc");
    c.writes[0].json = "{\"v\":1}";
    c.writes[1].kind = LEASE_WRITE_PUBLICATION;
    strcpy(c.writes[1].key, "race.topic");
    c.writes[1].json = "{\"done\":true}";
    CHECK(lease_digest_commit(&c, c.call.request_digest), "digest");
    lease_commit_result_t cr;
    CHECK(lease_store_fenced_commit(env->store, &c, &cr) == LEASE_BACKEND_UNAVAILABLE,
          "a commit with a publication: %s", CODE(cr.code));
    /* its document is not written either (keys: lease:{ns}:d:<canonical>:<key>) */
    char key[600];
    race_valkey_ident_key(&held->identity, key, sizeof key);
    char doc[700];
    snprintf(doc, sizeof doc, "lease:{leased}:d:%s:ops-doc", strstr(key, ":id:") + 4);
    const char *args[] = {"EXISTS", doc, NULL};
    char *out = race_valkey_cli(env, args);
    CHECK(atoi(out) == 0, "the refused commit's document was written");
    free(out);
    printf("refused by design on valkey: session_open, keepalive, close and an acquire in a "
           "session (invalid_lease_request, field session_id); a commit with a publication "
           "(lease_backend_unavailable); nothing written\n");
}

int main(void)
{
    race_env_t env;
    race_setup(&env, "store_ops", 8, "race-store-ops");
    lease_result_t res;

    /* five standing leases of two owners */
    lease_identity_t ids[5];
    lease_record_t leases[5];
    for (int i = 0; i < 5; i++) {
        char target[32];
        snprintf(target, sizeof target, "ops-%d", i);
        race_identity(&ids[i], target);
        leases[i] = acquire_as(env.store, &ids[i], i < 3 ? "prn-a" : "prn-b", 60000);
        CHECK(strcmp(leases[i].metadata_json, "{\"attempt\":1,\"source\":\"race\"}") == 0,
              "metadata round trip: %s", leases[i].metadata_json);
        CHECK(leases[i].renewed_at_ms == leases[i].acquired_at_ms, "renewed_at = acquired_at");
        CHECK(leases[i].expires_at_ms == leases[i].acquired_at_ms + 60000, "expires_at");
        CHECK(strcmp(leases[i].owner_credential_id, "key_race") == 0, "owner credential");
    }

    /* inspect by identity and by id; out of scope is not found */
    CHECK(race_inspect(env.store, &ids[1], &res) == LEASE_INSPECTED &&
              race_same_lease(&res.lease, &leases[1]),
          "inspect by identity");
    CHECK(race_inspect_id(env.store, leases[2].lease_id, &res) == LEASE_INSPECTED &&
              race_same_lease(&res.lease, &leases[2]),
          "inspect by lease id");
    lease_inspect_req_t ir;
    race_inspect_req(&ir, &ids[1], NULL);
    strcpy(ir.scope.tenant_id, "tenant-other");
    CHECK(lease_store_inspect(env.store, &ir, &res) == LEASE_NOT_FOUND, "other tenant");
    race_inspect_req(&ir, &ids[1], NULL);
    ir.scope.all_actors = false;
    ir.scope.n_actors = 1;
    strcpy(ir.scope.actor_names[0], "someone-else");
    CHECK(lease_store_inspect(env.store, &ir, &res) == LEASE_NOT_FOUND, "other actor");
    CHECK(race_inspect_id(env.store, "lease_doesnotexist", &res) == LEASE_NOT_FOUND, "unknown");

    /* lists: by owner, by target, by program, paged */
    char seen[16][LEASE_ID_MAX + 1];
    lease_list_req_t l;
    list_req(&l, LEASE_LIST_BY_OWNER, NULL, "prn-a", 1);
    CHECK(list_all(env.store, &l, seen, 16) == 3, "prn-a owns three");
    list_req(&l, LEASE_LIST_BY_TARGET, "ops-4", NULL, 10);
    CHECK(list_all(env.store, &l, seen, 16) == 1 && strcmp(seen[0], leases[4].lease_id) == 0,
          "by target");
    list_req(&l, LEASE_LIST_BY_PROGRAM, NULL, NULL, 2);
    CHECK(list_all(env.store, &l, seen, 16) == 5, "by program, three pages");
    for (int i = 0; i < 5; i++)
        CHECK(strcmp(seen[i], leases[i].lease_id) == 0, "identity order, page after page");
    list_req(&l, LEASE_LIST_BY_PROGRAM, NULL, NULL, 2);
    strcpy(l.page_token, "forged.0123456789abcdef0123456789abcdef");
    lease_list_result_t lr;
    CHECK(lease_store_list(env.store, &l, &lr) == LEASE_INVALID_LEASE_REQUEST &&
              strcmp(lr.field, "page_token") == 0,
          "a forged page token is named");
    lease_list_result_free(&lr);

    /* lists while other threads acquire and release */
    churn_t churn[CHURNERS];
    lister_t lst = {.store = env.store};
    pthread_t ct[CHURNERS], lt[LISTERS];
    for (int i = 0; i < CHURNERS; i++) {
        churn[i] = (churn_t){.store = env.store, .index = i};
        CHECK(pthread_create(&ct[i], NULL, churner, &churn[i]) == 0, "thread");
    }
    for (int i = 0; i < LISTERS; i++)
        CHECK(pthread_create(&lt[i], NULL, lister, &lst) == 0, "thread");
    for (int i = 0; i < LISTERS; i++)
        pthread_join(lt[i], NULL);
    for (int i = 0; i < CHURNERS; i++) {
        __atomic_store_n(&churn[i].stop, 1, __ATOMIC_SEQ_CST);
        pthread_join(ct[i], NULL);
    }
    CHECK(lst.pages_ok == 25 * LISTERS, "every concurrent listing completed");

    /* a released lease, inspected by id, is the terminal record */
    char rid[128];
    race_rid(rid, sizeof rid, "ops-rel", 0, 0);
    lease_owner_req_t rel;
    race_owner_req(&rel, &leases[0], rid, "prn-a", "inst-ops", 0, false, 10000);
    CHECK(lease_store_release(env.store, &rel, &res) == LEASE_RELEASED, "release");
    CHECK(res.lease.state == LEASE_STATE_RELEASED && res.lease.ended_at_ms > 0, "terminal");
    CHECK(race_inspect_id(env.store, leases[0].lease_id, &res) == LEASE_INSPECTED &&
              res.lease.state == LEASE_STATE_RELEASED &&
              res.lease.ended_at_ms >= res.lease.acquired_at_ms,
          "terminal record by id");

    /* credential lookup */
    create_credential(&env);
    lease_deadline_t d = lease_deadline_in(5000);
    lease_credential_t cred;
    bool found = false;
    CHECK(lease_store_credential_lookup(env.store, "key_abcdefghijklmnopqrstuvwxyz", &d, &cred,
                                        &found) == LEASE_INSPECTED &&
              found,
          "credential found");
    CHECK(strcmp(cred.principal_id, "prn-c") == 0 && cred.scope.n_actors == 2 &&
              !cred.scope.all_actors && cred.capabilities == (LEASE_CAP_LEASE | LEASE_CAP_READ) &&
              !cred.admin && cred.secret_digest[0] == 0xab && cred.created_at_ms > 0 &&
              !cred.has_expiry && !cred.revoked,
          "credential fields");
    CHECK(lease_store_credential_lookup(env.store, "key_bbbbbbbbbbbbbbbbbbbbbbbbbb", &d, &cred,
                                        &found) == LEASE_NOT_FOUND &&
              !found,
          "unknown credential");

    /* audit batch */
    lease_audit_event_t ev[2];
    memset(ev, 0, sizeof ev);
    for (int i = 0; i < 2; i++) {
        ev[i].event_type = i ? "target_lease_inspect" : "target_lease_acquire";
        ev[i].occurred_at_ms = lease_wall_now_ms();
        ev[i].code = i ? LEASE_NOT_FOUND : LEASE_CONFLICT;
        race_call(&ev[i].call, i ? "audit-req-2" : "audit-req-1", "prn-a", 5000);
        ev[i].has_identity = true;
        ev[i].identity = ids[1];
    }
    CHECK(lease_store_record_audit(env.store, ev, 2, &d) == LEASE_INSPECTED, "record_audit");
    if (env.valkey)
        CHECK(valkey_audit_entries(&env, "audit-req-1", "deny", "ops-1") == 1 &&
                  valkey_audit_entries(&env, "audit-req-2", "deny", "ops-1") == 1,
              "two audit entries with their fields");
    else
        CHECK(testpg_query_int(env.db_url, "SELECT count(*) FROM lease.audit_events WHERE "
                                           "request_id IN ('audit-req-1', 'audit-req-2') AND "
                                           "decision = 'deny' AND target_id = 'ops-1'") == 2,
              "two audit rows with their fields");

    /* sweep and health */
    lease_identity_t short_id;
    race_identity(&short_id, "ops-short");
    lease_record_t short_lease = acquire_as(env.store, &short_id, "prn-a", 1100);
    lease_sleep_ms(short_lease.expires_at_ms - lease_wall_now_ms() + 30);
    d = lease_deadline_in(5000);
    lease_sweep_result_t sw;
    lease_code_t c;
    if (env.valkey) {
        /* no lease_store_sweep on Valkey (refused by design); leased's
         * sweeper runs the housekeeping's expire step there */
        CHECK(lease_store_sweep(env.store, 100, &d, &sw) == LEASE_BACKEND_UNAVAILABLE && !sw.ran,
              "sweep on valkey is refused");
        CHECK(race_inspect_id(env.store, short_lease.lease_id, &res) == LEASE_INSPECTED &&
                  res.lease.state == LEASE_STATE_EXPIRED,
              "the expired lease before the expire step: %s", CODE(res.code));
        lease_housekeeping_result_t hk;
        do
            c = lease_store_housekeep(env.store, LEASE_STEP_EXPIRE, 100, 0, &d, &hk);
        while (c == LEASE_BACKEND_UNAVAILABLE);
        CHECK(c == LEASE_INSPECTED && hk.ran && hk.expired == 1, "expire step expired %lld: %s",
              (long long)hk.expired, CODE(c));
    } else {
        do
            c = lease_store_sweep(env.store, 100, &d, &sw);
        while (c == LEASE_BACKEND_UNAVAILABLE);
        CHECK(c == LEASE_INSPECTED && sw.ran && sw.expired == 1, "sweep expired %lld",
              (long long)sw.expired);
    }
    CHECK(race_inspect_id(env.store, short_lease.lease_id, &res) == LEASE_INSPECTED &&
              res.lease.state == LEASE_STATE_EXPIRED &&
              res.lease.ended_at_ms == short_lease.expires_at_ms,
          "the swept lease ended expired at its expiry");
    lease_health_t h;
    CHECK(lease_store_health(env.store, &d, &h) == LEASE_INSPECTED, "health");
    CHECK(h.active_leases == 4, "four standing leases active: %lld", (long long)h.active_leases);
    if (env.valkey)
        refused_on_valkey(&env, &leases[1]);
    printf("all store operations round-trip; %d concurrent listings consistent\n", lst.pages_ok);
    race_teardown(&env);
    return 0;
}
