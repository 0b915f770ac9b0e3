/*
 * failover_drill.h - what the failover tests share (header only; each test
 * file is its own program): worker threads that acquire and release a
 * handful of hot identities over HTTP through a real leased and record
 * every acknowledged fencing token, the drill's phases, and the checks.
 *
 *   drill_t d;
 *   drill_start(&d, leased_proc_url(srv), worker_token);
 *   drill_wait_acks(&d, DRILL_STREAMING, 30);     // a condition, with a deadline
 *   testpair_run(pair, "kill", "primary");
 *   drill_set_phase(&d, DRILL_KILLED);
 *   ...
 *   drill_stop(&d);                               // joins the workers
 *   drill_check_monotonic(&d);                    // no token reused or lowered
 *   drill_free(&d);
 *
 * The phase a request started in says which database can have decided it:
 * before DRILL_KILLED the old primary, from DRILL_KILLED on only the new one
 * (the test sets DRILL_KILLED after the old primary is dead). Workers never
 * assert (cmocka is not thread-safe): they count, the test asserts.
 */
#ifndef LEASE_TEST_FAILOVER_DRILL_H
#define LEASE_TEST_FAILOVER_DRILL_H

#include "../http/http_common.h"

#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>

#include "testpair.h"

#define DRILL_IDENTITIES 4
#ifndef DRILL_WORKERS /* -DDRILL_WORKERS=1 reproduces a lone worker's runs */
#define DRILL_WORKERS 4
#endif
/* Short leases: one whose acquisition's reply was lost in the crash (held,
 * but by nobody who knows it) blocks its identity for two seconds only. */
#define DRILL_TTL_MS 2000
/* Each acquisition's deadline (deadline_ms). leased answers within it, or
 * within it plus the cancel grace once a statement was sent
 * (docs/architecture.md), whether the database is there or not; the drill
 * asserts that after the kill, with DRILL_ANSWER_MARGIN_MS for a loaded
 * machine's scheduling. */
#define DRILL_DEADLINE_MS 5000
#define DRILL_CANCEL_GRACE_MS 1000
#define DRILL_ANSWER_MARGIN_MS 2000
#define DRILL_ANSWER_BOUND_NS                                                                      \
    ((int64_t)(DRILL_DEADLINE_MS + DRILL_CANCEL_GRACE_MS + DRILL_ANSWER_MARGIN_MS) * 1000000)
/* The HTTP client's own timeout: above the bound, so a request leased never
 * answers is seen (as "no answer" after this long) and counted late. */
#define DRILL_CLIENT_TIMEOUT_MS 15000
/* Bound on every wait for a condition. Measured (drill_print_answer_times
 * prints the longest): at most 4.4 s in the pg_ctl drills, also beside
 * `stress-ng --cpu 3` on two cores, and 1.4 s in the Patroni drill (whose
 * waits for Patroni are its own, in patronicluster); about 7 times that.
 * failover_frozen sets its own: its requests wait out their deadlines. */
#ifndef DRILL_WAIT_MS
#define DRILL_WAIT_MS 30000
#endif

/* leased's settings for the drills: the workers retry refusals every 10 ms,
 * above the default per-credential rate (a 429 would hide the answer the
 * drill is about); a known pool size (drill_wait_connections_dropped). */
#define DRILL_POOL_SIZE 8
static const char *const drill_leased_env[] = {"LEASE_RATE_LIMIT=100000/s", "LEASE_DB_POOL_SIZE=8",
                                               NULL};

typedef enum drill_phase {
    DRILL_STREAMING,    /* primary up, replica streaming */
    DRILL_UNREPLICATED, /* what the primary acknowledges now the new database will lack
                         * (replica stopped, or after the restore target) */
    DRILL_KILLED,       /* the primary is dead (immediate shutdown) */
    DRILL_PROMOTED,     /* the replica (or a restore) accepts writes */
    DRILL_RECOVERING,   /* leasectl recover is running */
    DRILL_RECOVERED,    /* leasectl recover returned */
    DRILL_PHASES
} drill_phase_t;

static const char *const drill_phase_names[DRILL_PHASES] = {
    "streaming", "unreplicated", "killed", "promoted", "recovering", "recovered"};

/* One acknowledged (200 lease_acquired) acquisition. */
typedef struct drill_ack {
    int64_t start_ns, reply_ns; /* CLOCK_MONOTONIC around the request */
    json_int_t token;
    drill_phase_t start_phase, reply_phase;
} drill_ack_t;

typedef struct drill_identity {
    char target[32];
    drill_ack_t *acks;
    size_t n, cap;
} drill_identity_t;

typedef struct drill drill_t;

/* Every answer time of one kind of request (acquisition or release) started
 * in one phase, to print its distribution (drill_print_answer_times). */
