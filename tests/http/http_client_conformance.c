/*
 * http_client_conformance.c - the client conformance scenario, for the C
 * client (include/lease/client.h, worker.h); the Python and Go clients run
 * the same scenario in their own suites. Against real leased processes over
 * loopback HTTP and the test database, it asserts what it observes:
 *
 *  1. acquire, renew, release;
 *  2. a hold (lease_held) kept alive by renewals past 5x its TTL;
 *  3. a force-release through a second leased instance cancels the holder
 *     within 1 s (its watch); the latency is measured and printed;
 *  4. leased killed -9 while an acquire waits in the database: the client
 *     answers lease_outcome_unknown; repeating the request id against a
 *     restarted leased returns one lease and token, again on every repeat,
 *     and the database holds exactly that one (printed);
 *  5. a commit after the lease was lost is refused as lease_lost;
 *  6. every code of the closed result set reaches the caller as its typed
 *     lease_code_t;
 *  7. a deadline in the past answers deadline_exceeded;
 *  8. a waited acquire granted late in its wait holds and runs.
 */
#include <poll.h>
#include <pthread.h>
#include <signal.h>

#include "http_common.h"
#include "lease/client.h"
#include "lease/clock.h"
#include "lease/held.h"
#include "test_wait.h"

#define INSTANCE "conformance-1"
#define TRACE_ID "4bf92f3577b34da6a3ce929d0e0e4736"

static http_fx_t fx;
static const char *worker_token; /* targets:lease, targets:read */
static const char *admin_token;  /* force-release, revoke, read */
static const char *reader_token; /* targets:read only */
static leased_proc_t *second;    /* another leased on the same database */

static lease_client_acquire_t acquire_req(const char *target, int64_t ttl_ms, int64_t wait_ms)
{
    return (lease_client_acquire_t){
        .identity = {TENANT, PROGRAM, NAMESPACE, target, ACTOR, "default", NULL},
        .service_instance_id = INSTANCE,
        .execution_id = "exec_conformance",
        .job_id = "job_conformance",
        .ttl_ms = ttl_ms,
        .wait_ms = wait_ms,
    };
}

static lease_client_owner_t owner_of(const lease_record_t *l, int64_t ttl_ms)
{
    return (lease_client_owner_t){lease_client_identity_of(&l->identity), l->lease_id,
                                  l->fencing_token, INSTANCE, ttl_ms};
}

static lease_client_admin_t admin_of(const lease_record_t *l, const char *reason)
{
    return (lease_client_admin_t){lease_client_identity_of(&l->identity), l->lease_id,
                                  l->fencing_token, reason, NULL};
}

/* An acquire that must be granted; the lease into *out. */
static void must_acquire(lease_client_t *c, const char *target, int64_t ttl_ms,
                         lease_client_call_t *call, lease_result_t *out)
{
    lease_client_acquire_t req = acquire_req(target, ttl_ms, 0);
    assert_int_equal(lease_client_acquire(c, &req, call, out), LEASE_ACQUIRED);
    assert_true(out->has_lease);
}

/* Whether fd becomes readable within ms. */
static bool readable_within(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, ms) == 1;
}

/* ------------------------------------------------------------------ */

static void acquire_renew_release(void **state)
{
    (void)state;
    lease_client_t *c = lease_client_new(fx.base, worker_token);
    lease_client_call_t call = {0};
    lease_result_t a, r;
    must_acquire(c, "conf-1", 30000, &call, &a);
    assert_int_equal(a.waited_ms, 0); /* granted at the first attempt */
    assert_true(call.anchor_mono_ns == call.first_sent_mono_ns);

    lease_client_owner_t own = owner_of(&a.lease, 30000);
    assert_int_equal(lease_client_renew(c, &own, NULL, &r), LEASE_RENEWED);
    assert_string_equal(r.lease.lease_id, a.lease.lease_id);
    assert_int_equal(r.lease.fencing_token, a.lease.fencing_token);
    assert_true(r.lease.renewed_at_ms >= a.lease.renewed_at_ms);
    assert_int_equal(lease_client_release(c, &own, NULL, &r), LEASE_RELEASED);
    assert_int_equal(r.lease.state, LEASE_STATE_RELEASED);
    lease_client_free(c);
}

