/*
 * race_renew_races.c - renewals, releases, administrative ends, expiry and
 * the sweeper racing each other on real short TTLs; the backend's
 * linearization decides and a successor always survives:
 *  A. renew racing expiry (TTL 1100 ms, fired around expires_at) and a
 *     rival acquire: a renewal linearizes before expires_at or is
 *     lease_lost, an expired lease is never revived, never two holders;
 *  B. renew racing release / revoke / force-release by the same lease: the
 *     end always wins its own lease, and the terminal record shows the
 *     renewal exactly when the renewal said lease_renewed;
 *  C. stale release, renew and revoke after reacquisition: lease_lost, and
 *     the successor stays active and renewable (also fired concurrently);
 *  D. the sweeper running continuously while holders renew, release and
 *     abandon 1100 ms leases: no live lease is swept, each abandoned lease
 *     is recorded expired exactly once. (On Valkey the expire step
 *     leased's sweeper runs there: it has no lease.sweep.)
 * On both backends (race_util.h): Postgres's tables are also read on
 * Postgres.
 */
#include "race_util.h"

#define TTL 1100

static lease_record_t must_acquire(lease_store_t *s, const lease_identity_t *id,
                                   const char *principal, const char *instance, int64_t ttl)
{
    char rid[128];
    race_rid(rid, sizeof rid, "acq", 0, 0);
    lease_acquire_req_t req;
    race_acquire_req(&req, id, rid, principal, instance, ttl, 10000);
    return race_acquire_retrying(s, &req);
}

static void sleep_until_wall(int64_t wall_ms)
{
    lease_sleep_ms(wall_ms - lease_wall_now_ms());
}

/* ---- A: renew racing expiry ------------------------------------------- */

#define EXPIRY_PAIRS 10

typedef struct expiry_pair {
    lease_store_t *store;
    lease_identity_t id;
    lease_record_t old;
    int64_t fire_wall_ms;
    lease_result_t renew, rival;
    race_barrier_t *start;
} expiry_pair_t;

static void *expiry_renew(void *arg)
{
    expiry_pair_t *p = arg;
    char rid[128];
    race_rid(rid, sizeof rid, "exp-renew", 0, 0);
    lease_owner_req_t req;
    race_owner_req(&req, &p->old, rid, "prn-holder", "inst-holder", TTL, true, 10000);
    race_barrier_wait(p->start);
    sleep_until_wall(p->fire_wall_ms);
    req.call.deadline = lease_deadline_in(10000);
    lease_code_t c;
    do
        c = lease_store_renew(p->store, &req, &p->renew);
    while (c == LEASE_BACKEND_UNAVAILABLE);
    return NULL;
}

static void *expiry_rival(void *arg)
{
    expiry_pair_t *p = arg;
    char rid[128];
    race_rid(rid, sizeof rid, "exp-rival", 0, 0);
    lease_acquire_req_t req;
    race_acquire_req(&req, &p->id, rid, "prn-rival", "inst-rival", 30000, 10000);
    race_barrier_wait(p->start);
    sleep_until_wall(p->fire_wall_ms);
    req.call.deadline = lease_deadline_in(10000);
    lease_code_t c;
    do
        c = lease_store_acquire(p->store, &req, &p->rival);
    while (c == LEASE_BACKEND_UNAVAILABLE);
    return NULL;
}