typedef struct drill_times {
    int64_t *ns;
    size_t n, cap;
} drill_times_t;

enum { DRILL_ACQUIRE, DRILL_RELEASE, DRILL_KINDS };
static const char *const drill_kind_names[DRILL_KINDS] = {"acquire", "release"};

typedef struct drill_worker {
    drill_t *d;
    int index;
    pthread_t thread;
    _Atomic long releasing; /* attempts of the release under way (0: acquiring) */
} drill_worker_t;

struct drill {
    const char *base, *token;
    /* This drill's number in the program: part of every request id, so
     * that a second drill against the same leased and database is not
     * answered from the first one's idempotency records. */
    int run;
    pthread_mutex_t mu;
    _Atomic int phase;
    _Atomic bool stop;
    int64_t phase_ns[DRILL_PHASES]; /* when each phase began (0: never) */
    int64_t promote_issued_ns;      /* set by the test just before it promotes */
    drill_identity_t ids[DRILL_IDENTITIES];
    drill_worker_t workers[DRILL_WORKERS];
    /* Under mu: */
    long acked[DRILL_PHASES];    /* acknowledged acquisitions, by the phase they started in */
    long answered[DRILL_PHASES]; /* acquisitions answered (or failed), by the phase they started in
                                  */
    long sealed[DRILL_PHASES]; /* 503 reason namespace_sealed, by the phase they were answered in */
    long other[DRILL_PHASES];  /* other refusals (database unreachable, outcome unknown...) */
    struct {
        char kind[96]; /* "503 lease_backend_unavailable namespace_sealed" */
        long n;
    } kinds[12];          /* every kind of answer to an acquisition, counted */
    long conflicts;       /* 409 lease_conflict: another worker held the identity */
    long released;        /* releases answered 200 */
    long release_expired; /* releases given up: the lease had expired (drill_release) */
    /* The slowest answer to an acquisition, by the phase it started in. */
    int64_t slowest_ns[DRILL_PHASES];
    char slowest_kind[DRILL_PHASES][96];
    long transport_errors; /* no HTTP answer at all */
    /* Every request's answer time, by kind and the phase it started in;
     * the requests answered past DRILL_ANSWER_BOUND_NS (or never), in any
     * phase, with the first one's description. */
    drill_times_t times[DRILL_KINDS][DRILL_PHASES];
    long late[DRILL_KINDS];
    char late_example[DRILL_KINDS][160];
    /* The longest any drill_wait waited for its condition (ms), and what. */
    int64_t longest_wait_ns;
    char longest_wait[128];
    /* First acknowledged acquisition sent after the new database accepted
     * writes (phase DRILL_PROMOTED or later), answered at (0: none). */
    int64_t first_ack_after_promotion_ns;
    /* Acquisitions started and answered while DRILL_PROMOTED was the phase
     * that were not 503 namespace_sealed. */
    long promoted_not_sealed;
    char promoted_not_sealed_example[512];
    int64_t first_sealed_ns; /* first namespace_sealed answer (0: none yet) */
};

/* The drill's worker credential, made in db (the primary): its token. */
static inline char *drill_credential(const char *db)
{
    return leased_proc_credential(db,
                                  &(leased_cred_spec_t){.principal = "prn_drill",
                                                        .tenant = TENANT,
                                                        .program = PROGRAM,
                                                        .capabilities = WORKER_CAPS},
                                  NULL);
}

/* A primary and its synchronous standby (synchronous_commit on), the
 * drill's credential made on the primary, and the multi-host URL leased
 * is given; seal_on_timeline_change false first when asked. */
typedef struct drill_sync_pair {
    testpair_t *pair;
    char *primary, *replica, *both, *token;
} drill_sync_pair_t;

static inline void drill_sync_pair_start(drill_sync_pair_t *p, bool seal_on_timeline_change)
{
    p->pair = testpair_new();
    p->primary = testpair_url(p->pair, "primary", "postgres");
    p->replica = testpair_url(p->pair, "replica", "postgres");
    p->token = drill_credential(p->primary);
    if (!seal_on_timeline_change)
        assert_true(testpg_exec(p->primary, "UPDATE lease.policy SET seal_on_timeline_change = "
                                            "false"));
    testpair_run(p->pair, "replica", "sync");
    assert_int_equal(testpg_query_int(p->primary, "SELECT count(*) FROM pg_stat_replication "
                                                  "WHERE sync_state = 'sync'"),
                     1);
    p->both = testpair_multi_url(p->pair, "primary,replica", "postgres");
}

static inline void drill_sync_pair_free(drill_sync_pair_t *p)
{
    free(p->both);
    free(p->token);
    free(p->replica);
    free(p->primary);
    testpair_free(p->pair);
}

