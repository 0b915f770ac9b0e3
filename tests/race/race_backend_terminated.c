/*
 * race_backend_terminated.c - the backend serving a call is terminated
 * (pg_terminate_backend by application_name) while the call is in flight,
 * blocked behind another transaction's row lock. The caller must get
 * lease_outcome_unknown or a definite, true result, never a wrong one, and
 * repeating the request id must resolve it with exactly one effect: one
 * token for acquire, one release (race_fenced_commit.c does the same for
 * commits).
 * Idle pooled sessions killed between calls are never reused: the next
 * calls reconnect and answer definitely.
 * An internal write (the audit queue's batch) killed in flight is a backend
 * error, not an outcome unknown: nobody resolves it by request id, and
 * leased_db_outcome_unknown_total counts only answers a caller must resolve.
 * On Valkey (race_util.h) the same four cases: the call is held inside the
 * server by CLIENT PAUSE ... WRITE instead of a row lock, and the
 * adapter's connections are closed by CLIENT KILL instead of
 * pg_terminate_backend; the stored results, the counter and each lease's
 * end are read through the store protocol and in the store
 * (race_env_*); lease.history's row is PostgreSQL's only.
 */
#include "race_blocker.h"

#define APP "race-term"

typedef enum op { OP_ACQUIRE, OP_RELEASE } op_t;

typedef struct inflight {
    lease_store_t *store;
    op_t op;
    lease_acquire_req_t acquire;
    lease_owner_req_t release;
    lease_result_t res;
    lease_code_t code;
} inflight_t;

static void *send_it(void *arg)
{
    inflight_t *f = arg;
    switch (f->op) {
    case OP_ACQUIRE:
        f->code = lease_store_acquire(f->store, &f->acquire, &f->res);
        break;
    case OP_RELEASE:
        f->code = lease_store_release(f->store, &f->release, &f->res);
        break;
    }
    return NULL;
}

static void *send_it(void *arg);

/* Valkey: runs f while every write waits at the server, closes the
 * adapter's connections once the call is held there, then ends the pause.
 * Returns the caller's answer. */
static lease_code_t kill_in_flight_valkey(race_env_t *env, inflight_t *f)
{
    race_valkey_pause_writes(env);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, send_it, f) == 0, "thread");
    race_valkey_wait_blocked(env, 1);
    int killed = race_valkey_kill_clients(env);
    CHECK(killed >= 1, "closed %d connections", killed);
    pthread_join(t, NULL);
    race_valkey_unpause(env);
    return f->code;
}

/* Runs f while `id` is locked by another session, kills the call's backend
 * once it waits, then lets the lock go. Returns the caller's answer. */
static lease_code_t kill_in_flight(race_env_t *env, const lease_identity_t *id, inflight_t *f)
{
    if (env->valkey)
        return kill_in_flight_valkey(env, f);
    race_blocker_t b;
    race_block(&b, env->db_url, id);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, send_it, f) == 0, "thread");
    race_wait_for_lock_waiters(env->db_url, APP, 1);
    int killed = testpg_terminate_backends(env->db_url, APP);
    CHECK(killed >= 1, "terminated %d backends", killed);
    pthread_join(t, NULL);
    race_unblock(&b);
    return f->code;
}

static void *warm_pool(void *arg)
{
    lease_identity_t id;
    race_identity(&id, "warm");
    for (int i = 0; i < 5; i++) {
        lease_result_t res;
        lease_code_t c = race_inspect(arg, &id, &res);
        CHECK(c == LEASE_NOT_FOUND, "warm-up inspect: %s", CODE(c));
    }
    return NULL;
}

typedef struct audit_call {
    lease_store_t *store;
    lease_code_t code;
} audit_call_t;

static void *record_one(void *arg)
{
    audit_call_t *a = arg;
    lease_audit_event_t ev;
    memset(&ev, 0, sizeof ev);
    ev.event_type = "target_lease_renew";
    ev.occurred_at_ms = lease_wall_now_ms();
    ev.code = LEASE_OUTCOME_UNKNOWN;
    ev.decision = "error";
    ev.backend_health = "degraded";
    race_call(&ev.call, "t-audit", "prn-t", 15000);
    lease_deadline_t d = lease_deadline_in(15000);
    a->code = lease_store_record_audit(a->store, &ev, 1, &d);
    return NULL;
}

