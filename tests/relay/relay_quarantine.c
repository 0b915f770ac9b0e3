/*
 * relay_quarantine.c - no poison outbox row, with the real broker:
 *  1. a 256-character topic (one more than an AMQP short string holds) is
 *     refused at commit time: 400 invalid_lease_request naming
 *     writes[0].topic, and no outbox row is written (255 are accepted);
 *  2. a payload over the broker's message size limit
 *     (LEASE_RELAY_MAX_MESSAGE_BYTES, 8 KiB here) is quarantined with its
 *     reason, counted (leased_relay_quarantined_total) and audited, while
 *     every other row of the batch, before and after it and of its own
 *     identity, is delivered exactly once;
 *  3. a relay that does not know the broker's limit (the test broker's
 *     max_message_size is 32768, tests/harness/rabbitcluster) learns it from
 *     the broker's refusal: the big row is quarantined with the broker's
 *     reason, the rows after it are delivered exactly once, and later big
 *     rows are quarantined before they are published.
 */
#include "relay_common.h"

static relay_fx_t fx;

static int setup(void **state)
{
    (void)state;
    relay_fx_open(&fx, "relay_quarantine");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    relay_fx_close(&fx);
    return 0;
}

static void a_topic_no_route_can_carry_is_refused_at_commit(void **state)
{
    (void)state;
    char topic[257];
    memset(topic, 't', 256);
    topic[256] = '\0';
    json_t *l = relay_acquire(&fx, "q-topic");
    http_resp_t *r = relay_commit(&fx, "q-topic", l, 1, topic, "accepted", NULL);
    check_reply(r, 400, "invalid_lease_request", NULL);
    assert_string_equal(http_resp_str(r, "field"), "writes[0].topic");
    /* the answer says the limit, so the caller can fix the topic */
    assert_non_null(strstr(http_resp_str(r, "msg"), "255"));
    http_resp_free(r);
    assert_int_equal(relay_outbox_rows(&fx), 0);
    /* 255 characters are accepted */
    topic[255] = '\0';
    relay_commit_ok(&fx, "q-topic", l, 1, topic);
    assert_int_equal(relay_outbox_rows(&fx), 1);
    relay_release(&fx, "q-topic", l);
    json_decref(l);
    assert_true(testpg_exec(fx.http.db, "DELETE FROM lease.outbox"));
}

/* One publication whose payload carries `pad` bytes of padding. */
static json_t *big_publication(const char *target, json_t *lease, size_t pad)
{
    char *blob = malloc(pad + 1);
    memset(blob, 'x', pad);
    blob[pad] = '\0';
    json_t *payload = relay_payload(
        target, json_integer_value(json_object_get(lease, "fencing_token")), 99, "accepted");
    json_object_set_new(payload, "blob", json_string(blob));
    free(blob);
    return json_pack("[{s:s, s:s, s:o}]", "kind", "publication", "topic", "results.big", "payload",
                     payload);
}

static void a_message_over_the_broker_limit_is_quarantined(void **state)
{
    (void)state;
    json_t *a = relay_acquire(&fx, "q-a");
    json_t *b = relay_acquire(&fx, "q-b");
    relay_commit_ok(&fx, "q-a", a, 1, "results.a");
    relay_commit_ok(&fx, "q-b", b, 1, "results.b");
    http_resp_t *r =
        relay_commit(&fx, "q-a", a, 0, "results.a", "accepted", big_publication("q-a", a, 20000));
    check_reply(r, 200, "commit_accepted", NULL);
    http_resp_free(r);
    long long big = testpg_query_int(fx.http.db, "SELECT max(outbox_id) FROM lease.outbox");
    relay_commit_ok(&fx, "q-a", a, 1, "results.a"); /* behind it, same identity */
    relay_commit_ok(&fx, "q-b", b, 1, "results.b");
    relay_proc_t *relay = relay_proc_start(
        fx.http.db, (const char *[]){fx.exchange_env, "LEASE_RELAY_MAX_MESSAGE_BYTES=8192",
                                     "LEASE_RELAY_INSTANCE_ID=relay-q", NULL});
    if (!relay_wait_sql(fx.http.db,
                        "SELECT count(*) FROM lease.outbox WHERE published_at IS NULL AND "
                        "quarantined_at IS NULL",
                        0, 30000))
        relay_proc_dump_log(relay);
    collector_t col;
    collector_init(&col);
    assert_true(collector_until(&col, fx.consumer, 4, 30000));
    collector_drain(&col, fx.consumer, 500);
    /* the four others, each exactly once; never the big one */
    assert_int_equal(col.n_new, 4);
    assert_int_equal(col.n_duplicate, 0);
    for (size_t i = 0; i < col.n; i++)
        assert_true(col.items[i].outbox_id != big);
    collector_check_order(&col);
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM lease.outbox WHERE outbox_id = %lld AND published_at IS NULL "
             "AND quarantined_at IS NOT NULL AND quarantine_reason LIKE 'message size %% is "
             "larger than the broker''s max message size 8192%%'",
             big);
    assert_int_equal(testpg_query_int(fx.http.db, sql), 1);
    assert_int_equal(testpg_query_int(fx.http.db, "SELECT count(*) FROM lease.outbox WHERE "
                                                  "published_by = 'relay-q'"),
                     4);
    assert_true(relay_wait_metric(relay, "leased_relay_quarantined_total", 1, 5000));
    assert_int_equal(testpg_query_int(fx.http.db,
                                      "SELECT count(*) FROM lease.audit_events WHERE "
                                      "result_code = 'outbox_quarantined' AND target_id = 'q-a' "
                                      "AND principal_id = 'relay:relay-q'"),
                     1);
    /* nothing more comes: the quarantined row is not claimed again */
    collector_drain(&col, fx.consumer, 1000);
    assert_int_equal(col.n, 4);
    assert_int_equal(relay_proc_stop(relay), 0);
    collector_free(&col);
    json_decref(a);
    json_decref(b);
}