static inline int64_t drill_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline void drill_pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static inline void drill_set_phase(drill_t *d, drill_phase_t phase)
{
    pthread_mutex_lock(&d->mu);
    d->phase_ns[phase] = drill_now_ns();
    pthread_mutex_unlock(&d->mu);
    atomic_store(&d->phase, (int)phase);
}

/* Records one answer time; caller holds mu. */
static inline void drill_record_time(drill_t *d, int kind, drill_phase_t start_phase,
                                     int64_t start_ns, int64_t reply_ns, const char *what)
{
    drill_times_t *t = &d->times[kind][start_phase];
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 1024;
        t->ns = realloc(t->ns, t->cap * sizeof *t->ns);
    }
    t->ns[t->n++] = reply_ns - start_ns;
    if (reply_ns - start_ns > DRILL_ANSWER_BOUND_NS && !d->late[kind]++)
        snprintf(d->late_example[kind], sizeof d->late_example[kind],
                 "%s sent in phase %s answered after %.0f ms: %s", drill_kind_names[kind],
                 drill_phase_names[start_phase], (reply_ns - start_ns) / 1e6, what);
}

static inline char *drill_acquire_body(const char *request_id, const char *target)
{
    return dump(json_pack("{s:s, s:o, s:s, s:s, s:s, s:i, s:i}", "request_id", request_id,
                          "lock_identity", identity_json(target), "service_instance_id", "inst_1",
                          "execution_id", "exec_drill", "job_id", "job_drill", "ttl_ms",
                          DRILL_TTL_MS, "deadline_ms", DRILL_DEADLINE_MS));
}

static inline void drill_record_ack(drill_t *d, int id, json_int_t token, int64_t start_ns,
                                    int64_t reply_ns, drill_phase_t start_phase,
                                    drill_phase_t reply_phase)
{
    drill_identity_t *x = &d->ids[id];
    pthread_mutex_lock(&d->mu);
    if (x->n == x->cap) {
        x->cap = x->cap ? x->cap * 2 : 256;
        x->acks = realloc(x->acks, x->cap * sizeof *x->acks);
    }
    x->acks[x->n++] = (drill_ack_t){start_ns, reply_ns, token, start_phase, reply_phase};
    d->acked[start_phase]++;
    pthread_mutex_unlock(&d->mu);
}

/*
 * Releases what an acknowledged acquisition (answered at acked_ns) holds,
 * until an answer says it is released or no longer held, the lease has
 * expired (the database decided it before acked_ns: by acked_ns + its TTL it
 * holds nothing to release), or the drill stops. Without the expiry bound a
 * worker whose release met the primary's death retried until the database
 * was back, which the drill brings about only after answers to acquisitions
 * started since the kill: with every worker in that loop, none came.
 */
static inline void drill_release(drill_t *d, drill_worker_t *wk, http_client_t *c, long i, int id,
                                 json_t *lease, int64_t acked_ns)
{
    int w = wk->index;
    int64_t expired_ns = acked_ns + (int64_t)DRILL_TTL_MS * 1000000;
    for (int attempt = 0; !atomic_load(&d->stop); attempt++) {
        if (drill_now_ns() >= expired_ns) {
            pthread_mutex_lock(&d->mu);
            d->release_expired++;
            pthread_mutex_unlock(&d->mu);
            break;
        }
        atomic_store(&wk->releasing, attempt + 1);
        char rid[64];
        snprintf(rid, sizeof rid, "d%d-w%d-r%ld-%d", d->run, w, i, attempt);
        char *body = owner_body(rid, d->ids[id].target, lease);
        drill_phase_t start_phase = (drill_phase_t)atomic_load(&d->phase);
        int64_t start_ns = drill_now_ns();
        http_resp_t *r =
            http_client_call(c, "POST", "/v1/leases/release", d->token, body, NULL, NULL);
        int64_t reply_ns = drill_now_ns();
        free(body);
        long st = r ? r->status : 0;
        char what[96];
        snprintf(what, sizeof what, "%ld %s", st,
                 r && http_resp_str(r, "code") ? http_resp_str(r, "code") : "no answer");
        http_resp_free(r);
        pthread_mutex_lock(&d->mu);
        drill_record_time(d, DRILL_RELEASE, start_phase, start_ns, reply_ns, what);
        pthread_mutex_unlock(&d->mu);
        if (st == 200 || st == 409) {
            pthread_mutex_lock(&d->mu);
            d->released += st == 200;
            pthread_mutex_unlock(&d->mu);
            break;
        }
        drill_pause_ms(10);
    }
    atomic_store(&wk->releasing, 0);
}

