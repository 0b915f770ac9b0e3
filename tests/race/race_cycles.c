/*
 * race_cycles.c - thousands of acquire/release cycles over four hot
 * identities from many threads. Each thread observes its own answers:
 *  - no two threads ever hold one identity at once (a per-identity holder
 *    flag is taken with compare-and-swap after lease_acquired and dropped
 *    before release is sent; a failed swap is a double grant);
 *  - tokens strictly increase per identity in acquisition order (the holder
 *    appends its token to the identity's log while it holds the flag);
 *  - afterwards the durable counter equals the number of acquisitions seen,
 *    history holds exactly those leases as released, and nothing is active; each
 *    acquisition, renewal and release audited once.
 * On both backends (race_util.h): Postgres's tables are also read on
 * Postgres.
 */
#include "race_util.h"

#define THREADS 12
#define CYCLES 700 /* per thread: 8400 acquire attempts */
#define IDENTITIES 4
#define LOG_MAX (THREADS * CYCLES)

typedef struct hot {
    lease_identity_t id;
    int holder; /* __atomic: 0 free, else thread index + 1 */
    int n_tokens;
    int64_t tokens[LOG_MAX];
    char lease_ids[LOG_MAX][LEASE_ID_MAX + 1]; /* each acquisition's lease */
} hot_t;

typedef struct shared {
    lease_store_t *store;
    hot_t hot[IDENTITIES];
    race_barrier_t start;
    int acquired;    /* __atomic */
    int conflicts;   /* __atomic */
    int unavailable; /* __atomic: acquire gave up after retries (not acquired) */
    int renewed;     /* __atomic */
} shared_t;

typedef struct worker {
    shared_t *s;
    int index;
} worker_t;

static void *cycle(void *arg)
{
    worker_t *w = arg;
    shared_t *s = w->s;
    char principal[32], instance[32];
    snprintf(principal, sizeof principal, "prn-%d", w->index);
    snprintf(instance, sizeof instance, "inst-%d", w->index);
    race_barrier_wait(&s->start);
    for (int n = 0; n < CYCLES; n++) {
        hot_t *h = &s->hot[lease_jitter(IDENTITIES)];
        char rid[128];
        race_rid(rid, sizeof rid, "cyc", w->index, n);
        lease_acquire_req_t acq;
        race_acquire_req(&acq, &h->id, rid, principal, instance, 30000, 15000);
        lease_result_t res;
        lease_code_t c = lease_store_acquire(s->store, &acq, &res);
        if (c == LEASE_CONFLICT) {
            __atomic_add_fetch(&s->conflicts, 1, __ATOMIC_RELAXED);
            continue;
        }
        if (c == LEASE_BACKEND_UNAVAILABLE) {
            /* a typed "not acquired" after exhausted retries; the final
             * counter check proves it allocated nothing */
            __atomic_add_fetch(&s->unavailable, 1, __ATOMIC_RELAXED);
            continue;
        }
        CHECK(c == LEASE_ACQUIRED, "thread %d: acquire answered %s", w->index, CODE(c));
        int expected = 0;
        CHECK(__atomic_compare_exchange_n(&h->holder, &expected, w->index + 1, false,
                                          __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST),
              "double grant: thread %d acquired %s token %lld while thread %d holds it", w->index,
              h->id.target_id, (long long)res.lease.fencing_token, expected - 1);
        __atomic_add_fetch(&s->acquired, 1, __ATOMIC_RELAXED);
        /* only the holder writes the log */
        if (h->n_tokens > 0)
            CHECK(res.lease.fencing_token > h->tokens[h->n_tokens - 1],
                  "token %lld after %lld on %s", (long long)res.lease.fencing_token,
                  (long long)h->tokens[h->n_tokens - 1], h->id.target_id);
        snprintf(h->lease_ids[h->n_tokens], sizeof h->lease_ids[0], "%s", res.lease.lease_id);
        h->tokens[h->n_tokens++] = res.lease.fencing_token;
        lease_record_t lease = res.lease;

        if (n % 5 == 0) {
            race_rid(rid, sizeof rid, "cyc-renew", w->index, n);
            lease_owner_req_t ren;
            race_owner_req(&ren, &lease, rid, principal, instance, 30000, true, 15000);
            do
                c = lease_store_renew(s->store, &ren, &res);
            while (c == LEASE_BACKEND_UNAVAILABLE);
            CHECK(c == LEASE_RENEWED, "the holder's renew answered %s", CODE(c));
            CHECK(res.lease.fencing_token == lease.fencing_token, "renew kept the token");
            __atomic_add_fetch(&s->renewed, 1, __ATOMIC_RELAXED);
        }

        __atomic_store_n(&h->holder, 0, __ATOMIC_SEQ_CST);
        race_rid(rid, sizeof rid, "cyc-release", w->index, n);
        lease_owner_req_t rel;
        race_owner_req(&rel, &lease, rid, principal, instance, 0, false, 15000);
        /* the same request id until the answer is definite */
        do {
            rel.call.deadline = lease_deadline_in(15000);
            c = lease_store_release(s->store, &rel, &res);
        } while (c == LEASE_BACKEND_UNAVAILABLE);
        CHECK(c == LEASE_RELEASED, "the holder's release answered %s", CODE(c));
        CHECK(!res.replayed || res.current_state == LEASE_STATE_RELEASED, "release replay");
    }
    return NULL;
}

