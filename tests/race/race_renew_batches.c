/*
 * race_renew_batches.c - concurrent renew-batches of disjoint leases do not
 * fail each other under SERIALIZABLE.
 *
 * THREADS holders, each with LEASES leases of its own (acquired all at once,
 * so their rows share heap pages), renew them all in one
 * lease_store_renew_many (lease.renew_many) per round, ROUNDS rounds, all
 * at once, in two sittings. No two batches touch the same lease, so no
 * serialization failure is a real conflict of the leases.
 *
 * "settings": back to back, lease.locks at fillfactor 10 so that every
 * renewal is a HOT update whatever the cadence. What is left is the
 * granularity of predicate locks: with PostgreSQL's defaults a batch's
 * tuple locks on lease.locks are promoted to page locks after two rows of a
 * heap page (max_pred_locks_per_page) and to a relation lock after 31
 * (max_pred_locks_per_relation), and then any other batch's write to a
 * neighbouring lease is a read-write conflict. With the settings
 * docs/operators.md documents ("Predicate locks for batch renewals"), which
 * the test cluster runs with (tests/harness/pgcluster), batches commit at
 * their first attempt (with the defaults, 4 holders of 50 saw more retries
 * than batches: 247 and 262 of 240).
 *
 * "schema layout": lease.locks as the schema makes it, one batch per holder
 * per period (PERIOD_MS, and at least PERIOD_SPAN times the holder's last
 * batch), as a fleet renews. A batch renewing most rows of a page
 * needs room there for all their new versions at once; without it the rest
 * are not HOT and their index entries conflict with every other batch's
 * look-ups. At the fillfactor 80 of schemas before 22 this sitting saw 23
 * and 30 retries in 360 batches; at schema 22's 40, none in eight runs (four
 * of them beside busy loops), 8 under AddressSanitizer in CI.
 *
 * Every batch must be decided and every item renewed with its own lease and
 * token. ctest runs it alone (RUN_SERIAL): beside two other tests and a
 * background build its batches took 2.6x as long and overlapped enough for
 * 26 retries in 240 batches (every batch still decided). RETRIES_ALLOWED
 * leaves room for the rare conflict PostgreSQL reports when other sessions
 * share the cluster (the harness's, or an outside LEASE_TEST_DATABASE_URL's).
 *
 * On both backends (race_util.h). On Valkey (one function call per batch,
 * nothing to serialize) the "schema layout" sitting runs ("fleet cadence":
 * a batch per holder per period), and every lease is read back through the
 * store (on Postgres too); the "settings"
 * sitting is left out by name (lease.locks' fillfactor and the cluster's
 * predicate-lock settings are PostgreSQL's), as are the table reads.
 */
#include "race_util.h"

#define THREADS 6
#define LEASES 100
#define ROUNDS 60
#define TTL_MS 120000
#define PERIOD_MS 40  /* between a holder's rounds in the schema-layout sitting, at least */
#define PERIOD_SPAN 3 /* ... and at least this many times its last batch */
#define RETRIES_ALLOWED (THREADS * ROUNDS / 20) /* one batch in 20 */

typedef struct holder {
    race_env_t *env;
    int index;
    race_barrier_t *start;
    int pause_ms; /* between rounds: 0 back to back, else at least this long */
    lease_record_t held[LEASES];
    int failed_calls; /* batches not decided at all */
    int items_not_renewed;
    lease_code_t first_failure;
} holder_t;

static void *renew_rounds(void *arg)
{
    holder_t *h = arg;
    lease_owner_req_t reqs[LEASES];
    lease_result_t results[LEASES];
    race_barrier_wait(h->start);
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < LEASES; i++) {
            char rid[128];
            race_rid(rid, sizeof rid, "batch", h->index * 1000 + i, round);
            race_owner_req(&reqs[i], &h->held[i], rid, "prn-holder", "inst-holder", TTL_MS, true,
                           20000);
        }
        lease_deadline_t deadline = lease_deadline_in(20000);
        int64_t sent_ns = lease_mono_now_ns();
        lease_code_t c = lease_store_renew_many(h->env->store, reqs, LEASES, &deadline, results);
        if (c != LEASE_RENEWED) {
            if (h->failed_calls++ == 0)
                h->first_failure = c;
            continue;
        }
        for (int i = 0; i < LEASES; i++) {
            bool ok = results[i].code == LEASE_RENEWED &&
                      results[i].lease.fencing_token == h->held[i].fencing_token &&
                      strcmp(results[i].lease.lease_id, h->held[i].lease_id) == 0;
            h->items_not_renewed += !ok;
        }
        /* A fleet renews every ttl/3, seconds apart, with batches that take
         * milliseconds: the period is at least PERIOD_SPAN batches long, so
         * that a slow machine (a sanitizer build, a busy CI) keeps that
         * proportion instead of renewing back to back. */
        int64_t took_ms = (lease_mono_now_ns() - sent_ns) / 1000000;
        int64_t pause_ms =
            PERIOD_SPAN * took_ms > h->pause_ms ? PERIOD_SPAN * took_ms : h->pause_ms;
        if (h->pause_ms > 0)
            usleep((useconds_t)pause_ms * 1000);
    }
    return NULL;
}