static inline void *drill_worker_main(void *arg)
{
    drill_worker_t *wk = arg;
    drill_t *d = wk->d;
    http_client_t *c = http_client_new(d->base, DRILL_CLIENT_TIMEOUT_MS);
    for (long i = 0; !atomic_load(&d->stop); i++) {
        int id = (int)((wk->index + i) % DRILL_IDENTITIES);
        char rid[64];
        snprintf(rid, sizeof rid, "d%d-w%d-a%ld", d->run, wk->index, i);
        char *body = drill_acquire_body(rid, d->ids[id].target);
        drill_phase_t start_phase = (drill_phase_t)atomic_load(&d->phase);
        int64_t start_ns = drill_now_ns();
        char err[256] = "";
        http_resp_t *r =
            http_client_call(c, "POST", "/v1/leases/acquire", d->token, body, NULL, err);
        int64_t reply_ns = drill_now_ns();
        drill_phase_t reply_phase = (drill_phase_t)atomic_load(&d->phase);
        free(body);
        const char *code = r ? http_resp_str(r, "code") : NULL;
        const char *reason = r ? http_resp_str(r, "reason") : NULL;
        bool acked = r && r->status == 200 && code && strcmp(code, "lease_acquired") == 0;
        bool sealed = r && r->status == 503 && code &&
                      strcmp(code, "lease_backend_unavailable") == 0 && reason &&
                      strcmp(reason, "namespace_sealed") == 0;
        bool conflict = r && r->status == 409;
        json_t *lease = acked ? json_deep_copy(json_object_get(r->json, "lease")) : NULL;
        json_int_t token = acked ? json_integer_value(json_object_get(lease, "fencing_token")) : 0;

        char kind[96];
        snprintf(kind, sizeof kind, "%ld %s%s%s", r ? r->status : 0L,
                 code ? code : (r ? "-" : "no answer"), reason ? " " : "", reason ? reason : "");
        pthread_mutex_lock(&d->mu);
        for (size_t k = 0; k < sizeof d->kinds / sizeof d->kinds[0]; k++)
            if (!d->kinds[k].n || strcmp(d->kinds[k].kind, kind) == 0) {
                if (!d->kinds[k].n)
                    snprintf(d->kinds[k].kind, sizeof d->kinds[k].kind, "%s", kind);
                d->kinds[k].n++;
                break;
            }
        d->answered[start_phase]++;
        drill_record_time(d, DRILL_ACQUIRE, start_phase, start_ns, reply_ns, kind);
        if (acked && start_phase >= DRILL_PROMOTED && !d->first_ack_after_promotion_ns)
            d->first_ack_after_promotion_ns = reply_ns;
        if (reply_ns - start_ns > d->slowest_ns[start_phase]) {
            d->slowest_ns[start_phase] = reply_ns - start_ns;
            snprintf(d->slowest_kind[start_phase], sizeof d->slowest_kind[start_phase], "%s", kind);
        }
        if (!r)
            d->transport_errors++;
        else if (sealed) {
            d->sealed[reply_phase]++;
            if (!d->first_sealed_ns)
                d->first_sealed_ns = reply_ns;
        } else if (conflict)
            d->conflicts++;
        else if (!acked)
            d->other[reply_phase]++;
        if (start_phase == DRILL_PROMOTED && reply_phase == DRILL_PROMOTED && !sealed) {
            if (!d->promoted_not_sealed++)
                snprintf(d->promoted_not_sealed_example, sizeof d->promoted_not_sealed_example,
                         "%ld %s", r ? r->status : 0L, r ? r->body : err);
        }
        pthread_mutex_unlock(&d->mu);

        if (acked) {
            drill_record_ack(d, id, token, start_ns, reply_ns, start_phase, reply_phase);
            drill_release(d, wk, c, i, id, lease, reply_ns);
        } else if (!conflict) {
            drill_pause_ms(10); /* load shaping while the database is away, not a wait */
        }
        json_decref(lease);
        http_resp_free(r);
    }
    http_client_free(c);
    return NULL;
}

/* Starts the workers on leased at base with a worker credential's token. */
static inline void drill_start(drill_t *d, const char *base, const char *token)
{
    static int runs;
    memset(d, 0, sizeof *d);
    d->run = runs++;
    d->base = base;
    d->token = token;
    pthread_mutex_init(&d->mu, NULL);
    for (int i = 0; i < DRILL_IDENTITIES; i++)
        snprintf(d->ids[i].target, sizeof d->ids[i].target, "hot-%d", i);
    drill_set_phase(d, DRILL_STREAMING);
    for (int w = 0; w < DRILL_WORKERS; w++) {
        d->workers[w] = (drill_worker_t){.d = d, .index = w};
        assert_int_equal(
            pthread_create(&d->workers[w].thread, NULL, drill_worker_main, &d->workers[w]), 0);
    }
}

/* Joins the workers; then every acquisition started from the kill on was
 * answered within its deadline (plus the cancel grace and the margin), the
 * database there or not. */