static void the_broker_limit_is_learned_from_its_refusal(void **state)
{
    (void)state;
    if (!testbroker_owned())
        skip(); /* LEASE_TEST_AMQP_URL: a broker whose limit this test does not know */
    json_t *c = relay_acquire(&fx, "q-c");
    json_t *d = relay_acquire(&fx, "q-d");
    /* the big row first: nothing is published before it in its batch */
    http_resp_t *r =
        relay_commit(&fx, "q-c", c, 0, "results.c", "accepted", big_publication("q-c", c, 40000));
    check_reply(r, 200, "commit_accepted", NULL);
    http_resp_free(r);
    long long big = testpg_query_int(fx.http.db, "SELECT max(outbox_id) FROM lease.outbox");
    relay_commit_ok(&fx, "q-c", c, 1, "results.c");
    relay_commit_ok(&fx, "q-d", d, 2, "results.d");
    relay_proc_t *relay = relay_proc_start(
        fx.http.db, (const char *[]){fx.exchange_env, "LEASE_RELAY_INSTANCE_ID=relay-b",
                                     "LEASE_RELAY_BACKOFF_MAX_MS=200", NULL});
    if (!relay_wait_sql(fx.http.db,
                        "SELECT count(*) FROM lease.outbox WHERE published_at IS NULL AND "
                        "quarantined_at IS NULL",
                        0, 30000))
        relay_proc_dump_log(relay);
    collector_t col;
    collector_init(&col);
    assert_true(collector_until(&col, fx.consumer, 3, 30000));
    collector_drain(&col, fx.consumer, 500);
    assert_int_equal(col.n_new, 3);
    assert_int_equal(col.n_duplicate, 0);
    for (size_t i = 0; i < col.n; i++)
        assert_true(col.items[i].outbox_id != big);
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM lease.outbox WHERE outbox_id = %lld AND quarantined_at IS NOT "
             "NULL AND quarantine_reason LIKE 'refused by the broker: %%406%%larger than "
             "configured max size 32768%%'",
             big);
    if (testpg_query_int(fx.http.db, sql) != 1)
        relay_proc_dump_log(relay);
    assert_int_equal(testpg_query_int(fx.http.db, sql), 1);
    /* the relay knows the limit now: the next big row is never published */
    r = relay_commit(&fx, "q-d", d, 0, "results.d", "accepted", big_publication("q-d", d, 40000));
    check_reply(r, 200, "commit_accepted", NULL);
    http_resp_free(r);
    long long big2 = testpg_query_int(fx.http.db, "SELECT max(outbox_id) FROM lease.outbox");
    relay_commit_ok(&fx, "q-d", d, 1, "results.d");
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM lease.outbox WHERE outbox_id = %lld AND quarantine_reason "
             "LIKE 'message size %% is larger than the broker''s max message size 32768%%'",
             big2);
    assert_true(relay_wait_sql(fx.http.db, sql, 1, 30000));
    assert_true(collector_until(&col, fx.consumer, 4, 30000));
    collector_drain(&col, fx.consumer, 500);
    assert_int_equal(col.n_new, 4);
    assert_int_equal(col.n_duplicate, 0);
    assert_true(relay_wait_metric(relay, "leased_relay_quarantined_total", 2, 5000));
    assert_int_equal(relay_proc_stop(relay), 0);
    collector_free(&col);
    json_decref(c);
    json_decref(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_topic_no_route_can_carry_is_refused_at_commit),
        cmocka_unit_test(a_message_over_the_broker_limit_is_quarantined),
        cmocka_unit_test(the_broker_limit_is_learned_from_its_refusal),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
