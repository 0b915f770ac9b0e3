/*
 * http_audit_fair_share.c - the audit queue is shared fairly per tenant:
 * when one tenant's events fill it, that tenant's new requests are refused
 * (429), the other tenant's go on, and no event of an admitted request is
 * dropped (issue 34, finding 4). A real leased on a real Postgres (or, with
 * LEASE_TEST_STORE=valkey, a real redis-server: docs/backends.md "Contract
 * tests on both backends"), with a small queue (LEASE_AUDIT_QUEUE_SIZE=16) and a slow writer
 * (LEASE_AUDIT_BATCH=5) so that the flood outruns it for certain.
 *
 * Tenant A repeats one renew-batch of 100 renewals of its lease from
 * several connections: every item is a replay, audited one by one, so each
 * answered batch queues 100 events. Tenant B inspects meanwhile. Then,
 * once the queue is empty:
 * - leased_audit_admission_refused_total > 0 (A was held back) and
 *   leased_audit_events_dropped_total is 0 (and _fallback_total: no batch
 *   the store refused went to the log instead);
 * - every replayed item A was answered has its audit row;
 * - every one of B's requests was answered and has its audit row.
 * An audit row is a row of lease.audit_log on Postgres, an entry of the
 * Stream lease:{leased}:audit on Valkey (docs/backends.md "Audit events",
 * written by the queue through leased_v1_record_audit).
 */
#include "http_common.h"
#include "lease/clock.h"

#define FLOOD_TENANT "tenant-flood"
#define FLOODERS 4
#define FLOOD_S 8
#define BATCH 100
#define B_PAUSE_MS 100
#define B_MAX 256

static http_fx_t fx;
static const char *token_a, *token_b; /* owned by fx */
static char *replay_body;             /* the batch A repeats */

static int setup(void **state)
{
    http_fx_open(&fx, state, "http_ashare");
    token_a = http_fx_worker_of(&fx, "prn_flood", FLOOD_TENANT);
    token_b = http_fx_worker(&fx, "prn_quiet");
    const char *env[] = {"LEASE_AUDIT_QUEUE_SIZE=16", "LEASE_AUDIT_BATCH=5", NULL};
    http_fx_serve(&fx, env);
    return 0;
}

static json_t *flood_identity(void)
{
    return identity_json_of(FLOOD_TENANT, "t-share");
}

typedef struct flooder {
    volatile int *stop;
    long batches_ok, items_replayed, refused, other;
} flooder_t;

static void *flood_main(void *arg)
{
    flooder_t *f = arg;
    http_client_t *c = http_client_new(fx.base, 30000);
    while (!__atomic_load_n(f->stop, __ATOMIC_ACQUIRE)) {
        http_resp_t *r =
            http_client_call(c, "POST", "/v1/leases/renew-batch", token_a, replay_body, NULL, NULL);
        if (r && r->status == 200) {
            f->batches_ok++;
            json_t *res = json_object_get(r->json, "results");
            for (size_t i = 0; i < json_array_size(res); i++)
                if (json_is_true(json_object_get(json_array_get(res, i), "replayed")))
                    f->items_replayed++;
        } else if (r && r->status == 429) {
            f->refused++;
            long long ms = http_resp_int(r, "retry_after_ms");
            usleep((useconds_t)(ms > 0 && ms < 1000 ? ms : 50) * 1000);
        } else {
            f->other++;
            fprintf(stderr, "A answered %ld: %.200s\n", r ? r->status : 0L, r ? r->body : "");
        }
        http_resp_free(r);
    }
    http_client_free(c);
    return NULL;
}

/* A value of the Prometheus text (first sample of name), or -1. */
static double metric(const char *name)
{
    http_resp_t *r = call(fx.base, "GET", "/metrics", NULL, NULL);
    double v = -1;
    size_t n = strlen(name);
    for (const char *p = r->body; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, name, n) == 0 && (p[n] == ' ' || p[n] == '{')) {
            const char *sp = strchr(p, ' ');
            if (sp)
                v = strtod(sp + 1, NULL);
            break;
        }
    }
    http_resp_free(r);
    return v;
}

static long long replay_rows(void)
{
    if (fx.valkey)
        return http_fx_valkey_audit_stat(
            &fx, "count",
            (const char *[]){"tenant_id", FLOOD_TENANT, "request_id", "share-%", NULL});
    return testpg_query_int(fx.db, "SELECT count(*) FROM lease.audit_log"
                                   " WHERE tenant_id = '" FLOOD_TENANT "'"
                                   "   AND request_id LIKE 'share-%'");
}

static long long audit_rows_of(const char correlation_id[40])
{
    if (fx.valkey)
        return http_fx_audit_count(&fx,
                                   (const char *[]){"correlation_id", correlation_id, "event_type",
                                                    "target_lease_inspect", NULL});
    char sql[320];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM lease.audit_log WHERE correlation_id = '%.39s'"
             " AND event_type = 'target_lease_inspect'",
             correlation_id);
    return testpg_query_int(fx.db, sql);
}

