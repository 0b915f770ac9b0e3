/*
 * valkey_codec.c - the exact JSON argument each leased_v1 function receives
 * from valkey_codec.c's encoders, pinned byte for byte. The pins were taken
 * from the jansson-built encoders (json_dumps, JSON_COMPACT) that the direct
 * writers replaced (docs/benchmarks.md, "leased on Valkey"): the same
 * members in the same order, the same escapes, empty optional members left
 * out, and a member whose text is not UTF-8 left out as json_string's
 * refusal left it out. And the packed answer (leased.lua packed_answer)
 * read, and refused whole when it is malformed. No server is needed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "valkey_codec.h"

static void pin(char *got, const char *want)
{
    if (got == NULL || strcmp(got, want) != 0)
        print_message("got:  %s\nwant: %s\n", got ? got : "(null)", want);
    assert_non_null(got);
    assert_string_equal(got, want);
    free(got);
}

static void fill_call(lease_call_t *c)
{
    snprintf(c->request_id, sizeof c->request_id, "req-1");
    snprintf(c->correlation_id, sizeof c->correlation_id, "corr \"q\" \\ \t\x01 \xc3\xa9");
    snprintf(c->deadline_class, sizeof c->deadline_class, "client");
    c->deadline.wall_ms = 1764900000123LL;
    snprintf(c->principal.principal_id, sizeof c->principal.principal_id, "prn_a");
    snprintf(c->principal.client_id, sizeof c->principal.client_id, "cli_a");
    snprintf(c->principal.credential_id, sizeof c->principal.credential_id, "cred_a");
    snprintf(c->principal.principal_class, sizeof c->principal.principal_class, "worker");
    snprintf(c->request_digest, sizeof c->request_digest, "%064d", 7);
}

static void fill_identity(lease_identity_t *i, bool with_class)
{
    snprintf(i->tenant_id, sizeof i->tenant_id, "t1");
    snprintf(i->program_id, sizeof i->program_id, "p1");
    snprintf(i->target_namespace, sizeof i->target_namespace, "ns");
    snprintf(i->target_id, sizeof i->target_id, "target/\xe2\x82\xac");
    snprintf(i->actor_name, sizeof i->actor_name, "actor");
    snprintf(i->workflow_name, sizeof i->workflow_name, "wf");
    if (with_class)
        snprintf(i->operation_class, sizeof i->operation_class, "batch");
}

#define CALL_JSON                                                                                  \
    "\"deadline_at_ms\":1764900000123,\"principal\":{\"principal_id\":\"prn_a\",\"client_id\":"    \
    "\"cli_a\",\"credential_id\":\"cred_a\",\"principal_class\":\"worker\"},\"request_id\":"       \
    "\"req-1\",\"request_digest\":"                                                                \
    "\"0000000000000000000000000000000000000000000000000000000000000007\","                        \
    "\"correlation_id\":\"corr \\\"q\\\" \\\\ \\t\\u0001 \xc3\xa9\",\"deadline_class\":\"client\""
/* what a single lease mutation's request ends with: it asks for the packed
 * answer (batches' items do not) */
#define PACKED ",\"packed_answer\":true"
#define IDENTITY_JSON                                                                              \
    "{\"tenant_id\":\"t1\",\"program_id\":\"p1\",\"target_namespace\":\"ns\",\"target_id\":"       \
    "\"target/\xe2\x82\xac\",\"actor_name\":\"actor\",\"workflow_name\":\"wf\""