static void renew_racing_expiry(race_env_t *env, int batch, int *n_renewed, int *n_lost)
{
    static const int offsets[EXPIRY_PAIRS] = {-80, -40, -20, -10, -3, 0, 3, 10, 25, 60};
    expiry_pair_t p[EXPIRY_PAIRS];
    pthread_t t[2 * EXPIRY_PAIRS];
    race_barrier_t start;
    race_barrier_init(&start, 2 * EXPIRY_PAIRS);
    for (int i = 0; i < EXPIRY_PAIRS; i++) {
        char target[32];
        snprintf(target, sizeof target, "expiry-%d-%d", batch, i);
        memset(&p[i], 0, sizeof p[i]);
        p[i].store = env->store;
        p[i].start = &start;
        race_identity(&p[i].id, target);
        p[i].old = must_acquire(env->store, &p[i].id, "prn-holder", "inst-holder", TTL);
        p[i].fire_wall_ms = p[i].old.expires_at_ms + offsets[i] + batch * 7 % 5;
    }
    for (int i = 0; i < EXPIRY_PAIRS; i++) {
        CHECK(pthread_create(&t[2 * i], NULL, expiry_renew, &p[i]) == 0, "thread");
        CHECK(pthread_create(&t[2 * i + 1], NULL, expiry_rival, &p[i]) == 0, "thread");
    }
    for (int i = 0; i < 2 * EXPIRY_PAIRS; i++)
        pthread_join(t[i], NULL);
    race_barrier_destroy(&start);

    for (int i = 0; i < EXPIRY_PAIRS; i++) {
        expiry_pair_t *x = &p[i];
        lease_code_t rc = x->renew.code, ac = x->rival.code;
        CHECK(rc == LEASE_RENEWED || rc == LEASE_LOST, "renew: %s", CODE(rc));
        CHECK(ac == LEASE_ACQUIRED || ac == LEASE_CONFLICT, "rival: %s", CODE(ac));
        if (rc == LEASE_RENEWED) {
            (*n_renewed)++;
            CHECK(x->renew.lease.renewed_at_ms < x->old.expires_at_ms,
                  "a renewal linearized at %lld, after expiry %lld",
                  (long long)x->renew.lease.renewed_at_ms, (long long)x->old.expires_at_ms);
            CHECK(x->renew.lease.fencing_token == x->old.fencing_token, "renew keeps the token");
            CHECK(x->renew.lease.expires_at_ms == x->renew.lease.renewed_at_ms + TTL,
                  "renewed expiry");
        } else {
            (*n_lost)++;
        }
        if (ac == LEASE_ACQUIRED) {
            CHECK(x->rival.lease.acquired_at_ms >= x->old.expires_at_ms,
                  "rival acquired at %lld before the old lease expired at %lld",
                  (long long)x->rival.lease.acquired_at_ms, (long long)x->old.expires_at_ms);
            CHECK(x->rival.lease.fencing_token == x->old.fencing_token + 1, "next token");
            /* two holders at once would need the renewal to end first */
            CHECK(rc != LEASE_RENEWED ||
                      x->rival.lease.acquired_at_ms >= x->renew.lease.expires_at_ms,
                  "renewed and acquired by a rival at once");
        }
        /* the state now agrees with the answers; a lost renewal revived nothing */
        lease_result_t now;
        lease_code_t ic = race_inspect(env->store, &x->id, &now);
        if (ac == LEASE_ACQUIRED) {
            CHECK(ic == LEASE_INSPECTED && now.lease.state == LEASE_STATE_ACTIVE &&
                      strcmp(now.lease.lease_id, x->rival.lease.lease_id) == 0,
                  "the rival's lease is the active one");
        } else if (rc == LEASE_LOST) {
            CHECK(ic == LEASE_NOT_FOUND || now.lease.state != LEASE_STATE_ACTIVE ||
                      strcmp(now.lease.lease_id, x->old.lease_id) != 0,
                  "a lost renewal revived the lease");
        }
        if (rc == LEASE_LOST) {
            /* and stays lost */
            char rid[128];
            race_rid(rid, sizeof rid, "exp-renew2", i, batch);
            lease_owner_req_t again;
            race_owner_req(&again, &x->old, rid, "prn-holder", "inst-holder", TTL, true, 10000);
            lease_result_t res;
            CHECK(lease_store_renew(env->store, &again, &res) == LEASE_LOST, "renew again: %s",
                  CODE(res.code));
        }
    }
}

/* ---- B: renew racing the end of the same lease ------------------------- */

typedef enum end_kind { END_RELEASE, END_REVOKE, END_FORCE } end_kind_t;

typedef struct end_race {
    lease_store_t *store;
    lease_record_t lease;
    end_kind_t kind;
    race_barrier_t start;
    lease_result_t renew, end;
} end_race_t;

