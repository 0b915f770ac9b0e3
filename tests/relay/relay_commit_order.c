/*
 * relay_commit_order.c - what the relay's order per identity rests on: the
 * outbox rows of one identity become visible in token order. A new lease
 * (a higher token) is granted only once every commit of the previous lease
 * has finished (a fenced commit holds the identity's row FOR SHARE; the
 * acquisition updates it), so no row of a lower token can appear after a
 * row of a higher token is visible.
 *
 * Four threads commit publications to one identity as fast as they can
 * with whatever lease is current, while a fifth releases and re-acquires
 * it (a higher token each time) and an observer session keeps reading the
 * highest visible token and how many rows with a lower token are visible.
 * Afterwards no lower-token row may have appeared after a higher token was
 * seen. Then the relay delivers everything: tokens never go back in first
 * deliveries (the relay runs all along, delivering while commits happen).
 *
 * Rows of one lease committed concurrently become visible in commit order,
 * which need not be outbox_id order (their ids are drawn before they
 * commit); the test counts how often that happened, for the record.
 */
#include "relay_common.h"

#define THREADS 4
#define ROTATIONS 5

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

/* The current lease, shared by the committers and the rotator; under mu
 * also which lease it is and how many commits of it were accepted (the
 * rotator waits for those, not for a total: commits of the old lease still
 * in flight at a rotation must not count for the new one). */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static json_t *current;
static int generation, accepted_now;
static volatile int accepted, refused, done, other;
static char other_reply[512]; /* the first unexpected answer (threads cannot fail a test) */

static void *commit_loop(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&done, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&mu);
        json_t *lease = json_deep_copy(current);
        int gen = generation;
        pthread_mutex_unlock(&mu);
        http_resp_t *r = relay_commit(&fx, "t-order", lease, 2, "results.order", "accepted", NULL);
        if (r && r->status == 200) {
            __atomic_add_fetch(&accepted, 1, __ATOMIC_RELAXED);
            pthread_mutex_lock(&mu);
            if (gen == generation)
                accepted_now++;
            pthread_mutex_unlock(&mu);
        } else if (r && r->status == 409 && strcmp(http_resp_str(r, "code"), "lease_lost") == 0)
            __atomic_add_fetch(&refused, 1, __ATOMIC_RELAXED); /* the lease was rotated */
        else if (__atomic_add_fetch(&other, 1, __ATOMIC_RELAXED) == 1)
            snprintf(other_reply, sizeof other_reply, "%ld %s", r ? r->status : 0L,
                     r ? r->body : "no answer");
        http_resp_free(r);
        json_decref(lease);
    }
    return NULL;
}

typedef struct observation {
    long long max_token;
    long long below; /* visible rows with a lower token */
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
        /* one statement, one snapshot */
        PGresult *r = PQexec(c, "SELECT m, (SELECT count(*) FROM lease.outbox WHERE "
                                "fencing_token < m) FROM (SELECT coalesce(max(fencing_token), 0) "
                                "AS m FROM lease.outbox) x");
        if (PQresultStatus(r) == PGRES_TUPLES_OK && o->n < o->cap) {
            o->seen[o->n].max_token = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
            o->seen[o->n].below = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
            o->n++;
        }
        PQclear(r);
    }
    PQfinish(c);
    return NULL;
}

/* Waits until `want` commits of the current lease were accepted. */
static bool wait_accepted_now(int want)
{
    long end = child_proc_now_ms() + 60000;
    for (;;) {
        pthread_mutex_lock(&mu);
        int n = accepted_now;
        pthread_mutex_unlock(&mu);
        if (n >= want)
            return true;
        if (child_proc_now_ms() > end)
            return false;
        usleep(2000);
    }
}

static void rows_of_an_identity_appear_in_token_order(void **state)
{
    (void)state;
    current = relay_acquire(&fx, "t-order");
    /* the relay delivers while the commits happen */
    relay_proc_t *relay = relay_proc_start(
        fx.http.db, (const char *[]){fx.exchange_env, "LEASE_RELAY_POLL_INTERVAL_MS=5", NULL});
    observer_t obs = {.cap = 400000};
    obs.seen = calloc(obs.cap, sizeof *obs.seen);
    pthread_t ot, th[THREADS];
    pthread_create(&ot, NULL, observe, &obs);
    for (int i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, commit_loop, NULL);
    for (int k = 1; k <= ROTATIONS; k++) {
        assert_true(wait_accepted_now(30));
        json_t *next;
        pthread_mutex_lock(&mu);
        json_t *old = current;
        pthread_mutex_unlock(&mu);
        relay_release(&fx, "t-order", old);
        next = relay_acquire(&fx, "t-order");
        pthread_mutex_lock(&mu);
        current = next;
        generation++;
        accepted_now = 0;
        pthread_mutex_unlock(&mu);
        json_decref(old);
    }
    assert_true(wait_accepted_now(30));
    __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    obs.stop = 1;
    pthread_join(ot, NULL);
    if (other)
        fail_msg("%d unexpected commit answers, the first: %s", other, other_reply);
    assert_int_equal(relay_outbox_rows(&fx), 2LL * accepted);
    assert_int_equal(testpg_query_int(fx.http.db, "SELECT count(DISTINCT fencing_token) FROM "
                                                  "lease.outbox"),
                     ROTATIONS + 1);

    /* no row of a lower token appeared after a higher token was visible */
    size_t checked = 0;
    for (size_t i = 0; i < obs.n; i += 1 + obs.n / 500) {
        char sql[128];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM lease.outbox WHERE fencing_token < %lld",
                 obs.seen[i].max_token);
        long long now = testpg_query_int(fx.http.db, sql);
        if (now != obs.seen[i].below)
            fail_msg("a row with a token below %lld appeared after that token was visible "
                     "(%lld such rows then, %lld now)",
                     obs.seen[i].max_token, obs.seen[i].below, now);
        checked++;
    }
    assert_true(checked > 10);

    collector_t col;
    collector_init(&col);
    assert_true(collector_until(&col, fx.consumer, (size_t)(2 * accepted), 60000));
    collector_drain(&col, fx.consumer, 300);
    collector_check_exact(&col, &fx);
    collector_check_order_ids(&col, false); /* tokens never go back */
    size_t id_inversions = 0;
    for (size_t i = 1; i < col.n; i++)
        if (col.items[i].outbox_id < col.items[i - 1].outbox_id)
            id_inversions++;
    fprintf(stderr,
            "commit order: %d commits accepted and %d refused (rotated lease) from %d threads "
            "over %d leases; %zu observations, %zu checked; %zu deliveries came before a lower "
            "outbox id of the same lease\n",
            accepted, refused, THREADS, ROTATIONS + 1, obs.n, checked, id_inversions);
    assert_int_equal(relay_proc_stop(relay), 0);
    collector_free(&col);
    free(obs.seen);
    json_decref(current);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rows_of_an_identity_appear_in_token_order),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