static void acquire_pinned(void **state)
{
    (void)state;
    lease_acquire_req_t *r = calloc(1, sizeof *r);
    assert_non_null(r);
    fill_call(&r->call);
    fill_identity(&r->identity, false);
    snprintf(r->service_instance_id, sizeof r->service_instance_id, "svc");
    snprintf(r->execution_id, sizeof r->execution_id, "exe");
    snprintf(r->job_id, sizeof r->job_id, "job");
    snprintf(r->metadata_json, sizeof r->metadata_json, "{\"a\":[1,2.5,\"x\"]}");
    r->ttl_ms = 30000;
    pin(valkey_encode_acquire(r),
        "{" CALL_JSON ",\"lock_identity\":" IDENTITY_JSON "},\"service_instance_id\":\"svc\","
        "\"execution_id\":\"exe\",\"job_id\":\"job\",\"ttl_ms\":30000,"
        "\"metadata_json\":\"{\\\"a\\\":[1,2.5,\\\"x\\\"]}\"" PACKED "}");
    /* every optional member present, and an empty job id (always written) */
    fill_identity(&r->identity, true);
    snprintf(r->trace_id, sizeof r->trace_id, "tr");
    r->job_id[0] = '\0';
    r->maximum_lifetime_ms = -5;
    r->metadata_json[0] = '\0';
    pin(valkey_encode_acquire(r),
        "{" CALL_JSON ",\"lock_identity\":" IDENTITY_JSON ",\"operation_class\":\"batch\"},"
        "\"service_instance_id\":\"svc\",\"execution_id\":\"exe\",\"job_id\":\"\","
        "\"trace_id\":\"tr\",\"ttl_ms\":30000,\"maximum_lifetime_ms\":-5" PACKED "}");
    free(r);
}

static void call_without_optional_members_pinned(void **state)
{
    (void)state;
    lease_owner_req_t r = {0};
    r.call.deadline.wall_ms = 0;
    fill_identity(&r.identity, false);
    snprintf(r.lease_id, sizeof r.lease_id, "lse_1");
    pin(valkey_encode_owner(&r, true),
        "{\"deadline_at_ms\":0,\"principal\":{\"principal_id\":\"\",\"client_id\":\"\","
        "\"credential_id\":\"\",\"principal_class\":\"\"},\"lock_identity\":" IDENTITY_JSON
        "},\"lease_id\":\"lse_1\",\"fencing_token\":0,\"service_instance_id\":\"\"" PACKED "}");
}

static void owner_pinned(void **state)
{
    (void)state;
    lease_owner_req_t r[2];
    memset(r, 0, sizeof r);
    for (int i = 0; i < 2; i++) {
        fill_call(&r[i].call);
        fill_identity(&r[i].identity, i == 1);
        snprintf(r[i].lease_id, sizeof r[i].lease_id, "lse_%d", i);
        snprintf(r[i].service_instance_id, sizeof r[i].service_instance_id, "svc");
        r[i].fencing_token = 9007199254740993LL + i;
        r[i].ttl_ms = i == 0 ? 1500 : 0;
    }
#define OWNER0                                                                                     \
    "{" CALL_JSON ",\"lock_identity\":" IDENTITY_JSON "},\"lease_id\":\"lse_0\","                  \
    "\"fencing_token\":9007199254740993,\"service_instance_id\":\"svc\""
#define OWNER1                                                                                     \
    "{" CALL_JSON ",\"lock_identity\":" IDENTITY_JSON ",\"operation_class\":\"batch\"},"           \
    "\"lease_id\":\"lse_1\",\"fencing_token\":9007199254740994,\"service_instance_id\":\"svc\""
    pin(valkey_encode_owner(&r[0], true), OWNER0 ",\"ttl_ms\":1500" PACKED "}");
    pin(valkey_encode_owner(&r[0], false), OWNER0 PACKED "}");
    pin(valkey_encode_owner(&r[1], true), OWNER1 PACKED "}");
    pin(valkey_encode_owner_many(r, 2, true),
        "{\"renewals\":[" OWNER0 ",\"ttl_ms\":1500}," OWNER1 "}]}");
    pin(valkey_encode_owner_many(r, 2, false), "{\"releases\":[" OWNER0 "}," OWNER1 "}]}");
    pin(valkey_encode_owner_many(r, 0, false), "{\"releases\":[]}");
}

