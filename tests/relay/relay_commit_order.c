/*
 * relay_commit_order.c - the relay's ordering rests on one property of the
 * fenced commit: the outbox rows of one identity become visible in
 * outbox_id order (commits of an identity serialise on its high-water mark
 * row, so a lower id never commits after a higher one is visible). Six
 * threads commit publications to one identity at once while an observer
 * session keeps reading the highest visible id of the identity and how many
 * rows lie at or below it; afterwards no row may have appeared below a
 * maximum already observed. Then the relay delivers them: first deliveries
 * in outbox_id order.
 */
#include "relay_common.h"

#define THREADS 6
#define COMMITS 25

static relay_fx_t fx;

static int setup(void **state)
{
    (void)state;
    relay_fx_open(&fx, "relay_commit_order");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    relay_fx_close(&fx);
    return 0;
}

typedef struct committer {
    json_t *lease;
    int accepted;
    int failed;
} committer_t;

static void *commit_loop(void *arg)
{
    committer_t *c = arg;
    for (int i = 0; i < COMMITS; i++) {
        http_resp_t *r =
            relay_commit(&fx, "t-order", c->lease, 2, "results.order", "accepted", NULL);
        if (r && r->status == 200)
            c->accepted++;
        else
            c->failed++;
        http_resp_free(r);
    }
    return NULL;
}

typedef struct observation {
    long long max_id;
    long long at_or_below;
} observation_t;

typedef struct observer {
    volatile int stop;
    observation_t *seen;
    size_t n, cap;
} observer_t;

static void *observe(void *arg)
{
    observer_t *o = arg;
    PGconn *c = PQconnectdb(fx.http.db);
    if (PQstatus(c) != CONNECTION_OK)
        return NULL;
    while (!o->stop) {
        /* one statement, one snapshot: the highest visible id and the count
         * of rows at or below it */
        PGresult *r = PQexec(c, "SELECT coalesce(max(outbox_id), 0), count(*) FROM lease.outbox");
        if (PQresultStatus(r) == PGRES_TUPLES_OK && o->n < o->cap) {
            o->seen[o->n].max_id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
            o->seen[o->n].at_or_below = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
            o->n++;
        }
        PQclear(r);
    }
    PQfinish(c);
    return NULL;
}

static void rows_of_an_identity_appear_in_id_order(void **state)
{
    (void)state;
    json_t *lease = relay_acquire(&fx, "t-order");
    observer_t obs = {.cap = 200000};
    obs.seen = calloc(obs.cap, sizeof *obs.seen);
    pthread_t ot, th[THREADS];
    committer_t cs[THREADS];
    pthread_create(&ot, NULL, observe, &obs);
    for (int i = 0; i < THREADS; i++) {
        cs[i] = (committer_t){.lease = lease};
        pthread_create(&th[i], NULL, commit_loop, &cs[i]);
    }
    int accepted = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        accepted += cs[i].accepted;
        assert_int_equal(cs[i].failed, 0);
    }
    obs.stop = 1;
    pthread_join(ot, NULL);
    assert_int_equal(accepted, THREADS * COMMITS);
    assert_int_equal(relay_outbox_rows(&fx), 2 * THREADS * COMMITS);
    /* nothing appeared later below a maximum already seen */
    size_t checked = 0;
    for (size_t i = 0; i < obs.n; i += 1 + obs.n / 400) {
        char sql[128];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM lease.outbox WHERE outbox_id <= %lld",
                 obs.seen[i].max_id);
        long long now = testpg_query_int(fx.http.db, sql);
        if (now != obs.seen[i].at_or_below)
            fail_msg("a row below outbox id %lld appeared after it was visible (%lld then, "
                     "%lld now)",
                     obs.seen[i].max_id, obs.seen[i].at_or_below, now);
        checked++;
    }
    fprintf(stderr, "commit order: %d commits from %d threads, %zu observations, %zu checked\n",
            accepted, THREADS, obs.n, checked);
    assert_true(checked > 10);

    collector_t col;
    collector_init(&col);
    relay_proc_t *relay = relay_proc_start(fx.http.db, (const char *[]){fx.exchange_env, NULL});
    assert_true(collector_until(&col, fx.consumer, (size_t)(2 * THREADS * COMMITS), 60000));
    collector_drain(&col, fx.consumer, 300);
    collector_check_exact(&col, &fx);
    collector_check_order(&col);
    assert_int_equal(relay_proc_stop(relay), 0);
    collector_free(&col);
    free(obs.seen);
    json_decref(lease);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rows_of_an_identity_appear_in_id_order),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