static void *acquire_all(void *arg)
{
    holder_t *h = arg;
    /* all holders acquire at once, so their rows share heap pages, as a
     * fleet's workers' rows do */
    race_barrier_wait(h->start);
    for (int i = 0; i < LEASES; i++) {
        char target[64];
        snprintf(target, sizeof target, "batch-%d-%d", h->index, i);
        lease_identity_t id;
        race_identity(&id, target);
        lease_acquire_req_t req;
        char rid[128];
        race_rid(rid, sizeof rid, "acq", h->index, i);
        race_acquire_req(&req, &id, rid, "prn-holder", "inst-holder", TTL_MS, 20000);
        h->held[i] = race_acquire_retrying(h->env->store, &req);
    }
    return NULL;
}

static void run_all(holder_t *h, void *(*fn)(void *))
{
    pthread_t t[THREADS];
    race_barrier_t start;
    race_barrier_init(&start, THREADS);
    for (int i = 0; i < THREADS; i++) {
        h[i].start = &start;
        CHECK(pthread_create(&t[i], NULL, fn, &h[i]) == 0, "pthread_create");
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    race_barrier_destroy(&start);
}

static char *setting(const char *url, const char *name)
{
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT current_setting('%s')", name);
    char *v = testpg_query_value(url, sql);
    CHECK(v, "SHOW %s", name);
    return v;
}

/* One sitting in a database of its own: THREADS holders acquire LEASES
 * leases each at once, then renew them all in ROUNDS batches each, all at
 * once; fillfactor, when not NULL, is set on lease.locks before the rows
 * exist. Checks that every batch was decided, every item renewed with its
 * own lease and token, and at most `allowed` serialization retries. */
static void sitting(const char *what, const char *fillfactor, int pause_ms,
                    unsigned long long allowed, const char *per_page, const char *per_relation)
{
    race_env_t env;
    race_setup(&env, "race_renew_batches", THREADS, "race_renew_batches");
    char *layout = NULL;
    if (env.valkey)
        goto holders;
    /* Autovacuum off for this database's tables: an autovacuum ANALYZE
     * holds a snapshot while it samples (runs of 0.1-0.5 s on
     * lease.idempotency and lease.locks here at schema 22, shorter since
     * migration 0023), during which no renewal's old version can be
     * pruned, so renewals stop being HOT and their index entries conflict
     * with other batches' look-ups. That is a real cost of any long
     * transaction in the lease database (docs/operators.md, "Long
     * transactions and batch renewals"), but not what these sittings
     * measure: with autovacuum visiting a sitting's database at random
     * (once a minute), one CI run saw 24 retries in the settings sitting where
     * local runs saw 0; a snapshot held 600 ms of every second gave 44. */
    CHECK(testpg_exec(env.db_url,
                      "DO $$DECLARE t regclass; BEGIN FOR t IN SELECT c.oid FROM pg_class c "
                      "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'lease' "
                      "AND c.relkind = 'r' LOOP EXECUTE format('ALTER TABLE %s SET "
                      "(autovacuum_enabled = off)', t); END LOOP; END$$"),
          "autovacuum off");
    if (fillfactor) {
        char sql[96];
        snprintf(sql, sizeof sql, "ALTER TABLE lease.locks SET (fillfactor = %s)", fillfactor);
        CHECK(testpg_exec(env.db_url, sql), "fillfactor");
    }
    layout = testpg_query_value(
        env.db_url, "SELECT coalesce(array_to_string(reloptions, ','), 'fillfactor=100') "
                    "FROM pg_class WHERE oid = 'lease.locks'::regclass");
    CHECK(layout, "lease.locks reloptions");
holders:;
    holder_t h[THREADS];
    memset(h, 0, sizeof h);
    for (int i = 0; i < THREADS; i++) {
        h[i].env = &env;
        h[i].index = i;
        h[i].pause_ms = pause_ms;
    }
    run_all(h, acquire_all);

    lease_store_stats_t before, after;
    lease_store_stats(env.store, &before);
    int64_t t0 = lease_mono_now_ns();
    run_all(h, renew_rounds);
    int64_t elapsed_ms = (lease_mono_now_ns() - t0) / 1000000;
    lease_store_stats(env.store, &after);

    unsigned long long retries = after.serialization_retries - before.serialization_retries;
    int failed = 0, not_renewed = 0;
    lease_code_t first = LEASE_RENEWED;
    for (int i = 0; i < THREADS; i++) {
        failed += h[i].failed_calls;
        not_renewed += h[i].items_not_renewed;
        if (h[i].failed_calls && first == LEASE_RENEWED)
            first = h[i].first_failure;
    }
    printf("%s (lease.locks %s, %d ms between rounds): %d batches of %d renewals from %d holders "
           "in %lld ms: %llu serialization retries, %d batches failed (first: %s), %d items not "
           "renewed\n",
           what, layout ? layout : "absent: valkey", pause_ms, THREADS * ROUNDS, LEASES, THREADS,
           (long long)elapsed_ms, retries, failed, failed ? CODE(first) : "none", not_renewed);
    fflush(stdout);

    CHECK(failed == 0, "%s: %d of %d batches of disjoint leases failed (first: %s)", what, failed,
          THREADS * ROUNDS, CODE(first));
    CHECK(not_renewed == 0, "%s: %d items were not renewed with their own lease and token", what,
          not_renewed);
    CHECK(retries <= allowed,
          "%s: %llu serialization retries among batches of disjoint leases (lease.locks %s; "
          "cluster: max_pred_locks_per_page=%s max_pred_locks_per_relation=%s; "
          "docs/operators.md, \"Predicate locks for batch renewals\")",
          what, retries, layout ? layout : "absent: valkey", per_page, per_relation);
    /* every lease still active, its expiry pushed by the last round: each
     * as the store shows it by its id, and on Postgres in lease.locks */
    int64_t pushed = lease_wall_now_ms() + 60000;
    for (int i = 0; i < THREADS; i++)
        for (int k = 0; k < LEASES; k++) {
            lease_result_t seen;
            CHECK(race_inspect_id(env.store, h[i].held[k].lease_id, &seen) == LEASE_INSPECTED,
                  "%s: lease %s: %s", what, h[i].held[k].lease_id, CODE(seen.code));
            CHECK(seen.lease.state == LEASE_STATE_ACTIVE &&
                      seen.lease.fencing_token == h[i].held[k].fencing_token &&
                      seen.lease.expires_at_ms > pushed &&
                      seen.lease.renewed_at_ms > h[i].held[k].acquired_at_ms,
                  "%s: lease %s is %s, expires in %lld ms, renewed %lld ms after its acquisition",
                  what, seen.lease.lease_id, lease_state_name(seen.lease.state),
                  (long long)(seen.lease.expires_at_ms - lease_wall_now_ms()),
                  (long long)(seen.lease.renewed_at_ms - h[i].held[k].acquired_at_ms));
        }
    if (!env.valkey)
        CHECK(testpg_query_int(
                  env.db_url, "SELECT count(*) FROM lease.locks WHERE state = 'active' "
                              "AND expires_at > now() + interval '60 seconds'") == THREADS * LEASES,
              "%s: all %d leases active after the rounds", what, THREADS * LEASES);
    free(layout);
    race_teardown(&env);
}

int main(void)
{
    char *per_page, *per_relation, *per_xact;
    if (test_store_is_valkey()) {
        printf("not run on valkey: settings (lease.locks at fillfactor 10 and the cluster's "
               "predicate-lock settings: PostgreSQL's serialization, which Valkey has not)\n");
        /* one function call per batch: no serialization retry at all */
        sitting("fleet cadence", NULL, PERIOD_MS, 0, "-", "-");
        printf("ok: concurrent renew-batches of disjoint leases did not fail each other\n");
        return 0;
    }
    {
        race_env_t env;
        race_setup(&env, "race_renew_batches", THREADS, "race_renew_batches");
        per_page = setting(env.db_url, "max_pred_locks_per_page");
        per_relation = setting(env.db_url, "max_pred_locks_per_relation");
        per_xact = setting(env.db_url, "max_pred_locks_per_transaction");
        race_teardown(&env);
    }
    printf("cluster: max_pred_locks_per_page=%s max_pred_locks_per_relation=%s "
           "max_pred_locks_per_transaction=%s\n",
           per_page, per_relation, per_xact);

    /* The granularity settings: rows with room for every new version on
     * their own page, so that each renewal is a HOT update whatever the
     * cadence, and batches back to back. What is left to conflict is the
     * predicate locks' granularity (the cluster's settings). */
    sitting("settings", "10", 0, RETRIES_ALLOWED, per_page, per_relation);
    /* The schema's own layout, renewed as a fleet renews: a batch per
     * holder per period. A batch renewing most rows of a page needs room
     * there for all their new versions at once; where there is none, the
     * rest are not HOT, and their index entries land on btree leaf pages
     * that every other batch's lookups have read (read-write conflicts no
     * setting removes; docs/schema.md, lease.locks' fillfactor). */
    sitting("schema layout", NULL, PERIOD_MS, RETRIES_ALLOWED, per_page, per_relation);

    free(per_page);
    free(per_relation);
    free(per_xact);
    printf("ok: concurrent renew-batches of disjoint leases did not fail each other\n");
    return 0;
}
