/*
 * failover_sessions.c - a session holding leases while the primary is
 * killed and its synchronous standby promoted (issue 37: "Postgres
 * restarted or failed over while sessions are open: nothing reported alive
 * that the database would not confirm; tokens never regress").
 *
 *   - Between the kill and the promotion no keep-alive is answered
 *     lease_renewed (nothing can decide).
 *   - By default (seal_on_timeline_change = true) the promoted database is
 *     sealed: keep-alives are refused (503) until `leasectl recover`, which
 *     revokes every live lease; after it, every lease of the session reads
 *     as the promoted database says (revoked), and each identity is
 *     acquired again with a token greater than the session's (the epoch).
 *     The session itself stays open and a keep-alive of it is answered
 *     lease_renewed, holding nothing: a holder learns of each revoked lease
 *     from its watch, as of any revocation (docs/clients.md: a hold without
 *     a watch is never put in a session).
 *   - With seal_on_timeline_change = false (an operator who guarantees
 *     synchronous replication) the promoted database knows the session: the
 *     keep-alive is answered lease_renewed, its leases are active with the
 *     same tokens, and after closing it the identities are taken with
 *     greater tokens.
 */
#include "failover_drill.h"

#define LEASES 3
/* long enough to outlive the kill and the promotion */
#define TTL_MS 60000

typedef struct sessions_run {
    drill_sync_pair_t p;
    char *sid;
    leased_proc_t *srv;
    const char *base;
    json_t *held[LEASES];
} sessions_run_t;

static http_resp_t *acquire_in(const sessions_run_t *s, const char *rid, const char *target,
                               const char *session)
{
    json_t *o = parse_owned(acquire_body(rid, target));
    if (session)
        json_object_set_new(o, "session_id", json_string(session));
    return call_owned(s->base, "POST", "/v1/leases/acquire", s->p.token, dump(o));
}

static http_resp_t *keepalive(const sessions_run_t *s)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/sessions/%s/keepalive", s->sid);
    return call(s->base, "POST", path, s->p.token, "{}");
}

/* A lease as GET answers it, against the promoted database's own view. */
static void lease_as_db_says(const sessions_run_t *s, json_t *lease)
{
    const char *lid = json_string_value(json_object_get(lease, "lease_id"));
    char path[256], sql[256];
    snprintf(path, sizeof path, "/v1/leases/%s", lid);
    http_resp_t *r = call(s->base, "GET", path, s->p.token, NULL);
    const char *state =
        r->status == 200 ? json_string_value(json_object_get(lease_of(r), "state")) : "(not found)";
    snprintf(sql, sizeof sql, "SELECT count(*) FROM lease.active_leases WHERE lease_id = '%s'",
             lid);
    long long active = testpg_query_int(s->p.replica, sql);
    printf("%s: GET says %ld %s, the promoted lease.active_leases has %lld\n", lid, r->status,
           state, active);
    if (active) {
        check_reply(r, 200, "lease_inspected", NULL);
        assert_string_equal(state, "active");
    } else {
        assert_true(r->status != 200 || strcmp(state, "active") != 0);
    }
    http_resp_free(r);
}

/* Primary and synchronous standby, leased on both, a session holding
 * LEASES leases; then the primary killed (keep-alives refused) and the
 * replica promoted. */
static void run_until_promoted(sessions_run_t *s, bool seal_on_timeline_change)
{
    drill_sync_pair_start(&s->p, seal_on_timeline_change);
    s->srv = leased_proc_start(s->p.both, drill_leased_env);
    assert_non_null(s->srv);
    s->base = leased_proc_url(s->srv);

    http_resp_t *r =
        call_owned(s->base, "POST", "/v1/sessions", s->p.token,
                   dump(json_pack("{s:s, s:s, s:i}", "request_id", "req_fs_open",
                                  "service_instance_id", "inst_fs", "ttl_ms", TTL_MS)));
    check_reply(r, 200, "lease_acquired", NULL);
    s->sid = strdup(
        json_string_value(json_object_get(json_object_get(r->json, "session"), "session_id")));
    http_resp_free(r);
    for (int i = 0; i < LEASES; i++) {
        char rid[32], target[32];
        snprintf(rid, sizeof rid, "req_fs_a%d", i);
        snprintf(target, sizeof target, "fs_t%d", i);
        r = acquire_in(s, rid, target, s->sid);
        check_reply(r, 200, "lease_acquired", NULL);
        s->held[i] = json_deep_copy(lease_of(r));
        http_resp_free(r);
    }
    r = keepalive(s);
    check_reply(r, 200, "lease_renewed", NULL);
    http_resp_free(r);

    testpair_run(s->p.pair, "kill", "primary");
    for (int i = 0; i < 4; i++) {
        r = keepalive(s);
        printf("keep-alive with the primary killed: %ld %s\n", r->status,
               http_resp_str(r, "code") ? http_resp_str(r, "code") : "-");
        assert_int_equal(r->status, 503);
        http_resp_free(r);
    }
    testpair_run(s->p.pair, "promote", "replica");
}