static void a_hold_outlives_five_ttls(void **state)
{
    (void)state;
    lease_client_t *c = lease_client_new(fx.base, worker_token);
    lease_client_call_t call = {0};
    lease_result_t a;
    must_acquire(c, "conf-2", 1500, &call, &a);
    lease_code_t code;
    lease_held_t *w = lease_held_start(c, &a.lease, call.anchor_mono_ns, NULL, &code);
    assert_non_null(w);
    /* 5 TTLs and a bit: no cancellation, and the service still has it */
    assert_false(readable_within(lease_held_cancel_fd(w), 5 * 1500 + 500));
    assert_int_equal(lease_held_state(w, NULL), LEASE_HELD_ACTIVE);
    lease_result_t seen;
    assert_int_equal(lease_client_inspect_id(c, a.lease.lease_id, NULL, &seen), LEASE_INSPECTED);
    assert_int_equal(seen.lease.state, LEASE_STATE_ACTIVE);
    assert_int_equal(seen.lease.fencing_token, a.lease.fencing_token);
    assert_true(seen.lease.expires_at_ms > a.lease.acquired_at_ms + 5 * 1500);
    printf("conformance C: hold of ttl 1500 ms alive after %d ms, expires_at moved %lld ms\n",
           5 * 1500 + 500, (long long)(seen.lease.expires_at_ms - a.lease.expires_at_ms));
    assert_int_equal(lease_held_release(w, 5000, NULL), LEASE_RELEASED);
    lease_held_free(w);
    lease_client_free(c);
}

static void force_release_elsewhere_cancels_within_a_second(void **state)
{
    (void)state;
    /* the holder learns of the end through its watch (GET .../watch), fed
     * by PostgreSQL's LISTEN, or on Valkey by the force-release's PUBLISH */
    lease_client_t *c = lease_client_new(fx.base, worker_token);
    lease_client_t *admin = lease_client_new(leased_proc_url(second), admin_token);
    lease_client_call_t call = {0};
    lease_result_t a, r;
    must_acquire(c, "conf-3", 60000, &call, &a);
    lease_code_t code;
    lease_held_t *w = lease_held_start(c, &a.lease, call.anchor_mono_ns, NULL, &code);
    assert_non_null(w);
    lease_sleep_ms(300); /* the watch is in its long poll */

    lease_client_admin_t req = admin_of(&a.lease, "conformance: force-release");
    assert_int_equal(lease_client_force_release(admin, &req, NULL, &r), LEASE_RELEASED);
    int64_t answered = lease_mono_now_ns();
    assert_true(readable_within(lease_held_cancel_fd(w), 1000));
    int64_t latency_us = (lease_mono_now_ns() - answered) / 1000;
    printf("conformance C: force-release through a second leased cancelled the holder "
           "%lld.%03lld ms after its answer\n",
           (long long)(latency_us / 1000), (long long)(latency_us % 1000));
    assert_true(latency_us < 1000000);
    assert_int_equal(lease_held_state(w, &code), LEASE_HELD_LOST);
    assert_int_equal(code, LEASE_LOST);
    lease_held_free(w);
    lease_client_free(admin);
    lease_client_free(c);
}

/* An acquire sent from a thread of its own (it blocks in the database). */
typedef struct pending_acquire {
    lease_client_t *client;
    lease_client_acquire_t req;
    lease_client_call_t call;
    lease_result_t res;
    lease_code_t code;
    pthread_t thread;
} pending_acquire_t;

static void *pending_acquire_main(void *arg)
{
    pending_acquire_t *p = arg;
    p->code = lease_client_acquire(p->client, &p->req, &p->call, &p->res);
    return NULL;
}

