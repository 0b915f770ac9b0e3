/*
 * test_server_codec.c - strict decoding into store requests (what is
 * accepted, normalised, and how refusals name their field) and the
 * encoding of leases and envelopes (which fields which viewer sees).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "lease/json_text.h"
#include "server/json_codec.h"

static const leased_codec_limits_t limits = {10000};

#define ID                                                                                         \
    "\"lock_identity\":{\"tenant_id\":\"Tenant-Main\",\"program_id\":\"program-a\","               \
    "\"target_namespace\":\"starintel-target\",\"target_id\":\"Target_01\",\"actor_name\":"        \
    "\"usernamegen\",\"workflow_name\":\"default\"}"

static leased_request_t *decode_ok(leased_op_t op, const char *body)
{
    leased_request_t *req = leased_request_new(op);
    leased_codec_error_t err;
    bool ok = leased_codec_decode(op, body, strlen(body), NULL, &limits, req, &err);
    if (!ok)
        fprintf(stderr, "refused (%s: %s): %s\n", err.field, err.reason, body);
    assert_true(ok);
    return req;
}

static void decode_bad(leased_op_t op, const char *body, const char *field)
{
    leased_request_t *req = leased_request_new(op);
    leased_codec_error_t err;
    bool ok = leased_codec_decode(op, body, strlen(body), NULL, &limits, req, &err);
    if (ok || strcmp(err.field, field) != 0)
        fprintf(stderr, "expected refusal naming %s, got %s (%s): %s\n", field,
                ok ? "success" : err.field, err.reason ? err.reason : "", body);
    assert_false(ok);
    assert_string_equal(err.field, field);
    assert_non_null(err.reason);
    leased_request_free(req);
}

static void test_acquire_accepted(void **state)
{
    (void)state;
    leased_request_t *req = decode_ok(
        LEASED_OP_ACQUIRE,
        "{\"request_id\":\"r-1\"," ID ",\"service_instance_id\":\"i\",\"execution_id\":\"e\","
        "\"job_id\":\"j\",\"ttl_ms\":15000,\"metadata\":{\"z\":1,\"a\":\"x\",\"b\":true},"
        "\"wait_ms\":250,\"deadline_ms\":900}");
    const lease_acquire_req_t *a = &req->u.acquire;
    assert_string_equal(a->call.request_id, "r-1");
    assert_string_equal(a->identity.tenant_id, "tenant-main"); /* case-folded */
    assert_string_equal(a->identity.target_id, "Target_01");   /* preserved */
    assert_string_equal(a->identity.operation_class, "default");
    assert_int_equal(a->ttl_ms, 15000);
    assert_int_equal(a->maximum_lifetime_ms, 0);
    /* metadata is stored compact with sorted keys (digest stability) */
    assert_string_equal(a->metadata_json, "{\"a\":\"x\",\"b\":true,\"z\":1}");
    assert_int_equal(req->wait_ms, 250);
    assert_int_equal(req->deadline.kind, LEASED_DEADLINE_RELATIVE);
    assert_int_equal(req->deadline.ms, 900);
    leased_request_free(req);

    /* operation_class null is the default; deadline_at parses */
    req = decode_ok(LEASED_OP_ACQUIRE,
                    "{\"request_id\":\"r\",\"lock_identity\":{\"tenant_id\":\"t\",\"program_id\":"
                    "\"p\",\"target_namespace\":\"n\",\"target_id\":\"x\",\"actor_name\":\"a\","
                    "\"workflow_name\":\"w\",\"operation_class\":null},\"service_instance_id\":"
                    "\"i\",\"execution_id\":\"e\",\"job_id\":\"j\",\"deadline_at\":"
                    "\"2030-01-02T03:04:05.678+01:00\"}");
    assert_string_equal(req->u.acquire.identity.operation_class, "default");
    assert_string_equal(req->u.acquire.metadata_json, "{}");
    assert_int_equal(req->deadline.kind, LEASED_DEADLINE_ABSOLUTE);
    assert_int_equal(req->deadline.ms, INT64_C(1893549845678));
    leased_request_free(req);
}

