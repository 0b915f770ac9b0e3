/*
 * http_audit_flood.c - one tenant's flood of refused batch items does not
 * cost another tenant its audit (issue 34, finding 4), against a real
 * leased on a real Postgres with its default settings (or, with
 * LEASE_TEST_STORE=valkey, on a real redis-server: docs/backends.md
 * "Contract tests on both backends").
 *
 * Tenant A renews batches of 100 leases that do not exist (every item is
 * lease_lost) from several connections for FLOOD_S seconds, while tenant B
 * inspects once every B_PAUSE_MS. Then, once the audit queue is empty:
 * - every one of B's answered requests has its audit row (found by the
 *   correlation id its answer carried);
 * - leased_audit_events_dropped_total is 0 (and _fallback_total: no
 *   batch the store refused went to the log instead);
 * - A's refused items are aggregated: at most one lease_lost row per batch,
 *   the rows' event_count summing to every refused item A was answered;
 * - leased's log grew by far fewer lines than A had items refused (before:
 *   one warning line per dropped event).
 * What each run measured is printed (the figures of the report).
 * A row is a row of lease.audit_log on Postgres, an entry of the Stream
 * lease:{leased}:audit on Valkey (docs/backends.md "Audit events": the
 * queue's batches through leased_v1_record_audit, event_count absent when
 * an entry stands for one event).
 */
#include "http_common.h"
#include "lease/clock.h"

#define FLOOD_TENANT "tenant-flood"
#define FLOODERS 4
#define FLOOD_S 10
#define BATCH 100
#define B_PAUSE_MS 100
#define B_MAX 256

static http_fx_t fx;
static const char *token_a, *token_b; /* owned by fx */

static int setup(void **state)
{
    http_fx_open(&fx, state, "http_aflood");
    token_a = http_fx_worker_of(&fx, "prn_flood", FLOOD_TENANT);
    token_b = http_fx_worker(&fx, "prn_quiet");
    http_fx_serve(&fx, NULL);
    return 0;
}

typedef struct flooder {
    int index;
    volatile int *stop;
    long batches_ok, items_lost, refused, other;
} flooder_t;

/* A renew-batch of BATCH leases of A's that do not exist (new request ids
 * each time, so nothing is a replay). */
static char *unknown_batch(int who, long round)
{
    json_t *items = json_array();
    for (int i = 0; i < BATCH; i++) {
        char rid[64], lid[64];
        snprintf(rid, sizeof rid, "fl-%d-%ld-%d", who, round, i);
        snprintf(lid, sizeof lid, "lease-none-%d-%ld-%d", who, round, i);
        json_t *id = identity_json_of(FLOOD_TENANT, "t-flood");
        json_array_append_new(items,
                              json_pack("{s:s, s:o, s:s, s:i, s:s}", "request_id", rid,
                                        "lock_identity", id, "lease_id", lid, "fencing_token", 1,
                                        "service_instance_id", "inst_flood"));
    }
    return dump(json_pack("{s:o}", "renewals", items));
}

