/*
 * race_failclosed.c - backend failures that must fail closed with a typed
 * result, through the store against the real schema:
 *  1. a corrupt record (the stored tuple no longer matches its lock key):
 *     LS001 -> lease_backend_unavailable, not retryable, nothing acquired,
 *     and the adapter quarantined the key (lease.quarantine row, audit
 *     alert); concurrent callers all fail closed the same way;
 *  2. a login role without the SERIALIZABLE default: the store sets it on
 *     each new session, so operations still run SERIALIZABLE;
 *  3. a malformed call (no principal: a service bug) : LS003 ->
 *     backend_unavailable;
 *  4. a sealed namespace: acquire answers backend_unavailable, health
 *     reports sealed;
 *  5. health of a healthy database: reachable, schema current, the active
 *     lease count of the database.
 * On Valkey (race_util.h): 1 with the identity record as the function
 * library keeps it (leased.lua: "A record is read whole and checked before
 * anything is written"): a record whose stored identity differs from the
 * one asked for, and one that misses a member, each refused to every
 * concurrent caller with lease_backend_unavailable, reason corrupt_record,
 * nothing acquired; 3, 4 (the namespace record's seal) and 5 (the live
 * set's count) the same. Left out there, printed, counted nowhere: 1's
 * quarantine (lease.quarantine and its alert are PostgreSQL's) and 2 (a
 * login role's default isolation level).
 */
#include "race_util.h"

#define THREADS 6

typedef struct corrupt_call {
    lease_store_t *store;
    lease_identity_t id;
    int index;
    lease_result_t res;
} corrupt_call_t;

static void *acquire_corrupt(void *arg)
{
    corrupt_call_t *c = arg;
    char rid[128], principal[32];
    race_rid(rid, sizeof rid, "corrupt", c->index, 0);
    snprintf(principal, sizeof principal, "prn-c%d", c->index);
    lease_acquire_req_t req;
    race_acquire_req(&req, &c->id, rid, principal, "inst", 30000, 10000);
    lease_code_t code = lease_store_acquire(c->store, &req, &c->res);
    CHECK(code == c->res.code, "codes agree");
    return NULL;
}

/* THREADS concurrent acquires of a corrupt identity: every one fails
 * closed, not retryable, no lease. */
static void acquire_all_fail_closed(lease_store_t *s, const lease_identity_t *id)
{
    corrupt_call_t calls[THREADS];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        calls[i] = (corrupt_call_t){.store = s, .id = *id, .index = i};
        CHECK(pthread_create(&t[i], NULL, acquire_corrupt, &calls[i]) == 0, "thread");
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < THREADS; i++) {
        CHECK(calls[i].res.code == LEASE_BACKEND_UNAVAILABLE, "corrupt acquire %d: %s", i,
              CODE(calls[i].res.code));
        CHECK(calls[i].res.retry_after_ms == 0, "corruption is not retryable");
        CHECK(!calls[i].res.has_lease, "no lease over ambiguity");
    }
}

/* Case 1 on Valkey: target's identity record, held by a lease, changed
 * behind the store's back (field set to value; value NULL: the member
 * deleted), then THREADS callers at once. */
static void corrupt_valkey(const race_env_t *env, const char *target, const char *how,
                           const char *field, const char *value)
{
    lease_identity_t id;
    race_identity(&id, target);
    race_acquire_ok(env->store, &id, "c-setup", "prn-owner", "inst");
    char key[512];
    race_valkey_ident_key(&id, key, sizeof key);
    if (value)
        race_valkey_hset(env, key, field, value);
    else {
        const char *args[] = {"HDEL", key, field, NULL};
        char *out = race_valkey_cli(env, args);
        CHECK(atoi(out) == 1, "HDEL %s: %s", field, out);
        free(out);
    }
    long long counter = race_env_counter(env, &id);
    acquire_all_fail_closed(env->store, &id);
    CHECK(race_env_counter(env, &id) == counter, "no token allocated");
    lease_result_t res;
    CHECK(race_inspect(env->store, &id, &res) == LEASE_BACKEND_UNAVAILABLE, "inspect: %s",
          CODE(res.code));
    CHECK(strcmp(res.reason, "corrupt_record") == 0, "inspect's reason: %s", res.reason);
    /* the record is left as it was found: the store wrote nothing (an
     * absent member prints an empty line) */
    const char *args[] = {"HGET", key, field, NULL};
    char *out = race_valkey_cli(env, args);
    char want[64];
    snprintf(want, sizeof want, "%s\n", value ? value : "");
    CHECK(strcmp(out, want) == 0, "the corrupt record was changed: %s = %s", field, out);
    free(out);
    printf("1: corrupt record (%s): %d callers got lease_backend_unavailable (corrupt_record), "
           "no token\n",
           how, THREADS);
}