static void test_refusals_name_fields(void **state)
{
    (void)state;
    const char *rest = ",\"service_instance_id\":\"i\",\"execution_id\":\"e\",\"job_id\":\"j\"";
    char body[1024];
#define BAD(extra, field)                                                                          \
    do {                                                                                           \
        snprintf(body, sizeof body, "{\"request_id\":\"r\"," ID "%s%s}", rest, extra);             \
        decode_bad(LEASED_OP_ACQUIRE, body, field);                                                \
    } while (0)
    BAD(",\"ttl_ms\":1.5", "ttl_ms");
    BAD(",\"ttl_ms\":-1", "ttl_ms");
    BAD(",\"maximum_lifetime_ms\":\"1\"", "maximum_lifetime_ms");
    BAD(",\"wait_ms\":10001", "wait_ms");
    BAD(",\"trace_id\":\"has space\"", "trace_id");
    BAD(",\"metadata\":{\"a-b\":1}", "metadata.a-b");
    BAD(",\"metadata\":{\"a\":[1]}", "metadata.a");
    BAD(",\"deadline_ms\":0", "deadline_ms");
    BAD(",\"extra\":{}", "extra");
#undef BAD
    decode_bad(LEASED_OP_ACQUIRE, "{\"a\":{\"b\":{\"c\":1,\"c\":2}}}", "a.b.c");
    decode_bad(LEASED_OP_ACQUIRE, "{\"a\":[0,{\"b\":1},{\"c\":1,\"c\":1}]}", "a[2].c");
    decode_bad(LEASED_OP_ACQUIRE, "{\"x\":\"\\\"quoted\\\"\",\"x\":1}", "x");
    decode_bad(LEASED_OP_ACQUIRE, "{\"n\":123456789012345678901234567890}", "n");
    decode_bad(LEASED_OP_ACQUIRE, "{\"request_id\":\"r\"", "body");
    decode_bad(LEASED_OP_ACQUIRE, "null", "body");
    decode_bad(LEASED_OP_RENEW,
               "{\"request_id\":\"r\"," ID ",\"lease_id\":\"l\","
               "\"fencing_token\":0,\"service_instance_id\":\"i\"}",
               "fencing_token");
    decode_bad(LEASED_OP_RELEASE,
               "{\"request_id\":\"r\"," ID ",\"lease_id\":\"l\","
               "\"fencing_token\":1,\"service_instance_id\":\"i\","
               "\"ttl_ms\":1000}",
               "ttl_ms"); /* release takes no TTL */
    decode_bad(LEASED_OP_REVOKE,
               "{\"request_id\":\"r\"," ID ",\"lease_id\":\"l\","
               "\"fencing_token\":1,\"reason\":\"line\\nbreak\"}",
               "reason");
    decode_bad(LEASED_OP_INSPECT, "{\"lease_id\":\"l\"}", "lease_id");
    decode_bad(LEASED_OP_LIST,
               "{\"by\":\"owner\",\"tenant_id\":\"t\",\"program_id\":\"p\","
               "\"target_id\":\"x\"}",
               "target_id");
    decode_bad(LEASED_OP_LIST, "{\"by\":\"program\",\"tenant_id\":\"t\",\"program_id\":\"*\"}",
               "program_id");
    decode_bad(LEASED_OP_LIST,
               "{\"by\":\"program\",\"tenant_id\":\"t\",\"program_id\":\"p\","
               "\"page_token\":\"\"}",
               "page_token");
    /* by program and by target name their scope; by owner may leave it to
     * the credential (the service fills it in) */
    decode_bad(LEASED_OP_LIST, "{\"by\":\"program\",\"program_id\":\"p\"}", "tenant_id");
    decode_bad(LEASED_OP_LIST, "{\"by\":\"program\",\"tenant_id\":\"t\"}", "program_id");
    decode_bad(LEASED_OP_LIST,
               "{\"by\":\"target\",\"tenant_id\":\"t\",\"target_namespace\":\"n\","
               "\"target_id\":\"x\"}",
               "program_id");
    decode_bad(LEASED_OP_LIST, "{\"by\":\"owner\",\"tenant_id\":\"Not Valid\"}", "tenant_id");
    leased_request_t *owner = decode_ok(LEASED_OP_LIST, "{\"by\":\"owner\"}");
    assert_int_equal(owner->u.list.by, LEASE_LIST_BY_OWNER);
    assert_string_equal(owner->u.list.tenant_id, "");
    assert_string_equal(owner->u.list.program_id, "");
    leased_request_free(owner);
    owner = decode_ok(LEASED_OP_LIST, "{\"by\":\"owner\",\"program_id\":\"Program-A\"}");
    assert_string_equal(owner->u.list.tenant_id, "");
    assert_string_equal(owner->u.list.program_id, "program-a");
    leased_request_free(owner);
    decode_bad(LEASED_OP_COMMIT,
               "{\"request_id\":\"r\"," ID ",\"lease_id\":\"l\","
               "\"fencing_token\":1,\"execution_id\":\"e\",\"trace_id\":\"t\","
               "\"writes\":[{\"kind\":\"document\",\"key\":\"k\","
               "\"expected_revision\":0,\"body\":{},\"topic\":\"x\"}]}",
               "writes[0].topic");
    decode_bad(LEASED_OP_COMMIT,
               "{\"request_id\":\"r\"," ID ",\"lease_id\":\"l\","
               "\"fencing_token\":1,\"execution_id\":\"e\",\"trace_id\":\"t\","
               "\"writes\":[{\"kind\":\"publication\",\"topic\":\"t\","
               "\"payload\":3}]}",
               "writes[0].payload");
    /* a topic is an AMQP routing key: 255 bytes at most (a document key 256) */
    char topic[300];
    memset(topic, 't', 256);
    topic[256] = '\0';
    char commit[700];
    snprintf(commit, sizeof commit,
             "{\"request_id\":\"r\"," ID ",\"lease_id\":\"l\","
             "\"fencing_token\":1,\"execution_id\":\"e\",\"trace_id\":\"t\","
             "\"writes\":[{\"kind\":\"publication\",\"topic\":\"%s\",\"payload\":{}}]}",
             topic);
    decode_bad(LEASED_OP_COMMIT, commit, "writes[0].topic");
    topic[255] = '\0';
    snprintf(commit, sizeof commit,
             "{\"request_id\":\"r\"," ID ",\"lease_id\":\"l\","
             "\"fencing_token\":1,\"execution_id\":\"e\",\"trace_id\":\"t\","
             "\"writes\":[{\"kind\":\"publication\",\"topic\":\"%s\",\"payload\":{}}]}",
             topic);
    leased_request_free(decode_ok(LEASED_OP_COMMIT, commit));
    /* a field name is capped, never overflowing */
    char longkey[300];
    memset(longkey, 'k', 200);
    longkey[200] = '\0';
    snprintf(body, sizeof body, "{\"%s\":1}", longkey);
    leased_request_t *req = leased_request_new(LEASED_OP_ACQUIRE);
    leased_codec_error_t err;
    assert_false(
        leased_codec_decode(LEASED_OP_ACQUIRE, body, strlen(body), NULL, &limits, req, &err));
    assert_int_equal(strlen(err.field), LEASE_FIELD_MAX);
    leased_request_free(req);
}