static void test_full_queue_holds_back_the_flooding_tenant_only(void **state)
{
    (void)state;
    /* A's lease, renewed 100 times by one batch: repeating the batch then
     * answers 100 stored results */
    http_resp_t *r =
        call_owned(fx.base, "POST", "/v1/leases/acquire", token_a,
                   dump(json_pack("{s:s, s:o, s:s, s:s, s:s}", "request_id", "share-acquire",
                                  "lock_identity", flood_identity(), "service_instance_id",
                                  "inst_1", "execution_id", "exec_1", "job_id", "job_1")));
    check_reply(r, 200, "lease_acquired", NULL);
    json_t *lease = json_deep_copy(lease_of(r));
    http_resp_free(r);
    json_t *items = json_array();
    for (int i = 0; i < BATCH; i++) {
        char rid[32];
        snprintf(rid, sizeof rid, "share-%d", i);
        json_array_append_new(items, json_pack("{s:s, s:o, s:O, s:O, s:s}", "request_id", rid,
                                               "lock_identity", flood_identity(), "lease_id",
                                               json_object_get(lease, "lease_id"), "fencing_token",
                                               json_object_get(lease, "fencing_token"),
                                               "service_instance_id", "inst_1"));
    }
    json_decref(lease);
    replay_body = dump(json_pack("{s:o}", "renewals", items));
    r = call(fx.base, "POST", "/v1/leases/renew-batch", token_a, replay_body);
    check_reply(r, 200, "lease_renewed", NULL);
    http_resp_free(r);
    assert_true(test_wait_until(10000, metric("leased_audit_queue_depth") == 0));
    usleep(600000);
    long long rows_before = replay_rows();

    volatile int stop = 0;
    flooder_t f[FLOODERS];
    pthread_t th[FLOODERS];
    for (int i = 0; i < FLOODERS; i++) {
        f[i] = (flooder_t){.stop = &stop};
        assert_int_equal(pthread_create(&th[i], NULL, flood_main, &f[i]), 0);
    }
    static char corr[B_MAX][40];
    int n_b = 0, b_ok = 0;
    http_client_t *b = http_client_new(fx.base, 30000);
    int64_t end = lease_mono_now_ns() + (int64_t)FLOOD_S * 1000000000;
    while (lease_mono_now_ns() < end && n_b < B_MAX) {
        r = http_client_call(b, "POST", "/v1/leases/inspect", token_b,
                             "{\"lock_identity\": {\"tenant_id\": \"" TENANT
                             "\", \"program_id\": \"" PROGRAM
                             "\", \"target_namespace\": \"" NAMESPACE
                             "\", \"target_id\": \"t-quiet\", \"actor_name\": \"" ACTOR
                             "\", \"workflow_name\": \"default\"}}",
                             NULL, NULL);
        if (r && http_resp_str(r, "correlation_id")) {
            snprintf(corr[n_b++], sizeof corr[0], "%s", http_resp_str(r, "correlation_id"));
            if (r->status == 404)
                b_ok++; /* nothing is held there: lease_not_found */
            else
                fprintf(stderr, "B answered %ld: %s\n", r->status, r->body);
        }
        http_resp_free(r);
        usleep(B_PAUSE_MS * 1000);
    }
    http_client_free(b);
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    long batches = 0, replayed = 0, refused = 0, other = 0;
    for (int i = 0; i < FLOODERS; i++) {
        pthread_join(th[i], NULL);
        batches += f[i].batches_ok;
        replayed += f[i].items_replayed;
        refused += f[i].refused;
        other += f[i].other;
    }

    assert_true(test_wait_until(20000, metric("leased_audit_queue_depth") == 0));
    usleep(600000); /* the batch the writer took last is being written */
    double dropped = metric("leased_audit_events_dropped_total");
    double fallback = metric("leased_audit_events_fallback_total");
    double share_refusals = metric("leased_audit_admission_refused_total");
    long long replay_audited = replay_rows() - rows_before;
    long missing = 0;
    for (int i = 0; i < n_b; i++)
        if (audit_rows_of(corr[i]) < 1)
            missing++;
    printf("A: %ld batches answered 200 (%ld items replayed), %ld refused 429, %ld other\n",
           batches, replayed, refused, other);
    printf("audit: %lld of A's replayed items audited; %.0f admissions refused for the audit "
           "share; dropped %.0f, to the log %.0f\n",
           replay_audited, share_refusals, dropped, fallback);
    printf("B: %d inspects answered (%d lease_not_found), %ld without an audit row\n", n_b, b_ok,
           missing);

    assert_true(batches > 0);
    assert_true(share_refusals > 0); /* A was held back at its share */
    assert_true(refused >= share_refusals);
    assert_true(dropped == 0);
    assert_true(fallback == 0);
    assert_int_equal(replay_audited, replayed);
    assert_true(n_b >= FLOOD_S * 1000 / B_PAUSE_MS / 4);
    assert_int_equal(b_ok, n_b); /* B never refused */
    assert_int_equal(missing, 0);
    free(replay_body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_queue_holds_back_the_flooding_tenant_only),
    };
    return cmocka_run_group_tests(tests, setup, http_fx_teardown);
}
