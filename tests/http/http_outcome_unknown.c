/*
 * http_outcome_unknown.c - lease_outcome_unknown reached for real: leased's
 * database sessions are terminated while a renew it sent waits inside the
 * database on a row lock; the reply is 503 lease_outcome_unknown, and
 * repeating the request id resolves it (the renew happens once).
 */
#include <libpq-fe.h>
#include <pthread.h>

#include "http_common.h"

static struct {
    char *db;
    leased_proc_t *srv;
    const char *base;
    char *token;
} fx;

static int setup(void **state)
{
    (void)state;
    fx.db = testpg_create_db("http_unknown");
    fx.token =
        leased_proc_credential(fx.db,
                               &(leased_cred_spec_t){.principal = "prn_outage",
                                                     .tenant = TENANT,
                                                     .program = PROGRAM,
                                                     .capabilities = "targets:lease,targets:read"},
                               NULL);
    const char *env[] = {"LEASE_DB_CONNECT_TIMEOUT_MS=500", NULL};
    fx.srv = leased_proc_start(fx.db, env);
    fx.base = leased_proc_url(fx.srv);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    assert_int_equal(leased_proc_stop(fx.srv), 0);
    testpg_drop_db(fx.db);
    free(fx.db);
    free(fx.token);
    return 0;
}

typedef struct pending {
    char *body;
    http_resp_t *resp;
} pending_t;

static void *send_renew(void *arg)
{
    pending_t *p = arg;
    http_client_t *c = http_client_new(fx.base, 20000);
    p->resp = http_client_call(c, "POST", "/v1/leases/renew", fx.token, p->body, NULL, NULL);
    http_client_free(c);
    return NULL;
}

static void test_outcome_unknown(void **state)
{
    (void)state;
    http_resp_t *a = call_owned(fx.base, "POST", "/v1/leases/acquire", fx.token,
                                acquire_body("unk-acq", "t-unknown"));
    check_reply(a, 200, "lease_acquired", NULL);
    json_t *lease = json_deep_copy(lease_of(a));
    http_resp_free(a);

    PGconn *blocker = PQconnectdb(fx.db);
    assert_int_equal(PQstatus(blocker), CONNECTION_OK);
    PGresult *res = PQexec(blocker, "BEGIN; SELECT 1 FROM lease.locks WHERE target_id = "
                                    "'t-unknown' FOR UPDATE");
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    PQclear(res);

    json_t *b = parse_owned(owner_body("unk-renew", "t-unknown", lease));
    json_object_set_new(b, "deadline_ms", json_integer(15000));
    pending_t p = {dump(b), NULL};
    pthread_t th;
    pthread_create(&th, NULL, send_renew, &p);
    long long waiting = 0;
    for (int i = 0; i < 200 && waiting == 0; i++) {
        usleep(20000);
        waiting = testpg_query_int(
            fx.db, "SELECT count(*) FROM pg_stat_activity WHERE "
                   "datname = current_database() AND application_name = 'leased' AND "
                   "wait_event_type = "
                   "'Lock'");
    }
    assert_int_equal(waiting, 1);
    /* the renew was sent and is inside the database: end leased's sessions */
    assert_true(testpg_terminate_backends(fx.db, "leased") >= 1);
    pthread_join(th, NULL);
    check_reply(p.resp, 503, "lease_outcome_unknown", NULL);
    assert_true(json_is_true(json_object_get(p.resp->json, "retryable")));
    http_resp_free(p.resp);
    res = PQexec(blocker, "ROLLBACK");
    PQclear(res);
    PQfinish(blocker);

    /* resolving by the same request id: the renew never committed, so it
     * happens now, once */
    http_resp_t *r = call(fx.base, "POST", "/v1/leases/renew", fx.token, p.body);
    check_reply(r, 200, "lease_renewed", NULL);
    assert_null(json_object_get(r->json, "replayed"));
    http_resp_free(r);
    r = call(fx.base, "POST", "/v1/leases/renew", fx.token, p.body);
    check_reply(r, 200, "lease_renewed", NULL);
    assert_true(json_is_true(json_object_get(r->json, "replayed")));
    http_resp_free(r);
    free(p.body);
    json_decref(lease);
    /* the metric counts it */
    r = call(fx.base, "GET", "/metrics", NULL, NULL);
    assert_non_null(strstr(r->body, "leased_db_outcome_unknown_total 1"));
    assert_non_null(strstr(
        r->body, "leased_http_requests_total{route=\"renew\",code=\"lease_outcome_unknown\"} 1"));
    http_resp_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_outcome_unknown),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