static inline void drill_stop(drill_t *d)
{
    atomic_store(&d->stop, true);
    for (int w = 0; w < DRILL_WORKERS; w++)
        pthread_join(d->workers[w].thread, NULL);
    for (int k = 0; k < DRILL_KINDS; k++) {
        if (d->late[k])
            fprintf(stderr,
                    "drill: %ld %s requests answered past their %d ms deadline (+ %d ms cancel "
                    "grace + %d ms margin) or never, the first: %s\n",
                    d->late[k], drill_kind_names[k], DRILL_DEADLINE_MS, DRILL_CANCEL_GRACE_MS,
                    DRILL_ANSWER_MARGIN_MS, d->late_example[k]);
    }
    for (int k = 0; k < DRILL_KINDS; k++)
        assert_int_equal(d->late[k], 0);
}

static inline void drill_free(drill_t *d)
{
    for (int i = 0; i < DRILL_IDENTITIES; i++)
        free(d->ids[i].acks);
    for (int k = 0; k < DRILL_KINDS; k++)
        for (int p = 0; p < DRILL_PHASES; p++)
            free(d->times[k][p].ns);
    pthread_mutex_destroy(&d->mu);
}

/* A counter read under the lock. */
static inline long drill_read(drill_t *d, const long *field)
{
    pthread_mutex_lock(&d->mu);
    long v = *field;
    pthread_mutex_unlock(&d->mu);
    return v;
}

/* Acknowledged acquisitions of identity id started in [from, to]. */
static inline size_t drill_acks_between(drill_t *d, int id, drill_phase_t from, drill_phase_t to)
{
    size_t n = 0;
    pthread_mutex_lock(&d->mu);
    for (size_t k = 0; k < d->ids[id].n; k++)
        if (d->ids[id].acks[k].start_phase >= from && d->ids[id].acks[k].start_phase <= to)
            n++;
    pthread_mutex_unlock(&d->mu);
    return n;
}

/* The highest token of identity id acknowledged for a request started in
 * [from, to] (0: none), or the lowest with lowest = true (0: none). */
static inline json_int_t drill_token_between(drill_t *d, int id, drill_phase_t from,
                                             drill_phase_t to, bool lowest)
{
    json_int_t best = 0;
    pthread_mutex_lock(&d->mu);
    for (size_t k = 0; k < d->ids[id].n; k++) {
        const drill_ack_t *a = &d->ids[id].acks[k];
        if (a->start_phase < from || a->start_phase > to)
            continue;
        if (!best || (lowest ? a->token < best : a->token > best))
            best = a->token;
    }
    pthread_mutex_unlock(&d->mu);
    return best;
}

static inline long drill_sum(drill_t *d, const long *field, drill_phase_t from, drill_phase_t to)
{
    long n = 0;
    for (int p = (int)from; p <= (int)to; p++)
        n += drill_read(d, &field[p]);
    return n;
}

/* What the workers are doing and what was answered so far (a failed
 * wait's diagnosis). */
static inline void drill_print_state(drill_t *d)
{
    fprintf(stderr, "drill: phase %s; workers:", drill_phase_names[atomic_load(&d->phase)]);
    for (int w = 0; w < DRILL_WORKERS; w++) {
        long r = atomic_load(&d->workers[w].releasing);
        if (r)
            fprintf(stderr, " w%d releasing (attempt %ld)", w, r);
        else
            fprintf(stderr, " w%d acquiring", w);
    }
    fprintf(stderr, "; acquisitions answered by the phase they started in:");
    pthread_mutex_lock(&d->mu);
    for (int p = 0; p < DRILL_PHASES; p++)
        fprintf(stderr, " %s %ld (slowest %.0f ms)", drill_phase_names[p], d->answered[p],
                d->slowest_ns[p] / 1e6);
    pthread_mutex_unlock(&d->mu);
    fprintf(stderr, "\n");
}

/* Waits (at most DRILL_WAIT_MS) until cond(d, arg) holds; fails the test
 * naming what it waited for. */
static inline void drill_wait(drill_t *d, bool (*cond)(drill_t *, long), long arg, const char *what)
{
    int64_t begin = drill_now_ns(), end = begin + (int64_t)DRILL_WAIT_MS * 1000000;
    while (!cond(d, arg)) {
        if (drill_now_ns() > end) {
            fprintf(stderr, "drill: timed out waiting until %s\n", what);
            drill_print_state(d);
            fail();
        }
        drill_pause_ms(20);
    }
    if (drill_now_ns() - begin > d->longest_wait_ns) {
        d->longest_wait_ns = drill_now_ns() - begin;
        snprintf(d->longest_wait, sizeof d->longest_wait, "%s", what);
    }
}

static inline bool drill_has_acks_in_phase(drill_t *d, long n)
{
    drill_phase_t p = (drill_phase_t)atomic_load(&d->phase);
    return drill_read(d, &d->acked[p]) >= n;
}

