/*
 * http_held_batch.c - the C client's held leases renew every lease a process holds
 * through one client in one POST /v1/leases/renew-batch per period
 * (issue 20), against a real leased and Postgres:
 *
 *  1. four leases held through one client (TTL 1 500 ms) for three TTLs:
 *     leased's own request counters show the renewals went out as batches
 *     (no /v1/leases/renew at all, at most one batch per renewal period and
 *     client), and every lease is active with its expiry moved on;
 *  2. one of three held leases force-released by an administrator: that
 *     holder alone is cancelled (lease_lost) by its batch item, the other
 *     two keep renewing in the same batches.
 */
#include <poll.h>

#include "http_common.h"
#include "lease/client.h"
#include "lease/held.h"

#define INSTANCE "batch-worker-1"
#define TTL_MS 1500

static http_fx_t fx;
static const char *worker_token;
static const char *admin_token;

static int setup(void **state)
{
    http_fx_open(&fx, state, "http_wbatch");
    worker_token = http_fx_worker(&fx, "prn_wbatch");
    admin_token = http_fx_credential(&fx, "prn_wbatch_admin", "*",
                                     "targets:force-release,targets:read", true);
    http_fx_serve(&fx, NULL);
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

/* Acquires target through c and starts holding it (no watch: renewal is
 * what is under test). */
static lease_held_t *hold(lease_client_t *c, const char *target, lease_record_t *lease)
{
    lease_client_acquire_t req = {
        .identity = {TENANT, PROGRAM, NAMESPACE, target, ACTOR, "default", NULL},
        .service_instance_id = INSTANCE,
        .execution_id = "exec_wbatch",
        .job_id = "job_wbatch",
        .ttl_ms = TTL_MS,
    };
    lease_client_call_t call = {0};
    lease_result_t a;
    assert_int_equal(lease_client_acquire(c, &req, &call, &a), LEASE_ACQUIRED);
    *lease = a.lease;
    lease_held_config_t cfg = {.no_watch = true};
    lease_code_t code;
    lease_held_t *w = lease_held_start(c, &a.lease, call.anchor_mono_ns, &cfg, &code);
    assert_non_null(w);
    return w;
}

static void renewals_of_a_process_go_out_as_batches(void **state)
{
    (void)state;
    enum { N = 4 };
    lease_client_t *c = lease_client_new(fx.base, worker_token);
    assert_non_null(c);
    lease_held_t *w[N];
    lease_record_t l[N];
    for (int i = 0; i < N; i++) {
        char target[32];
        snprintf(target, sizeof target, "t-wb-%d", i);
        w[i] = hold(c, target, &l[i]);
    }
    long long renew_before = requests_of("renew");
    long long batch_before = requests_of("renew_batch");
    /* three TTLs: about eight renewal periods of G/3 */
    assert_false(readable_within(lease_held_cancel_fd(w[0]), 3 * TTL_MS));
    long long renews = requests_of("renew") - renew_before;
    long long batches = requests_of("renew_batch") - batch_before;
    printf("worker batch: %d leases held %d ms through one client: %lld renew-batch calls, "
           "%lld single renewals\n",
           N, 3 * TTL_MS, batches, renews);
    assert_int_equal(renews, 0);
    assert_true(batches >= 4);             /* at least 3 periods of G/3 in 3 G, each renewed */
    assert_true(batches <= 3 * 3 * 2 + 1); /* not one per lease (4 x 9 = 36 would be) */
    for (int i = 0; i < N; i++) {
        assert_int_equal(lease_held_state(w[i], NULL), LEASE_HELD_ACTIVE);
        lease_result_t seen;
        assert_int_equal(lease_client_inspect_id(c, l[i].lease_id, NULL, &seen), LEASE_INSPECTED);
        assert_int_equal(seen.lease.state, LEASE_STATE_ACTIVE);
        assert_true(seen.lease.expires_at_ms > l[i].expires_at_ms + TTL_MS);
    }
    for (int i = 0; i < N; i++) {
        assert_int_equal(lease_held_release(w[i], 5000, NULL), LEASE_RELEASED);
        lease_held_free(w[i]);
    }
    lease_client_free(c);
}

static void one_loss_cancels_only_its_holder(void **state)
{
    (void)state;
    enum { N = 3 };
    lease_client_t *c = lease_client_new(fx.base, worker_token);
    lease_client_t *admin = lease_client_new(fx.base, admin_token);
    assert_non_null(c);
    assert_non_null(admin);
    lease_held_t *w[N];
    lease_record_t l[N];
    for (int i = 0; i < N; i++) {
        char target[32];
        snprintf(target, sizeof target, "t-wb-loss-%d", i);
        w[i] = hold(c, target, &l[i]);
    }
    assert_false(readable_within(lease_held_cancel_fd(w[1]), TTL_MS / 2));
    lease_client_admin_t fr = {lease_client_identity_of(&l[1].identity), l[1].lease_id,
                               l[1].fencing_token, "worker batch test", NULL};
    lease_result_t r;
    assert_int_equal(lease_client_force_release(admin, &fr, NULL, &r), LEASE_RELEASED);
    long long batch_before = requests_of("renew_batch");
    /* the next batch carries the lost lease: its holder alone is cancelled */
    assert_true(readable_within(lease_held_cancel_fd(w[1]), TTL_MS));
    lease_code_t code;
    assert_int_equal(lease_held_state(w[1], &code), LEASE_HELD_LOST);
    assert_int_equal(code, LEASE_LOST);
    assert_true(requests_of("renew_batch") > batch_before); /* told by a batch */
    /* the others renew on, in batches, past two more TTLs */
    assert_false(readable_within(lease_held_cancel_fd(w[0]), 2 * TTL_MS));
    for (int i = 0; i < N; i += 2) {
        assert_int_equal(lease_held_state(w[i], NULL), LEASE_HELD_ACTIVE);
        lease_result_t seen;
        assert_int_equal(lease_client_inspect_id(c, l[i].lease_id, NULL, &seen), LEASE_INSPECTED);
        assert_int_equal(seen.lease.state, LEASE_STATE_ACTIVE);
        assert_true(seen.lease.expires_at_ms > l[i].expires_at_ms + TTL_MS);
    }
    lease_held_stop(w[1]);
    lease_held_free(w[1]);
    for (int i = 0; i < N; i += 2) {
        assert_int_equal(lease_held_release(w[i], 5000, NULL), LEASE_RELEASED);
        lease_held_free(w[i]);
    }
    lease_client_free(admin);
    lease_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(renewals_of_a_process_go_out_as_batches),
        cmocka_unit_test(one_loss_cancels_only_its_holder),
    };
    return cmocka_run_group_tests(tests, setup, http_fx_teardown);
}