int main(void)
{
    race_env_t env;
    race_setup(&env, "cycles", 8, "race-cycles");
    shared_t *s = calloc(1, sizeof *s);
    CHECK(s, "oom");
    s->store = env.store;
    for (int i = 0; i < IDENTITIES; i++) {
        char target[32];
        snprintf(target, sizeof target, "hot-%d", i);
        race_identity(&s->hot[i].id, target);
    }
    int64_t t0 = lease_mono_now_ns();
    pthread_t t[THREADS];
    worker_t w[THREADS];
    race_barrier_init(&s->start, THREADS);
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker_t){s, i};
        CHECK(pthread_create(&t[i], NULL, cycle, &w[i]) == 0, "pthread_create");
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    race_barrier_destroy(&s->start);
    double secs = (double)(lease_mono_now_ns() - t0) / 1e9;

    int total = 0;
    for (int i = 0; i < IDENTITIES; i++) {
        hot_t *h = &s->hot[i];
        long long counter = race_env_counter(&env, &h->id);
        CHECK(counter == h->n_tokens, "%s: counter %lld, %d acquisitions seen", h->id.target_id,
              counter, h->n_tokens);
        for (int k = 1; k < h->n_tokens; k++)
            CHECK(h->tokens[k] > h->tokens[k - 1], "tokens increase");
        if (!env.valkey)
            CHECK(race_count(env.db_url, "lease.history", &h->id, "state = 'released'") ==
                      h->n_tokens,
                  "%s: every acquisition ended released in history", h->id.target_id);
        /* on either backend: each acquisition's lease, by its id, ended
         * released with the token it was given */
        for (int k = 0; k < h->n_tokens; k++) {
            lease_result_t seen;
            CHECK(race_inspect_id(env.store, h->lease_ids[k], &seen) == LEASE_INSPECTED,
                  "%s: lease %s: %s", h->id.target_id, h->lease_ids[k], CODE(seen.code));
            CHECK(seen.lease.state == LEASE_STATE_RELEASED &&
                      seen.lease.fencing_token == h->tokens[k],
                  "%s: lease %s is %s token %lld, want released token %lld", h->id.target_id,
                  h->lease_ids[k], lease_state_name(seen.lease.state),
                  (long long)seen.lease.fencing_token, (long long)h->tokens[k]);
        }
        lease_result_t now;
        CHECK(race_inspect(env.store, &h->id, &now) == LEASE_NOT_FOUND, "%s: still held (%s)",
              h->id.target_id, now.lease.lease_id);
        total += h->n_tokens;
    }
    CHECK(total == s->acquired, "acquisitions add up");
    if (!env.valkey)
        CHECK(testpg_query_int(env.db_url, "SELECT count(*) FROM lease.active_leases") == 0,
              "nothing left active");
    CHECK(race_env_audit_count(&env, "target_lease_acquire", NULL) == total,
          "one acquisition audited per lease");
    CHECK(race_env_audit_count(&env, "target_lease_release", NULL) == total,
          "one release audited per lease (a retried release replays)");
    CHECK(race_env_audit_count(&env, "target_lease_renew", NULL) == s->renewed,
          "one renewal audited per renewal");
    lease_store_stats_t st;
    lease_store_stats(env.store, &st);
    printf("%d acquire attempts in %.1fs: %d acquired, %d conflicts, %d gave up after retries, "
           "%d renewals; %llu serialization retries; outcome unknown %llu\n",
           THREADS * CYCLES, secs, s->acquired, s->conflicts, s->unavailable, s->renewed,
           (unsigned long long)st.serialization_retries, (unsigned long long)st.outcome_unknown);
    CHECK(s->acquired > IDENTITIES * 10, "the identities changed hands many times");
    CHECK(st.outcome_unknown == 0, "no outcome unknown without failures");
    free(s);
    race_teardown(&env);
    return 0;
}