static void *end_renewer(void *arg)
{
    end_race_t *e = arg;
    char rid[128];
    race_rid(rid, sizeof rid, "end-renew", 0, 0);
    lease_owner_req_t req;
    race_owner_req(&req, &e->lease, rid, "prn-holder", "inst-holder", 20000, true, 10000);
    race_barrier_wait(&e->start);
    lease_code_t c;
    do
        c = lease_store_renew(e->store, &req, &e->renew);
    while (c == LEASE_BACKEND_UNAVAILABLE);
    return NULL;
}

static void *end_ender(void *arg)
{
    end_race_t *e = arg;
    char rid[128];
    race_rid(rid, sizeof rid, "end-end", (int)e->kind, 0);
    lease_owner_req_t rel;
    lease_admin_req_t adm;
    race_owner_req(&rel, &e->lease, rid, "prn-holder", "inst-holder", 0, false, 10000);
    race_admin_req(&adm, &e->lease, rid, e->kind == END_REVOKE, 10000);
    race_barrier_wait(&e->start);
    lease_code_t c;
    do
        c = e->kind == END_RELEASE  ? lease_store_release(e->store, &rel, &e->end)
            : e->kind == END_REVOKE ? lease_store_revoke(e->store, &adm, &e->end)
                                    : lease_store_force_release(e->store, &adm, &e->end);
    while (c == LEASE_BACKEND_UNAVAILABLE);
    return NULL;
}

static void renew_racing_end(race_env_t *env, end_kind_t kind, int rounds, int *renew_first)
{
    lease_identity_t id;
    char target[32];
    snprintf(target, sizeof target, "end-%d", (int)kind);
    race_identity(&id, target);
    for (int r = 0; r < rounds; r++) {
        end_race_t e;
        memset(&e, 0, sizeof e);
        e.store = env->store;
        e.kind = kind;
        e.lease = must_acquire(env->store, &id, "prn-holder", "inst-holder", 30000);
        race_barrier_init(&e.start, 2);
        pthread_t a, b;
        CHECK(pthread_create(&a, NULL, end_renewer, &e) == 0, "thread");
        CHECK(pthread_create(&b, NULL, end_ender, &e) == 0, "thread");
        pthread_join(a, NULL);
        pthread_join(b, NULL);
        race_barrier_destroy(&e.start);

        lease_code_t want = kind == END_REVOKE ? LEASE_REVOKED : LEASE_RELEASED;
        lease_state_t state = kind == END_REVOKE ? LEASE_STATE_REVOKED : LEASE_STATE_RELEASED;
        CHECK(e.end.code == want, "end: %s", CODE(e.end.code));
        CHECK(e.renew.code == LEASE_RENEWED || e.renew.code == LEASE_LOST, "renew: %s",
              CODE(e.renew.code));
        /* the terminal record shows the renewal iff it was answered renewed */
        lease_result_t hist;
        CHECK(race_inspect_id(env->store, e.lease.lease_id, &hist) == LEASE_INSPECTED,
              "terminal record by lease id");
        CHECK(hist.lease.state == state, "terminal state %s", lease_state_name(hist.lease.state));
        if (e.renew.code == LEASE_RENEWED) {
            (*renew_first)++;
            CHECK(hist.lease.renewed_at_ms == e.renew.lease.renewed_at_ms,
                  "renewed before the end, but history says renewed_at %lld (renew %lld)",
                  (long long)hist.lease.renewed_at_ms, (long long)e.renew.lease.renewed_at_ms);
            /* The end decided on the renewed row (above), so it is ordered
             * after the renewal. Its ended_at (its now()) is not compared
             * with renewed_at: a transaction's timestamp is taken when its
             * statement arrives, before its snapshot, and a renewal that
             * runs entirely inside that gap (a backend descheduled on a
             * loaded machine: 1 run in 100 under stress-ng) is seen by an
             * end whose now() is earlier. docs/architecture.md ("the
             * microsecond gap") says why that is harmless. */
        } else {
            CHECK(hist.lease.renewed_at_ms == e.lease.renewed_at_ms,
                  "a renewal answered lease_lost left a trace");
        }
        lease_result_t now;
        lease_code_t ic = race_inspect(env->store, &id, &now);
        CHECK(ic == LEASE_NOT_FOUND, "nothing active after the end: %s", CODE(ic));
    }
}

