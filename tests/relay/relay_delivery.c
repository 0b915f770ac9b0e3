/*
 * relay_delivery.c - leased-relay end to end with a real RabbitMQ: every
 * accepted commit's publication arrives (exactly once when nothing fails),
 * in order per identity, with the lease in its headers; nothing from a
 * rejected or stale commit ever does; routes pick exchange and key; an
 * unroutable row waits and holds back its identity's later rows; --once,
 * SIGTERM, bad settings.
 */
#include "relay_common.h"

static relay_fx_t fx;

static int setup(void **state)
{
    (void)state;
    relay_fx_open(&fx, "relay_delivery");
    return 0;
}

/* Each test starts with an empty queue, whatever the one before left. */
static int drain_queue(void **state)
{
    (void)state;
    collector_t col;
    collector_init(&col);
    collector_drain(&col, fx.consumer, 200);
    collector_free(&col);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    relay_fx_close(&fx);
    return 0;
}

/* An acquire with a TTL of its own (the shared helper takes the default). */
static json_t *acquire_ttl(const char *target, int ttl_ms)
{
    json_t *body = parse_owned(acquire_body("acq-short", target));
    json_object_set_new(body, "ttl_ms", json_integer(ttl_ms));
    http_resp_t *r = call_owned(fx.http.base, "POST", "/v1/leases/acquire", fx.worker, dump(body));
    check_reply(r, 200, "lease_acquired", NULL);
    json_t *lease = json_deep_copy(lease_of(r));
    http_resp_free(r);
    return lease;
}

/* A commit that must be refused with code; it must write nothing. */
static void commit_refused(const char *target, json_t *lease, json_t *extra, long status,
                           const char *code)
{
    long long before = relay_outbox_rows(&fx);
    http_resp_t *r = relay_commit(&fx, target, lease, 2, "results.ready", "rejected", extra);
    check_reply(r, status, code, NULL);
    http_resp_free(r);
    assert_int_equal(relay_outbox_rows(&fx), before);
}

static void check_message_against_row(const testbroker_msg_t *m)
{
    char sql[1024];
    snprintf(sql, sizeof sql,
             "SELECT o.lease_id || '|' || o.fencing_token || '|' || o.execution_id || '|' || "
             "o.trace_id || '|' || o.topic || '|' || l.tenant_id || '|' || l.program_id || '|' || "
             "l.target_namespace || '|' || l.target_id || '|' || l.actor_name || '|' || "
             "l.workflow_name || '|' || l.operation_class || '|' || "
             "to_char(o.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') || "
             "'|' || floor(extract(epoch FROM o.created_at))::bigint || '|' || o.payload::text "
             "FROM lease.outbox o JOIN lease.locks l USING (lock_key) WHERE o.outbox_id = %s",
             m->message_id);
    char *want = testpg_query_value(fx.http.db, sql);
    assert_non_null(want);
    const char *names[] = {"lease_id",  "fencing_token", "execution_id",  "trace_id",
                           "topic",     "tenant_id",     "program_id",    "target_namespace",
                           "target_id", "actor_name",    "workflow_name", "operation_class",
                           "created_at"};
    char got[2048] = "";
    size_t len = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = testbroker_msg_header(m, names[i]);
        assert_non_null(v);
        len += (size_t)snprintf(got + len, sizeof got - len, "%s|", v);
    }
    /* the message's own properties: timestamp, and the body is the payload */
    char *payload = strrchr(want, '|') + 1;
    snprintf(got + len, sizeof got - len, "%" PRIu64 "|%s", m->timestamp, payload);
    assert_string_equal(got, want);
    json_error_t jerr;
    json_t *a = json_loads(m->body, 0, &jerr), *b = json_loads(payload, 0, &jerr);
    assert_true(json_equal(a, b));
    json_decref(a);
    json_decref(b);
    assert_string_equal(testbroker_msg_header(m, "outbox_id"), m->message_id);
    assert_string_equal(m->type, testbroker_msg_header(m, "topic"));
    assert_non_null(m->correlation_id);
    assert_string_equal(m->correlation_id, testbroker_msg_header(m, "trace_id"));
    free(want);
}

