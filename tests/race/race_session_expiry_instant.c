/*
 * race_session_expiry_instant.c - a keep-alive at the instant its session
 * expires (issue 37), racing the sweeper recording that expiry and another
 * principal's acquire taking over a lease of the session. Many rounds, each
 * a fresh session (TTL 250 ms) holding one lease; the three calls start
 * together at the session's expiry shifted by -6 .. +6 ms, so some rounds
 * fall before it and some after.
 *
 * Then the same three-way question made deterministic: a keep-alive that
 * began before the expiry is held up on the session's row (another
 * transaction holds it FOR UPDATE, as a concurrent keep-alive or close
 * does, and rolls back) until after the expiry; meanwhile another
 * principal tries to take the lease over. The keep-alive decided "alive" at
 * its start, the takeover decides "ended": only one of them may commit.
 *
 * Never both: a keep-alive answered lease_renewed and the takeover answered
 * lease_acquired. And what each was answered is what the database holds:
 *   kept alive  -> the session is open, the lease row is still the holder's;
 *   taken over  -> the lease row is the taker's with a greater token, the
 *                  holder's lease is in history as expired, and the
 *                  keep-alive was lease_lost.
 */
#include <libpq-fe.h>
#include <pthread.h>
#include <sys/time.h>

#include "race_sessions.h"
#include "race_blocker.h"

#define APP "race_session_expiry_instant"
#define ROUNDS 60
#define TTL_MS 250

static race_env_t env;
static race_barrier_t start_line;

typedef struct round_ctx {
    const char *session_id;
    lease_identity_t id;
    int64_t start_at_ms; /* wall clock: when the three calls go */
    lease_code_t kept, taken;
    int64_t kept_until_ms; /* the keep-alive's answer: the session's new expiry */
    lease_record_t taker;
    char sweep[128];
    bool held_up;   /* the held-up rounds: no start line */
    int taken_done; /* the takeover answered (read while it runs) */
} round_ctx_t;

static int64_t wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static void wait_for(const round_ctx_t *c)
{
    if (c->held_up)
        return;
    race_barrier_wait(&start_line);
    int64_t d = c->start_at_ms - wall_ms();
    if (d > 0)
        lease_sleep_ms(d);
}

static void *keepalive_main(void *arg)
{
    round_ctx_t *c = arg;
    wait_for(c);
    lease_result_t res;
    c->kept = race_session_keepalive(env.store, "prn-holder", c->session_id, &res);
    if (c->kept == LEASE_RENEWED)
        c->kept_until_ms = res.session.expires_at_ms;
    return NULL;
}