/* ---- C: stale operations after reacquisition --------------------------- */

typedef struct stale_race {
    lease_store_t *store;
    lease_identity_t id;
    lease_record_t old;
    int64_t fire_wall_ms;
    race_barrier_t start;
    lease_result_t release, acquire;
} stale_race_t;

static void *stale_release(void *arg)
{
    stale_race_t *s = arg;
    char rid[128];
    race_rid(rid, sizeof rid, "stale-rel", 0, 0);
    lease_owner_req_t req;
    race_owner_req(&req, &s->old, rid, "prn-old", "inst-old", 0, false, 10000);
    race_barrier_wait(&s->start);
    sleep_until_wall(s->fire_wall_ms);
    req.call.deadline = lease_deadline_in(10000);
    lease_code_t c;
    do
        c = lease_store_release(s->store, &req, &s->release);
    while (c == LEASE_BACKEND_UNAVAILABLE);
    return NULL;
}

static void *successor_acquire(void *arg)
{
    stale_race_t *s = arg;
    char rid[128];
    race_rid(rid, sizeof rid, "successor", 0, 0);
    lease_acquire_req_t req;
    race_acquire_req(&req, &s->id, rid, "prn-new", "inst-new", 30000, 10000);
    race_barrier_wait(&s->start);
    sleep_until_wall(s->fire_wall_ms);
    req.call.deadline = lease_deadline_in(10000);
    lease_code_t c;
    do
        c = lease_store_acquire(s->store, &req, &s->acquire);
    while (c == LEASE_BACKEND_UNAVAILABLE);
    return NULL;
}

static void stale_after_reacquire(race_env_t *env)
{
    /* sequential: the old holder's every operation is lease_lost */
    lease_identity_t id;
    race_identity(&id, "stale-seq");
    lease_record_t old = must_acquire(env->store, &id, "prn-old", "inst-old", TTL);
    sleep_until_wall(old.expires_at_ms + 20);
    lease_record_t succ = must_acquire(env->store, &id, "prn-new", "inst-new", 30000);
    CHECK(succ.fencing_token == old.fencing_token + 1, "successor token");
    char rid[128];
    lease_result_t res;
    race_rid(rid, sizeof rid, "stale-release", 0, 0);
    lease_owner_req_t o;
    race_owner_req(&o, &old, rid, "prn-old", "inst-old", 0, false, 10000);
    CHECK(lease_store_release(env->store, &o, &res) == LEASE_LOST, "stale release: %s",
          CODE(res.code));
    race_rid(rid, sizeof rid, "stale-renew", 0, 0);
    race_owner_req(&o, &old, rid, "prn-old", "inst-old", TTL, true, 10000);
    CHECK(lease_store_renew(env->store, &o, &res) == LEASE_LOST, "stale renew: %s", CODE(res.code));
    lease_admin_req_t a;
    race_rid(rid, sizeof rid, "stale-revoke", 0, 0);
    race_admin_req(&a, &old, rid, true, 10000);
    CHECK(lease_store_revoke(env->store, &a, &res) == LEASE_LOST, "stale revoke: %s",
          CODE(res.code));
    race_rid(rid, sizeof rid, "stale-force", 0, 0);
    race_admin_req(&a, &old, rid, false, 10000);
    CHECK(lease_store_force_release(env->store, &a, &res) == LEASE_LOST, "stale force: %s",
          CODE(res.code));
    /* the same lease id with the successor's token is still not the lease */
    lease_record_t forged = old;
    forged.fencing_token = succ.fencing_token;
    race_rid(rid, sizeof rid, "stale-forged", 0, 0);
    race_owner_req(&o, &forged, rid, "prn-old", "inst-old", 0, false, 10000);
    CHECK(lease_store_release(env->store, &o, &res) == LEASE_LOST, "forged release: %s",
          CODE(res.code));
    CHECK(race_inspect(env->store, &id, &res) == LEASE_INSPECTED &&
              strcmp(res.lease.lease_id, succ.lease_id) == 0 &&
              res.lease.state == LEASE_STATE_ACTIVE,
          "the successor survives");
    race_rid(rid, sizeof rid, "succ-renew", 0, 0);
    race_owner_req(&o, &succ, rid, "prn-new", "inst-new", 30000, true, 10000);
    CHECK(lease_store_renew(env->store, &o, &res) == LEASE_RENEWED, "successor renews: %s",
          CODE(res.code));

    /* concurrent: the stale release fired at the moment the successor acquires */
    int both = 0;
    for (int r = 0; r < 6; r++) {
        stale_race_t s;
        memset(&s, 0, sizeof s);
        s.store = env->store;
        char target[32];
        snprintf(target, sizeof target, "stale-race-%d", r);
        race_identity(&s.id, target);
        s.old = must_acquire(env->store, &s.id, "prn-old", "inst-old", TTL);
        s.fire_wall_ms = s.old.expires_at_ms + (r - 2) * 4;
        race_barrier_init(&s.start, 2);
        pthread_t a1, a2;
        CHECK(pthread_create(&a1, NULL, stale_release, &s) == 0, "thread");
        CHECK(pthread_create(&a2, NULL, successor_acquire, &s) == 0, "thread");
        pthread_join(a1, NULL);
        pthread_join(a2, NULL);
        race_barrier_destroy(&s.start);
        CHECK(s.release.code == LEASE_RELEASED || s.release.code == LEASE_LOST, "release: %s",
              CODE(s.release.code));
        CHECK(s.acquire.code == LEASE_ACQUIRED || s.acquire.code == LEASE_CONFLICT, "acquire: %s",
              CODE(s.acquire.code));
        if (s.acquire.code == LEASE_ACQUIRED) {
            both += s.release.code == LEASE_LOST;
            CHECK(race_inspect(env->store, &s.id, &res) == LEASE_INSPECTED &&
                      strcmp(res.lease.lease_id, s.acquire.lease.lease_id) == 0 &&
                      res.lease.state == LEASE_STATE_ACTIVE,
                  "the successor survives a concurrent stale release");
        } else {
            /* conflict: the old lease was still active when the acquire ran,
             * so the release must have found it too, or found it expired */
            CHECK(s.release.code == LEASE_RELEASED || s.release.code == LEASE_LOST, "release");
        }
    }
    printf("C: stale release/renew/revoke/force after reacquire all lease_lost; "
           "%d/6 concurrent rounds had a successor and a stale release\n",
           both);
}