static void accepted_arrive_exactly_once_rejected_never(void **state)
{
    (void)state;
    const char *targets[] = {"t-a", "t-b", "t-c"};
    json_t *first[3], *second[3];
    int rows = 0;
    for (int i = 0; i < 3; i++) {
        first[i] = relay_acquire(&fx, targets[i]);
        rows += relay_commit_ok(&fx, targets[i], first[i], 3, "results.ready");
        rows += relay_commit_ok(&fx, targets[i], first[i], 2, "results.more");
        relay_release(&fx, targets[i], first[i]);
        second[i] = relay_acquire(&fx, targets[i]);
        rows += relay_commit_ok(&fx, targets[i], second[i], 4, "results.ready");
    }
    /* refused commits: a former holder (stale token), a write conflict, a
     * released lease, an expired lease */
    commit_refused("t-a", first[0], NULL, 409, "lease_lost");
    commit_refused("t-b", second[1],
                   json_pack("[{s:s, s:s, s:i, s:{}}]", "kind", "document", "key", "doc/x",
                             "expected_revision", 5, "body"),
                   409, "write_conflict");
    relay_release(&fx, "t-c", second[2]);
    commit_refused("t-c", second[2], NULL, 409, "lease_lost");
    json_t *short_lease = acquire_ttl("t-d", 1100);
    assert_true(relay_wait_sql(fx.http.db,
                               "SELECT count(*) FROM lease.locks WHERE target_id = 't-d' "
                               "AND expires_at <= now()",
                               1, 10000));
    commit_refused("t-d", short_lease, NULL, 409, "lease_lost");
    assert_int_equal(relay_outbox_rows(&fx), rows);
    assert_int_equal(testpg_query_int(fx.http.db, "SELECT count(*) FROM lease.outbox "
                                                  "WHERE payload ->> 'tag' <> 'accepted'"),
                     0);

    relay_proc_t *relay = relay_proc_start(
        fx.http.db, (const char *[]){fx.exchange_env, "LEASE_RELAY_INSTANCE_ID=relay-a", NULL});
    collector_t col;
    collector_init(&col);
    /* the first message, checked field by field against its row */
    testbroker_msg_t *m = testbroker_next(fx.consumer, 30000);
    if (!m)
        relay_proc_dump_log(relay);
    assert_non_null(m);
    check_message_against_row(m);
    collector_take(&col, m);
    testbroker_msg_free(m);
    if (!collector_until(&col, fx.consumer, (size_t)rows, 30000))
        relay_proc_dump_log(relay);
    assert_int_equal(col.n_new, rows);
    assert_true(relay_wait_sql(
        fx.http.db, "SELECT count(*) FROM lease.outbox WHERE published_at IS NULL", 0, 10000));
    collector_drain(&col, fx.consumer, 300);
    collector_check_exact(&col, &fx);
    collector_check_order(&col);
    /* nothing failed, so nothing came twice */
    assert_int_equal(col.n_duplicate, 0);
    assert_int_equal(col.n_stale, 0);
    assert_int_equal(testpg_query_int(fx.http.db, "SELECT count(*) FROM lease.outbox WHERE "
                                                  "published_by = 'relay-a' AND last_error IS NULL "
                                                  "AND attempts = 0"),
                     rows);
    assert_true(
        relay_wait_metric(relay, "leased_relay_published_total{destination=\"amqp\"}", rows, 5000));
    assert_true(relay_proc_metric(relay, "leased_relay_published_total{destination=\"amqp\"}") == rows);
    long end = child_proc_now_ms() + 5000;
    while (relay_proc_metric(relay, "leased_relay_lag_rows") != 0 && child_proc_now_ms() < end)
        usleep(20000);
    assert_true(relay_proc_metric(relay, "leased_relay_lag_rows") == 0);
    assert_true(relay_proc_metric(relay, "leased_relay_broker_up") == 1);
    http_resp_t *r = http_call(relay_proc_url(relay), "GET", "/readyz", NULL, NULL);
    assert_int_equal(r->status, 200);
    http_resp_free(r);

    /* SIGTERM: a clean exit */
    assert_int_equal(relay_proc_stop(relay), 0);
    collector_free(&col);
    for (int i = 0; i < 3; i++) {
        json_decref(first[i]);
        json_decref(second[i]);
    }
    json_decref(short_lease);
}