/* Each identity acquired again (no session): a token greater than the
 * session's lease had. */
static void taken_again_with_greater_tokens(const sessions_run_t *s)
{
    for (int i = 0; i < LEASES; i++) {
        char rid[32], target[32];
        snprintf(rid, sizeof rid, "req_fs_b%d", i);
        snprintf(target, sizeof target, "fs_t%d", i);
        http_resp_t *r = acquire_in(s, rid, target, NULL);
        check_reply(r, 200, "lease_acquired", NULL);
        json_int_t old_token = json_integer_value(json_object_get(s->held[i], "fencing_token"));
        json_int_t new_token = json_integer_value(json_object_get(lease_of(r), "fencing_token"));
        printf("%s: token %lld -> %lld\n", target, (long long)old_token, (long long)new_token);
        assert_true(new_token > old_token);
        http_resp_free(r);
    }
}

static void run_free(sessions_run_t *s)
{
    assert_int_equal(leased_proc_stop(s->srv), 0);
    for (int i = 0; i < LEASES; i++)
        json_decref(s->held[i]);
    free(s->sid);
    drill_sync_pair_free(&s->p);
}

static void test_sealed_by_default_then_recovered(void **state)
{
    (void)state;
    sessions_run_t s = {0};
    run_until_promoted(&s, true);
    drill_wait_readyz(s.base, 503, "sealed");
    http_resp_t *r = keepalive(&s);
    printf("keep-alive on the sealed promoted database: %ld %s\n", r->status,
           http_resp_str(r, "code") ? http_resp_str(r, "code") : "-");
    assert_int_equal(r->status, 503);
    http_resp_free(r);

    free(drill_recover(s.p.replica, "failover drill: a session open across the promotion", s.base));
    drill_wait_readyz(s.base, 200, NULL);
    /* recovery revoked every live lease: none of the session's is active;
     * the session itself is still open (printed, not asserted: either is
     * safe, since its leases are not) */
    r = keepalive(&s);
    printf("keep-alive after recovery: %ld %s\n", r->status,
           http_resp_str(r, "code") ? http_resp_str(r, "code") : "-");
    http_resp_free(r);
    for (int i = 0; i < LEASES; i++)
        lease_as_db_says(&s, s.held[i]);
    assert_int_equal(testpg_query_int(s.p.replica, "SELECT count(*) FROM lease.active_leases "
                                                   "WHERE target_id LIKE 'fs_t%'"),
                     0);
    taken_again_with_greater_tokens(&s);
    run_free(&s);
}

static void test_without_timeline_seal_the_session_goes_on(void **state)
{
    (void)state;
    sessions_run_t s = {0};
    run_until_promoted(&s, false);
    drill_wait_readyz(s.base, 200, NULL);
    /* the synchronous standby had the session: kept alive, its leases
     * active with the same tokens */
    http_resp_t *r = keepalive(&s);
    for (int i = 0; r->status == 503 && i < 50; i++) {
        /* a pooled connection to the killed primary, found at use */
        http_resp_free(r);
        drill_pause_ms(100);
        r = keepalive(&s);
    }
    check_reply(r, 200, "lease_renewed", NULL);
    http_resp_free(r);
    for (int i = 0; i < LEASES; i++)
        lease_as_db_says(&s, s.held[i]);
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM lease.active_leases WHERE session_id = '%s'",
             s.sid);
    assert_int_equal(testpg_query_int(s.p.replica, sql), LEASES);

    char path[256];
    snprintf(path, sizeof path, "/v1/sessions/%s/close", s.sid);
    r = call(s.base, "POST", path, s.p.token, "{\"request_id\":\"req_fs_close\"}");
    check_reply(r, 200, "lease_released", NULL);
    assert_int_equal(http_resp_int(r, "leases_ended"), LEASES);
    http_resp_free(r);
    taken_again_with_greater_tokens(&s);
    run_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sealed_by_default_then_recovered),
        cmocka_unit_test(test_without_timeline_seal_the_session_goes_on),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