static void text_that_is_not_utf8_is_left_out(void **state)
{
    (void)state;
    lease_owner_req_t r = {0};
    fill_call(&r.call);
    fill_identity(&r.identity, false);
    snprintf(r.lease_id, sizeof r.lease_id, "lse_\xff");
    snprintf(r.service_instance_id, sizeof r.service_instance_id, "svc");
    snprintf(r.call.request_id, sizeof r.call.request_id, "\xc3\x28");
    pin(valkey_encode_owner(&r, false),
        "{\"deadline_at_ms\":1764900000123,\"principal\":{\"principal_id\":\"prn_a\","
        "\"client_id\":\"cli_a\",\"credential_id\":\"cred_a\",\"principal_class\":\"worker\"},"
        "\"request_digest\":\"0000000000000000000000000000000000000000000000000000000000000007\","
        "\"correlation_id\":\"corr \\\"q\\\" \\\\ \\t\\u0001 \xc3\xa9\",\"deadline_class\":"
        "\"client\",\"lock_identity\":" IDENTITY_JSON "},\"fencing_token\":0,"
        "\"service_instance_id\":\"svc\"" PACKED "}");
}

static void admin_pinned(void **state)
{
    (void)state;
    lease_admin_req_t r = {0};
    fill_call(&r.call);
    fill_identity(&r.identity, false);
    snprintf(r.lease_id, sizeof r.lease_id, "lse_2");
    r.fencing_token = 42;
    snprintf(r.reason, sizeof r.reason, "line\nbreak");
    pin(valkey_encode_admin(&r), "{" CALL_JSON ",\"lock_identity\":" IDENTITY_JSON
                                 "},\"lease_id\":\"lse_2\",\"fencing_token\":42,"
                                 "\"reason\":\"line\\nbreak\"" PACKED "}");
    snprintf(r.incident_id, sizeof r.incident_id, "inc-9");
    pin(valkey_encode_admin(&r),
        "{" CALL_JSON ",\"lock_identity\":" IDENTITY_JSON
        "},\"lease_id\":\"lse_2\",\"fencing_token\":42,"
        "\"reason\":\"line\\nbreak\",\"incident_id\":\"inc-9\"" PACKED "}");
}

static void inspect_and_list_pinned(void **state)
{
    (void)state;
    lease_inspect_req_t *r = calloc(1, sizeof *r);
    assert_non_null(r);
    fill_call(&r->call);
    snprintf(r->scope.tenant_id, sizeof r->scope.tenant_id, "t1");
    snprintf(r->scope.program_id, sizeof r->scope.program_id, "*");
    r->scope.all_actors = true;
    r->scope.n_actors = 2;
    snprintf(r->scope.actor_names[0], sizeof r->scope.actor_names[0], "a\xff");
    snprintf(r->scope.actor_names[1], sizeof r->scope.actor_names[1], "b");
    snprintf(r->lease_id, sizeof r->lease_id, "lse_3");
#define SCOPE "\"scope\":{\"tenant_id\":\"t1\",\"program_id\":\"*\",\"actor_names\":[\"*\",\"b\"]}"
    pin(valkey_encode_inspect(r), "{" CALL_JSON "," SCOPE ",\"lease_id\":\"lse_3\"}");
    r->by_identity = true;
    r->scope.all_actors = false;
    r->scope.n_actors = 0;
    fill_identity(&r->identity, true);
    pin(valkey_encode_inspect(r),
        "{" CALL_JSON ",\"scope\":{\"tenant_id\":\"t1\",\"program_id\":\"*\",\"actor_names\":[]},"
        "\"lock_identity\":" IDENTITY_JSON ",\"operation_class\":\"batch\"}}");
    free(r);

    lease_list_req_t *l = calloc(1, sizeof *l);
    assert_non_null(l);
    fill_call(&l->call);
    snprintf(l->scope.tenant_id, sizeof l->scope.tenant_id, "t1");
    snprintf(l->scope.program_id, sizeof l->scope.program_id, "p1");
    l->scope.n_actors = 1;
    snprintf(l->scope.actor_names[0], sizeof l->scope.actor_names[0], "b");
    snprintf(l->tenant_id, sizeof l->tenant_id, "t1");
    snprintf(l->program_id, sizeof l->program_id, "p1");
    snprintf(l->target_namespace, sizeof l->target_namespace, "ns");
    snprintf(l->target_id, sizeof l->target_id, "x");
    snprintf(l->owner_principal_id, sizeof l->owner_principal_id, "prn_a");
#define LSCOPE "\"scope\":{\"tenant_id\":\"t1\",\"program_id\":\"p1\",\"actor_names\":[\"b\"]}"
    l->by = LEASE_LIST_BY_PROGRAM;
    pin(valkey_encode_list(l),
        "{" CALL_JSON "," LSCOPE ",\"by\":\"program\",\"tenant_id\":\"t1\",\"program_id\":\"p1\"}");
    l->by = LEASE_LIST_BY_TARGET;
    l->page_size = 50;
    snprintf(l->page_token, sizeof l->page_token, "pg");
    pin(valkey_encode_list(l),
        "{" CALL_JSON "," LSCOPE ",\"by\":\"target\",\"tenant_id\":\"t1\",\"program_id\":\"p1\","
        "\"target_namespace\":\"ns\",\"target_id\":\"x\",\"page_size\":50,\"page_token\":\"pg\"}");
    l->by = LEASE_LIST_BY_OWNER;
    l->page_size = 0;
    l->page_token[0] = '\0';
    pin(valkey_encode_list(l), "{" CALL_JSON "," LSCOPE ",\"by\":\"owner\",\"tenant_id\":\"t1\","
                               "\"program_id\":\"p1\",\"owner_principal_id\":\"prn_a\"}");
    free(l);
}