/* ---- D: the sweeper racing live leases --------------------------------- */

#define SWEEP_WORKERS 4
#define SWEEP_IDS 3

#define SWEEP_LOG 1024 /* leases per identity, far above what 6 s allow */

typedef struct sweep_shared {
    lease_store_t *store;
    const char *db_url; /* NULL on Valkey */
    bool valkey;
    lease_identity_t ids[SWEEP_IDS];
    /* every lease taken, and whether it was abandoned (else released), to
     * read each one's end through the store afterwards */
    pthread_mutex_t log_lock;
    int n_log[SWEEP_IDS];
    char log_id[SWEEP_IDS][SWEEP_LOG][LEASE_ID_MAX + 1];
    bool log_abandoned[SWEEP_IDS][SWEEP_LOG];
    int stop;                 /* __atomic */
    int acquired[SWEEP_IDS];  /* __atomic */
    int abandoned[SWEEP_IDS]; /* __atomic */
    int renewed;              /* __atomic */
    int sweeps;               /* __atomic */
    int64_t swept;            /* __atomic */
    int late;                 /* __atomic: renewals that came after the expiry */
} sweep_shared_t;

typedef struct sweep_worker {
    sweep_shared_t *s;
    int index;
} sweep_worker_t;

/* Whether the lease ended by expiry and no earlier, as the store shows it
 * by its id: expired (still the identity's lease with its expiry passed,
 * not yet swept, or recorded expired no sooner than its expires_at). On
 * Postgres the tables must say the same: still the identity's row with
 * its expiry passed, or a history row expired no sooner than expires_at. */