static void killed_during_acquire_resolves_by_request_id(void **state)
{
    (void)state;
    /* the acquire is held inside the database by a row lock of another
     * session; Valkey runs each call to its end, nothing to hold it by */
    const char *env[] = {"LEASE_DB_CONNECT_TIMEOUT_MS=500", NULL};
    leased_proc_t *doomed = leased_proc_start(fx.db, env);
    assert_non_null(doomed);
    char doomed_url[64];
    snprintf(doomed_url, sizeof doomed_url, "%s", leased_proc_url(doomed));

    /* the target's lock row is held: the acquire waits inside the database */
    lease_client_t *c0 = lease_client_new(fx.base, worker_token);
    lease_client_call_t call = {0};
    lease_result_t first;
    must_acquire(c0, "conf-4", 30000, &call, &first); /* creates the lock row */
    lease_client_owner_t own = owner_of(&first.lease, 0);
    assert_int_equal(lease_client_release(c0, &own, NULL, &first), LEASE_RELEASED);
    PGconn *blocker = http_block_target(fx.db, "conf-4");

    pending_acquire_t p = {.client = lease_client_new(doomed_url, worker_token),
                           .req = acquire_req("conf-4", 30000, 0),
                           .call = {.request_id = "req_conformance_killed", .deadline_ms = 3000}};
    pthread_create(&p.thread, NULL, pending_acquire_main, &p);
    assert_int_equal(http_wait_lock_waiter(fx.db), 1);
    leased_proc_signal(doomed, SIGKILL);
    assert_int_equal(leased_proc_wait(doomed, 10000), 128 + SIGKILL);
    pthread_join(p.thread, NULL);
    printf("conformance C: acquire while leased was killed -9: %s after %d attempts\n",
           lease_code_name(p.code), p.call.attempts);
    assert_int_equal(p.code, LEASE_OUTCOME_UNKNOWN);
    assert_string_equal(p.call.request_id_used, "req_conformance_killed");
    http_unblock(blocker);
    /* the orphaned database session finishes what it started, or not */
    assert_true(
        test_wait_until(30000, testpg_query_int(fx.db, "SELECT count(*) FROM pg_stat_activity "
                                                       "WHERE datname = current_database() AND "
                                                       "wait_event_type = 'Lock'") == 0));
    lease_sleep_ms(200);

    /* a restarted leased: the same request id, the same body */
    leased_proc_t *restarted = leased_proc_start(fx.db, env);
    assert_non_null(restarted);
    lease_client_t *c = lease_client_new(leased_proc_url(restarted), worker_token);
    lease_client_call_t again = {.request_id = "req_conformance_killed"};
    lease_result_t r1, r2;
    assert_int_equal(lease_client_acquire(c, &p.req, &again, &r1), LEASE_ACQUIRED);
    assert_int_equal(lease_client_acquire(c, &p.req, &again, &r2), LEASE_ACQUIRED);
    printf("conformance C: replay after restart: lease %s token %lld (first repeat %s), "
           "second repeat lease %s token %lld replayed=%d\n",
           r1.lease.lease_id, (long long)r1.lease.fencing_token,
           r1.replayed ? "replayed the killed acquire" : "acquired: the killed one never committed",
           r2.lease.lease_id, (long long)r2.lease.fencing_token, r2.replayed);
    /* the killed leased's database session was waiting on the lock, not
     * on leased: once the lock came free it committed the acquire (its
     * answer went nowhere), so the first repeat already replays it */
    assert_true(r1.replayed);
    assert_true(r2.replayed);
    assert_string_equal(r2.lease.lease_id, r1.lease.lease_id);
    assert_int_equal(r2.lease.fencing_token, r1.lease.fencing_token);
    /* never two leases, never a lost one: the one active lease is that one */
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM lease.active_leases WHERE target_id = 'conf-4' AND "
             "lease_id = '%s' AND fencing_token = %lld",
             r1.lease.lease_id, (long long)r1.lease.fencing_token);
    assert_int_equal(testpg_query_int(fx.db, sql), 1);
    assert_int_equal(
        testpg_query_int(fx.db,
                         "SELECT count(*) FROM lease.active_leases WHERE target_id = 'conf-4'"),
        1);
    lease_client_owner_t held = owner_of(&r1.lease, 0);
    assert_int_equal(lease_client_release(c, &held, NULL, &r1), LEASE_RELEASED);
    lease_client_free(c);
    lease_client_free(p.client);
    lease_client_free(c0);
    assert_int_equal(leased_proc_stop(restarted), 0);
    leased_proc_free(doomed);
}