static void commit_pinned(void **state)
{
    (void)state;
    lease_commit_req_t *r = calloc(1, sizeof *r);
    assert_non_null(r);
    fill_call(&r->call);
    fill_identity(&r->identity, false);
    snprintf(r->lease_id, sizeof r->lease_id, "lse_4");
    r->fencing_token = 7;
    snprintf(r->execution_id, sizeof r->execution_id, "exe");
    r->n_writes = 2;
    r->writes[0] =
        (lease_write_t){.kind = LEASE_WRITE_DOCUMENT, .expected_revision = 3, .json = "{\"v\":1}"};
    snprintf(r->writes[0].key, sizeof r->writes[0].key, "doc/1");
    r->writes[1] = (lease_write_t){.kind = LEASE_WRITE_PUBLICATION, .json = "[]"};
    snprintf(r->writes[1].key, sizeof r->writes[1].key, "topic.a");
    pin(valkey_encode_commit(r),
        "{" CALL_JSON ",\"lock_identity\":" IDENTITY_JSON "},\"lease_id\":\"lse_4\","
        "\"fencing_token\":7,\"execution_id\":\"exe\",\"writes\":[{\"kind\":\"document\","
        "\"key\":\"doc/1\",\"expected_revision\":3,\"body_json\":\"{\\\"v\\\":1}\"},"
        "{\"kind\":\"publication\",\"topic\":\"topic.a\",\"payload_json\":\"[]\"}]}");
    r->writes[1].json = NULL;
    assert_null(valkey_encode_commit(r));
    r->writes[1].json = "[]";
    r->writes[1].kind = (lease_write_kind_t)99;
    assert_null(valkey_encode_commit(r));
    free(r);
}