static bool expired_on_its_own(const sweep_shared_t *s, const lease_identity_t *id,
                               const lease_record_t *lease)
{
    lease_result_t seen;
    lease_code_t c = race_inspect_id(s->store, lease->lease_id, &seen);
    CHECK(c == LEASE_INSPECTED, "lease %s by its id: %s", lease->lease_id, CODE(c));
    bool expired = seen.lease.state == LEASE_STATE_EXPIRED &&
                   (seen.lease.ended_at_ms == 0 || seen.lease.ended_at_ms >= lease->expires_at_ms);
    if (s->valkey)
        return expired;
    char cond[256];
    snprintf(cond, sizeof cond, "lease_id = '%s' AND expires_at <= now()", lease->lease_id);
    bool in_tables = race_count(s->db_url, "lease.locks", id, cond) == 1;
    if (!in_tables) {
        snprintf(cond, sizeof cond,
                 "lease_id = '%s' AND state = 'expired' AND ended_at >= expires_at",
                 lease->lease_id);
        in_tables = race_count(s->db_url, "lease.history", id, cond) == 1;
    }
    CHECK(expired == in_tables, "lease %s: the store says %s, the tables %s", lease->lease_id,
          lease_state_name(seen.lease.state), in_tables ? "expired on its own" : "not");
    return expired;
}

/* One pass of the expiry housekeeping: on Postgres the sweep
 * (lease.sweep); on Valkey, which has no such function (docs/backends.md),
 * the expire step leased's sweeper runs there (leased_v1_expire_due, no
 * grace). *expired: leases it moved to history. */
static lease_code_t expire_pass(const sweep_shared_t *s, int batch, int64_t *expired)
{
    lease_deadline_t d = lease_deadline_in(5000);
    if (s->valkey) {
        lease_housekeeping_result_t hk;
        lease_code_t c = lease_store_housekeep(s->store, LEASE_STEP_EXPIRE, batch, 0, &d, &hk);
        *expired = hk.expired;
        CHECK(c != LEASE_INSPECTED || hk.ran, "the expire step did not run");
        return c;
    }
    lease_sweep_result_t res;
    lease_code_t c = lease_store_sweep(s->store, batch, &d, &res);
    *expired = res.expired;
    CHECK(c != LEASE_INSPECTED || res.ran, "the sweep did not run");
    return c;
}

static void *sweeper(void *arg)
{
    sweep_shared_t *s = arg;
    while (!__atomic_load_n(&s->stop, __ATOMIC_SEQ_CST)) {
        int64_t expired = 0;
        lease_code_t c = expire_pass(s, 100, &expired);
        CHECK(c == LEASE_INSPECTED || c == LEASE_BACKEND_UNAVAILABLE, "sweep: %s", CODE(c));
        if (c == LEASE_INSPECTED) {
            __atomic_add_fetch(&s->sweeps, 1, __ATOMIC_RELAXED);
            __atomic_add_fetch(&s->swept, expired, __ATOMIC_RELAXED);
        }
        lease_sleep_ms(20);
    }
    return NULL;
}

static void log_lease(sweep_shared_t *s, int k, const lease_record_t *lease, bool abandoned)
{
    pthread_mutex_lock(&s->log_lock);
    int n = s->n_log[k]++;
    CHECK(n < SWEEP_LOG, "more than %d leases of one identity", SWEEP_LOG);
    snprintf(s->log_id[k][n], sizeof s->log_id[k][n], "%s", lease->lease_id);
    s->log_abandoned[k][n] = abandoned;
    pthread_mutex_unlock(&s->log_lock);
}

