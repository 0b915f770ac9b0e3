/*
 * race_idempotent.c - the same request id sent from 8 threads at once,
 * for acquire, renew and release: one mutation, one token, and every answer
 * the same lease (exactly one executed, the others say replayed). A reuse
 * of the id with a different body answers idempotency_conflict and changes
 * nothing.
 * On both backends (race_util.h): Postgres's tables are also read on
 * Postgres.
 */
#include "race_util.h"

#define THREADS 8

typedef enum op { OP_ACQUIRE, OP_RENEW, OP_RELEASE } op_t;

typedef struct shared {
    lease_store_t *store;
    op_t op;
    lease_acquire_req_t acquire;
    lease_owner_req_t owner;
    race_barrier_t start;
    lease_result_t results[THREADS];
} shared_t;

typedef struct worker {
    shared_t *s;
    int index;
} worker_t;

static void *send_same(void *arg)
{
    worker_t *w = arg;
    shared_t *s = w->s;
    lease_acquire_req_t a = s->acquire;
    lease_owner_req_t o = s->owner;
    race_barrier_wait(&s->start);
    a.call.deadline = lease_deadline_in(20000);
    o.call.deadline = lease_deadline_in(20000);
    lease_result_t *res = &s->results[w->index];
    lease_code_t c = s->op == OP_ACQUIRE ? lease_store_acquire(s->store, &a, res)
                     : s->op == OP_RENEW ? lease_store_renew(s->store, &o, res)
                                         : lease_store_release(s->store, &o, res);
    CHECK(c == res->code, "returned and stored codes agree");
    return NULL;
}

/* Sends the prepared request from every thread; checks the answers are one
 * execution plus replays of it; returns that lease. */
static lease_record_t storm(shared_t *s, lease_code_t want, lease_state_t state_now)
{
    pthread_t t[THREADS];
    worker_t w[THREADS];
    race_barrier_init(&s->start, THREADS);
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker_t){s, i};
        CHECK(pthread_create(&t[i], NULL, send_same, &w[i]) == 0, "pthread_create");
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    race_barrier_destroy(&s->start);
    int fresh = 0;
    for (int i = 0; i < THREADS; i++) {
        lease_result_t *r = &s->results[i];
        CHECK(r->code == want, "thread %d: %s, want %s", i, CODE(r->code), CODE(want));
        CHECK(r->has_lease, "thread %d: no lease in the answer", i);
        CHECK(race_same_lease(&r->lease, &s->results[0].lease),
              "thread %d answered another lease (%s/%lld vs %s/%lld)", i, r->lease.lease_id,
              (long long)r->lease.fencing_token, s->results[0].lease.lease_id,
              (long long)s->results[0].lease.fencing_token);
        if (!r->replayed)
            fresh++;
        else
            CHECK(r->current_state == state_now, "replay %d: current_state %s, want %s", i,
                  lease_state_name(r->current_state), lease_state_name(state_now));
    }
    CHECK(fresh == 1, "%d answers were executions, want exactly 1", fresh);
    return s->results[0].lease;
}