static void test_get_and_commit(void **state)
{
    (void)state;
    leased_request_t *req = leased_request_new(LEASED_OP_GET);
    leased_codec_error_t err;
    assert_true(leased_codec_decode(LEASED_OP_GET, "", 0, "lease_abc", &limits, req, &err));
    assert_false(req->u.inspect.by_identity);
    assert_string_equal(req->u.inspect.lease_id, "lease_abc");
    assert_false(leased_codec_decode(LEASED_OP_GET, "", 0, "bad id", &limits, req, &err));
    assert_string_equal(err.field, "lease_id");
    leased_request_free(req);

    req = decode_ok(LEASED_OP_COMMIT,
                    "{\"request_id\":\"r\"," ID ",\"lease_id\":\"l\",\"fencing_token\":3,"
                    "\"execution_id\":\"e\",\"trace_id\":\"t\",\"writes\":[{\"kind\":"
                    "\"document\",\"key\":\"docs/a:1\",\"expected_revision\":2,\"body\":{\"b\":"
                    "2,\"a\":1}},{\"kind\":\"publication\",\"topic\":\"done\",\"payload\":{}}]}");
    const lease_commit_req_t *c = &req->u.commit;
    assert_int_equal(c->n_writes, 2);
    assert_int_equal(c->writes[0].kind, LEASE_WRITE_DOCUMENT);
    assert_string_equal(c->writes[0].key, "docs/a:1");
    assert_int_equal(c->writes[0].expected_revision, 2);
    assert_string_equal(c->writes[0].json, "{\"a\":1,\"b\":2}");
    assert_int_equal(c->writes[1].kind, LEASE_WRITE_PUBLICATION);
    assert_string_equal(c->writes[1].key, "done");
    assert_string_equal(c->writes[1].json, "{}");
    leased_request_free(req);
}