static void routes_pick_exchange_and_routing_key(void **state)
{
    (void)state;
    char ex2[128], ex3[128], routes[512], q2[128], q3[128];
    snprintf(ex2, sizeof ex2, "%s.alerts", fx.exchange);
    snprintf(ex3, sizeof ex3, "%s.state", fx.exchange);
    snprintf(q2, sizeof q2, "%s.alerts", fx.queue);
    snprintf(q3, sizeof q3, "%s.state", fx.queue);
    snprintf(routes, sizeof routes,
             "LEASE_RELAY_ROUTES=alerts.*=amqp:%s/pager.fixed, state.*=amqp:%s", ex2, ex3);
    testbroker_consumer_t *c2 = testbroker_consumer_new(ex2, "pager.fixed", q2);
    testbroker_consumer_t *c3 = testbroker_consumer_new(ex3, "state.#", q3);
    json_t *lease = relay_acquire(&fx, "t-routes");
    relay_commit_ok(&fx, "t-routes", lease, 1, "alerts.high");
    relay_commit_ok(&fx, "t-routes", lease, 1, "state.scanned");
    relay_commit_ok(&fx, "t-routes", lease, 1, "other.topic");
    relay_proc_t *relay =
        relay_proc_start(fx.http.db, (const char *[]){fx.exchange_env, routes, NULL});
    testbroker_msg_t *m = testbroker_next(c2, 30000);
    assert_non_null(m);
    assert_string_equal(m->type, "alerts.high");
    assert_string_equal(m->routing_key, "pager.fixed");
    assert_string_equal(m->exchange, ex2);
    testbroker_msg_free(m);
    m = testbroker_next(c3, 30000);
    assert_non_null(m);
    assert_string_equal(m->type, "state.scanned");
    assert_string_equal(m->routing_key, "state.scanned");
    testbroker_msg_free(m);
    m = testbroker_next(fx.consumer, 30000);
    assert_non_null(m);
    assert_string_equal(m->type, "other.topic");
    assert_string_equal(m->exchange, fx.exchange);
    testbroker_msg_free(m);
    assert_true(relay_wait_sql(
        fx.http.db, "SELECT count(*) FROM lease.outbox WHERE published_at IS NULL", 0, 10000));
    assert_int_equal(relay_proc_stop(relay), 0);
    testbroker_consumer_free(c2);
    testbroker_consumer_free(c3);
    json_decref(lease);
}

/*
 * A row no queue takes is returned by the broker: it is deferred with the
 * reason, its identity's later rows stay unpublished behind it, other
 * identities flow. Once a queue is bound it is delivered, then the rows
 * behind it, in order.
 */
static void unroutable_row_waits_and_holds_back_its_identity(void **state)
{
    (void)state;
    char ex[128], routes[256], q[128];
    snprintf(ex, sizeof ex, "%s.nobody", fx.exchange);
    snprintf(q, sizeof q, "%s.late", fx.queue);
    snprintf(routes, sizeof routes, "LEASE_RELAY_ROUTES=lost.*=amqp:%s", ex);
    long long base = testpg_query_int(fx.http.db, "SELECT coalesce(max(outbox_id), 0) FROM "
                                                  "lease.outbox");
    json_t *lu = relay_acquire(&fx, "t-u"), *lv = relay_acquire(&fx, "t-v");
    relay_commit_ok(&fx, "t-u", lu, 1, "lost.one");   /* base + 1 */
    relay_commit_ok(&fx, "t-u", lu, 1, "fine.two");   /* base + 2 */
    relay_commit_ok(&fx, "t-v", lv, 1, "fine.three"); /* base + 3 */
    relay_proc_t *relay = relay_proc_start(
        fx.http.db, (const char *[]){fx.exchange_env, routes, "LEASE_RELAY_RETRY_DELAY_MS=200",
                                     "LEASE_RELAY_BACKOFF_MAX_MS=200", NULL});
    char sql[256];
    snprintf(
        sql, sizeof sql,
        "SELECT count(*) FROM lease.outbox WHERE outbox_id = %lld AND published_at IS NOT NULL",
        base + 3);
    assert_true(relay_wait_sql(fx.http.db, sql, 1, 30000));
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM lease.outbox WHERE outbox_id = %lld AND published_at IS NULL "
             "AND attempts >= 1 AND last_error LIKE 'returned by the broker: 312 NO_ROUTE%%'",
             base + 1);
    if (!relay_wait_sql(fx.http.db, sql, 1, 30000))
        relay_proc_dump_log(relay);
    assert_true(relay_wait_sql(fx.http.db, sql, 1, 1));
    /* it is tried again and again, and the row behind it stays unpublished */
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM lease.outbox WHERE outbox_id = %lld AND attempts >= 3",
             base + 1);
    assert_true(relay_wait_sql(fx.http.db, sql, 1, 30000));
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM lease.outbox WHERE outbox_id = %lld AND published_at IS NULL",
             base + 2);
    assert_int_equal(testpg_query_int(fx.http.db, sql), 1);
    assert_true(relay_proc_metric(relay, "leased_relay_deferred_total") >= 3);

    /* a queue appears: the row goes, then the one behind it */
    testbroker_declare(ex, q, "#");
    assert_true(relay_wait_sql(
        fx.http.db, "SELECT count(*) FROM lease.outbox WHERE published_at IS NULL", 0, 30000));
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM lease.outbox a, lease.outbox b WHERE a.outbox_id = %lld AND "
             "b.outbox_id = %lld AND a.published_at <= b.published_at AND a.last_error IS NULL",
             base + 1, base + 2);
    assert_int_equal(testpg_query_int(fx.http.db, sql), 1);
    testbroker_consumer_t *late = testbroker_consumer_new(ex, "#", q);
    testbroker_msg_t *m = testbroker_next(late, 10000);
    assert_non_null(m);
    assert_string_equal(m->type, "lost.one");
    testbroker_msg_free(m);
    testbroker_consumer_free(late);
    assert_int_equal(relay_proc_stop(relay), 0);
    collector_t col;
    collector_init(&col);
    collector_drain(&col, fx.consumer, 500);
    collector_free(&col);
    json_decref(lu);
    json_decref(lv);
}