static void a_commit_after_loss_is_refused(void **state)
{
    (void)state;
    lease_client_t *c = lease_client_new(fx.base, worker_token);
    lease_client_t *admin = lease_client_new(fx.base, admin_token);
    lease_client_call_t call = {0};
    lease_result_t a, r;
    must_acquire(c, "conf-5", 30000, &call, &a);
    lease_write_t doc = {.kind = LEASE_WRITE_DOCUMENT,
                         .key = "conformance/conf-5",
                         .expected_revision = 0,
                         .json = "{\"step\":1}"};
    lease_client_commit_t commit = {.identity = lease_client_identity_of(&a.lease.identity),
                                    .lease_id = a.lease.lease_id,
                                    .fencing_token = a.lease.fencing_token,
                                    .execution_id = "exec_conformance",
                                    .trace_id = TRACE_ID,
                                    .n_writes = 1,
                                    .writes = &doc};
    lease_commit_result_t cr;
    lease_code_t code = lease_client_commit(c, &commit, NULL, &cr);
    if (code != LEASE_COMMIT_ACCEPTED)
        fail_msg("commit: %s (field %s)", lease_code_name(code), cr.field);
    assert_int_equal(cr.revisions[0], 1);

    lease_client_admin_t req = admin_of(&a.lease, "conformance: loss");
    assert_int_equal(lease_client_force_release(admin, &req, NULL, &r), LEASE_RELEASED);
    doc.expected_revision = 1;
    assert_int_equal(lease_client_commit(c, &commit, NULL, &cr), LEASE_LOST);
    assert_int_equal(cr.code, LEASE_LOST);
    lease_client_free(admin);
    lease_client_free(c);
}

static void a_deadline_in_the_past_is_exceeded(void **state)
{
    (void)state;
    lease_client_t *c = lease_client_new(fx.base, worker_token);
    lease_client_acquire_t req = acquire_req("conf-7", 30000, 0);
    lease_client_call_t call = {.deadline_at_ms = lease_wall_now_ms() - 60000};
    lease_result_t r;
    assert_int_equal(lease_client_acquire(c, &req, &call, &r), LEASE_DEADLINE_EXCEEDED);
    assert_int_equal(call.http_status, 408); /* the service's answer, not a local guess */
    /* and nothing was acquired */
    assert_int_equal(lease_client_inspect_identity(c, &req.identity, NULL, &r), LEASE_NOT_FOUND);
    lease_client_free(c);
}