/* n acquisitions acknowledged that started in the current phase. */
static inline void drill_wait_acks(drill_t *d, long n)
{
    char what[96];
    snprintf(what, sizeof what, "%ld acquisitions are acknowledged in phase %s", n,
             drill_phase_names[atomic_load(&d->phase)]);
    drill_wait(d, drill_has_acks_in_phase, n, what);
}

static inline bool drill_has_answers_since_kill(drill_t *d, long n)
{
    return drill_read(d, &d->answered[DRILL_KILLED]) >= n;
}

/*
 * After the old primary died: waits until leased has dropped every
 * connection it held to it. A connection to a dead server looks alive until
 * it is used; the pool hands out connected slots before empty ones, so once
 * more acquisitions than it has slots (plus one in flight per worker) have
 * been answered since the kill, each of those connections has been used and
 * discarded. A failover manager likewise promotes only after its own
 * timeout. Without this wait, a request after the promotion can still meet
 * one of them and be answered lease_outcome_unknown (no decision, but not
 * the sealed answer the drill checks for).
 */
static inline void drill_wait_connections_dropped(drill_t *d)
{
    drill_wait(d, drill_has_answers_since_kill, 2 * DRILL_POOL_SIZE + DRILL_WORKERS,
               "leased has used every connection it held to the lost primary");
}

static inline bool drill_has_sealed(drill_t *d, long n)
{
    return drill_read(d, &d->sealed[DRILL_PROMOTED]) >= n;
}

/* n acquisitions answered namespace_sealed after the promotion. */
static inline void drill_wait_sealed(drill_t *d, long n)
{
    char what[96];
    snprintf(what, sizeof what, "%ld acquisitions are refused namespace_sealed", n);
    drill_wait(d, drill_has_sealed, n, what);
}

static inline bool drill_each_has_acks_since(drill_t *d, long phase_and_n)
{
    drill_phase_t from = (drill_phase_t)(phase_and_n / 1000);
    size_t n = (size_t)(phase_and_n % 1000);
    for (int id = 0; id < DRILL_IDENTITIES; id++)
        if (drill_acks_between(d, id, from, DRILL_PHASES - 1) < n)
            return false;
    return true;
}

/* Every identity has n (< 1000) acknowledged acquisitions started in phase
 * `from` or later. */
static inline void drill_wait_each_identity(drill_t *d, drill_phase_t from, long n)
{
    char what[128];
    snprintf(what, sizeof what, "every identity has %ld acknowledged acquisitions since %s", n,
             drill_phase_names[from]);
    drill_wait(d, drill_each_has_acks_since, (long)from * 1000 + n, what);
}

/*
 * No acknowledged token reused or lowered: for each identity, every
 * acknowledged acquisition's token is greater than that of every
 * acquisition acknowledged before the request was sent (real-time order),
 * and no token was acknowledged twice. Returns the number of violations
 * (printing the first few).
 */
static inline long drill_violations(drill_t *d)
{
    long bad = 0;
    pthread_mutex_lock(&d->mu);
    for (int id = 0; id < DRILL_IDENTITIES; id++) {
        const drill_identity_t *x = &d->ids[id];
        for (size_t b = 0; b < x->n; b++)
            for (size_t a = 0; a < x->n; a++) {
                if (a == b)
                    continue;
                const drill_ack_t *pa = &x->acks[a], *pb = &x->acks[b];
                bool lowered = pa->reply_ns < pb->start_ns && pb->token <= pa->token;
                bool reused = a < b && pa->token == pb->token;
                if (lowered || reused) {
                    if (bad++ < 5)
                        fprintf(stderr,
                                "drill: %s: token %lld (%s, sent in %s) after token %lld "
                                "(acknowledged in %s)\n",
                                x->target, (long long)pb->token, reused ? "reused" : "lowered",
                                drill_phase_names[pb->start_phase], (long long)pa->token,
                                drill_phase_names[pa->reply_phase]);
                }
            }
    }
    pthread_mutex_unlock(&d->mu);
    return bad;
}

/* ------------------------------------------------------------------ */
/* leased and the database, as the drills see them                     */

/* Polls /readyz (at most DRILL_WAIT_MS) until it answers want_status and,
 * when want_reason is not NULL, that reason. */
static inline void drill_wait_readyz(const char *base, long want_status, const char *want_reason)
{
    int64_t end = drill_now_ns() + (int64_t)DRILL_WAIT_MS * 1000000;
    char last[256] = "";
    for (;;) {
        http_resp_t *r = http_call(base, "GET", "/readyz", NULL, NULL);
        bool ok = r && r->status == want_status &&
                  (!want_reason || (http_resp_str(r, "reason") &&
                                    strcmp(http_resp_str(r, "reason"), want_reason) == 0));
        if (r)
            snprintf(last, sizeof last, "%ld %s", r->status, r->body);
        http_resp_free(r);
        if (ok)
            return;
        if (drill_now_ns() > end) {
            fprintf(stderr, "drill: /readyz never answered %ld %s (last: %s)\n", want_status,
                    want_reason ? want_reason : "", last);
            fail();
        }
        drill_pause_ms(20);
    }
}