static void *sweep_holder(void *arg)
{
    sweep_worker_t *w = arg;
    sweep_shared_t *s = w->s;
    char principal[32], instance[32];
    snprintf(principal, sizeof principal, "prn-sw-%d", w->index);
    snprintf(instance, sizeof instance, "inst-sw-%d", w->index);
    int64_t until = lease_mono_now_ns() + 6000LL * 1000000;
    for (int n = 0; lease_mono_now_ns() < until; n++) {
        int k = (int)lease_jitter(SWEEP_IDS);
        char rid[128];
        race_rid(rid, sizeof rid, "sw-acq", w->index, n);
        lease_acquire_req_t acq;
        race_acquire_req(&acq, &s->ids[k], rid, principal, instance, TTL, 5000);
        lease_result_t res;
        lease_code_t c = lease_store_acquire(s->store, &acq, &res);
        if (c != LEASE_ACQUIRED) {
            CHECK(c == LEASE_CONFLICT || c == LEASE_BACKEND_UNAVAILABLE, "acquire: %s", CODE(c));
            lease_sleep_ms(30);
            continue;
        }
        __atomic_add_fetch(&s->acquired[k], 1, __ATOMIC_SEQ_CST);
        lease_record_t lease = res.lease;
        /* renew well before expiry: the sweeper must not have touched it */
        sleep_until_wall(lease.acquired_at_ms + 300);
        race_rid(rid, sizeof rid, "sw-renew", w->index, n);
        lease_owner_req_t ren;
        race_owner_req(&ren, &lease, rid, principal, instance, TTL, true, 5000);
        do
            c = lease_store_renew(s->store, &ren, &res);
        while (c == LEASE_BACKEND_UNAVAILABLE);
        if (c == LEASE_LOST && expired_on_its_own(s, &s->ids[k], &lease)) {
            /* this thread reached the database only after the expiry (a
             * loaded machine): rightly refused, and the lease counts as
             * abandoned. Only a lease ended before its expiry is lost. */
            __atomic_add_fetch(&s->abandoned[k], 1, __ATOMIC_SEQ_CST);
            __atomic_add_fetch(&s->late, 1, __ATOMIC_RELAXED);
            log_lease(s, k, &lease, true);
            continue;
        }
        CHECK(c == LEASE_RENEWED, "a live lease (%lld ms before expiry) was lost: %s",
              (long long)(lease.expires_at_ms - lease_wall_now_ms()), CODE(c));
        __atomic_add_fetch(&s->renewed, 1, __ATOMIC_RELAXED);
        if (n % 2 == 0) {
            /* abandon it: expiry (the sweeper or the next acquire) ends it */
            __atomic_add_fetch(&s->abandoned[k], 1, __ATOMIC_SEQ_CST);
            log_lease(s, k, &lease, true);
            continue;
        }
        race_rid(rid, sizeof rid, "sw-rel", w->index, n);
        lease_owner_req_t rel;
        race_owner_req(&rel, &lease, rid, principal, instance, 0, false, 5000);
        do
            c = lease_store_release(s->store, &rel, &res);
        while (c == LEASE_BACKEND_UNAVAILABLE);
        CHECK(c == LEASE_RELEASED, "release of a live lease: %s", CODE(c));
        log_lease(s, k, &lease, false);
    }
    return NULL;
}

/* Leases of the sweep identities still unexpired: as the store shows each
 * identity, and on Postgres also in lease.locks. */
static long long live_leases(sweep_shared_t *s)
{
    long long n = 0;
    for (int i = 0; i < SWEEP_IDS; i++) {
        lease_result_t seen;
        lease_code_t c = race_inspect(s->store, &s->ids[i], &seen);
        CHECK(c == LEASE_INSPECTED || c == LEASE_NOT_FOUND, "inspect: %s", CODE(c));
        n += c == LEASE_INSPECTED && seen.lease.state == LEASE_STATE_ACTIVE;
        if (!s->valkey)
            n += race_count(s->db_url, "lease.locks", &s->ids[i],
                            "state = 'active' AND expires_at > now()");
    }
    return n;
}

