/*
 * http_held_sessions.c - the C client's held leases live in the client's
 * session by default (issue 37), against a real leased and Postgres:
 *
 *  1. six leases held through one client (lease_held_acquire, TTL 1 500 ms)
 *     for three TTLs: all in one session; leased's own request counters
 *     show keep-alives only (no /v1/leases/renew, no renew-batch), about
 *     one per period, not one per lease; the session row's renewed_at and
 *     every lease's expires_at moved on;
 *  2. the session closed from outside (the same credential, another
 *     client): the next keep-alive answers lease_lost and every held lease
 *     of the session is cancelled LEASE_HELD_LOST (leased's watch polls
 *     once a minute here, so the keep-alive is what tells);
 *  3. keep-alive answers that never arrive in time (a proxy delays every
 *     answer): every held lease is cancelled LEASE_HELD_UNCONFIRMED, and
 *     before the expiry of the last confirmed keep-alive's window;
 *  4. the opt-out (per_lease_renewal): acquired without a session and
 *     renewed on its own.
 */
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>

#include "http_common.h"
#include "lease/client.h"
#include "lease/clock.h"
#include "lease/held.h"
#include "tcp_proxy.h"

#define INSTANCE "session-worker-1"
#define TTL_MS 1500

static http_fx_t fx;
static const char *worker_token;

static int setup(void **state)
{
    http_fx_open(&fx, state, "http_hsess");
    worker_token = http_fx_worker(&fx, "prn_hsess");
    /* the watch learns of an end only by its poll, once a minute: what ends
     * a lease in these tests (a session closed, answers late) is then told
     * by the session's keep-alive, the path under test */
    const char *env[] = {"LEASE_WATCH_LISTEN=false", "LEASE_WATCH_POLL_MS=60000", NULL};
    http_fx_serve(&fx, env);
    return 0;
}

/* leased_http_requests_total of a route, summed over its codes. */
static long long requests_of(const char *route)
{
    http_resp_t *r = call(fx.base, "GET", "/metrics", NULL, NULL);
    assert_int_equal(r->status, 200);
    char prefix[128];
    int len = snprintf(prefix, sizeof prefix, "leased_http_requests_total{route=\"%s\",", route);
    long long sum = 0;
    for (const char *p = r->body; (p = strstr(p, prefix)) != NULL; p += len) {
        const char *value = strchr(p, ' ');
        if (value)
            sum += atoll(value + 1);
    }
    http_resp_free(r);
    return sum;
}

static bool readable_within(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, ms) == 1;
}

/* When a held lease left ACTIVE (monotonic ns), set by its callback. */
typedef struct cancel_note {
    _Atomic int64_t at;
} cancel_note_t;

static void note_cancel(void *arg, lease_held_state_t why, lease_code_t code)
{
    (void)why;
    (void)code;
    cancel_note_t *note = arg;
    atomic_store(&note->at, lease_mono_now_ns());
}

/* Holds target through c the default way (per_lease false) or opted out;
 * cancelled_at (may be NULL) receives when it was cancelled. */
static lease_held_t *hold_noting(lease_client_t *c, const char *target, lease_record_t *lease,
                                 bool per_lease, cancel_note_t *cancelled_at)
{
    lease_client_acquire_t req = {
        .identity = {TENANT, PROGRAM, NAMESPACE, target, ACTOR, "default", NULL},
        .service_instance_id = INSTANCE,
        .execution_id = "exec_hsess",
        .job_id = "job_hsess",
        .ttl_ms = TTL_MS,
    };
    lease_held_config_t cfg = {.per_lease_renewal = per_lease,
                               .on_cancel = cancelled_at ? note_cancel : NULL,
                               .cancel_arg = cancelled_at};
    lease_client_call_t call = {0};
    lease_result_t a;
    lease_code_t code;
    lease_held_t *h = lease_held_acquire(c, &req, &call, &a, &cfg, &code);
    if (!h)
        fail_msg("hold of %s: %s (field %s)", target, lease_code_name(code), a.field);
    *lease = a.lease;
    return h;
}

static lease_held_t *hold(lease_client_t *c, const char *target, lease_record_t *lease,
                          bool per_lease)
{
    return hold_noting(c, target, lease, per_lease, NULL);
}

