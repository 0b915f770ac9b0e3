/*
 * race_retry_yield.c - a request whose transaction keeps failing to
 * serialize holds no worker while it pauses between attempts (issue 34,
 * finding 3: "a contended request holds its worker through its retry
 * back-off sleeps").
 *
 * A trigger of the test's own makes every write of one target's lock row
 * fail with SQLSTATE 40001 (serialization_failure) for a few seconds, so
 * an acquire of that target is retried by leased again and again, pausing
 * between attempts. leased runs one worker. Another tenant's request must
 * be answered while that acquire is still being retried (the pauses give
 * the worker back), and the acquire itself is answered once the failures
 * stop: acquired, after several attempts (leased_db_serialization_
 * retries_total counts them).
 */
#include <poll.h>

#include "../http/http_common.h"
#include "raw_http.h"

#define FAIL_FOR_S 4

static http_fx_t fx;
static const char *token_a, *token_b;

static int setup(void **state)
{
    http_fx_open(&fx, state, "race_retry_yield");
    token_a = http_fx_worker(&fx, "prn_retried");
    token_b = http_fx_worker_of(&fx, "prn_other", "tenant-b");
    return 0;
}

static void sql(const char *text)
{
    PGconn *c = PQconnectdb(fx.db);
    assert_int_equal(PQstatus(c), CONNECTION_OK);
    PGresult *r = PQexec(c, text);
    if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
        fprintf(stderr, "%s: %s\n", text, PQerrorMessage(c));
    assert_true(PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK);
    PQclear(r);
    PQfinish(c);
}

static long long serialization_retries(void)
{
    http_resp_t *m = call(fx.base, "GET", "/metrics", NULL, NULL);
    assert_non_null(m);
    const char *at = strstr(m->body, "\nleased_db_serialization_retries_total ");
    long long v = at ? atoll(at + strlen("\nleased_db_serialization_retries_total ")) : -1;
    http_resp_free(m);
    return v;
}

static void test_retry_pauses_hold_no_worker(void **state)
{
    (void)state;
    const char *env[] = {"LEASE_HTTP_THREADS=1", NULL};
    http_fx_serve(&fx, env);
    int port = leased_proc_port(fx.srv);

    /* the target's lock row exists (one cycle); both credentials cached */
    json_t *lease = acquire_lease(fx.base, token_a, "warm-1", "t-retry");
    http_resp_t *rel = call_owned(fx.base, "POST", "/v1/leases/release", token_a,
                                  owner_body("warm-2", "t-retry", lease));
    assert_int_equal(rel->status, 200);
    http_resp_free(rel);
    json_decref(lease);
    char *inspect = inspect_body_of("tenant-b", "t-b");
    char *req_b = raw_post_text("/v1/leases/inspect", token_b, inspect);
    free(inspect);
    raw_resp_t *r = raw_call(port, "127.0.0.3", req_b);
    assert_non_null(r);
    assert_int_equal(r->status, 404);
    raw_resp_free(r);

    /* every write of t-retry's lock row fails to serialize for a while */
    char ddl[1024];
    snprintf(ddl, sizeof ddl,
             "CREATE TABLE public.fail_until (at timestamptz); "
             "INSERT INTO public.fail_until VALUES (clock_timestamp() + interval '%d seconds'); "
             "CREATE FUNCTION public.fail_serialize() RETURNS trigger LANGUAGE plpgsql AS $$ "
             "BEGIN IF NEW.target_id = 't-retry' AND clock_timestamp() < "
             "(SELECT at FROM public.fail_until) THEN "
             "RAISE EXCEPTION 'test: could not serialize' USING ERRCODE = '40001'; END IF; "
             "RETURN NEW; END $$; "
             "CREATE TRIGGER fail_serialize BEFORE INSERT OR UPDATE ON lease.locks "
             "FOR EACH ROW EXECUTE FUNCTION public.fail_serialize()",
             FAIL_FOR_S);
    sql(ddl);
    long long retries_before = serialization_retries();

    json_t *body = parse_owned(acquire_body("retried-1", "t-retry"));
    json_object_set_new(body, "deadline_ms", json_integer(20000));
    char *text = dump(body);
    char *req_a = raw_post_text("/v1/leases/acquire", token_a, text);
    free(text);
    raw_conn_t *a = raw_connect(port, "127.0.0.2");
    assert_non_null(a);
    assert_true(raw_send(a, req_a));
    assert_true(test_wait_until(10000, serialization_retries() > retries_before));

    /* the one worker answers tenant B while A's acquire is still retried */
    for (int i = 0; i < 3; i++) {
        r = raw_call(port, "127.0.0.3", req_b);
        assert_non_null(r);
        assert_int_equal(r->status, 404);
        raw_resp_free(r);
    }
    struct pollfd pa = {raw_fd(a), POLLIN, 0};
    assert_int_equal(poll(&pa, 1, 0), 0); /* A: still unanswered */
    long long now_retrying = testpg_query_int(
        fx.db, "SELECT (clock_timestamp() < (SELECT at FROM public.fail_until))::int");
    assert_int_equal(now_retrying, 1);

    /* the failures stop: A is granted after its retries */
    r = raw_read(a, 30000);
    assert_non_null(r);
    assert_int_equal(r->status, 200);
    assert_string_equal(raw_str(r, "code"), "lease_acquired");
    raw_resp_free(r);
    raw_close(a);
    assert_true(serialization_retries() - retries_before >= 3);
    free(req_a);
    free(req_b);
    assert_int_equal(leased_proc_stop(fx.srv), 0);
    fx.srv = NULL;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_retry_pauses_hold_no_worker),
    };
    return cmocka_run_group_tests(tests, setup, http_fx_teardown);
}
