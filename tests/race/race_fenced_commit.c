/*
 * race_fenced_commit.c - fenced commits through the Postgres store:
 *  1. a commit whose backend is terminated while it waits on the identity
 *     row: outcome unknown (or a true definite answer); repeating the
 *     request id writes the document exactly once (revision 1);
 *  2. a commit blocked past its deadline: deadline_exceeded, nothing
 *     written;
 *  3. 6 threads committing one document after another while an
 *     administrator revokes their lease: per thread the accepted commits
 *     are a prefix and every later one is lease_lost writing nothing; no
 *     commit sent after the revoke answered is accepted; after a reacquisition
 *     the old token is lease_lost too.
 * On both backends (race_util.h), with two differences on Valkey: its
 * commits carry no publication (the outbox needs PostgreSQL: Valkey
 * refuses a commit with one, docs/backends.md), and cases 1 and 2 are
 * left out by name (they hold the identity's row lock from a second
 * Postgres session and terminate the store's backend). Each document's
 * revision is read through the store on both backends (a commit that
 * expects an impossible revision answers write_conflict with the revision
 * it found and writes nothing), lease.fenced_documents on Postgres beside.
 */
#include "race_blocker.h"

#define APP "race-commit"

/* Whether commits carry a publication (not on Valkey: see above). */
static bool with_publication = true;

typedef struct inflight {
    lease_store_t *store;
    lease_commit_req_t req;
    lease_commit_result_t res;
    lease_code_t code;
} inflight_t;

static void *send_commit(void *arg)
{
    inflight_t *f = arg;
    f->code = lease_store_fenced_commit(f->store, &f->req, &f->res);
    return NULL;
}

static void commit_req(lease_commit_req_t *c, const lease_record_t *l, const char *rid,
                       const char *doc, int64_t expected_revision, int64_t deadline_ms)
{
    memset(c, 0, sizeof *c);
    race_call(&c->call, rid, l->owner_principal_id, deadline_ms);
    c->identity = l->identity;
    snprintf(c->lease_id, sizeof c->lease_id, "%s", l->lease_id);
    c->fencing_token = l->fencing_token;
    snprintf(c->execution_id, sizeof c->execution_id, "%s", l->execution_id);
    c->n_writes = with_publication ? 2 : 1;
    c->writes[0].kind = LEASE_WRITE_DOCUMENT;
    snprintf(c->writes[0].key, sizeof c->writes[0].key, "%s", doc);
    c->writes[0].expected_revision = expected_revision;
    c->writes[0].json = "{\"v\":1}";
    c->writes[1].kind = LEASE_WRITE_PUBLICATION;
    strcpy(c->writes[1].key, "race.topic");
    c->writes[1].json = "{\"done\":true}";
    CHECK(lease_digest_commit(c, c->call.request_digest), "digest");
}

static lease_record_t acquire_ok(lease_store_t *s, const lease_identity_t *id)
{
    return race_acquire_ok(s, id, "c-acq", "prn-c", "inst-c");
}

/* A document's revision in lease.fenced_documents (Postgres only). */
static long long doc_revision(const char *db_url, const char *doc)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT coalesce((SELECT revision FROM lease.fenced_documents "
             "WHERE document_key = '%s'), 0)",
             doc);
    return testpg_query_int(db_url, sql);
}

/* A document's revision as the store answers it to the holder of `live`
 * (an active lease of the document's identity): a commit expecting a
 * revision no document reaches answers write_conflict with the revision it
 * found (0: none) and writes nothing. */
static long long store_revision(lease_store_t *s, const lease_record_t *live, const char *doc)
{
    char rid[128];
    race_rid(rid, sizeof rid, "c-probe", 0, 0);
    lease_commit_req_t probe;
    bool publish = with_publication;
    with_publication = false;
    commit_req(&probe, live, rid, doc, 1000000, 10000);
    with_publication = publish;
    lease_commit_result_t res;
    lease_code_t c = lease_store_fenced_commit(s, &probe, &res);
    CHECK(c == LEASE_WRITE_CONFLICT, "probe of %s: %s", doc, CODE(c));
    CHECK(strcmp(res.field, "writes[0].expected_revision") == 0, "probe of %s: field %s", doc,
          res.field);
    return res.current_revision;
}

/* A document's revision: through the store, and on Postgres also in the
 * table, which must agree. */
static long long revision_of(const race_env_t *env, const lease_record_t *live, const char *doc)
{
    long long seen = store_revision(env->store, live, doc);
    if (!env->valkey)
        CHECK(doc_revision(env->db_url, doc) == seen,
              "%s: the table has revision %lld, the store "
              "answered %lld",
              doc, doc_revision(env->db_url, doc), seen);
    return seen;
}