static lease_record_t acquire_ok(lease_store_t *s, const lease_identity_t *id, const char *tag)
{
    return race_acquire_ok(s, id, tag, "prn-t", "inst-t");
}

static void release_ok(lease_store_t *s, const lease_record_t *l, const char *tag)
{
    char rid[128];
    race_rid(rid, sizeof rid, tag, 0, 0);
    lease_owner_req_t req;
    race_owner_req(&req, l, rid, "prn-t", "inst-t", 0, false, 10000);
    lease_result_t res;
    CHECK(lease_store_release(s, &req, &res) == LEASE_RELEASED, "%s: %s", tag, CODE(res.code));
}

int main(void)
{
    race_env_t env;
    race_setup(&env, "backend_terminated", 4, APP);
    inflight_t *f = calloc(1, sizeof *f);
    CHECK(f, "oom");
    f->store = env.store;
    lease_identity_t id;
    race_identity(&id, "terminated-1");
    /* the identity's row must exist for the blocker to lock it */
    lease_record_t first = acquire_ok(env.store, &id, "t-setup");
    release_ok(env.store, &first, "t-setup-rel");
    long long before = race_env_counter(&env, &id);

    /* 1. acquire killed while blocked */
    char rid[128];
    race_rid(rid, sizeof rid, "t-acquire", 0, 0);
    race_acquire_req(&f->acquire, &id, rid, "prn-t", "inst-t", 30000, 15000);
    f->op = OP_ACQUIRE;
    lease_code_t c = kill_in_flight(&env, &id, f);
    CHECK(c == LEASE_OUTCOME_UNKNOWN || c == LEASE_ACQUIRED, "killed acquire answered %s", CODE(c));
    if (c == LEASE_ACQUIRED)
        CHECK(race_env_counter(&env, &id) == before + 1, "a definite answer is true");
    printf("1: acquire killed in flight answered %s\n", CODE(c));
    /* resolve by repeating the request id */
    lease_acquire_req_t again = f->acquire;
    again.call.deadline = lease_deadline_in(10000);
    lease_result_t res;
    CHECK(lease_store_acquire(env.store, &again, &res) == LEASE_ACQUIRED, "resolve: %s",
          CODE(res.code));
    CHECK(race_env_counter(&env, &id) == before + 1, "exactly one token for the request");
    CHECK(c != LEASE_ACQUIRED || res.replayed, "a repeat of a committed acquire is a replay");
    lease_record_t lease = res.lease;
    lease_result_t now;
    CHECK(race_inspect(env.store, &id, &now) == LEASE_INSPECTED &&
              strcmp(now.lease.lease_id, lease.lease_id) == 0,
          "the resolved lease is the active one");
    CHECK(race_env_stored_results(&env, &id, "acquire") == 2,
          "one stored result per executed acquire (the setup's and the resolved one)");

    /* 2. release killed while blocked */
    race_rid(rid, sizeof rid, "t-release", 0, 0);
    race_owner_req(&f->release, &lease, rid, "prn-t", "inst-t", 0, false, 15000);
    f->op = OP_RELEASE;
    c = kill_in_flight(&env, &id, f);
    CHECK(c == LEASE_OUTCOME_UNKNOWN || c == LEASE_RELEASED, "killed release answered %s", CODE(c));
    printf("2: release killed in flight answered %s\n", CODE(c));
    lease_owner_req_t rel_again = f->release;
    rel_again.call.deadline = lease_deadline_in(10000);
    CHECK(lease_store_release(env.store, &rel_again, &res) == LEASE_RELEASED, "resolve: %s",
          CODE(res.code));
    if (!env.valkey)
        CHECK(race_count(env.db_url, "lease.history", &id,
                         "state = 'released' AND lease_id = (SELECT lease_id FROM lease.history "
                         "ORDER BY ended_at DESC LIMIT 1)") == 1,
              "released once");
    CHECK(race_inspect_id(env.store, lease.lease_id, &now) == LEASE_INSPECTED &&
              now.lease.state == LEASE_STATE_RELEASED,
          "the lease, by its id, released: %s", CODE(now.code));
    CHECK(race_env_stored_results(&env, &id, "release") == 2,
          "one stored result per executed release (the setup's and the resolved one)");
    CHECK(race_inspect(env.store, &id, &now) == LEASE_NOT_FOUND, "nothing active");
    CHECK(race_env_counter(&env, &id) == before + 1, "release allocates no token");

    lease_store_stats_t st;
    lease_store_stats(env.store, &st);
    uint64_t unknown_before = st.outcome_unknown;

    /* 3. idle pooled sessions killed between calls are never reused */
    lease_identity_t ids[4];
    for (int i = 0; i < 4; i++) {
        char target[32];
        snprintf(target, sizeof target, "idle-%d", i);
        race_identity(&ids[i], target);
    }
    /* fill the pool: four calls at once leave four idle sessions */
    pthread_t warm[4];
    for (int i = 0; i < 4; i++)
        CHECK(pthread_create(&warm[i], NULL, warm_pool, env.store) == 0, "thread");
    for (int i = 0; i < 4; i++)
        pthread_join(warm[i], NULL);
    int killed =
        env.valkey ? race_valkey_kill_clients(&env) : testpg_terminate_backends(env.db_url, APP);
    CHECK(killed >= 1, "there were idle pooled sessions to kill (%d)", killed);
    /* A kill that lands while a statement is being sent is indistinguishable
     * from a kill after it (outcome unknown, case 1). Here the sessions are
     * dead before the next call: the pool must notice and never send on them. */
    if (env.valkey)
        CHECK(test_wait_until(5000, race_valkey_clients(&env) == 0),
              "the killed connections are still listed");
    else
        race_wait_for_no_sessions(env.db_url, APP);
    for (int i = 0; i < 4; i++) {
        lease_record_t l = acquire_ok(env.store, &ids[i], "t-idle");
        CHECK(l.fencing_token == 1, "a definite, fresh lease after the kill");
    }
    lease_store_stats(env.store, &st);
    CHECK(st.outcome_unknown == unknown_before,
          "dead idle sessions were detected before sending, not after");
    printf("3: %d idle sessions killed; the next calls reconnected and answered definitely\n",
           killed);

    /* 4. an internal write killed while blocked (LOCK TABLE holds the audit
     * insert): a failure the audit queue logs, never an outcome unknown */
    lease_store_stats(env.store, &st);
    unknown_before = st.outcome_unknown;
    uint64_t errors_before = st.backend_errors;
    audit_call_t ac = {.store = env.store};
    if (env.valkey) {
        /* the audit batch's FCALL held by the pause, its connection closed */
        race_valkey_pause_writes(&env);
        pthread_t t;
        CHECK(pthread_create(&t, NULL, record_one, &ac) == 0, "thread");
        race_valkey_wait_blocked(&env, 1);
        CHECK(race_valkey_kill_clients(&env) >= 1, "close the audit write's connection");
        pthread_join(t, NULL);
        race_valkey_unpause(&env);
        goto audit_answered;
    }
    PGconn *locker = PQconnectdb(env.db_url);
    CHECK(PQstatus(locker) == CONNECTION_OK, "locker connect");
    PQclear(PQexec(locker, "BEGIN"));
    PGresult *lr = PQexec(locker, "LOCK TABLE lease.audit_events IN EXCLUSIVE MODE");
    CHECK(PQresultStatus(lr) == PGRES_COMMAND_OK, "lock audit_events: %s",
          PQresultErrorMessage(lr));
    PQclear(lr);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, record_one, &ac) == 0, "thread");
    race_wait_for_lock_waiters(env.db_url, APP, 1);
    CHECK(testpg_terminate_backends(env.db_url, APP) >= 1, "terminate the audit write");
    pthread_join(t, NULL);
    PQclear(PQexec(locker, "ROLLBACK"));
    PQfinish(locker);
audit_answered:
    CHECK(ac.code == LEASE_BACKEND_UNAVAILABLE, "the killed audit write answered %s",
          CODE(ac.code));
    lease_store_stats(env.store, &st);
    CHECK(st.outcome_unknown == unknown_before,
          "an internal write is not counted as an outcome unknown (%llu -> %llu)",
          (unsigned long long)unknown_before, (unsigned long long)st.outcome_unknown);
    CHECK(st.backend_errors == errors_before + 1, "it is counted as a backend error");
    printf("4: an audit write killed in flight answered %s, counted as a backend error\n",
           CODE(ac.code));

    free(f);
    race_teardown(&env);
    return 0;
}