static void sweeper_racing(race_env_t *env)
{
    static sweep_shared_t s; /* the lease log is large for a stack */
    memset(&s, 0, sizeof s);
    s.store = env->store;
    s.db_url = env->db_url;
    s.valkey = env->valkey;
    pthread_mutex_init(&s.log_lock, NULL);
    for (int i = 0; i < SWEEP_IDS; i++) {
        char target[32];
        snprintf(target, sizeof target, "swept-%d", i);
        race_identity(&s.ids[i], target);
    }
    pthread_t sw, t[SWEEP_WORKERS];
    sweep_worker_t w[SWEEP_WORKERS];
    CHECK(pthread_create(&sw, NULL, sweeper, &s) == 0, "thread");
    for (int i = 0; i < SWEEP_WORKERS; i++) {
        w[i] = (sweep_worker_t){&s, i};
        CHECK(pthread_create(&t[i], NULL, sweep_holder, &w[i]) == 0, "thread");
    }
    for (int i = 0; i < SWEEP_WORKERS; i++)
        pthread_join(t[i], NULL);
    /* let every abandoned lease expire (the sweeper keeps running) */
    CHECK(test_wait_until(60000, live_leases(&s) == 0), "abandoned leases never expired");
    __atomic_store_n(&s.stop, 1, __ATOMIC_SEQ_CST);
    pthread_join(sw, NULL);
    int64_t expired = 0;
    lease_code_t c;
    do
        c = expire_pass(&s, 1000, &expired);
    while (c == LEASE_BACKEND_UNAVAILABLE);
    CHECK(c == LEASE_INSPECTED, "final sweep: %s", CODE(c));
    int acquired = 0;
    for (int i = 0; i < SWEEP_IDS; i++) {
        CHECK(race_env_counter(env, &s.ids[i]) == s.acquired[i], "%s: counter %lld vs %d",
              s.ids[i].target_id, race_env_counter(env, &s.ids[i]), s.acquired[i]);
        if (!env->valkey) {
            CHECK(race_count(env->db_url, "lease.history", &s.ids[i], "state = 'expired'") ==
                      s.abandoned[i],
                  "%s: each abandoned lease recorded expired exactly once", s.ids[i].target_id);
            CHECK(race_count(env->db_url, "lease.history", &s.ids[i], "") == s.acquired[i],
                  "%s: every lease has one terminal record", s.ids[i].target_id);
        }
        /* on either backend: every lease taken, by its id, ended as its
         * holder left it (released, or expired no sooner than its expiry) */
        CHECK(s.n_log[i] == s.acquired[i], "%s: %d leases logged, %d acquired", s.ids[i].target_id,
              s.n_log[i], s.acquired[i]);
        for (int k = 0; k < s.n_log[i]; k++) {
            lease_result_t seen;
            CHECK(race_inspect_id(env->store, s.log_id[i][k], &seen) == LEASE_INSPECTED,
                  "lease %s by its id: %s", s.log_id[i][k], CODE(seen.code));
            if (s.log_abandoned[i][k])
                CHECK(seen.lease.state == LEASE_STATE_EXPIRED &&
                          seen.lease.ended_at_ms >= seen.lease.expires_at_ms,
                      "abandoned lease %s: %s, ended %lld, expires %lld", s.log_id[i][k],
                      lease_state_name(seen.lease.state), (long long)seen.lease.ended_at_ms,
                      (long long)seen.lease.expires_at_ms);
            else
                CHECK(seen.lease.state == LEASE_STATE_RELEASED, "released lease %s: %s",
                      s.log_id[i][k], lease_state_name(seen.lease.state));
        }
        acquired += s.acquired[i];
    }
    pthread_mutex_destroy(&s.log_lock);
    CHECK(acquired >= 6, "enough leases changed hands (%d)", acquired);
    printf("D: %d leases, %d renewed while %d sweeps ran (%lld swept, %d renewals too late), "
           "no live lease lost\n",
           acquired, s.renewed, s.sweeps, (long long)s.swept, s.late);
}

int main(void)
{
    race_env_t env;
    race_setup(&env, "renew_races", 12, "race-renew-races");

    int renewed = 0, lost = 0;
    for (int batch = 0; batch < 2; batch++)
        renew_racing_expiry(&env, batch, &renewed, &lost);
    printf("A: renew at expiry: %d renewed before expiry, %d lost; no revival, one holder\n",
           renewed, lost);

    static const char *names[] = {"release", "revoke", "force-release"};
    for (int k = END_RELEASE; k <= END_FORCE; k++) {
        int renew_first = 0;
        renew_racing_end(&env, (end_kind_t)k, 12, &renew_first);
        printf("B: renew vs %s: %d/12 renewed first, the end always won its lease\n", names[k],
               renew_first);
    }

    stale_after_reacquire(&env);
    sweeper_racing(&env);

    lease_store_stats_t st;
    lease_store_stats(env.store, &st);
    CHECK(st.outcome_unknown == 0, "no outcome unknown without failures");
    race_teardown(&env);
    return 0;
}