static lease_record_t sample_record(void)
{
    lease_record_t r;
    memset(&r, 0, sizeof r);
    snprintf(r.identity.tenant_id, sizeof r.identity.tenant_id, "tenant-main");
    snprintf(r.identity.program_id, sizeof r.identity.program_id, "program-a");
    snprintf(r.identity.target_namespace, sizeof r.identity.target_namespace, "ns");
    snprintf(r.identity.target_id, sizeof r.identity.target_id, "T1");
    snprintf(r.identity.actor_name, sizeof r.identity.actor_name, "actor");
    snprintf(r.identity.workflow_name, sizeof r.identity.workflow_name, "default");
    snprintf(r.identity.operation_class, sizeof r.identity.operation_class, "default");
    snprintf(r.lease_id, sizeof r.lease_id, "lease_1");
    r.fencing_token = 42;
    r.state = LEASE_STATE_ACTIVE;
    r.acquired_at_ms = INT64_C(1785931200000);
    r.renewed_at_ms = r.acquired_at_ms;
    r.expires_at_ms = r.acquired_at_ms + 30000;
    r.ttl_ms = 30000;
    r.maximum_lifetime_ms = 3600000;
    snprintf(r.owner_principal_id, sizeof r.owner_principal_id, "prn_owner");
    snprintf(r.owner_client_id, sizeof r.owner_client_id, "cl_owner");
    snprintf(r.owner_credential_id, sizeof r.owner_credential_id, "key_x");
    snprintf(r.service_instance_id, sizeof r.service_instance_id, "inst");
    snprintf(r.execution_id, sizeof r.execution_id, "exec");
    snprintf(r.job_id, sizeof r.job_id, "job");
    snprintf(r.trace_id, sizeof r.trace_id, "trace");
    snprintf(r.request_id, sizeof r.request_id, "req");
    snprintf(r.metadata_json, sizeof r.metadata_json, "{\"k\":1}");
    return r;
}