static void audit_pinned(void **state)
{
    (void)state;
    lease_audit_event_t *e = calloc(2, sizeof *e);
    assert_non_null(e);
    e[0].event_type = "target_lease_acquire";
    e[0].occurred_at_ms = 1764900000000LL;
    e[0].latency_ms = 3;
    e[0].code = LEASE_ACQUIRED;
    e[0].decision = "allow";
    e[0].backend_health = "ok";
    fill_call(&e[0].call);
    snprintf(e[0].call.trace_id, sizeof e[0].call.trace_id, "tr");
    e[0].has_identity = true;
    fill_identity(&e[0].identity, false);
    snprintf(e[0].lease_id, sizeof e[0].lease_id, "lse_5");
    e[0].fencing_token = 11;
    snprintf(e[0].service_instance_id, sizeof e[0].service_instance_id, "svc");
    e[0].requested_ttl_ms = 1000;
    e[0].resulting_state = LEASE_STATE_ACTIVE;
    e[0].event_count = 1;
    snprintf(e[0].source_address, sizeof e[0].source_address, "127.0.0.1");
    /* no decision: derived from the code, as the PostgreSQL adapter does */
    e[1].event_type = "auth_denied";
    e[1].code = LEASE_BACKEND_UNAVAILABLE;
    e[1].event_count = 4;
    snprintf(e[1].reason, sizeof e[1].reason, "r");
    pin(valkey_encode_audit(e, 2),
        "{\"events\":[{\"event_type\":\"target_lease_acquire\",\"occurred_at_ms\":1764900000000,"
        "\"latency_ms\":3,\"code\":\"lease_acquired\",\"decision\":\"allow\","
        "\"backend_health\":\"ok\",\"source\":\"service\",\"principal_id\":\"prn_a\","
        "\"client_id\":\"cli_a\",\"credential_id\":\"cred_a\",\"request_id\":\"req-1\","
        "\"correlation_id\":\"corr \\\"q\\\" \\\\ \\t\\u0001 \xc3\xa9\",\"trace_id\":\"tr\","
        "\"deadline_class\":\"client\",\"tenant_id\":\"t1\",\"program_id\":\"p1\","
        "\"target_namespace\":\"ns\",\"target_id\":\"target/\xe2\x82\xac\",\"actor_name\":"
        "\"actor\",\"workflow_name\":\"wf\",\"lease_id\":\"lse_5\",\"fencing_token\":11,"
        "\"service_instance_id\":\"svc\",\"requested_ttl_ms\":1000,\"resulting_state\":"
        "\"active\",\"source_address\":\"127.0.0.1\"},{\"event_type\":\"auth_denied\","
        "\"occurred_at_ms\":0,\"latency_ms\":0,\"code\":\"lease_backend_unavailable\","
        "\"decision\":\"error\",\"source\":\"service\",\"reason\":\"r\","
        "\"event_count\":4}]}");
    free(e);
}

/* ---- packed answers ----------------------------------------------------- */

/* The 26 members of STORED_FIELDS, as leased.lua's stored_answer_encode
 * writes them (metadata empty: lease_pairs answers it as "{}"). */
#define MEMBERS                                                                                    \
    "t1\0p1\0ns\0target\0actor\0wf\0default\0lse_7\0"                                              \
    "4294967297\0"                                                                                 \
    "100\0"                                                                                        \
    "200\0"                                                                                        \
    "30100\0\0"                                                                                    \
    "30000\0"                                                                                      \
    "3600000\0prn_a\0cli_a\0cred_a\0svc\0exe\0job\0\0req-1\0\0\0\0"

static bool decode_text(const char *text, size_t len, lease_result_t *res)
{
    redisReply r;
    memset(&r, 0, sizeof r);
    r.type = REDIS_REPLY_STRING;
    r.str = (char *)(uintptr_t)text; /* read only: valkey_decode_result takes it const */
    r.len = len;
    return valkey_decode_result(&r, res);
}

#define DECODES(lit, res) decode_text(lit, sizeof(lit) - 1, res)

/* "\1lease_acquired\0active\0" and MEMBERS' members, members[member]
 * replaced by value, then "replayed\0" "0": its length in out. */
static size_t packed_with(char *out, size_t cap, int member, const char *value)
{
    static const char *const members[26] = {
        "t1",  "p1",  "ns",    "target", "actor", "wf",      "default", "lse_7", "4294967297",
        "100", "200", "30100", "",       "30000", "3600000", "prn_a",   "cli_a", "cred_a",
        "svc", "exe", "job",   "",       "req-1", "",        "",        ""};
    static const char head[] = "\1lease_acquired\0active";
    size_t n = sizeof head - 1;
    memcpy(out, head, n);
    for (int k = 0; k < 26; k++) {
        const char *m = k == member ? value : members[k];
        size_t len = strlen(m);
        assert_true(n + 1 + len < cap);
        out[n++] = '\0';
        memcpy(out + n, m, len);
        n += len;
    }
    static const char tail[] = "\0replayed\0"
                               "0";
    assert_true(n + sizeof tail - 1 <= cap);
    memcpy(out + n, tail, sizeof tail - 1);
    return n + sizeof tail - 1;
}