#define RACERS 6
#define ROUNDS 12

typedef struct revoke_race {
    lease_store_t *store;
    lease_record_t lease;
    race_barrier_t start;
    lease_code_t codes[RACERS][ROUNDS];
    int64_t sent_ns[RACERS][ROUNDS];
    lease_result_t revoke;
    int64_t revoked_ns; /* when the revoke's answer arrived */
} revoke_race_t;

typedef struct racer {
    revoke_race_t *r;
    int index;
} racer_t;

/* Commits one document after another until the lease is gone. */
static void *race_commit(void *arg)
{
    racer_t *x = arg;
    race_barrier_wait(&x->r->start);
    for (int k = 0; k < ROUNDS; k++) {
        char rid[128], doc[32];
        race_rid(rid, sizeof rid, "c-race", x->index, k);
        snprintf(doc, sizeof doc, "race-doc-%d-%d", x->index, k);
        lease_commit_req_t req;
        commit_req(&req, &x->r->lease, rid, doc, 0, 10000);
        lease_commit_result_t res;
        lease_code_t c;
        x->r->sent_ns[x->index][k] = lease_mono_now_ns();
        do
            c = lease_store_fenced_commit(x->r->store, &req, &res);
        while (c == LEASE_BACKEND_UNAVAILABLE);
        x->r->codes[x->index][k] = c;
    }
    return NULL;
}

static void *race_revoke(void *arg)
{
    revoke_race_t *r = arg;
    char rid[128];
    race_rid(rid, sizeof rid, "c-revoke", 0, 0);
    lease_admin_req_t req;
    race_admin_req(&req, &r->lease, rid, true, 10000);
    race_barrier_wait(&r->start);
    lease_sleep_ms(15 + (int64_t)lease_jitter(10));
    lease_code_t c;
    do
        c = lease_store_revoke(r->store, &req, &r->revoke);
    while (c == LEASE_BACKEND_UNAVAILABLE);
    r->revoked_ns = lease_mono_now_ns();
    return NULL;
}

int main(void)
{
    race_env_t env;
    race_setup(&env, "fenced_commit", 8, APP);
    with_publication = !env.valkey;
    lease_identity_t id;
    race_identity(&id, "commit-1");
    lease_record_t lease = acquire_ok(env.store, &id);
    char rid[128];

    /* 0. an ordinary commit goes through (else everything below is moot) */
    {
        race_rid(rid, sizeof rid, "c-plain", 0, 0);
        lease_commit_req_t plain;
        commit_req(&plain, &lease, rid, "doc-plain", 0, 10000);
        lease_commit_result_t pres;
        lease_code_t pc = lease_store_fenced_commit(env.store, &plain, &pres);
        CHECK(pc == LEASE_COMMIT_ACCEPTED,
              "a plain commit answered %s (the log line above has the "
              "backend's reason)",
              CODE(pc));
        CHECK(revision_of(&env, &lease, "doc-plain") == 1, "plain commit wrote revision 1");
    }
    lease_commit_result_t res;
    lease_code_t c;
    int documents_before = 1; /* doc-plain */

    if (env.valkey) {
        printf("not run on valkey: 1 (a commit terminated while it waits on the identity's row: "
               "a Postgres row lock and backend)\n");
        printf("not run on valkey: 2 (a commit blocked past its deadline by a Postgres row "
               "lock)\n");
        goto revoke_race;
    }

    /* 1. terminated while waiting on the row */
    inflight_t f;
    memset(&f, 0, sizeof f);
    f.store = env.store;
    race_rid(rid, sizeof rid, "c-killed", 0, 0);
    commit_req(&f.req, &lease, rid, "doc-killed", 0, 15000);
    race_blocker_t b;
    race_block(&b, env.db_url, &id);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, send_commit, &f) == 0, "thread");
    race_wait_for_lock_waiters(env.db_url, APP, 1);
    CHECK(testpg_terminate_backends(env.db_url, APP) >= 1, "terminate");
    pthread_join(t, NULL);
    race_unblock(&b);
    CHECK(f.code == LEASE_OUTCOME_UNKNOWN || f.code == LEASE_COMMIT_ACCEPTED, "killed commit: %s",
          CODE(f.code));
    lease_commit_req_t again = f.req;
    again.call.deadline = lease_deadline_in(10000);
    CHECK(lease_store_fenced_commit(env.store, &again, &res) == LEASE_COMMIT_ACCEPTED,
          "resolve: %s", CODE(res.code));
    CHECK(res.n_writes == 2 && res.revisions[0] == 1 && res.revisions[1] > 0, "results");
    CHECK(revision_of(&env, &lease, "doc-killed") == 1, "written exactly once");
    documents_before++;
    CHECK(testpg_query_int(env.db_url, "SELECT count(*) FROM lease.outbox") == 2,
          "published exactly once (and once by the plain commit)");
    printf("1: commit killed in flight: %s; repeat wrote revision 1 once\n", CODE(f.code));

    /* 2. blocked past its deadline */
    race_block(&b, env.db_url, &id);
    race_rid(rid, sizeof rid, "c-late", 0, 0);
    lease_commit_req_t late;
    commit_req(&late, &lease, rid, "doc-late", 0, 400);
    c = lease_store_fenced_commit(env.store, &late, &res);
    race_unblock(&b);
    CHECK(c == LEASE_DEADLINE_EXCEEDED, "blocked commit: %s", CODE(c));
    CHECK(revision_of(&env, &lease, "doc-late") == 0, "nothing written");
    printf("2: commit blocked past its deadline: %s, nothing written\n", CODE(c));

    /* 3. commits racing a revoke */