int main(void)
{
    race_env_t env;
    race_setup(&env, "failclosed", 4, "race-failclosed");
    char rid[128], key[512], sql[1400];
    lease_result_t res;

    /* 1. corrupt record */
    lease_identity_t id;
    lease_acquire_req_t req;
    if (env.valkey) {
        corrupt_valkey(&env, "corrupt-1", "stored identity differs", "target_id", "somebody-else");
        corrupt_valkey(&env, "corrupt-2", "a member missing", "owner", NULL);
        printf("not run on valkey: 1's quarantine (a lease.quarantine record and its "
               "target_lease_quarantine alert: PostgreSQL's)\n");
        printf("not run on valkey: 2 (a login role without the SERIALIZABLE default: "
               "PostgreSQL's isolation level)\n");
    } else {
        race_identity(&id, "corrupt-1");
        race_rid(rid, sizeof rid, "c-setup", 0, 0);
        race_acquire_req(&req, &id, rid, "prn-owner", "inst", 30000, 10000);
        CHECK(lease_store_acquire(env.store, &req, &res) == LEASE_ACQUIRED, "setup");
        race_key_sql(&id, key, sizeof key);
        snprintf(sql, sizeof sql,
                 "UPDATE lease.locks SET target_id = 'somebody-else' WHERE lock_key = %s", key);
        CHECK(testpg_exec(env.db_url, sql), "corrupt the row");
        long long counter = race_counter(env.db_url, &id);
        acquire_all_fail_closed(env.store, &id);
        CHECK(race_counter(env.db_url, &id) == counter, "no token allocated");
        snprintf(sql, sizeof sql,
                 "SELECT count(*) FROM lease.quarantine WHERE lock_key = %s AND operation = "
                 "'acquire' AND resolved_at IS NULL AND stored_record IS NOT NULL "
                 "AND detail LIKE 'corrupt lease record:%%'",
                 key);
        CHECK(testpg_query_int(env.db_url, sql) == 1, "one open quarantine record for the key");
        CHECK(testpg_query_int(env.db_url, "SELECT count(*) FROM lease.audit_events WHERE "
                                           "event_type = 'target_lease_quarantine'") == 1,
              "one quarantine alert in audit");
        /* inspect of the corrupt identity fails closed too */
        CHECK(race_inspect(env.store, &id, &res) == LEASE_BACKEND_UNAVAILABLE, "inspect: %s",
              CODE(res.code));
        printf(
            "1: corrupt record: %d callers got lease_backend_unavailable, key quarantined once\n",
            THREADS);

        /* 2. a login role without the serializable default (the superuser here):
         * the store makes each session SERIALIZABLE itself, so operations work
         * and the functions' LS002 guard (pgtap/10) never fires through it */
        lease_store_t *weak = race_open_store(env.db_url, 1, "race-failclosed-weak");
        lease_identity_t idw;
        race_identity(&idw, "owner-role-1");
        race_rid(rid, sizeof rid, "weak", 0, 0);
        race_acquire_req(&req, &idw, rid, "prn-owner", "inst", 30000, 10000);
        CHECK(testpg_query_int(env.db_url,
                               "SELECT (current_setting('default_transaction_isolation')"
                               " <> 'serializable')::int") == 1,
              "the owner role does not default to serializable");
        CHECK(lease_store_acquire(weak, &req, &res) == LEASE_ACQUIRED,
              "acquire without the role "
              "default: %s",
              CODE(res.code));
        CHECK(race_counter(env.db_url, &idw) == 1, "one token allocated");
        lease_deadline_t d = lease_deadline_in(5000);
        lease_health_t h;
        CHECK(lease_store_health(weak, &d, &h) == LEASE_INSPECTED, "health answers");
        CHECK(h.reachable && h.schema_current, "health of the owner role");
        lease_store_stats_t st;
        lease_store_stats(weak, &st);
        CHECK(st.backend_errors == 0, "no backend error");
        lease_store_close(weak);
        printf("2: a role without the serializable default: the store sets it per session\n");
    }

    /* 3. a malformed call: no principal */
    lease_identity_t id2;
    race_identity(&id2, "weak-1");
    race_rid(rid, sizeof rid, "malformed", 0, 0);
    race_acquire_req(&req, &id2, rid, "prn-owner", "inst", 30000, 10000);
    req.call.principal.principal_id[0] = '\0';
    CHECK(lease_store_acquire(env.store, &req, &res) == LEASE_BACKEND_UNAVAILABLE,
          "principal-less acquire: %s", CODE(res.code));
    CHECK(!env.valkey || strcmp(res.reason, "malformed_call") == 0, "reason: %s", res.reason);
    CHECK(race_env_counter(&env, &id2) == 0, "nothing written");
    CHECK(race_inspect(env.store, &id2, &res) == LEASE_NOT_FOUND, "no lease: %s", CODE(res.code));
    /* bad caller input is invalid_lease_request, not a backend failure */
    race_rid(rid, sizeof rid, "badttl", 0, 0);
    race_acquire_req(&req, &id2, rid, "prn-owner", "inst", 5, 10000);
    CHECK(lease_store_acquire(env.store, &req, &res) == LEASE_INVALID_LEASE_REQUEST, "ttl 5: %s",
          CODE(res.code));
    CHECK(strcmp(res.field, "ttl_ms") == 0, "names the field: %s", res.field);
    race_rid(rid, sizeof rid, "badmeta", 0, 0);
    race_acquire_req(&req, &id2, rid, "prn-owner", "inst", 30000, 10000);
    /* the metadata rules (lease._bad_metadata) at the store, on both
     * backends: the library holds them as PostgreSQL does */
    strcpy(req.metadata_json, "{\"Bad Key\":1}");
    CHECK(lease_store_acquire(env.store, &req, &res) == LEASE_INVALID_LEASE_REQUEST, "metadata: %s",
          CODE(res.code));
    CHECK(strcmp(res.field, "metadata.Bad Key") == 0, "names the field: %s", res.field);
    CHECK(race_env_counter(&env, &id2) == 0, "bad input wrote nothing");
    printf("3: malformed call: lease_backend_unavailable; bad input: invalid_lease_request "
           "(field %s)\n",
           res.field);

    /* 4. sealed namespace (on Valkey the namespace record's seal, as the
     * incarnation check sets it) */
    if (env.valkey) {
        race_valkey_hset(&env, "lease:{leased}:ns", "sealed", "1");
        race_valkey_hset(&env, "lease:{leased}:ns", "sealed_reason", "race test");
    } else
        CHECK(testpg_exec(env.db_url, "UPDATE lease.namespace_state SET sealed = true, "
                                      "sealed_reason = 'race test', sealed_at = now()"),
              "seal");
    lease_store_stats_t sst;
    lease_store_stats(env.store, &sst);
    uint64_t sealed_before = sst.sealed_refusals;
    race_rid(rid, sizeof rid, "sealed", 0, 0);
    race_acquire_req(&req, &id2, rid, "prn-owner", "inst", 30000, 10000);
    CHECK(lease_store_acquire(env.store, &req, &res) == LEASE_BACKEND_UNAVAILABLE,
          "sealed acquire: %s", CODE(res.code));
    CHECK(strcmp(res.reason, "namespace_sealed") == 0 || !env.valkey, "sealed's reason: %s",
          res.reason);
    lease_store_stats(env.store, &sst);
    CHECK(sst.sealed_refusals == sealed_before + 1 || !env.valkey, "a sealed refusal counted");
    CHECK(race_env_counter(&env, &id2) == 0, "nothing written while sealed");
    lease_deadline_t d = lease_deadline_in(5000);
    lease_health_t h;
    CHECK(lease_store_health(env.store, &d, &h) == LEASE_INSPECTED && h.sealed, "health sealed");
    if (env.valkey) {
        race_valkey_hset(&env, "lease:{leased}:ns", "sealed", "0");
        race_valkey_hset(&env, "lease:{leased}:ns", "sealed_reason", "");
    } else
        CHECK(testpg_exec(env.db_url, "UPDATE lease.namespace_state SET sealed = false, "
                                      "sealed_reason = NULL, sealed_at = NULL"),
              "unseal");

    /* 5. health */
    d = lease_deadline_in(5000);
    CHECK(lease_store_health(env.store, &d, &h) == LEASE_INSPECTED, "health");
    CHECK(h.reachable && h.schema_current && !h.sealed, "healthy");
    long long active;
    if (env.valkey) {
        const char *args[] = {"SCARD", "lease:{leased}:act", NULL};
        char *out = race_valkey_cli(&env, args);
        active = atoll(out);
        free(out);
    } else
        active = testpg_query_int(env.db_url, "SELECT count(*) FROM lease.active_leases");
    CHECK(h.active_leases == active, "active lease count: %lld, the store holds %lld",
          (long long)h.active_leases, active);
    printf("4-5: sealed namespace refuses acquisition; health: schema %d current, %lld active\n",
           h.schema_version, (long long)h.active_leases);
    race_teardown(&env);
    return 0;
}