static void packed_answer_read(void **state)
{
    (void)state;
    lease_result_t res;
    assert_true(DECODES("\1lease_acquired\0active\0" MEMBERS "previous_state\0expired\0replayed\0"
                        "1\0current_state\0active",
                        &res));
    assert_int_equal(res.code, LEASE_ACQUIRED);
    assert_true(res.has_lease);
    assert_true(res.replayed);
    assert_int_equal(res.current_state, LEASE_STATE_ACTIVE);
    assert_int_equal(res.lease.state, LEASE_STATE_ACTIVE);
    assert_string_equal(res.lease.identity.tenant_id, "t1");
    assert_string_equal(res.lease.identity.operation_class, "default");
    assert_string_equal(res.lease.lease_id, "lse_7");
    assert_int_equal(res.lease.fencing_token, 4294967297LL);
    assert_int_equal(res.lease.acquired_at_ms, 100);
    assert_int_equal(res.lease.renewed_at_ms, 200);
    assert_int_equal(res.lease.expires_at_ms, 30100);
    assert_int_equal(res.lease.ended_at_ms, 0);
    assert_int_equal(res.lease.ttl_ms, 30000);
    assert_int_equal(res.lease.maximum_lifetime_ms, 3600000);
    assert_string_equal(res.lease.owner_principal_id, "prn_a");
    assert_string_equal(res.lease.owner_client_id, "cli_a");
    assert_string_equal(res.lease.owner_credential_id, "cred_a");
    assert_string_equal(res.lease.service_instance_id, "svc");
    assert_string_equal(res.lease.execution_id, "exe");
    assert_string_equal(res.lease.job_id, "job");
    assert_string_equal(res.lease.trace_id, "");
    assert_string_equal(res.lease.request_id, "req-1");
    assert_string_equal(res.lease.metadata_json, "{}");
    assert_string_equal(res.lease.end_reason, "");
    /* not replayed */
    assert_true(DECODES("\1lease_released\0released\0" MEMBERS "replayed\0"
                        "0\0current_state\0released",
                        &res));
    assert_false(res.replayed);
    assert_int_equal(res.lease.state, LEASE_STATE_RELEASED);
}

/* Each malformed answer is refused whole (the adapter answers
 * lease_outcome_unknown for a mutation it cannot read), nothing half read. */
static void packed_answer_malformed_refused(void **state)
{
    (void)state;
    lease_result_t res;
    /* too few members */
    assert_false(DECODES("\1lease_acquired\0active\0t1\0p1", &res));
    assert_int_equal(res.code, 0);
    assert_false(res.has_lease);
    /* a pair without its value */
    assert_false(DECODES("\1lease_acquired\0active\0" MEMBERS "replayed", &res));
    /* an unknown code, an unknown state */
    assert_false(DECODES("\1lease_taken\0active\0" MEMBERS "replayed\0"
                         "0",
                         &res));
    assert_false(DECODES("\1lease_acquired\0busy\0" MEMBERS "replayed\0"
                         "0",
                         &res));
    /* one member made bad: a token that is not a number, or none; no
     * tenant; no lease id */
    static const struct {
        int member;
        const char *value;
    } bad[] = {{8, "12x"}, {8, ""}, {0, ""}, {7, ""}};
    char whole[512];
    size_t wn = packed_with(whole, sizeof whole, -1, NULL); /* none made bad: read */
    assert_true(decode_text(whole, wn, &res));
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char text[512];
        size_t n = packed_with(text, sizeof text, bad[k].member, bad[k].value);
        assert_false(decode_text(text, n, &res));
        assert_false(res.has_lease);
    }
    /* a current state that is no state */
    assert_false(DECODES("\1lease_acquired\0active\0" MEMBERS "current_state\0gone", &res));
    assert_int_equal(res.code, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(acquire_pinned),
        cmocka_unit_test(call_without_optional_members_pinned),
        cmocka_unit_test(owner_pinned),
        cmocka_unit_test(text_that_is_not_utf8_is_left_out),
        cmocka_unit_test(admin_pinned),
        cmocka_unit_test(inspect_and_list_pinned),
        cmocka_unit_test(commit_pinned),
        cmocka_unit_test(audit_pinned),
        cmocka_unit_test(packed_answer_read),
        cmocka_unit_test(packed_answer_malformed_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