static void *flood_main(void *arg)
{
    flooder_t *f = arg;
    http_client_t *c = http_client_new(fx.base, 30000);
    for (long round = 0; !__atomic_load_n(f->stop, __ATOMIC_ACQUIRE); round++) {
        char *body = unknown_batch(f->index, round);
        http_resp_t *r =
            http_client_call(c, "POST", "/v1/leases/renew-batch", token_a, body, NULL, NULL);
        free(body);
        if (r && r->status == 200) {
            f->batches_ok++;
            json_t *res = json_object_get(r->json, "results");
            for (size_t i = 0; i < json_array_size(res); i++) {
                const char *code =
                    json_string_value(json_object_get(json_array_get(res, i), "code"));
                if (code && strcmp(code, "lease_lost") == 0)
                    f->items_lost++;
            }
        } else if (r && (r->status == 429 || r->status == 503)) {
            f->refused++;
            /* refused: come back after the hint, as a client should */
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

static int log_lines(void)
{
    return leased_proc_log_count(fx.srv, "\n");
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

static void test_flood_of_refused_items_costs_no_other_audit(void **state)
{
    (void)state;
    volatile int stop = 0;
    flooder_t f[FLOODERS];
    pthread_t th[FLOODERS];
    int lines_before = log_lines();
    for (int i = 0; i < FLOODERS; i++) {
        f[i] = (flooder_t){.index = i, .stop = &stop};
        assert_int_equal(pthread_create(&th[i], NULL, flood_main, &f[i]), 0);
    }

    /* B: one inspect at a time, each answer's correlation id kept */
    static char corr[B_MAX][40];
    int n_b = 0, b_ok = 0;
    http_client_t *b = http_client_new(fx.base, 30000);
    int64_t end = lease_mono_now_ns() + (int64_t)FLOOD_S * 1000000000;
    while (lease_mono_now_ns() < end && n_b < B_MAX) {
        http_resp_t *r = http_client_call(b, "POST", "/v1/leases/inspect", token_b,
                                          "{\"lock_identity\": {\"tenant_id\": \"" TENANT
                                          "\", \"program_id\": \"" PROGRAM
                                          "\", \"target_namespace\": \"" NAMESPACE
                                          "\", \"target_id\": \"t-quiet\", \"actor_name\": "
                                          "\"" ACTOR "\", \"workflow_name\": \"default\"}}",
                                          NULL, NULL);
        if (r && http_resp_str(r, "correlation_id")) {
            snprintf(corr[n_b++], sizeof corr[0], "%s", http_resp_str(r, "correlation_id"));
            if (r->status == 404)
                b_ok++; /* nothing is held there: lease_not_found */
        }
        http_resp_free(r);
        usleep(B_PAUSE_MS * 1000);
    }
    http_client_free(b);
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    long batches = 0, lost = 0, refused = 0, other = 0;
    for (int i = 0; i < FLOODERS; i++) {
        pthread_join(th[i], NULL);
        batches += f[i].batches_ok;
        lost += f[i].items_lost;
        refused += f[i].refused;
        other += f[i].other;
    }
    int lines_flood = log_lines() - lines_before;

    /* everything queued reaches the database (or is counted dropped) */
    assert_true(test_wait_until(20000, metric("leased_audit_queue_depth") == 0));
    usleep(600000); /* the batch the writer took last is being written */
    double dropped = metric("leased_audit_events_dropped_total");
    double fallback = metric("leased_audit_events_fallback_total");
    long missing = 0;
    for (int i = 0; i < n_b; i++)
        if (audit_rows_of(corr[i]) < 1)
            missing++;
    long long lost_rows, lost_counted, largest;
    if (fx.valkey) {
        const char *lost_of_a[] = {"tenant_id", FLOOD_TENANT, "code", "lease_lost", NULL};
        lost_rows = http_fx_valkey_audit_stat(&fx, "count", lost_of_a);
        lost_counted = http_fx_valkey_audit_stat(&fx, "sum", lost_of_a);
        largest = http_fx_valkey_audit_stat(&fx, "max", lost_of_a);
    } else {
        lost_rows = testpg_query_int(fx.db, "SELECT count(*) FROM lease.audit_log"
                                            " WHERE tenant_id = '" FLOOD_TENANT "'"
                                            "   AND result_code = 'lease_lost'");
        lost_counted =
            testpg_query_int(fx.db, "SELECT coalesce(sum(event_count), 0) FROM lease.audit_log"
                                    " WHERE tenant_id = '" FLOOD_TENANT "'"
                                    "   AND result_code = 'lease_lost'");
        largest = testpg_query_int(fx.db, "SELECT coalesce(max(event_count), 0)"
                                          " FROM lease.audit_log"
                                          " WHERE tenant_id = '" FLOOD_TENANT "'"
                                          "   AND result_code = 'lease_lost'");
    }
    printf("A: %ld batches answered 200 (%ld items lease_lost), %ld refused 429/503, %ld other\n",
           batches, lost, refused, other);
    printf("B: %d inspects answered (%d lease_not_found), %ld without an audit row\n", n_b, b_ok,
           missing);
    printf("audit: dropped %.0f, to the log %.0f; A's lease_lost rows %lld standing for %lld items "
           "(largest "
           "event_count %lld)\n",
           dropped, fallback, lost_rows, lost_counted, largest);
    printf("log: %d lines during the flood\n", lines_flood);

    assert_true(batches > 0);
    assert_true(n_b >= FLOOD_S * 1000 / B_PAUSE_MS / 4); /* B was answered throughout */
    assert_int_equal(b_ok, n_b);
    assert_int_equal(missing, 0);
    assert_true(dropped == 0);
    assert_true(fallback == 0);
    /* one row per batch at most, and every refused item accounted for */
    assert_true(lost_rows <= batches);
    assert_true(largest > 1);
    assert_int_equal(lost_counted, lost);
    /* not a line per refused item: a line per request answered, a few more */
    assert_true(lines_flood < lost / 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flood_of_refused_items_costs_no_other_audit),
    };
    return cmocka_run_group_tests(tests, setup, http_fx_teardown);
}