static json_t *lease_for(const char *viewer, bool audit)
{
    lease_result_t res;
    memset(&res, 0, sizeof res);
    res.code = LEASE_INSPECTED;
    res.has_lease = true;
    res.lease = sample_record();
    leased_view_t view = {viewer, audit};
    char *text = leased_codec_lease_envelope(&res, "corr_x", &view);
    json_t *root = json_loads(text, 0, NULL);
    free(text);
    assert_non_null(root);
    assert_string_equal(json_string_value(json_object_get(root, "status")), "success");
    assert_string_equal(json_string_value(json_object_get(root, "code")), "lease_inspected");
    json_t *lease = json_incref(json_object_get(root, "lease"));
    json_decref(root);
    return lease;
}

static void test_views(void **state)
{
    (void)state;
    json_t *owner = lease_for("prn_owner", false);
    assert_string_equal(json_string_value(json_object_get(owner, "execution_id")), "exec");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(owner, "metadata"), "k")),
                     1);
    assert_null(json_object_get(owner, "owner_principal_id"));
    assert_string_equal(json_string_value(json_object_get(owner, "acquired_at")),
                        "2026-08-05T12:00:00.000Z");
    assert_string_equal(json_string_value(json_object_get(owner, "expires_at")),
                        "2026-08-05T12:00:30.000Z");
    assert_null(json_object_get(owner, "ended_at"));
    json_decref(owner);

    json_t *stranger = lease_for("prn_someone", false);
    static const char *const private_fields[] = {"service_instance_id",
                                                 "execution_id",
                                                 "job_id",
                                                 "trace_id",
                                                 "metadata",
                                                 "owner_principal_id",
                                                 "owner_client_id",
                                                 "owner_credential_id",
                                                 "request_id",
                                                 "lock_key",
                                                 NULL};
    for (const char *const *f = private_fields; *f; f++)
        assert_null(json_object_get(stranger, *f));
    assert_int_equal(json_integer_value(json_object_get(stranger, "fencing_token")), 42);
    json_decref(stranger);

    json_t *auditor = lease_for("prn_auditor", true);
    assert_string_equal(json_string_value(json_object_get(auditor, "owner_principal_id")),
                        "prn_owner");
    assert_string_equal(json_string_value(json_object_get(auditor, "owner_client_id")), "cl_owner");
    assert_null(json_object_get(auditor, "owner_credential_id"));
    assert_null(json_object_get(auditor, "request_id"));
    json_decref(auditor);
}

static void test_envelopes(void **state)
{
    (void)state;
    char *text =
        leased_codec_error_envelope(LEASE_RATE_LIMITED, "corr_a", NULL, 250, -1, NULL, NULL);
    json_t *e = json_loads(text, 0, NULL);
    free(text);
    assert_string_equal(json_string_value(json_object_get(e, "status")), "error");
    assert_string_equal(json_string_value(json_object_get(e, "code")), "lease_rate_limited");
    assert_string_equal(json_string_value(json_object_get(e, "msg")), "Too many requests");
    assert_true(json_is_true(json_object_get(e, "retryable")));
    assert_int_equal(json_integer_value(json_object_get(e, "retry_after_ms")), 250);
    assert_null(json_object_get(e, "field"));
    assert_null(json_object_get(e, "current_revision"));
    json_decref(e);

    text = leased_codec_error_envelope(LEASE_WRITE_CONFLICT, "corr_b",
                                       "writes[1].expected_revision", 0, 4, NULL, NULL);
    e = json_loads(text, 0, NULL);
    free(text);
    assert_string_equal(json_string_value(json_object_get(e, "field")),
                        "writes[1].expected_revision");
    assert_int_equal(json_integer_value(json_object_get(e, "current_revision")), 4);
    assert_null(json_object_get(e, "retry_after_ms"));
    assert_false(json_is_true(json_object_get(e, "retryable")));
    json_decref(e);

    /* lists: next_page_token only when there is a next page */
    lease_record_t recs[2] = {sample_record(), sample_record()};
    lease_list_result_t list = {.code = LEASE_LISTED, .count = 2, .leases = recs};
    leased_view_t view = {"prn_other", false};
    text = leased_codec_list_envelope(&list, "corr_c", &view);
    e = json_loads(text, 0, NULL);
    free(text);
    assert_int_equal(json_array_size(json_object_get(e, "leases")), 2);
    assert_null(json_object_get(e, "next_page_token"));
    json_decref(e);
    snprintf(list.next_page_token, sizeof list.next_page_token, "abc.def");
    text = leased_codec_list_envelope(&list, "corr_c", &view);
    e = json_loads(text, 0, NULL);
    free(text);
    assert_string_equal(json_string_value(json_object_get(e, "next_page_token")), "abc.def");
    json_decref(e);

    /* replays say so, with the state now */
    lease_result_t res;
    memset(&res, 0, sizeof res);
    res.code = LEASE_ACQUIRED;
    res.has_lease = true;
    res.lease = sample_record();
    res.replayed = true;
    res.current_state = LEASE_STATE_RELEASED;
    text = leased_codec_lease_envelope(&res, "corr_d", &view);
    e = json_loads(text, 0, NULL);
    free(text);
    assert_true(json_is_true(json_object_get(e, "replayed")));
    assert_string_equal(json_string_value(json_object_get(e, "current_state")), "released");
    json_decref(e);
}

