/*
 * failover_sql.c - the SQL path on a promoted replica, no leased involved:
 * an operator (or any client of the SQL API) calling lease.acquire
 * directly, as the service role at SERIALIZABLE, on a replica promoted
 * after the primary was lost is refused (reason "sealed") before anything
 * is decided, and so are renewal, fenced commit and fence_check.
 * lease.health() reports the seal from the first call, before anything has
 * recorded it; the first refused call records it (lease.namespace_state,
 * a high-priority audit alert) and lease.check_namespace() reports it.
 * lease.recover_epoch unseals and the next token is above everything
 * handed out before.
 */
#include "failover_drill.h"

/* The fields every request to the SQL API carries (docs/sql-api.md). */
#define SQL_REQ                                                                                    \
    "jsonb_build_object('deadline_at', to_char((now() + interval '1 minute') AT TIME ZONE "        \
    "'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), 'request_id', 'sql-' || gen_random_uuid(), "     \
    "'request_digest', encode(sha256(convert_to(gen_random_uuid()::text, 'UTF8')), 'hex'), "       \
    "'principal', jsonb_build_object('principal_id', 'prn_sql', 'client_id', 'cl_sql', "           \
    "'credential_id', 'cred_sql', 'principal_class', 'worker'))"

/* SELECT lease.acquire(...) of target, as text. */
static char *acquire_sql(const char *target)
{
    char *sql = malloc(2048);
    snprintf(sql, 2048,
             "SELECT lease.acquire(" SQL_REQ " || jsonb_build_object('lock_identity', "
             "jsonb_build_object('tenant_id', 'tenant-main', 'program_id', 'program-a', "
             "'target_namespace', 'starintel-target', 'target_id', '%s', 'actor_name', "
             "'usernamegen', 'workflow_name', 'default'), 'service_instance_id', 'inst_sql', "
             "'execution_id', 'exec_sql', 'job_id', 'job_sql'))::text",
             target);
    return sql;
}

/* Runs sql on url; returns its one value (heap) and, in sqlstate (>= 6
 * bytes), "" or the error's SQLSTATE. */
static char *run_sql(const char *url, const char *sql, char *sqlstate)
{
    PGconn *c = PQconnectdb(url);
    assert_int_equal(PQstatus(c), CONNECTION_OK);
    PGresult *r = PQexec(c, sql);
    char *out = NULL;
    sqlstate[0] = '\0';
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
        out = strdup(PQgetvalue(r, 0, 0));
    else if (PQresultErrorField(r, PG_DIAG_SQLSTATE))
        snprintf(sqlstate, 6, "%s", PQresultErrorField(r, PG_DIAG_SQLSTATE));
    PQclear(r);
    PQfinish(c);
    return out;
}

/* A JSON result's member as a string ("" when absent). */
static char *member(const char *json_text, const char *path)
{
    json_error_t jerr;
    json_t *o = json_loads(json_text, 0, &jerr);
    assert_non_null(o);
    char *copy = strdup(path), *save = NULL;
    json_t *at = o;
    for (char *k = strtok_r(copy, ".", &save); k && at; k = strtok_r(NULL, ".", &save))
        at = json_object_get(at, k);
    char *out;
    if (json_is_string(at))
        out = strdup(json_string_value(at));
    else if (at)
        out = json_dumps(at, JSON_ENCODE_ANY | JSON_COMPACT);
    else
        out = strdup("");
    free(copy);
    json_decref(o);
    return out;
}