static long long sql_int(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static long long sql_int(const char *fmt, ...)
{
    char sql[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    return testpg_query_int(fx.db, sql);
}

static void many_leases_one_keepalive_per_period(void **state)
{
    (void)state;
    enum { N = 6 };
    lease_client_t *c = lease_client_new(fx.base, worker_token);
    assert_non_null(c);
    lease_held_t *h[N];
    lease_record_t l[N];
    for (int i = 0; i < N; i++) {
        char target[32];
        snprintf(target, sizeof target, "t-hs-%d", i);
        h[i] = hold(c, target, &l[i], false);
    }
    /* one session for all of them, the client's */
    assert_true(l[0].session_id[0] != '\0');
    for (int i = 1; i < N; i++)
        assert_string_equal(l[i].session_id, l[0].session_id);
    long long opened =
        sql_int("SELECT count(*) FROM lease.sessions WHERE session_id = '%s'", l[0].session_id);
    assert_int_equal(opened, 1);
    long long renewed_before = sql_int("SELECT (extract(epoch FROM renewed_at) * 1000)::bigint "
                                       "FROM lease.sessions WHERE session_id = '%s'",
                                       l[0].session_id);

    long long renew_before = requests_of("renew");
    long long batch_before = requests_of("renew_batch");
    long long keep_before = requests_of("session_keepalive");
    /* three TTLs: about nine keep-alive periods of TTL/3 */
    assert_false(readable_within(lease_held_cancel_fd(h[0]), 3 * TTL_MS));
    long long renews = requests_of("renew") - renew_before;
    long long batches = requests_of("renew_batch") - batch_before;
    long long keeps = requests_of("session_keepalive") - keep_before;
    printf("held sessions: %d leases held %d ms through one client: %lld keep-alives, "
           "%lld renew-batch calls, %lld single renewals\n",
           N, 3 * TTL_MS, keeps, batches, renews);
    assert_int_equal(renews, 0);
    assert_int_equal(batches, 0);
    assert_true(keeps >= 4);             /* kept alive, each period */
    assert_true(keeps <= 3 * 3 * 2 + 1); /* one per period, not one per lease (6 x 9) */
    assert_true(sql_int("SELECT (extract(epoch FROM renewed_at) * 1000)::bigint "
                        "FROM lease.sessions WHERE session_id = '%s'",
                        l[0].session_id) > renewed_before + TTL_MS);
    for (int i = 0; i < N; i++) {
        assert_int_equal(lease_held_state(h[i], NULL), LEASE_HELD_ACTIVE);
        lease_result_t seen;
        assert_int_equal(lease_client_inspect_id(c, l[i].lease_id, NULL, &seen), LEASE_INSPECTED);
        assert_int_equal(seen.lease.state, LEASE_STATE_ACTIVE);
        assert_true(seen.lease.expires_at_ms > l[i].expires_at_ms + TTL_MS);
    }
    for (int i = 0; i < N; i++) {
        assert_int_equal(lease_held_release(h[i], 5000, NULL), LEASE_RELEASED);
        lease_held_free(h[i]);
    }
    lease_client_free(c);
}

static void a_closed_session_loses_every_lease(void **state)
{
    (void)state;
    enum { N = 4 };
    lease_client_t *c = lease_client_new(fx.base, worker_token);
    lease_client_t *outside = lease_client_new(fx.base, worker_token);
    assert_non_null(c);
    assert_non_null(outside);
    lease_held_t *h[N];
    lease_record_t l[N];
    for (int i = 0; i < N; i++) {
        char target[32];
        snprintf(target, sizeof target, "t-hs-close-%d", i);
        h[i] = hold(c, target, &l[i], false);
    }
    assert_false(readable_within(lease_held_cancel_fd(h[0]), TTL_MS / 2));
    lease_result_t closed;
    assert_int_equal(lease_client_session_close(outside, l[0].session_id, NULL, &closed),
                     LEASE_RELEASED);
    assert_int_equal(closed.leases_ended, N);
    long long keep_before = requests_of("session_keepalive");
    /* the next keep-alive answers lease_lost: every lease of it is lost */
    for (int i = 0; i < N; i++) {
        assert_true(readable_within(lease_held_cancel_fd(h[i]), 2 * TTL_MS));
        lease_code_t code;
        assert_int_equal(lease_held_state(h[i], &code), LEASE_HELD_LOST);
        assert_int_equal(code, LEASE_LOST);
    }
    assert_true(requests_of("session_keepalive") > keep_before); /* told by a keep-alive */
    for (int i = 0; i < N; i++) {
        lease_held_stop(h[i]);
        lease_held_free(h[i]);
    }
    /* the next hold opens a new session */
    lease_record_t again;
    lease_held_t *next = hold(c, "t-hs-close-again", &again, false);
    assert_true(again.session_id[0] != '\0');
    assert_string_not_equal(again.session_id, l[0].session_id);
    assert_int_equal(lease_held_release(next, 5000, NULL), LEASE_RELEASED);
    lease_held_free(next);
    lease_client_free(outside);
    lease_client_free(c);
}

static void keepalives_without_answers_in_time_lose_every_lease(void **state)
{
    (void)state;
    enum { N = 3 };
    tcp_proxy_t px;
    assert_true(tcp_proxy_start(&px, (uint16_t)leased_proc_port(fx.srv)));
    char url[64];
    tcp_proxy_url(&px, url, sizeof url);
    lease_client_t *c = lease_client_new(url, worker_token);
    assert_non_null(c);
    lease_held_t *h[N];
    lease_record_t l[N];
    static cancel_note_t cancelled_at[N];
    for (int i = 0; i < N; i++) {
        char target[32];
        snprintf(target, sizeof target, "t-hs-slow-%d", i);
        h[i] = hold_noting(c, target, &l[i], false, &cancelled_at[i]);
    }
    assert_false(readable_within(lease_held_cancel_fd(h[0]), TTL_MS / 2));
    /* from now on every answer comes after the whole window */
    atomic_store(&px.delay_ms, 4 * TTL_MS);
    int64_t delayed_at = lease_mono_now_ns();
    for (int i = 0; i < N; i++) {
        assert_true(readable_within(lease_held_cancel_fd(h[i]), 3 * TTL_MS));
        /* the fd is written before the callback runs: wait for its note */
        assert_true(test_wait_until(1000, atomic_load(&cancelled_at[i].at) != 0));
        int64_t at = atomic_load(&cancelled_at[i].at);
        lease_code_t code;
        assert_int_equal(lease_held_state(h[i], &code), LEASE_HELD_UNCONFIRMED);
        /* never alive past what a confirmed keep-alive granted (a window
         * taken before the delay, or one a keep-alive sent before it and
         * answered in time gave: both end within a TTL of the delay). The
         * cancel point is the margin (150 ms) before that expiry; the
         * renewal thread's wake-up on a loaded machine may come later, so
         * 100 ms past the expiry are allowed for it. */
        lease_held_window_t w;
        lease_held_snapshot(h[i], NULL, &w);
        assert_true(at > delayed_at);
        assert_true(at <= w.expiry_ns + 100 * 1000000LL);
        assert_true(w.expiry_ns <= delayed_at + (int64_t)TTL_MS * 1000000);
    }
    printf("held sessions: answers delayed to every lease cancelled: %lld ms (information only)\n",
           (long long)((lease_mono_now_ns() - delayed_at) / 1000000));
    for (int i = 0; i < N; i++) {
        lease_held_stop(h[i]);
        lease_held_free(h[i]);
    }
    lease_client_free(c);
    atomic_store(&px.delay_ms, 0);
    tcp_proxy_stop(&px);
}

static void per_lease_renewal_opts_out(void **state)
{
    (void)state;
    lease_client_t *c = lease_client_new(fx.base, worker_token);
    assert_non_null(c);
    lease_record_t l;
    lease_held_t *h = hold(c, "t-hs-optout", &l, true);
    assert_string_equal(l.session_id, "");
    long long renew_before = requests_of("renew") + requests_of("renew_batch");
    long long keep_before = requests_of("session_keepalive");
    assert_false(readable_within(lease_held_cancel_fd(h), 2 * TTL_MS));
    assert_true(requests_of("renew") + requests_of("renew_batch") > renew_before);
    assert_int_equal(requests_of("session_keepalive"), keep_before);
    assert_int_equal(lease_held_release(h, 5000, NULL), LEASE_RELEASED);
    lease_held_free(h);
    lease_client_free(c);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* the proxy writes to sockets that may close */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(many_leases_one_keepalive_per_period),
        cmocka_unit_test(a_closed_session_loses_every_lease),
        cmocka_unit_test(keepalives_without_answers_in_time_lose_every_lease),
        cmocka_unit_test(per_lease_renewal_opts_out),
    };
    return cmocka_run_group_tests(tests, setup, http_fx_teardown);
}