/* The value of an unlabelled metric line "NAME VALUE" (-1 when absent). */
static inline long long drill_metric(const char *base, const char *name)
{
    http_resp_t *r = http_call(base, "GET", "/metrics", NULL, NULL);
    assert_non_null(r);
    long long v = -1;
    size_t n = strlen(name);
    for (const char *line = r->body; line && *line;) {
        if (strncmp(line, name, n) == 0 && line[n] == ' ')
            v = atoll(line + n + 1);
        line = strchr(line, '\n');
        if (line)
            line++;
    }
    http_resp_free(r);
    return v;
}

/* Waits until the gauge/counter `name` reaches at least min. */
static inline long long drill_wait_metric(const char *base, const char *name, long long min)
{
    int64_t end = drill_now_ns() + (int64_t)DRILL_WAIT_MS * 1000000;
    long long v;
    while ((v = drill_metric(base, name)) < min) {
        if (drill_now_ns() > end) {
            fprintf(stderr, "drill: metric %s stayed at %lld (< %lld)\n", name, v, min);
            fail();
        }
        drill_pause_ms(20);
    }
    return v;
}

/* An identity's durable counter on the database at url (0: no row). */
static inline long long drill_counter(const char *url, const char *target)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT coalesce(max(fencing_counter), 0) FROM lease.locks WHERE target_id = '%s'",
             target);
    return testpg_query_int(url, sql);
}

/*
 * How many acquisitions acknowledged for requests started in phases
 * [from, to] (and, when replied_before_ns is not 0, answered before it) the
 * database at url does not know: no lease with that identity and token in
 * lease.history or lease.locks. Zero means none of them was lost.
 */
static inline long drill_missing_tokens(drill_t *d, const char *url, drill_phase_t from,
                                        drill_phase_t to, int64_t replied_before_ns)
{
    long missing = 0;
    for (int id = 0; id < DRILL_IDENTITIES; id++) {
        size_t cap = 256, len = 0;
        char *list = malloc(cap);
        list[0] = '\0';
        pthread_mutex_lock(&d->mu);
        for (size_t k = 0; k < d->ids[id].n; k++) {
            const drill_ack_t *a = &d->ids[id].acks[k];
            if (a->start_phase < from || a->start_phase > to ||
                (replied_before_ns && a->reply_ns >= replied_before_ns))
                continue;
            if (cap - len < 32)
                list = realloc(list, cap *= 2);
            len += (size_t)snprintf(list + len, cap - len, "%s%lld", len ? "," : "",
                                    (long long)a->token);
        }
        pthread_mutex_unlock(&d->mu);
        size_t sqlsz = len + 512;
        char *sql = malloc(sqlsz);
        snprintf(sql, sqlsz,
                 "SELECT count(*) FROM unnest('{%s}'::bigint[]) t(token) WHERE NOT EXISTS "
                 "(SELECT 1 FROM lease.history h WHERE h.target_id = '%s' AND h.fencing_token = "
                 "t.token) AND NOT EXISTS (SELECT 1 FROM lease.locks l WHERE l.target_id = '%s' "
                 "AND l.fencing_token = t.token)",
                 list, d->ids[id].target, d->ids[id].target);
        missing += (long)testpg_query_int(url, sql);
        free(sql);
        free(list);
    }
    return missing;
}

/* `leasectl recover --reason REASON --database-url URL`; must succeed.
 * Returns what it printed (heap). */
/* leasectl recover on url, its floor read from the leased at floor_from
 * (--floor-from, docs/operators.md "Recovery": what the runbook asks),
 * or none when floor_from is NULL. */
static inline char *drill_recover(const char *url, const char *reason, const char *floor_from)
{
    char cmd[2048], from[512] = "";
    if (floor_from)
        snprintf(from, sizeof from, " --floor-from '%s'", floor_from);
    snprintf(cmd, sizeof cmd, "'%s' recover --reason '%s' --database-url '%s'%s 2>&1",
             LEASE_TEST_LEASECTL, reason, url, from);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char *out = calloc(1, 4096);
    size_t n = fread(out, 1, 4095, p);
    out[n] = '\0';
    int st = pclose(p);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
        fprintf(stderr, "drill: leasectl recover failed: %s\n", out);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    printf("drill leasectl recover: %s", out);
    if (floor_from) /* the floor it read is the one it used */
        assert_non_null(strstr(out, "\"floor\":"));
    return out;
}

static inline double drill_ms(int64_t from_ns, int64_t to_ns)
{
    return (double)(to_ns - from_ns) / 1e6;
}