static void once_mode_and_exit_codes(void **state)
{
    (void)state;
    json_t *lease = relay_acquire(&fx, "t-once");
    relay_commit_ok(&fx, "t-once", lease, 5, "results.once");
    assert_true(relay_unpublished(&fx) == 5);

    /* --once against a broker that is not there: exit 1, nothing marked */
    char *out = NULL;
    int rc = relay_proc_run(fx.http.db, (const char *[]){"--once", NULL},
                            (const char *[]){fx.exchange_env,
                                             "LEASE_RELAY_AMQP_URL=amqp://guest:guest@127.0.0.1:1",
                                             NULL},
                            30000, &out);
    if (rc != 1)
        fprintf(stderr, "%s\n", out);
    assert_int_equal(rc, 1);
    free(out);
    assert_true(relay_unpublished(&fx) == 5);

    /* --once: delivers what is there and exits 0 */
    rc = relay_proc_run(fx.http.db, (const char *[]){"--once", NULL},
                        (const char *[]){fx.exchange_env, NULL}, 60000, &out);
    if (rc != 0)
        fprintf(stderr, "%s\n", out);
    assert_int_equal(rc, 0);
    free(out);
    assert_true(relay_unpublished(&fx) == 0);
    collector_t col;
    collector_init(&col);
    assert_true(collector_until(&col, fx.consumer, 5, 10000));
    collector_free(&col);

    /* bad settings: exit 2, the setting named, a secret never echoed */
    rc = relay_proc_run(fx.http.db, (const char *[]){"--batch-size", "0", NULL}, NULL, 10000, &out);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, "batch size"));
    free(out);
    rc = relay_proc_run(fx.http.db, NULL,
                        (const char *[]){"LEASE_RELAY_AMQP_URL=amqps://u:s3cr3t-pw@h:port/v", NULL},
                        10000, &out);
    assert_int_equal(rc, 2);
    assert_null(strstr(out, "s3cr3t-pw"));
    assert_non_null(strstr(out, "AMQP url"));
    free(out);
    rc = relay_proc_run(fx.http.db, NULL,
                        (const char *[]){"LEASE_RELAY_ROUTES=a.*=couchdb:x", NULL}, 10000, &out);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, "LEASE_RELAY_COUCHDB_URL"));
    free(out);
    json_decref(lease);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(accepted_arrive_exactly_once_rejected_never, drain_queue),
        cmocka_unit_test_setup(routes_pick_exchange_and_routing_key, drain_queue),
        cmocka_unit_test_setup(unroutable_row_waits_and_holds_back_its_identity, drain_queue),
        cmocka_unit_test_setup(once_mode_and_exit_codes, drain_queue),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