int main(void)
{
    race_env_t env;
    race_setup(&env, "idempotent", 8, "race-idempotent");
    shared_t *s = calloc(1, sizeof *s);
    CHECK(s, "oom");
    s->store = env.store;
    lease_identity_t id;
    race_identity(&id, "idem-1");

    /* acquire: one lease, one token */
    char rid[128];
    race_rid(rid, sizeof rid, "idem-acquire", 0, 0);
    race_acquire_req(&s->acquire, &id, rid, "prn-owner", "inst-owner", 30000, 20000);
    s->op = OP_ACQUIRE;
    lease_record_t lease = storm(s, LEASE_ACQUIRED, LEASE_STATE_ACTIVE);
    CHECK(race_env_counter(&env, &id) == 1, "one token allocated");
    CHECK(lease.fencing_token == 1, "token 1");
    if (!env.valkey)
        CHECK(race_count(env.db_url, "lease.idempotency", &id, "operation = 'acquire'") == 1,
              "one stored result");
    CHECK(race_env_audit_count(&env, "target_lease_acquire", rid) == 1, "one acquisition audited");
    printf("acquire: 8 answers, 1 execution, lease %s token %lld\n", lease.lease_id,
           (long long)lease.fencing_token);

    /* the same id with another body: idempotency_conflict, nothing changes */
    lease_acquire_req_t changed = s->acquire;
    changed.ttl_ms = 60000;
    lease_digest_acquire(&changed, changed.call.request_digest);
    changed.call.deadline = lease_deadline_in(10000);
    lease_result_t res;
    CHECK(lease_store_acquire(env.store, &changed, &res) == LEASE_IDEMPOTENCY_CONFLICT, "got %s",
          CODE(res.code));
    CHECK(!res.has_lease, "a conflict shows no lease");
    CHECK(race_env_counter(&env, &id) == 1, "counter unchanged");
    CHECK(race_inspect(env.store, &id, &res) == LEASE_INSPECTED, "still held");
    CHECK(res.lease.ttl_ms == 30000 && strcmp(res.lease.lease_id, lease.lease_id) == 0,
          "the lease is unchanged");

    /* renew: one renewal, the same renewed lease in every answer */
    race_rid(rid, sizeof rid, "idem-renew", 0, 0);
    race_owner_req(&s->owner, &lease, rid, "prn-owner", "inst-owner", 45000, true, 20000);
    s->op = OP_RENEW;
    lease_record_t renewed = storm(s, LEASE_RENEWED, LEASE_STATE_ACTIVE);
    CHECK(renewed.fencing_token == lease.fencing_token, "renewal keeps the token");
    CHECK(renewed.ttl_ms == 45000, "renewed ttl");
    if (!env.valkey)
        CHECK(race_count(env.db_url, "lease.idempotency", &id, "operation = 'renew'") == 1,
              "one stored renewal");
    CHECK(race_env_audit_count(&env, "target_lease_renew", NULL) == 1, "one renewal audited");
    CHECK(race_inspect(env.store, &id, &res) == LEASE_INSPECTED && res.lease.ttl_ms == 45000 &&
              res.lease.expires_at_ms == renewed.expires_at_ms,
          "the store holds the one renewal");

    /* release: one release, every answer the released lease */
    race_rid(rid, sizeof rid, "idem-release", 0, 0);
    race_owner_req(&s->owner, &lease, rid, "prn-owner", "inst-owner", 0, false, 20000);
    s->op = OP_RELEASE;
    lease_record_t released = storm(s, LEASE_RELEASED, LEASE_STATE_RELEASED);
    CHECK(released.state == LEASE_STATE_RELEASED, "released state");
    if (!env.valkey)
        CHECK(race_count(env.db_url, "lease.history", &id, "state = 'released'") == 1,
              "one terminal record");
    CHECK(race_env_audit_count(&env, "target_lease_release", NULL) == 1, "one release audited");
    CHECK(race_inspect(env.store, &id, &res) == LEASE_NOT_FOUND, "the identity is free");
    CHECK(race_inspect_id(env.store, lease.lease_id, &res) == LEASE_INSPECTED &&
              res.lease.state == LEASE_STATE_RELEASED && race_same_lease(&res.lease, &released),
          "the lease by its id: released, as every answer showed it");
    CHECK(race_env_counter(&env, &id) == 1, "release does not touch the counter");

    /* a replay of the acquire now reports the lease's terminal state */
    lease_acquire_req_t again = s->acquire;
    again.call.deadline = lease_deadline_in(10000);
    CHECK(lease_store_acquire(env.store, &again, &res) == LEASE_ACQUIRED, "replay: %s",
          CODE(res.code));
    CHECK(res.replayed && res.current_state == LEASE_STATE_RELEASED,
          "replay says replayed, current_state released (%d, %s)", res.replayed,
          lease_state_name(res.current_state));
    CHECK(strcmp(res.lease.lease_id, lease.lease_id) == 0, "replay returns the original lease");
    CHECK(race_env_counter(&env, &id) == 1, "a replay allocates nothing");
    printf("renew and release: 8 answers each, 1 execution each\n");

    free(s);
    race_teardown(&env);
    return 0;
}
