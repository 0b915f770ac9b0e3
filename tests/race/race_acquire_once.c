/*
 * race_acquire_once.c - 32 threads acquire one identity at the same moment
 * through the store: exactly one lease_acquired, every other answer
 * lease_conflict, one token allocated (the durable counter moved by one),
 * one stored result (the winner's request replays, a loser's is decided
 * again). Three rounds cover the three ways the identity can be free: no
 * record yet, a freed one, and an expired lease that was never swept.
 * On both backends (race_util.h): Postgres's tables are also read on
 * Postgres.
 */
#include "race_util.h"

#define THREADS 32

typedef struct round {
    lease_store_t *store;
    lease_identity_t id;
    int64_t ttl_ms;
    int round_no;
    race_barrier_t start;
    lease_acquire_req_t reqs[THREADS]; /* as sent, for the replay check */
    lease_result_t results[THREADS];
} round_t;

typedef struct worker {
    round_t *round;
    int index;
} worker_t;

static void *acquire_at_once(void *arg)
{
    worker_t *w = arg;
    round_t *r = w->round;
    char rid[128], principal[64], instance[64];
    race_rid(rid, sizeof rid, "once", w->index, r->round_no);
    snprintf(principal, sizeof principal, "prn-%d", w->index);
    snprintf(instance, sizeof instance, "inst-%d", w->index);
    lease_acquire_req_t req;
    race_acquire_req(&req, &r->id, rid, principal, instance, r->ttl_ms, 20000);
    race_barrier_wait(&r->start);
    /* the deadline starts at the line, not while threads were created */
    req.call.deadline = lease_deadline_in(20000);
    r->reqs[w->index] = req;
    lease_code_t c = lease_store_acquire(r->store, &req, &r->results[w->index]);
    CHECK(c == r->results[w->index].code, "returned and stored codes agree");
    return NULL;
}

/* Runs one round; returns the winner's lease. */
static lease_record_t run_round(race_env_t *env, round_t *r, long long counter_before)
{
    pthread_t t[THREADS];
    worker_t w[THREADS];
    race_barrier_init(&r->start, THREADS);
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker_t){r, i};
        CHECK(pthread_create(&t[i], NULL, acquire_at_once, &w[i]) == 0, "pthread_create");
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    race_barrier_destroy(&r->start);

    int won = 0, conflict = 0, winner = -1;
    for (int i = 0; i < THREADS; i++) {
        lease_code_t c = r->results[i].code;
        if (c == LEASE_ACQUIRED) {
            won++;
            winner = i;
        } else if (c == LEASE_CONFLICT) {
            conflict++;
            CHECK(!r->results[i].has_lease, "a conflict must not show the holder's lease");
            CHECK(r->results[i].retry_after_ms > 0, "a conflict carries retry_after_ms");
        } else {
            CHECK(false, "round %d thread %d: unexpected %s", r->round_no, i, CODE(c));
        }
    }
    CHECK(won == 1, "round %d: %d winners", r->round_no, won);
    CHECK(conflict == THREADS - 1, "round %d: %d conflicts", r->round_no, conflict);
    lease_record_t lease = r->results[winner].lease;
    CHECK(!r->results[winner].replayed, "the winner's answer is not a replay");
    CHECK(lease.state == LEASE_STATE_ACTIVE, "winner's lease is active");

    long long counter = race_env_counter(env, &r->id);
    CHECK(counter == counter_before + 1, "round %d: counter %lld, want %lld", r->round_no, counter,
          counter_before + 1);
    CHECK(lease.fencing_token == counter, "winner's token %lld is the counter %lld",
          (long long)lease.fencing_token, counter);
    if (!env->valkey)
        CHECK(race_count(env->db_url, "lease.idempotency", &r->id, "operation = 'acquire'") ==
                  r->round_no,
              "one stored acquire result per round");
    /* the stored results on either backend: the winner's request replays
     * its lease, a loser's (its conflict was not stored) is decided again
     * and still conflicts; neither allocates a token */
    for (int i = 0; i < THREADS; i++) {
        lease_acquire_req_t again = r->reqs[i];
        again.call.deadline = lease_deadline_in(20000);
        lease_result_t seen;
        lease_code_t c = lease_store_acquire(env->store, &again, &seen);
        if (i == winner) {
            CHECK(c == LEASE_ACQUIRED && seen.replayed, "round %d: the winner's retry: %s%s",
                  r->round_no, CODE(c), seen.replayed ? " (replayed)" : "");
            CHECK(race_same_lease(&seen.lease, &lease), "the replay is the winner's lease");
        } else {
            CHECK(c == LEASE_CONFLICT && !seen.replayed, "round %d: thread %d's retry: %s%s",
                  r->round_no, i, CODE(c), seen.replayed ? " (replayed)" : "");
        }
    }
    CHECK(race_env_counter(env, &r->id) == counter, "retries allocated nothing");
    CHECK(race_env_audit_count(env, "target_lease_acquire", NULL) == r->round_no,
          "one acquisition audited per round");

    lease_result_t seen;
    CHECK(race_inspect(env->store, &r->id, &seen) == LEASE_INSPECTED, "inspect after round");
    CHECK(strcmp(seen.lease.lease_id, lease.lease_id) == 0, "the active lease is the winner's");
    printf("round %d: 1 acquired (token %lld), %d conflicts\n", r->round_no,
           (long long)lease.fencing_token, conflict);
    return lease;
}