/* Stored metadata as the encoder reads it (json_encode.c, the text the
 * Valkey library hands over): a number outside the request bound reads as
 * null (lease_json_null_unsafe_numbers; test_pg_codec pins the same rule in
 * the PostgreSQL result decoder), the other members as stored, and
 * metadata that is not an object as null as a whole. */
static void test_stored_metadata_numbers(void **state)
{
    (void)state;
    static const struct {
        const char *stored, *read;
    } cases[] = {
        {"{\"n\":9007199254740992}", "{\"n\":null}"},
        {"{\"n\":-9007199254740992,\"s\":\"ok\"}", "{\"n\":null,\"s\":\"ok\"}"},
        {"{\"n\":9200000000000000000,\"b\":true}", "{\"b\":true,\"n\":null}"},
        {"{\"r\":1e300,\"m\":-9007199254740991.5}", "{\"m\":null,\"r\":null}"},
        {"{\"n\":1e400,\"m\":-1e400}", "{\"m\":null,\"n\":null}"},
        {"{\"n\":9007199254740991,\"r\":0.1}", "{\"n\":9007199254740991,\"r\":0.1}"},
        {"[1,2]", "null"},
    };
    leased_view_t view = {"prn_owner", false};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lease_result_t res;
        memset(&res, 0, sizeof res);
        res.code = LEASE_INSPECTED;
        res.has_lease = true;
        res.lease = sample_record();
        snprintf(res.lease.metadata_json, sizeof res.lease.metadata_json, "%s", cases[i].stored);
        char *text = leased_codec_lease_envelope(&res, "corr_m", &view);
        assert_non_null(text);
        json_t *e = json_loads(text, 0, NULL);
        assert_non_null(e);
        json_t *md = json_object_get(json_object_get(e, "lease"), "metadata");
        assert_non_null(md);
        char *read = lease_json_dumps(md, JSON_SORT_KEYS);
        if (!read || strcmp(read, cases[i].read) != 0)
            fail_msg("stored metadata %s read as %s, want %s: %s", cases[i].stored,
                     read ? read : "(none)", cases[i].read, text);
        free(read);
        free(text);
        json_decref(e);
    }
}

/* The envelopes are written as text (json_encode.c): a batch's items are
 * separated, each answers as its own call would but without a correlation
 * id, a commit lists its results, and metadata keeps its shortest reals. */