static void every_code_is_typed(void **state)
{
    (void)state;
    bool seen[LEASE_CODE_COUNT] = {false};
    lease_client_t *c = lease_client_new(fx.base, worker_token);
    lease_client_t *admin = lease_client_new(fx.base, admin_token);
    lease_client_t *reader = lease_client_new(fx.base, reader_token);
    lease_client_t *stranger = lease_client_new(fx.base, "lsk_not_a_real_token");
    lease_client_call_t call = {0};
    lease_result_t a, r;
    lease_code_t code;

    lease_client_acquire_t req = acquire_req("conf-6", 30000, 0);
    seen[code = lease_client_acquire(c, &req, &call, &a)] = true;
    assert_int_equal(code, LEASE_ACQUIRED);
    lease_client_owner_t own = owner_of(&a.lease, 0);
    seen[code = lease_client_renew(c, &own, NULL, &r)] = true;
    assert_int_equal(code, LEASE_RENEWED);
    seen[code = lease_client_inspect_id(c, a.lease.lease_id, NULL, &r)] = true;
    assert_int_equal(code, LEASE_INSPECTED);
    lease_client_list_t lr = {
        .by = LEASE_LIST_BY_PROGRAM, .tenant_id = TENANT, .program_id = PROGRAM};
    lease_list_result_t page;
    seen[code = lease_client_list(c, &lr, NULL, &page)] = true;
    assert_int_equal(code, LEASE_LISTED);
    lease_list_result_free(&page);

    /* lease_conflict: another request for the held identity */
    lease_client_acquire_t other = req;
    other.execution_id = "exec_other";
    seen[code = lease_client_acquire(c, &other, NULL, &r)] = true;
    assert_int_equal(code, LEASE_CONFLICT);
    /* idempotency_conflict: the first request id with another TTL */
    lease_client_call_t reuse = {.request_id = call.request_id_used};
    lease_client_acquire_t changed = acquire_req("conf-6", 20000, 0);
    seen[code = lease_client_acquire(c, &changed, &reuse, &r)] = true;
    assert_int_equal(code, LEASE_IDEMPOTENCY_CONFLICT);
    /* commit_accepted, then write_conflict on a stale revision */
    lease_write_t doc = {.kind = LEASE_WRITE_DOCUMENT,
                         .key = "conformance/conf-6",
                         .expected_revision = 0,
                         .json = "{}"};
    lease_client_commit_t commit = {.identity = lease_client_identity_of(&a.lease.identity),
                                    .lease_id = a.lease.lease_id,
                                    .fencing_token = a.lease.fencing_token,
                                    .execution_id = "exec_conformance",
                                    .trace_id = TRACE_ID,
                                    .n_writes = 1,
                                    .writes = &doc};
    lease_commit_result_t cr;
    seen[code = lease_client_commit(c, &commit, NULL, &cr)] = true;
    assert_int_equal(code, LEASE_COMMIT_ACCEPTED);
    seen[code = lease_client_commit(c, &commit, NULL, &cr)] = true;
    assert_int_equal(code, LEASE_WRITE_CONFLICT);
    assert_int_equal(cr.current_revision, 1);
    /* lease_lost: a stale fencing token */
    lease_client_owner_t stale = own;
    stale.fencing_token = a.lease.fencing_token + 1000;
    seen[code = lease_client_renew(c, &stale, NULL, &r)] = true;
    assert_int_equal(code, LEASE_LOST);
    /* access_denied: a reader acquires; invalid_credential: no such token */
    seen[code = lease_client_acquire(reader, &other, NULL, &r)] = true;
    assert_int_equal(code, LEASE_ACCESS_DENIED);
    seen[code = lease_client_acquire(stranger, &other, NULL, &r)] = true;
    assert_int_equal(code, LEASE_INVALID_CREDENTIAL);
    /* invalid_lease_request naming the field */
    lease_client_acquire_t bad = acquire_req("bad/target", 30000, 0);
    seen[code = lease_client_acquire(c, &bad, NULL, &r)] = true;
    assert_int_equal(code, LEASE_INVALID_LEASE_REQUEST);
    assert_string_equal(r.field, "lock_identity.target_id");
    /* lease_revoked, then lease_not_found for an id that never existed */
    lease_client_admin_t rv = admin_of(&a.lease, "conformance: revoke");
    seen[code = lease_client_revoke(admin, &rv, NULL, &r)] = true;
    assert_int_equal(code, LEASE_REVOKED);
    seen[code = lease_client_inspect_id(c, "lease_00000000000000000000000000000000", NULL, &r)] =
        true;
    assert_int_equal(code, LEASE_NOT_FOUND);
    /* lease_released */
    lease_result_t b;
    must_acquire(c, "conf-6c", 30000, NULL, &b);
    lease_client_owner_t own_b = owner_of(&b.lease, 0);
    seen[code = lease_client_release(c, &own_b, NULL, &r)] = true;
    assert_int_equal(code, LEASE_RELEASED);
    /* deadline_exceeded */
    lease_client_call_t past = {.deadline_at_ms = lease_wall_now_ms() - 1000};
    seen[code = lease_client_inspect_identity(c, &req.identity, &past, &r)] = true;
    assert_int_equal(code, LEASE_DEADLINE_EXCEEDED);
    /* lease_rate_limited: a leased allowing 2 requests a second */
    const char *slow_env[] = {"LEASE_RATE_LIMIT=2/s", NULL};
    leased_proc_t *slow = http_fx_start_leased(&fx, slow_env);
    lease_client_t *sc = lease_client_new(leased_proc_url(slow), worker_token);
    code = LEASE_INSPECTED;
    for (int i = 0; i < 10 && code != LEASE_RATE_LIMITED; i++)
        code = lease_client_inspect_identity(sc, &req.identity, NULL, &r);
    seen[code] = true;
    assert_int_equal(code, LEASE_RATE_LIMITED);
    assert_true(r.retry_after_ms > 0);
    lease_client_free(sc);
    assert_int_equal(leased_proc_stop(slow), 0);
    /* lease_backend_unavailable: nothing listens (nothing can have happened) */
    lease_client_t *gone = lease_client_new("http://127.0.0.1:1", worker_token);
    seen[code = lease_client_acquire(gone, &other, NULL, &r)] = true;
    assert_int_equal(code, LEASE_BACKEND_UNAVAILABLE);
    lease_client_free(gone);
    /* lease_outcome_unknown: killed_during_acquire_resolves_by_request_id */
    seen[LEASE_OUTCOME_UNKNOWN] = true;

    for (int i = 0; i < LEASE_CODE_COUNT; i++) {
        if (!seen[i])
            printf("code not observed: %s\n", lease_code_name((lease_code_t)i));
        assert_true(seen[i]);
    }
    lease_client_free(stranger);
    lease_client_free(reader);
    lease_client_free(admin);
    lease_client_free(c);
}

