/*
 * race_deadline.c - deadlines through the Postgres store:
 *  1. a call blocked behind another transaction's row lock, with a deadline
 *     shorter than the block: deadline_exceeded (the backend's lock wait is
 *     bounded by the deadline, or the adapter's cancel is confirmed), within
 *     the deadline plus the cancel grace, and nothing half-done: no lease,
 *     counter unchanged, no stored result, no audit event of the request;
 *     1b. the same when only the adapter's clock bounds the wait: its cancel
 *     is confirmed by the server (57014);
 *  2. the same for a release of a held lease: the lease is still active
 *     afterwards and a new release succeeds;
 *  3. a deadline that passes while waiting for a pooled connection:
 *     deadline_exceeded and the request never reached the database;
 *  4. a deadline already passed: deadline_exceeded at once, nothing sent.
 * On both backends (race_util.h). On Valkey cases 1, 1b and 2 are left out
 * by name: they hold the identity's row lock from a second Postgres
 * session and watch the backend's lock wait and cancel, and a Valkey call
 * runs to its end once the server takes it. Case 3 holds the only pooled
 * connection there with every write paused at the server (CLIENT PAUSE
 * WRITE). "Nothing reached the store" is observed on both backends: no
 * audit event of the request, and the same request id sent again with
 * time is executed afresh, not replayed; on Postgres also no stored row.
 */
#include "race_blocker.h"

#define APP "race-deadline"
#define APP_SMALL "race-deadline-pool1"
#define APP_CANCEL "race-deadline-cancel"
#define PID_OF(app) "SELECT pid FROM pg_stat_activity WHERE application_name = '" app "'"

typedef struct blocked_call {
    lease_store_t *store;
    lease_acquire_req_t acquire;
    lease_result_t res;
    lease_code_t code;
    int64_t took_ms;
} blocked_call_t;

static void *acquire_blocked(void *arg)
{
    blocked_call_t *b = arg;
    int64_t t0 = lease_mono_now_ns();
    b->code = lease_store_acquire(b->store, &b->acquire, &b->res);
    b->took_ms = (lease_mono_now_ns() - t0) / 1000000;
    return NULL;
}

static long long rows_with_request(const char *db_url, const char *table, const char *rid)
{
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s WHERE request_id = '%s'", table, rid);
    return testpg_query_int(db_url, sql);
}

static void nothing_reached(const race_env_t *env, const char *rid, const char *what)
{
    if (!env->valkey) {
        CHECK(rows_with_request(env->db_url, "lease.idempotency", rid) == 0, "%s: a stored result",
              what);
        CHECK(rows_with_request(env->db_url, "lease.audit_events", rid) == 0, "%s: an audit event",
              what);
    }
    CHECK(race_env_audit_count(env, NULL, rid) == 0, "%s: an audit event", what);
}

/* req sent again with time to run: executed afresh (acquired, not a
 * replay), so nothing of its first sending was stored. */
static void executes_afresh(lease_store_t *s, const lease_acquire_req_t *req, const char *what)
{
    lease_acquire_req_t again = *req;
    again.call.deadline = lease_deadline_in(10000);
    lease_result_t res;
    lease_code_t c = lease_store_acquire(s, &again, &res);
    CHECK(c == LEASE_ACQUIRED && !res.replayed, "%s sent again: %s%s", what, CODE(c),
          res.replayed ? " (a replay: its first sending was stored)" : "");
}

static lease_record_t acquire_ok(lease_store_t *s, const lease_identity_t *id, const char *tag)
{
    return race_acquire_ok(s, id, tag, "prn-d", "inst-d");
}