static void *takeover_main(void *arg)
{
    round_ctx_t *c = arg;
    char rid[128];
    race_rid(rid, sizeof rid, "take", 0, 0);
    lease_acquire_req_t req;
    race_acquire_req(&req, &c->id, rid, "prn-taker", "inst-taker", 30000, 10000);
    wait_for(c);
    lease_result_t res;
    c->taken = lease_store_acquire(env.store, &req, &res);
    if (c->taken == LEASE_ACQUIRED)
        c->taker = res.lease;
    __atomic_store_n(&c->taken_done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void *sweeper_main(void *arg)
{
    round_ctx_t *c = arg;
    PGconn *conn = PQconnectdb(env.db_url);
    CHECK(PQstatus(conn) == CONNECTION_OK, "sweeper connect");
    wait_for(c);
    PGresult *r = PQexec(conn, "BEGIN ISOLATION LEVEL READ COMMITTED; "
                               "SELECT lease.expire_due(100, 0)::text; COMMIT");
    snprintf(c->sweep, sizeof c->sweep, "%s",
             PQresultStatus(r) == PGRES_COMMAND_OK ? "ran" : PQresultErrorMessage(r));
    PQclear(r);
    PQfinish(conn);
    return NULL;
}

/* One held-up round (see the top of the file). */
static void held_up_keepalive(int round)
{
    round_ctx_t c = {0};
    lease_session_t s = race_session_open(env.store, "prn-holder", 3000);
    c.session_id = s.session_id;
    char target[64];
    snprintf(target, sizeof target, "held-up-%d", round);
    race_identity(&c.id, target);
    lease_record_t held = race_acquire_in_session(env.store, &c.id, "prn-holder", s.session_id);

    PGconn *blocker = PQconnectdb(env.db_url);
    CHECK(PQstatus(blocker) == CONNECTION_OK, "blocker connect");
    char sql[512];
    snprintf(sql, sizeof sql,
             "BEGIN; SELECT 1 FROM lease.sessions WHERE session_id = '%s' FOR UPDATE",
             s.session_id);
    PGresult *r = PQexec(blocker, sql);
    CHECK(PQresultStatus(r) == PGRES_TUPLES_OK, "blocker: %s", PQresultErrorMessage(r));
    PQclear(r);

    /* the keep-alive starts shortly before the expiry (so that what it
     * extends the session to lies well past the takeover) and waits on
     * the row */
    CHECK(wall_ms() < s.expires_at_ms - 500, "round %d: too late to start before the expiry",
          round);
    lease_sleep_ms(s.expires_at_ms - 300 - wall_ms());
    c.held_up = true; /* no start line: each call goes when started */
    pthread_t k, a;
    pthread_create(&k, NULL, keepalive_main, &c);
    race_wait_for_lock_waiters(env.db_url, APP, 1);
    /* past the expiry by the database's clock, the takeover */
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM lease.sessions WHERE session_id = '%s' AND expires_at <= now()",
             s.session_id);
    CHECK(test_wait_until(10000, testpg_query_int(env.db_url, sql) == 1), "never expired");
    pthread_create(&a, NULL, takeover_main, &c);
    /* it ends, or it waits on the session's row too */
    for (int i = 0; i < 300; i++) {
        snprintf(sql, sizeof sql,
                 "SELECT count(*) FROM pg_stat_activity WHERE application_name = '%s' AND "
                 "wait_event_type = 'Lock'",
                 APP);
        if (__atomic_load_n(&c.taken_done, __ATOMIC_ACQUIRE) ||
            testpg_query_int(env.db_url, sql) >= 2)
            break;
        lease_sleep_ms(10);
    }
    r = PQexec(blocker, "ROLLBACK");
    PQclear(r);
    PQfinish(blocker);
    pthread_join(k, NULL);
    pthread_join(a, NULL);
    printf("held up %d: keep-alive %s, takeover %s\n", round, CODE(c.kept), CODE(c.taken));
    CHECK(!(c.kept == LEASE_RENEWED && c.taken == LEASE_ACQUIRED &&
            c.taker.acquired_at_ms < c.kept_until_ms),
          "held up %d: the session was kept alive to %lld and its lease taken over at %lld", round,
          (long long)c.kept_until_ms, (long long)c.taker.acquired_at_ms);
    CHECK(c.kept == LEASE_RENEWED || c.taken == LEASE_ACQUIRED, "held up %d: neither", round);
    char key[512], q[1024];
    race_key_sql(&c.id, key, sizeof key);
    snprintf(q, sizeof q, "SELECT lease_id FROM lease.locks WHERE lock_key = %s", key);
    char *row_lease = testpg_query_value(env.db_url, q);
    CHECK(row_lease &&
              strcmp(row_lease, c.kept == LEASE_RENEWED ? held.lease_id : c.taker.lease_id) == 0,
          "held up %d: the lease row is %s", round, row_lease);
    free(row_lease);
}

int main(void)
{
    race_setup(&env, APP, 4, APP);
    CHECK(testpg_exec(env.db_url, "UPDATE lease.policy SET minimum_ttl_ms = 50"), "policy");
    race_barrier_init(&start_line, 3);
    int kept = 0, taken = 0, neither = 0;
    for (int round = 0; round < ROUNDS; round++) {
        round_ctx_t c = {0};
        lease_session_t s = race_session_open(env.store, "prn-holder", TTL_MS);
        c.session_id = s.session_id;
        char target[64];
        snprintf(target, sizeof target, "instant-%d", round);
        race_identity(&c.id, target);
        lease_record_t held = race_acquire_in_session(env.store, &c.id, "prn-holder", s.session_id);
        c.start_at_ms = s.expires_at_ms + (round % 13) - 6;

        pthread_t t[3];
        pthread_create(&t[0], NULL, keepalive_main, &c);
        pthread_create(&t[1], NULL, takeover_main, &c);
        pthread_create(&t[2], NULL, sweeper_main, &c);
        for (int i = 0; i < 3; i++)
            pthread_join(t[i], NULL);
        CHECK(strcmp(c.sweep, "ran") == 0, "sweeper: %s", c.sweep);
        CHECK(c.kept == LEASE_RENEWED || c.kept == LEASE_LOST, "round %d: keep-alive %s", round,
              CODE(c.kept));
        CHECK(c.taken == LEASE_ACQUIRED || c.taken == LEASE_CONFLICT, "round %d: takeover %s",
              round, CODE(c.taken));
        CHECK(!(c.kept == LEASE_RENEWED && c.taken == LEASE_ACQUIRED &&
                c.taker.acquired_at_ms < c.kept_until_ms),
              "round %d: the session was kept alive to %lld and its lease taken over at %lld",
              round, (long long)c.kept_until_ms, (long long)c.taker.acquired_at_ms);

        /* the database agrees with the answers */
        char key[512], sql[1024];
        race_key_sql(&c.id, key, sizeof key);
        snprintf(sql, sizeof sql, "SELECT lease_id FROM lease.locks WHERE lock_key = %s", key);
        char *row_lease = testpg_query_value(env.db_url, sql);
        char *state = race_session_value(env.db_url, s.session_id, "state");
        if (c.taken == LEASE_ACQUIRED) {
            /* (after a keep-alive only once what it extended to had passed) */
            taken++;
            CHECK(c.taker.fencing_token > held.fencing_token, "round %d: token %lld after %lld",
                  round, (long long)c.taker.fencing_token, (long long)held.fencing_token);
            CHECK(row_lease && strcmp(row_lease, c.taker.lease_id) == 0,
                  "round %d: taken over, the lease row is %s", round, row_lease);
            snprintf(sql, sizeof sql,
                     "SELECT count(*) FROM lease.history WHERE lease_id = '%s' AND state = "
                     "'expired'",
                     held.lease_id);
            CHECK(testpg_query_int(env.db_url, sql) == 1, "round %d: no expired history row",
                  round);
        } else if (c.kept == LEASE_RENEWED) {
            kept++;
            CHECK(strcmp(state, "open") == 0, "round %d: kept alive, session %s", round, state);
            CHECK(row_lease && strcmp(row_lease, held.lease_id) == 0,
                  "round %d: kept alive, but the lease row is %s", round, row_lease);
        } else {
            neither++;
        }
        free(row_lease);
        free(state);
        /* a later keep-alive agrees with the first */
        if (c.kept == LEASE_LOST) {
            lease_result_t res;
            CHECK(race_session_keepalive(env.store, "prn-holder", s.session_id, &res) == LEASE_LOST,
                  "round %d: a lost session came back", round);
        }
    }
    for (int round = 0; round < 3; round++)
        held_up_keepalive(round);
    printf("%d rounds: kept alive %d, taken over %d, neither (keep-alive late, takeover early) "
           "%d\n",
           ROUNDS, kept, taken, neither);
    race_barrier_destroy(&start_line);
    race_teardown(&env);
    return 0;
}
