/*
 * race_silent_backend.c - the backend serving a call goes silent after the
 * statement was sent (SIGSTOP: it neither answers nor acts on the cancel,
 * like a partition). The caller gets lease_outcome_unknown once the
 * deadline and the cancel grace have passed, not later; the session is
 * discarded; and after the backend resumes (it may then commit the
 * statement, or not) repeating the request id resolves it: one lease, one
 * token. Needs signals to the server's processes, so only with the
 * throwaway cluster the tests own.
 * On Valkey (race_util.h) the test's own redis-server is frozen the same
 * way: the adapter has no cancel to send, so the answer is
 * lease_outcome_unknown at the request's deadline itself, not before and
 * not later; its connection is dropped (the server sees it closed once it
 * runs again), and the request id resolves the call there too.
 */
#include <signal.h>
#include <sys/types.h>

#include "race_blocker.h"

#define APP "race-silent"

/* The Valkey side: the redis-server frozen (SIGSTOP) while an acquire
 * waits for its answer. */
static int silent_valkey(race_env_t *env)
{
    lease_identity_t id;
    race_identity(&id, "silent-1");
    lease_result_t res;
    CHECK(race_inspect(env->store, &id, &res) == LEASE_NOT_FOUND, "warm-up");
    CHECK(race_valkey_clients(env) == 1, "the pool's one connection is open");
    int pid = race_valkey_pid(env);

    char rid[128];
    race_rid(rid, sizeof rid, "silent", 0, 0);
    int64_t t0 = lease_mono_now_ns();
    lease_acquire_req_t req;
    race_acquire_req(&req, &id, rid, "prn-s", "inst-s", 30000, 500);
    CHECK(kill((pid_t)pid, SIGSTOP) == 0, "SIGSTOP redis-server %d", pid);
    lease_code_t c = lease_store_acquire(env->store, &req, &res);
    int64_t took = (lease_mono_now_ns() - t0) / 1000000;
    CHECK(kill((pid_t)pid, SIGCONT) == 0, "SIGCONT redis-server %d", pid);
    CHECK(c == LEASE_OUTCOME_UNKNOWN, "silent server answered %s", CODE(c));
    /* no cancel grace on Valkey: the socket's timeout is what is left of
     * the deadline */
    CHECK(took >= 500 - 20 && took < 500 + 1000, "answered after %lld ms (deadline 500 ms)",
          (long long)took);
    lease_store_stats_t st;
    lease_store_stats(env->store, &st);
    CHECK(st.outcome_unknown == 1, "counted as outcome unknown");
    printf("silent server: %s after %lld ms\n", CODE(c), (long long)took);

    /* the connection was given up: the resumed server finds it closed */
    CHECK(test_wait_until(5000, race_valkey_clients(env) == 0),
          "the silent call's connection is still open");
    lease_acquire_req_t again = req;
    again.call.deadline = lease_deadline_in(10000);
    CHECK(lease_store_acquire(env->store, &again, &res) == LEASE_ACQUIRED, "resolve: %s",
          CODE(res.code));
    lease_record_t resolved = res.lease;
    bool replayed = res.replayed;
    CHECK(race_env_counter(env, &id) == 1, "exactly one token for the request");
    CHECK(race_env_stored_results(env, &id, "acquire") == 1, "one stored result");
    CHECK(lease_store_acquire(env->store, &again, &res) == LEASE_ACQUIRED && res.replayed &&
              race_same_lease(&res.lease, &resolved),
          "the resolved acquire replays its lease: %s", CODE(res.code));
    printf("resolved by repeating the request id: lease %s token %lld (%s)\n", resolved.lease_id,
           (long long)resolved.fencing_token,
           replayed ? "the frozen call had run: replay" : "it had not: executed now");
    race_teardown(env);
    return 0;
}

int main(void)
{
    if (test_store_is_valkey()) {
        race_env_t env;
        race_setup(&env, "silent", 1, APP);
        return silent_valkey(&env);
    }
    if (!testpg_owned()) {
        printf("skipped: the database is not the tests' own cluster, so its backends cannot "
               "be stopped (LEASE_TEST_DATABASE_URL is set)\n");
        return 77;
    }
    race_env_t env;
    race_setup(&env, "silent", 1, APP);
    lease_identity_t id;
    race_identity(&id, "silent-1");
    lease_result_t res;
    CHECK(race_inspect(env.store, &id, &res) == LEASE_NOT_FOUND, "warm-up");
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT pid FROM pg_stat_activity WHERE application_name = '%s'",
             APP);
    long long pid = testpg_query_int(env.db_url, sql);
    CHECK(pid > 0, "backend pid");

    char rid[128];
    race_rid(rid, sizeof rid, "silent", 0, 0);
    /* measured from before the request's 500 ms deadline is set: the time
     * to stop the backend counts against that deadline, not on top of it */
    int64_t t0 = lease_mono_now_ns();
    lease_acquire_req_t req;
    race_acquire_req(&req, &id, rid, "prn-s", "inst-s", 30000, 500);
    CHECK(kill((pid_t)pid, SIGSTOP) == 0, "SIGSTOP backend %lld", pid);
    lease_code_t c = lease_store_acquire(env.store, &req, &res);
    int64_t took = (lease_mono_now_ns() - t0) / 1000000;
    CHECK(kill((pid_t)pid, SIGCONT) == 0, "SIGCONT backend %lld", pid);
    CHECK(c == LEASE_OUTCOME_UNKNOWN, "silent backend answered %s", CODE(c));
    CHECK(took >= 500 + 1000 - 20 && took < 500 + 1000 + 1000,
          "answered after %lld ms (deadline 500 ms + cancel grace 1000 ms)", (long long)took);
    lease_store_stats_t st;
    lease_store_stats(env.store, &st);
    CHECK(st.outcome_unknown == 1, "counted as outcome unknown");
    printf("silent backend: %s after %lld ms\n", CODE(c), (long long)took);

    /* the session was given up; the resumed backend finds it closed */
    race_wait_for_no_sessions(env.db_url, APP);
    lease_acquire_req_t again = req;
    again.call.deadline = lease_deadline_in(10000);
    CHECK(lease_store_acquire(env.store, &again, &res) == LEASE_ACQUIRED, "resolve: %s",
          CODE(res.code));
    CHECK(race_counter(env.db_url, &id) == 1, "exactly one token for the request");
    CHECK(race_count(env.db_url, "lease.idempotency", &id, "operation = 'acquire'") == 1,
          "one stored result");
    printf("resolved by repeating the request id: lease %s token %lld (%s)\n", res.lease.lease_id,
           (long long)res.lease.fencing_token,
           res.replayed ? "the stopped call had committed: replay" : "it had not: executed now");
    race_teardown(&env);
    return 0;
}