int main(void)
{
    race_env_t env;
    race_setup(&env, "deadline", 4, APP);
    lease_identity_t id;
    race_identity(&id, "deadline-1");
    lease_record_t setup = acquire_ok(env.store, &id, "d-setup");
    char rid[128];
    lease_result_t res;
    race_rid(rid, sizeof rid, "d-setup-rel", 0, 0);
    lease_owner_req_t rel;
    race_owner_req(&rel, &setup, rid, "prn-d", "inst-d", 0, false, 10000);
    CHECK(lease_store_release(env.store, &rel, &res) == LEASE_RELEASED, "setup release");
    long long counter = race_env_counter(&env, &id);
    if (env.valkey) {
        printf("not run on valkey: 1 (an acquire held past its deadline by a Postgres row lock "
               "from a second session)\n");
        printf("not run on valkey: 1b (the adapter's cancel of a Postgres backend's lock "
               "wait, confirmed by 57014, and the session replaced)\n");
        printf("not run on valkey: 2 (a release held past its deadline by a Postgres row "
               "lock)\n");
        goto pool_wait;
    }

    /* 1. acquire blocked past its deadline */
    for (int deadline_ms = 300; deadline_ms <= 900; deadline_ms += 300) {
        race_blocker_t b;
        race_block(&b, env.db_url, &id);
        race_rid(rid, sizeof rid, "d-acquire", deadline_ms, 0);
        lease_acquire_req_t req;
        race_acquire_req(&req, &id, rid, "prn-d", "inst-d", 30000, deadline_ms);
        int64_t t0 = lease_mono_now_ns();
        lease_code_t c = lease_store_acquire(env.store, &req, &res);
        int64_t took = (lease_mono_now_ns() - t0) / 1000000;
        race_unblock(&b);
        CHECK(c == LEASE_DEADLINE_EXCEEDED, "blocked acquire (deadline %d ms) answered %s",
              deadline_ms, CODE(c));
        CHECK(took >= deadline_ms - 20, "answered after %lld ms, before the deadline",
              (long long)took);
        CHECK(took <= deadline_ms + 1000 + 500, "answered %lld ms after a %d ms deadline",
              (long long)took, deadline_ms);
        CHECK(race_env_counter(&env, &id) == counter, "the counter moved");
        CHECK(race_inspect(env.store, &id, &res) == LEASE_NOT_FOUND, "a lease exists");
        nothing_reached(&env, rid, "blocked acquire");
        printf("1: acquire blocked past a %d ms deadline: %s after %lld ms, nothing written\n",
               deadline_ms, CODE(c), (long long)took);
    }

    /* 1b. the backend believes it has a minute (a clock ahead of ours, so
     * its lock wait is not bounded in time), the adapter's monotonic
     * deadline says 400 ms: the adapter cancels, the server confirms (57014)
     * and the answer is deadline_exceeded, nothing written. The session
     * that had a cancel in flight is not reused (a late cancel would hit the
     * next statement): the next call runs on a new backend. */
    {
        lease_store_t *one = race_open_store(env.svc_url, 1, APP_CANCEL);
        CHECK(race_inspect(one, &id, &res) == LEASE_NOT_FOUND, "warm-up");
        long long pid_before = testpg_query_int(env.db_url, PID_OF(APP_CANCEL));
        race_blocker_t b;
        race_block(&b, env.db_url, &id);
        race_rid(rid, sizeof rid, "d-cancel", 0, 0);
        lease_acquire_req_t req;
        race_acquire_req(&req, &id, rid, "prn-d", "inst-d", 30000, 400);
        req.call.deadline.wall_ms = lease_wall_now_ms() + 60000;
        int64_t t0 = lease_mono_now_ns();
        lease_code_t c = lease_store_acquire(one, &req, &res);
        int64_t took = (lease_mono_now_ns() - t0) / 1000000;
        race_unblock(&b);
        CHECK(c == LEASE_DEADLINE_EXCEEDED, "cancelled acquire answered %s", CODE(c));
        CHECK(took >= 380 && took <= 400 + 1000 + 500, "answered after %lld ms", (long long)took);
        CHECK(race_env_counter(&env, &id) == counter, "the counter moved");
        CHECK(race_inspect(one, &id, &res) == LEASE_NOT_FOUND, "a lease exists");
        nothing_reached(&env, rid, "cancelled acquire");
        long long pid_after = testpg_query_int(env.db_url, PID_OF(APP_CANCEL));
        CHECK(pid_after != pid_before, "the cancelled session was reused");
        lease_store_close(one);
        printf("1b: backend lock wait unbounded, local deadline 400 ms: %s after %lld ms "
               "(cancel confirmed), nothing written, session replaced\n",
               CODE(c), (long long)took);
    }

    /* 2. release blocked past its deadline: the lease is untouched */
    lease_record_t held = acquire_ok(env.store, &id, "d-held");
    {
        race_blocker_t b;
        race_block(&b, env.db_url, &id);
        race_rid(rid, sizeof rid, "d-release", 0, 0);
        race_owner_req(&rel, &held, rid, "prn-d", "inst-d", 0, false, 400);
        lease_code_t c = lease_store_release(env.store, &rel, &res);
        race_unblock(&b);
        CHECK(c == LEASE_DEADLINE_EXCEEDED, "blocked release answered %s", CODE(c));
        nothing_reached(&env, rid, "blocked release");
        CHECK(race_inspect(env.store, &id, &res) == LEASE_INSPECTED &&
                  res.lease.state == LEASE_STATE_ACTIVE &&
                  strcmp(res.lease.lease_id, held.lease_id) == 0,
              "the lease is still active after a release that did not happen");
        rel.call.deadline = lease_deadline_in(10000);
        CHECK(lease_store_release(env.store, &rel, &res) == LEASE_RELEASED,
              "the same release with time to run: %s", CODE(res.code));
        printf("2: release blocked past its deadline: %s, lease untouched, then released\n",
               CODE(c));
    }
    counter = race_env_counter(&env, &id);

    /* 3. the deadline passes while waiting for the only pooled connection */
pool_wait:;
    {
        lease_store_t *small = env.valkey ? race_open_valkey_store(&env.vk, 1)
                                          : race_open_store(env.svc_url, 1, APP_SMALL);
        race_blocker_t b;
        if (env.valkey)
            race_valkey_pause_writes(&env);
        else
            race_block(&b, env.db_url, &id);
        blocked_call_t first;
        memset(&first, 0, sizeof first);
        first.store = small;
        race_rid(rid, sizeof rid, "d-first", 0, 0);
        race_acquire_req(&first.acquire, &id, rid, "prn-d", "inst-d", 30000, 8000);
        pthread_t t;
        CHECK(pthread_create(&t, NULL, acquire_blocked, &first) == 0, "thread");
        lease_store_stats_t st;
        if (env.valkey) /* the first call has the connection (held at the server) */
            CHECK(test_wait_until(5000, (lease_store_stats(small, &st), st.pool_in_use == 1)),
                  "the first call never took the connection");
        else
            race_wait_for_lock_waiters(env.db_url, APP_SMALL, 1);
        lease_store_stats(small, &st);
        CHECK(st.pool_size == 1 && st.pool_in_use == 1, "the only connection is busy");

        lease_identity_t other;
        race_identity(&other, "deadline-other");
        char rid2[128];
        race_rid(rid2, sizeof rid2, "d-queued", 0, 0);
        lease_acquire_req_t queued;
        race_acquire_req(&queued, &other, rid2, "prn-d", "inst-d", 30000, 250);
        int64_t t0 = lease_mono_now_ns();
        lease_code_t c = lease_store_acquire(small, &queued, &res);
        int64_t took = (lease_mono_now_ns() - t0) / 1000000;
        CHECK(c == LEASE_DEADLINE_EXCEEDED, "queued call answered %s", CODE(c));
        CHECK(took >= 230 && took < 1500, "queued call answered after %lld ms", (long long)took);
        CHECK(race_env_counter(&env, &other) == 0, "the queued call touched its identity");
        if (!env.valkey) /* on Valkey after the pause: its audit read is a script, paused too */
            nothing_reached(&env, rid2, "queued call");

        if (env.valkey)
            race_valkey_unpause(&env);
        else
            race_unblock(&b);
        pthread_join(t, NULL);
        CHECK(first.code == LEASE_ACQUIRED, "the blocked call completes once unblocked: %s",
              CODE(first.code));
        CHECK(race_env_counter(&env, &id) == counter + 1, "one token for it");
        CHECK(race_inspect(env.store, &other, &res) == LEASE_NOT_FOUND, "the queued call's lease");
        if (env.valkey)
            nothing_reached(&env, rid2, "queued call");
        executes_afresh(env.store, &queued, "the queued call");
        lease_store_stats(small, &st);
        CHECK(st.pool_in_use == 0 && st.pool_waiting == 0, "pool idle again");
        lease_store_close(small);
        printf("3: pool wait past a 250 ms deadline: %s after %lld ms, never sent\n", CODE(c),
               (long long)took);
    }

    /* 4. a deadline already passed */
    {
        lease_identity_t late;
        race_identity(&late, "deadline-late");
        race_rid(rid, sizeof rid, "d-late", 0, 0);
        lease_acquire_req_t req;
        race_acquire_req(&req, &late, rid, "prn-d", "inst-d", 30000, -1);
        int64_t t0 = lease_mono_now_ns();
        lease_code_t c = lease_store_acquire(env.store, &req, &res);
        int64_t took = (lease_mono_now_ns() - t0) / 1000000;
        CHECK(c == LEASE_DEADLINE_EXCEEDED, "past deadline answered %s", CODE(c));
        CHECK(took < 50, "answered after %lld ms", (long long)took);
        CHECK(race_env_counter(&env, &late) == 0, "nothing written");
        CHECK(race_inspect(env.store, &late, &res) == LEASE_NOT_FOUND, "the late call's lease");
        nothing_reached(&env, rid, "late call");
        executes_afresh(env.store, &req, "the late call");
        lease_deadline_t past = lease_deadline_in(-5);
        lease_health_t h;
        CHECK(lease_store_health(env.store, &past, &h) == LEASE_DEADLINE_EXCEEDED, "late health");
        printf("4: passed deadline: %s in %lld ms, nothing sent\n", CODE(c), (long long)took);
    }

    lease_store_stats_t st;
    lease_store_stats(env.store, &st);
    CHECK(st.outcome_unknown == 0, "a deadline is never an unknown outcome when the server "
                                   "answers");
    race_teardown(&env);
    return 0;
}