static inline int drill_cmp_ns(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Each kind of request's answer times by the phase it was sent in (count,
 * median, 99th percentile, slowest, in ms), the requests answered past
 * their deadline, and the longest wait for a condition: the figures the
 * drill's bounds are set from. After drill_stop. */
static inline void drill_print_answer_times(drill_t *d)
{
    for (int k = 0; k < DRILL_KINDS; k++) {
        printf("drill %s answer times by the phase sent in (n p50/p99/max ms):",
               drill_kind_names[k]);
        for (int p = 0; p < DRILL_PHASES; p++) {
            drill_times_t *t = &d->times[k][p];
            if (!t->n)
                continue;
            qsort(t->ns, t->n, sizeof *t->ns, drill_cmp_ns);
            printf(" %s %zu %.0f/%.0f/%.0f", drill_phase_names[p], t->n, t->ns[t->n / 2] / 1e6,
                   t->ns[(t->n * 99) / 100] / 1e6, t->ns[t->n - 1] / 1e6);
        }
        printf("\n");
    }
    printf("drill requests past their deadline (%d ms + %d ms cancel grace + %d ms margin): "
           "acquire %ld, release %ld; longest wait for a condition %.1f s (%s)\n",
           DRILL_DEADLINE_MS, DRILL_CANCEL_GRACE_MS, DRILL_ANSWER_MARGIN_MS, d->late[DRILL_ACQUIRE],
           d->late[DRILL_RELEASE], d->longest_wait_ns / 1e9, d->longest_wait);
}

/* When each phase began, in seconds since t0. */
static inline void drill_print_phases(const drill_t *d, int64_t t0)
{
    printf("drill phases (s since start):");
    for (int p = 0; p < DRILL_PHASES; p++)
        if (d->phase_ns[p])
            printf(" %s %.2f", drill_phase_names[p], drill_ms(t0, d->phase_ns[p]) / 1000.0);
    printf("\ndrill sealed answers by phase:");
    for (int p = 0; p < DRILL_PHASES; p++)
        printf(" %s %ld", drill_phase_names[p], d->sealed[p]);
    printf("\ndrill slowest answer to an acquisition, by the phase it started in (ms):");
    for (int p = 0; p < DRILL_PHASES; p++)
        printf(" %s %.0f", drill_phase_names[p], d->slowest_ns[p] / 1e6);
    printf("\ndrill answers to acquisitions:");
    for (size_t k = 0; k < sizeof d->kinds / sizeof d->kinds[0] && d->kinds[k].n; k++)
        printf("%s %s x%ld", k ? "," : "", d->kinds[k].kind, d->kinds[k].n);
    printf("\n");
}

/* leasectl recover on db while leased keeps serving, as the runbook says
 * (--floor-from the leased that served: its highest token + 1 is the
 * floor, so the tokens after it are above every token that leased saw
 * whatever the promoted member lacks): the phases around it, /readyz ready
 * again, every identity acquired after it, the workers stopped and the
 * phases printed. Returns what recover printed (heap). */
static inline char *drill_recover_and_settle(drill_t *d, const char *db, const char *reason,
                                             const char *base, int64_t t0)
{
    drill_set_phase(d, DRILL_RECOVERING);
    char *out = drill_recover(db, reason, base);
    drill_set_phase(d, DRILL_RECOVERED);
    drill_wait_readyz(base, 200, NULL);
    drill_wait_each_identity(d, DRILL_RECOVERED, 5);
    drill_stop(d);
    drill_print_phases(d, t0);
    drill_print_answer_times(d);
    return out;
}

/*
 * What a drill that seals must show once recovered: no token reused or
 * lowered, nothing acknowledged between the loss and the recovery, every
 * refusal in between namespace_sealed (`when` names that time in the
 * message), and each identity's first token after recovery above every
 * token before the loss. Returns the violations counted (0).
 */
static inline long drill_assert_sealed_until_recovery(drill_t *d, const char *when)
{
    long violations = drill_violations(d);
    assert_int_equal(violations, 0);
    assert_int_equal(drill_sum(d, d->acked, DRILL_KILLED, DRILL_PROMOTED), 0);
    if (d->promoted_not_sealed)
        fprintf(stderr, "drill: %ld answers %s were not namespace_sealed, e.g. %s\n",
                d->promoted_not_sealed, when, d->promoted_not_sealed_example);
    assert_int_equal(d->promoted_not_sealed, 0);
    for (int id = 0; id < DRILL_IDENTITIES; id++) {
        json_int_t before = drill_token_between(d, id, DRILL_STREAMING, DRILL_PROMOTED, false);
        json_int_t after = drill_token_between(d, id, DRILL_RECOVERED, DRILL_RECOVERED, true);
        assert_true(before > 0);
        assert_true(after > before);
    }
    return violations;
}

#endif