revoke_race:;
    revoke_race_t *r = calloc(1, sizeof *r);
    CHECK(r, "oom");
    r->store = env.store;
    r->lease = lease;
    race_barrier_init(&r->start, RACERS + 1);
    pthread_t th[RACERS + 1];
    racer_t x[RACERS];
    for (int i = 0; i < RACERS; i++) {
        x[i] = (racer_t){r, i};
        CHECK(pthread_create(&th[i], NULL, race_commit, &x[i]) == 0, "thread");
    }
    CHECK(pthread_create(&th[RACERS], NULL, race_revoke, r) == 0, "thread");
    for (int i = 0; i <= RACERS; i++)
        pthread_join(th[i], NULL);
    race_barrier_destroy(&r->start);
    CHECK(r->revoke.code == LEASE_REVOKED, "revoke: %s", CODE(r->revoke.code));
    int accepted = 0, lost = 0;
    for (int i = 0; i < RACERS; i++) {
        bool gone = false;
        for (int k = 0; k < ROUNDS; k++) {
            if (r->codes[i][k] == LEASE_COMMIT_ACCEPTED) {
                CHECK(!gone, "thread %d: a commit accepted after one was lease_lost", i);
                accepted++;
            } else {
                CHECK(r->codes[i][k] == LEASE_LOST, "commit %d/%d: %s", i, k, CODE(r->codes[i][k]));
                gone = true;
                lost++;
            }
        }
    }
    /* real time: a commit sent after the revoke answered must be lost.
     * (The database's timestamps cannot show this: a revoke whose
     * transaction started first may wait for a commit's share lock and so
     * be serialized after it; docs/architecture.md explains.) */
    for (int i = 0; i < RACERS; i++)
        for (int k = 0; k < ROUNDS; k++)
            CHECK(r->sent_ns[i][k] < r->revoked_ns || r->codes[i][k] == LEASE_LOST,
                  "commit %d/%d sent after the revoke succeeded was %s", i, k,
                  CODE(r->codes[i][k]));
    if (!env.valkey)
        CHECK(accepted + documents_before ==
                  testpg_query_int(env.db_url, "SELECT count(*) FROM lease.fenced_documents"),
              "documents written = commits accepted (+ doc-plain, doc-killed)");
    printf("3: %d commits racing a revoke: %d accepted before it, %d lease_lost after\n",
           RACERS * ROUNDS, accepted, lost);

    /* the old token after reacquisition */
    lease_record_t next = acquire_ok(env.store, &id);
    CHECK(next.fencing_token == lease.fencing_token + 1, "next token");
    /* each racing commit's document, read through the store by the next
     * holder: written once when accepted, absent when lost */
    for (int i = 0; i < RACERS; i++)
        for (int k = 0; k < ROUNDS; k++) {
            char doc[32];
            snprintf(doc, sizeof doc, "race-doc-%d-%d", i, k);
            long long rev = revision_of(&env, &next, doc);
            if (r->codes[i][k] == LEASE_COMMIT_ACCEPTED)
                CHECK(rev == 1, "%s: an accepted commit wrote revision 1 (%lld)", doc, rev);
            else
                CHECK(rev == 0, "%s: a lost commit wrote nothing (revision %lld)", doc, rev);
        }
    CHECK(revision_of(&env, &next, "doc-plain") == 1, "doc-plain kept revision 1");
    race_rid(rid, sizeof rid, "c-stale", 0, 0);
    lease_commit_req_t stale;
    commit_req(&stale, &lease, rid, "doc-stale", 0, 10000);
    CHECK(lease_store_fenced_commit(env.store, &stale, &res) == LEASE_LOST, "stale commit: %s",
          CODE(res.code));
    CHECK(revision_of(&env, &next, "doc-stale") == 0, "the stale commit wrote nothing");
    free(r);
    race_teardown(&env);
    return 0;
}