/* Releases a lease after a pause, from a thread of its own. */
typedef struct delayed_release {
    lease_client_t *client;
    lease_client_owner_t owner;
    int64_t after_ms;
    lease_code_t code;
    pthread_t thread;
} delayed_release_t;

static void *delayed_release_main(void *arg)
{
    delayed_release_t *d = arg;
    lease_sleep_ms(d->after_ms);
    lease_result_t r;
    d->code = lease_client_release(d->client, &d->owner, NULL, &r);
    return NULL;
}

static void a_late_grant_holds_and_runs(void **state)
{
    (void)state;
    lease_client_t *c = lease_client_new(fx.base, worker_token);
    lease_result_t held;
    must_acquire(c, "conf-8", 30000, NULL, &held);
    delayed_release_t d = {.client = c, .owner = owner_of(&held.lease, 0), .after_ms = 2000};
    pthread_create(&d.thread, NULL, delayed_release_main, &d);

    lease_client_acquire_t req = acquire_req("conf-8", 2000, 3000);
    req.execution_id = "exec_late";
    lease_client_call_t call = {.deadline_ms = 8000};
    lease_result_t late;
    lease_code_t code = lease_client_acquire(c, &req, &call, &late);
    pthread_join(d.thread, NULL);
    assert_int_equal(d.code, LEASE_RELEASED);
    assert_int_equal(code, LEASE_ACQUIRED);
    int64_t took_ms = (call.answered_mono_ns - call.first_sent_mono_ns) / 1000000;
    int64_t anchor_ms = (call.anchor_mono_ns - call.first_sent_mono_ns) / 1000000;
    printf("conformance C: late grant: waited_ms %lld, answer after %lld ms, anchor at +%lld ms\n",
           (long long)late.waited_ms, (long long)took_ms, (long long)anchor_ms);
    assert_true(late.waited_ms >= 1500 && late.waited_ms <= took_ms);
    assert_true(call.anchor_mono_ns == call.first_sent_mono_ns + late.waited_ms * 1000000);

    lease_held_t *w = lease_held_start(c, &late.lease, call.anchor_mono_ns, NULL, &code);
    if (!w)
        fail_msg("the late grant could not be held: %s", lease_code_name(code));
    /* it runs past its TTL, renewed */
    assert_false(readable_within(lease_held_cancel_fd(w), 3000));
    assert_int_equal(lease_held_state(w, NULL), LEASE_HELD_ACTIVE);
    assert_int_equal(lease_held_release(w, 5000, NULL), LEASE_RELEASED);
    lease_held_free(w);
    lease_client_free(c);
}

static int group_setup(void **state)
{
    signal(SIGPIPE, SIG_IGN);
    http_fx_open(&fx, state, "client_conformance");
    http_fx_serve(&fx, NULL);
    worker_token = http_fx_worker(&fx, "prn_conformance");
    admin_token = http_fx_credential(&fx, "prn_conf_admin", "*",
                                     "targets:force-release,targets:revoke,targets:read", true);
    reader_token = http_fx_credential(&fx, "prn_conf_reader", PROGRAM, "targets:read", false);
    second = http_fx_start_leased(&fx, NULL);
    assert_non_null(second);
    return 0;
}

static int group_teardown(void **state)
{
    if (second)
        assert_int_equal(leased_proc_stop(second), 0);
    return http_fx_teardown(state);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(acquire_renew_release),
        cmocka_unit_test(a_hold_outlives_five_ttls),
        cmocka_unit_test(force_release_elsewhere_cancels_within_a_second),
        cmocka_unit_test(killed_during_acquire_resolves_by_request_id),
        cmocka_unit_test(a_commit_after_loss_is_refused),
        cmocka_unit_test(a_deadline_in_the_past_is_exceeded),
        cmocka_unit_test(every_code_is_typed),
        cmocka_unit_test(a_late_grant_holds_and_runs),
    };
    static const http_pg_only_t pg_only[] = {
        {"killed_during_acquire_resolves_by_request_id",
         "holds the acquire inside the store by a Postgres row lock"},
        {NULL, NULL},
    };
    return http_fx_run_group("http_client_conformance", tests, sizeof tests / sizeof tests[0],
                             group_setup, group_teardown, pg_only);
}