static void test_sql_acquire_on_promoted_replica_is_refused(void **state)
{
    (void)state;
    testpair_t *pair = testpair_new();
    char *primary_svc = testpair_url(pair, "primary", "leased_app");
    char *replica = testpair_url(pair, "replica", "postgres");
    char *replica_svc = testpair_url(pair, "replica", "leased_app");
    testpair_run(pair, "replica", "async");
    char st[8];

    /* a lease on the primary, as the service role (serializable by the
     * role's default, as the operators' guide sets it up) */
    char *sql = acquire_sql("t-held");
    char *held = run_sql(primary_svc, sql, st);
    free(sql);
    assert_non_null(held);
    char *code = member(held, "code");
    assert_string_equal(code, "lease_acquired");
    free(code);
    char *lease_id = member(held, "lease.lease_id");
    char *token_text = member(held, "lease.fencing_token");
    long long held_token = atoll(token_text);
    assert_true(held_token >= 1);
    testpair_run(pair, "caught-up", NULL);

    testpair_run(pair, "kill", "primary");
    testpair_run(pair, "promote", "replica");

    /* nothing has recorded the seal yet, but health reports it already */
    assert_int_equal(testpg_query_int(replica, "SELECT sealed::int FROM lease.namespace_state"), 0);
    char *health = run_sql(replica_svc, "SELECT lease.health()::text", st);
    assert_non_null(health);
    char *sealed = member(health, "sealed");
    assert_string_equal(sealed, "true");
    free(sealed);
    char *why = member(health, "sealed_reason");
    assert_non_null(strstr(why, "timeline changed from 1 to 2"));
    free(why);
    free(health);

    /* lease.acquire called directly is refused before it decides */
    sql = acquire_sql("t-new");
    char *refused = run_sql(replica_svc, sql, st);
    free(sql);
    assert_non_null(refused);
    code = member(refused, "code");
    char *reason = member(refused, "reason");
    char *detail = member(refused, "detail");
    assert_string_equal(code, "lease_backend_unavailable");
    assert_string_equal(reason, "sealed");
    assert_non_null(strstr(detail, "timeline changed from 1 to 2"));
    free(code);
    free(reason);
    free(detail);
    free(refused);
    assert_int_equal(testpg_query_int(replica, "SELECT count(*) FROM lease.locks WHERE "
                                               "target_id = 't-new'"),
                     0);

    /* the refusal recorded the seal, with a high-priority alert */
    assert_int_equal(testpg_query_int(replica, "SELECT count(*) FROM lease.namespace_state WHERE "
                                               "sealed AND sealed_reason LIKE "
                                               "'timeline changed from 1 to 2%'"),
                     1);
    assert_int_equal(testpg_query_int(replica, "SELECT count(*) FROM lease.audit_events WHERE "
                                               "event_type = 'target_lease_alert' AND priority = "
                                               "'high' AND decision = 'error' AND reason LIKE "
                                               "'namespace sealed: timeline changed%'"),
                     1);
    char *check = run_sql(replica_svc, "SELECT lease.check_namespace()::text", st);
    assert_non_null(check);
    sealed = member(check, "sealed");
    assert_string_equal(sealed, "true");
    free(sealed);
    free(check);
    assert_int_equal(testpg_query_int(replica, "SELECT count(*) FROM lease.verify() WHERE "
                                               "problem = 'namespace_sealed'"),
                     1);

    /* renewal, fenced commit and fence_check of the lease held before */
    char buf[4096];
    snprintf(buf, sizeof buf,
             "SELECT lease.renew(" SQL_REQ " || jsonb_build_object('lock_identity', r #> "
             "'{lease,lock_identity}', 'lease_id', r #> '{lease,lease_id}', 'fencing_token', r #> "
             "'{lease,fencing_token}', 'service_instance_id', 'inst_sql'))::text "
             "FROM (SELECT '%s'::jsonb r) x",
             held);
    char *renew = run_sql(replica_svc, buf, st);
    assert_non_null(renew);
    reason = member(renew, "reason");
    assert_string_equal(reason, "sealed");
    free(reason);
    free(renew);
    snprintf(buf, sizeof buf,
             "SELECT lease.fenced_commit(" SQL_REQ " || jsonb_build_object('lock_identity', r #> "
             "'{lease,lock_identity}', 'lease_id', r #> '{lease,lease_id}', 'fencing_token', r #> "
             "'{lease,fencing_token}', 'execution_id', 'exec_sql', 'writes', "
             "jsonb_build_array(jsonb_build_object('kind', 'publication', 'topic', 'done', "
             "'payload', '{}'::jsonb))))::text FROM (SELECT '%s'::jsonb r) x",
             held);
    char *commit = run_sql(replica_svc, buf, st);
    assert_non_null(commit);
    reason = member(commit, "reason");
    assert_string_equal(reason, "sealed");
    free(reason);
    free(commit);
    snprintf(buf, sizeof buf,
             "SELECT lease.fence_check(r #> '{lease,lock_identity}', r #>> '{lease,lease_id}', "
             "(r #>> '{lease,fencing_token}')::bigint)::text FROM (SELECT '%s'::jsonb r) x",
             held);
    char *fenced = run_sql(replica_svc, buf, st);
    assert_null(fenced);
    assert_string_equal(st, "LS010");

    /* recovery from psql: unsealed, the next token above everything before */
    char *rec = run_sql(replica,
                        "BEGIN ISOLATION LEVEL SERIALIZABLE; SELECT lease.recover_epoch("
                        "'SQL drill: replica promoted')::text; COMMIT;",
                        st);
    /* PQexec returns the last statement's result (COMMIT) */
    free(rec);
    assert_string_equal(st, "");
    assert_int_equal(testpg_query_int(replica, "SELECT sealed::int FROM lease.namespace_state"), 0);
    sql = acquire_sql("t-held");
    char *after = run_sql(replica_svc, sql, st);
    free(sql);
    assert_non_null(after);
    char *after_token = member(after, "lease.fencing_token");
    assert_true(atoll(after_token) > held_token);
    assert_true(atoll(after_token) > 1000000000LL);
    printf("sql path: token before the failover %lld, after recovery %s\n", held_token,
           after_token);
    fflush(stdout);
    free(after_token);
    free(after);

    free(held);
    free(lease_id);
    free(token_text);
    free(replica_svc);
    free(replica);
    free(primary_svc);
    testpair_free(pair);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sql_acquire_on_promoted_replica_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