static void test_batch_and_commit_envelopes(void **state)
{
    (void)state;
    lease_result_t items[3];
    memset(items, 0, sizeof items);
    items[0].code = LEASE_RENEWED;
    items[0].has_lease = true;
    items[0].lease = sample_record();
    snprintf(items[0].lease.metadata_json, sizeof items[0].lease.metadata_json,
             "{\"r\":0.1,\"n\":[1,{\"x\":null}]}");
    items[1].code = LEASE_LOST;
    items[2].code = LEASE_INVALID_LEASE_REQUEST;
    snprintf(items[2].field, sizeof items[2].field, "renewals[2].ttl_ms");
    snprintf(items[2].detail, sizeof items[2].detail, "ttl_ms must be at most 60000");
    leased_view_t view = {"prn_owner", false};
    char *text = leased_codec_batch_envelope(LEASE_RENEWED, items, 3, "corr_e", &view);
    assert_non_null(text);
    assert_non_null(strstr(text, "\"r\":0.1,"));
    json_error_t err;
    json_t *e = json_loads(text, JSON_REJECT_DUPLICATES, &err);
    if (!e)
        fail_msg("not JSON (%s): %s", err.text, text);
    free(text);
    assert_string_equal(json_string_value(json_object_get(e, "correlation_id")), "corr_e");
    json_t *results = json_object_get(e, "results");
    assert_int_equal(json_array_size(results), 3);
    json_t *ok = json_array_get(results, 0);
    assert_string_equal(json_string_value(json_object_get(ok, "code")), "lease_renewed");
    assert_null(json_object_get(ok, "correlation_id"));
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(ok, "lease"), "fencing_token")), 42);
    json_t *lost = json_array_get(results, 1);
    assert_string_equal(json_string_value(json_object_get(lost, "status")), "error");
    assert_null(json_object_get(lost, "correlation_id"));
    assert_non_null(json_object_get(lost, "retryable"));
    json_t *bad = json_array_get(results, 2);
    assert_string_equal(json_string_value(json_object_get(bad, "field")), "renewals[2].ttl_ms");
    assert_string_equal(json_string_value(json_object_get(bad, "msg")),
                        "ttl_ms must be at most 60000");
    json_decref(e);

    lease_commit_req_t req;
    memset(&req, 0, sizeof req);
    snprintf(req.lease_id, sizeof req.lease_id, "lease_9");
    req.fencing_token = 7;
    req.n_writes = 2;
    req.writes[0].kind = LEASE_WRITE_DOCUMENT;
    snprintf(req.writes[0].key, sizeof req.writes[0].key, "doc\"1");
    req.writes[1].kind = LEASE_WRITE_PUBLICATION;
    snprintf(req.writes[1].key, sizeof req.writes[1].key, "topic.a");
    lease_commit_result_t res = {.n_writes = 2, .replayed = true};
    res.revisions[0] = 3;
    res.revisions[1] = 11;
    text = leased_codec_commit_envelope(&req, &res, "corr_f");
    e = json_loads(text, JSON_REJECT_DUPLICATES, &err);
    if (!e)
        fail_msg("not JSON (%s): %s", err.text, text);
    free(text);
    json_t *commit = json_object_get(e, "commit");
    assert_int_equal(json_integer_value(json_object_get(commit, "fencing_token")), 7);
    json_t *w0 = json_array_get(json_object_get(commit, "results"), 0);
    json_t *w1 = json_array_get(json_object_get(commit, "results"), 1);
    assert_string_equal(json_string_value(json_object_get(w0, "key")), "doc\"1");
    assert_int_equal(json_integer_value(json_object_get(w0, "revision")), 3);
    assert_string_equal(json_string_value(json_object_get(w1, "topic")), "topic.a");
    assert_int_equal(json_integer_value(json_object_get(w1, "outbox_id")), 11);
    assert_true(json_is_true(json_object_get(e, "replayed")));
    json_decref(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_acquire_accepted),
        cmocka_unit_test(test_refusals_name_fields),
        cmocka_unit_test(test_get_and_commit),
        cmocka_unit_test(test_views),
        cmocka_unit_test(test_envelopes),
        cmocka_unit_test(test_batch_and_commit_envelopes),
        cmocka_unit_test(test_stored_metadata_numbers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