int main(void)
{
    race_env_t env;
    race_setup(&env, "acquire_once", 16, "race-acquire-once");
    round_t *r = calloc(1, sizeof *r);
    CHECK(r, "oom");
    r->store = env.store;
    race_identity(&r->id, "contended-1");

    /* 1: the identity has no row yet (the first upsert races) */
    r->round_no = 1;
    r->ttl_ms = 30000;
    lease_record_t first = run_round(&env, r, 0);

    /* 2: the row exists and is free */
    char rid[128];
    race_rid(rid, sizeof rid, "once-release", 0, 0);
    lease_owner_req_t rel;
    race_owner_req(&rel, &first, rid, first.owner_principal_id, first.service_instance_id, 0, false,
                   10000);
    lease_result_t res;
    CHECK(lease_store_release(env.store, &rel, &res) == LEASE_RELEASED, "release: %s",
          CODE(res.code));
    r->round_no = 2;
    r->ttl_ms = 1100;
    lease_record_t second = run_round(&env, r, 1);
    CHECK(second.fencing_token > first.fencing_token, "tokens increase");

    /* 3: the row holds an expired lease nobody swept */
    lease_sleep_ms(second.expires_at_ms - lease_wall_now_ms() + 50);
    r->round_no = 3;
    r->ttl_ms = 30000;
    lease_record_t third = run_round(&env, r, 2);
    CHECK(third.fencing_token > second.fencing_token, "tokens increase");
    if (!env.valkey)
        CHECK(race_count(env.db_url, "lease.history", &r->id, "state = 'expired'") == 1,
              "the expired lease is in history");
    /* on either backend: the second lease, by its id, ended expired */
    CHECK(race_inspect_id(env.store, second.lease_id, &res) == LEASE_INSPECTED,
          "the expired lease by its id: %s", CODE(res.code));
    CHECK(res.lease.state == LEASE_STATE_EXPIRED && res.lease.fencing_token == second.fencing_token,
          "the second lease ended expired (%s)", lease_state_name(res.lease.state));

    lease_store_stats_t st;
    lease_store_stats(env.store, &st);
    printf("serialization retries: %llu, outcome unknown: %llu\n",
           (unsigned long long)st.serialization_retries, (unsigned long long)st.outcome_unknown);
    CHECK(st.outcome_unknown == 0, "no outcome unknown without failures");
    CHECK(st.pool_in_use == 0 && st.pool_waiting == 0, "pool idle at the end");
    free(r);
    race_teardown(&env);
    return 0;
}
