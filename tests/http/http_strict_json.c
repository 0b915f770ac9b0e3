/*
 * http_strict_json.c - bodies that must be refused: duplicate keys, unknown
 * fields, wrong types, missing fields, out-of-range values, metadata rules,
 * oversize bodies. Each answers 400 invalid_lease_request naming the field,
 * never 5xx, and changes nothing in the database.
 */
#include "http_common.h"

static http_fx_t fx;
static const char *worker; /* owned by fx */

static int setup(void **state)
{
    http_fx_open(&fx, state, "http_strict");
    worker = http_fx_worker(&fx, "prn_strict");
    http_fx_serve(&fx, NULL);
    return 0;
}

#define ID                                                                                         \
    "\"lock_identity\":{\"tenant_id\":\"tenant-main\",\"program_id\":\"program-a\","               \
    "\"target_namespace\":\"starintel-target\",\"target_id\":\"t-strict\","                        \
    "\"actor_name\":\"usernamegen\",\"workflow_name\":\"default\"}"
#define REST "\"service_instance_id\":\"i\",\"execution_id\":\"e\",\"job_id\":\"j\""
#define OWNER "\"lease_id\":\"lease_x\",\"fencing_token\":1,\"service_instance_id\":\"i\""

typedef struct bad_case {
    const char *path;
    const char *body;
    const char *field;
} bad_case_t;

static const bad_case_t cases[] = {
    /* duplicate keys, top level and nested */
    {"/v1/leases/acquire", "{\"request_id\":\"a\",\"request_id\":\"b\"," ID "," REST "}",
     "request_id"},
    {"/v1/leases/acquire",
     "{\"request_id\":\"a\",\"lock_identity\":{\"tenant_id\":\"tenant-main\",\"program_id\":"
     "\"program-a\",\"target_namespace\":\"n\",\"target_id\":\"x\",\"target_id\":\"y\","
     "\"actor_name\":\"a\",\"workflow_name\":\"w\"}," REST "}",
     "lock_identity.target_id"},
    /* unknown fields */
    {"/v1/leases/acquire", "{\"request_id\":\"a\"," ID "," REST ",\"owner\":\"me\"}", "owner"},
    {"/v1/leases/acquire",
     "{\"request_id\":\"a\",\"lock_identity\":{\"tenant_id\":\"tenant-main\",\"program_id\":"
     "\"program-a\",\"target_namespace\":\"n\",\"target_id\":\"x\",\"actor_name\":\"a\","
     "\"workflow_name\":\"w\",\"lock_key\":\"k\"}," REST "}",
     "lock_identity.lock_key"},
    {"/v1/leases/renew", "{\"request_id\":\"a\"," ID "," OWNER ",\"metadata\":{}}", "metadata"},
    /* wrong types */
    {"/v1/leases/acquire", "{\"request_id\":\"a\"," ID "," REST ",\"ttl_ms\":\"30000\"}", "ttl_ms"},
    {"/v1/leases/acquire", "{\"request_id\":\"a\"," ID "," REST ",\"ttl_ms\":30000.0}", "ttl_ms"},
    {"/v1/leases/acquire", "{\"request_id\":\"a\"," ID "," REST ",\"ttl_ms\":null}", "ttl_ms"},
    {"/v1/leases/acquire", "{\"request_id\":7," ID "," REST "}", "request_id"},
    {"/v1/leases/acquire", "{\"request_id\":\"a\",\"lock_identity\":\"tenant-main\"," REST "}",
     "lock_identity"},
    {"/v1/leases/renew",
     "{\"request_id\":\"a\"," ID ",\"lease_id\":\"l\",\"fencing_token\":true,"
     "\"service_instance_id\":\"i\"}",
     "fencing_token"},
    {"/v1/leases/acquire", "{\"request_id\":\"a\"," ID "," REST ",\"metadata\":[1]}", "metadata"},
    /* missing fields */
    {"/v1/leases/acquire",
     "{\"request_id\":\"a\"," ID ",\"service_instance_id\":\"i\",\"execution_id\":\"e\"}",
     "job_id"},
    {"/v1/leases/acquire",
     "{\"request_id\":\"a\",\"lock_identity\":{\"tenant_id\":\"tenant-main\",\"program_id\":"
     "\"program-a\",\"target_namespace\":\"n\",\"target_id\":\"x\",\"workflow_name\":\"w\"}," REST
     "}",
     "lock_identity.actor_name"},
    /* out of range and malformed values */
    {"/v1/leases/acquire", "{\"request_id\":\"a\"," ID "," REST ",\"ttl_ms\":0}", "ttl_ms"},
    {"/v1/leases/renew",
     "{\"request_id\":\"a\"," ID ",\"lease_id\":\"l\",\"fencing_token\":99999999999999999999,"
     "\"service_instance_id\":\"i\"}",
     "fencing_token"},
    {"/v1/leases/acquire", "{\"request_id\":\"a b\"," ID "," REST "}", "request_id"},
    {"/v1/leases/acquire", "{\"request_id\":\"a\\u0000b\"," ID "," REST "}", "request_id"},
    {"/v1/leases/acquire", "{\"request_id\":\"a\"," ID "," REST ",\"wait_ms\":999999999}",
     "wait_ms"},
    {"/v1/leases/acquire",
     "{\"request_id\":\"a\"," ID "," REST ",\"deadline_ms\":100,\"deadline_at\":"
     "\"2030-01-01T00:00:00Z\"}",
     "deadline_at"},
    {"/v1/leases/acquire", "{\"request_id\":\"a\"," ID "," REST ",\"deadline_at\":\"tomorrow\"}",
     "deadline_at"},
    {"/v1/leases/acquire",
     "{\"request_id\":\"a\",\"lock_identity\":{\"tenant_id\":\"Tenant Main\",\"program_id\":"
     "\"program-a\",\"target_namespace\":\"n\",\"target_id\":\"x\",\"actor_name\":\"a\","
     "\"workflow_name\":\"w\"}," REST "}",
     "lock_identity.tenant_id"},
    {"/v1/leases/acquire",
     "{\"request_id\":\"a\",\"lock_identity\":{\"tenant_id\":\"t\",\"program_id\":\"p\","
     "\"target_namespace\":\"n\",\"target_id\":\"x\",\"actor_name\":\"a\",\"workflow_name\":"
     "\"w\",\"operation_class\":\"everything\"}," REST "}",
     "lock_identity.operation_class"},
    /* metadata rules */
    {"/v1/leases/acquire", "{\"request_id\":\"a\"," ID "," REST ",\"metadata\":{\"Key\":1}}",
     "metadata.Key"},
    {"/v1/leases/acquire",
     "{\"request_id\":\"a\"," ID "," REST ",\"metadata\":{\"nested\":{\"a\":1}}}",
     "metadata.nested"},
    {"/v1/leases/acquire", "{\"request_id\":\"a\"," ID "," REST ",\"metadata\":{\"n\":null}}",
     "metadata.n"},
    {"/v1/leases/acquire",
     "{\"request_id\":\"a\"," ID "," REST
     ",\"metadata\":{\"a\":1,\"b\":1,\"c\":1,\"d\":1,\"e\":1,\"f\":1,\"g\":1,\"h\":1,\"i\":1,"
     "\"j\":1,\"k\":1,\"l\":1,\"m\":1,\"n\":1,\"o\":1,\"p\":1,\"q\":1}}",
     "metadata"},
    /* commits and lists */
    {"/v1/commits",
     "{\"request_id\":\"a\"," ID ",\"lease_id\":\"l\",\"fencing_token\":1,\"execution_id\":"
     "\"e\",\"trace_id\":\"t\",\"writes\":[{\"kind\":\"publication\",\"topic\":\"ok\","
     "\"payload\":{}},{\"kind\":\"document\",\"key\":\"bad key\",\"expected_revision\":0,"
     "\"body\":{}}]}",
     "writes[1].key"},
    {"/v1/commits",
     "{\"request_id\":\"a\"," ID ",\"lease_id\":\"l\",\"fencing_token\":1,\"execution_id\":"
     "\"e\",\"trace_id\":\"t\",\"writes\":[]}",
     "writes"},
    {"/v1/commits",
     "{\"request_id\":\"a\"," ID ",\"lease_id\":\"l\",\"fencing_token\":1,\"execution_id\":"
     "\"e\",\"trace_id\":\"t\",\"writes\":[{\"kind\":\"document\",\"key\":\"k\","
     "\"expected_revision\":0,\"body\":{\"x\":1,\"x\":2}}]}",
     "writes[0].body.x"},
    {"/v1/leases/list",
     "{\"by\":\"target\",\"tenant_id\":\"tenant-main\",\"program_id\":\"program-a\","
     "\"target_namespace\":\"n\"}",
     "target_id"},
    {"/v1/leases/list",
     "{\"by\":\"program\",\"tenant_id\":\"tenant-main\",\"program_id\":\"program-a\","
     "\"page_size\":0}",
     "page_size"},
    {"/v1/leases/list", "{\"by\":\"everyone\",\"tenant_id\":\"t\",\"program_id\":\"p\"}", "by"},
    /* not an object at all */
    {"/v1/leases/acquire", "", "body"},
    {"/v1/leases/acquire", "{", "body"},
    {"/v1/leases/acquire", "[1,2]", "body"},
    {"/v1/leases/acquire", "{\"request_id\":\"a\"} trailing", "body"},
};

static void check_refused(const http_resp_t *r, const char *field, const char *what)
{
    if (!r || r->status != 400 || !http_resp_str(r, "field") ||
        strcmp(http_resp_str(r, "field"), field) != 0)
        fprintf(stderr, "case %s: expected 400 naming %s, got %ld %s\n", what, field,
                r ? r->status : 0, r ? r->body : "(no reply)");
    check_reply(r, 400, "invalid_lease_request", NULL);
    assert_string_equal(http_resp_str(r, "field"), field);
}

static void test_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        http_resp_t *r = call(fx.base, "POST", cases[i].path, worker, cases[i].body);
        check_refused(r, cases[i].field, cases[i].body);
        http_resp_free(r);
    }
    /* none of them reached the store: through the API on either backend
     * (the list of the program's leases is empty), in the table on Postgres */
    http_resp_t *l = call_owned(fx.base, "POST", "/v1/leases/list", worker, list_body("program"));
    check_reply(l, 200, "lease_listed", NULL);
    assert_int_equal(json_array_size(http_resp_get(l, "leases")), 0);
    http_resp_free(l);
    if (!fx.valkey)
        assert_int_equal(testpg_query_int(fx.db, "SELECT count(*) FROM lease.locks"), 0);
}

/* Invalid UTF-8 inside a string names that field. */
static void test_invalid_utf8(void **state)
{
    (void)state;
    static const char body[] = "{\"request_id\":\"a\xff\"," ID "," REST "}";
    http_client_t *c = http_client_new(fx.base, 0);
    http_resp_t *r = http_client_call_raw(c, "POST", "/v1/leases/acquire", worker, body,
                                          sizeof body - 1, NULL, NULL);
    check_refused(r, "request_id", "invalid utf-8");
    http_resp_free(r);
    http_client_free(c);
}

/* Metadata strings over 256 bytes and objects over 2 KiB. */
static void test_metadata_sizes(void **state)
{
    (void)state;
    char big[300];
    memset(big, 'x', 257);
    big[257] = '\0';
    json_t *body = parse_owned(acquire_body("md-1", "t-md"));
    json_object_set_new(body, "metadata", json_pack("{s:s}", "note", big));
    http_resp_t *r = call_owned(fx.base, "POST", "/v1/leases/acquire", worker, dump(body));
    check_refused(r, "metadata.note", "long metadata string");
    http_resp_free(r);

    body = parse_owned(acquire_body("md-2", "t-md"));
    json_t *md = json_object();
    big[250] = '\0';
    for (int i = 0; i < 10; i++) {
        char key[8];
        snprintf(key, sizeof key, "k%d", i);
        json_object_set_new(md, key, json_string(big));
    }
    json_object_set_new(body, "metadata", md);
    r = call_owned(fx.base, "POST", "/v1/leases/acquire", worker, dump(body));
    check_refused(r, "metadata", "metadata over 2 KiB");
    http_resp_free(r);

    /* the limits themselves are accepted: 16 keys, 256-byte strings,
     * numbers and booleans */
    body = parse_owned(acquire_body("md-3", "t-md"));
    big[256] = '\0';
    memset(big, 'y', 256);
    md = json_pack("{s:s, s:i, s:f, s:b}", "note", big, "attempt", 3, "ratio", 0.5, "dry_run", 1);
    for (int i = 0; i < 12; i++) {
        char key[8];
        snprintf(key, sizeof key, "k%d", i);
        json_object_set_new(md, key, json_integer(i));
    }
    json_object_set_new(body, "metadata", md);
    r = call_owned(fx.base, "POST", "/v1/leases/acquire", worker, dump(body));
    check_reply(r, 200, "lease_acquired", NULL);
    assert_int_equal(json_object_size(http_resp_get(r, "lease.metadata")), 16);
    http_resp_free(r);
}

/* Bodies over 64 KiB: read and refused (connection stays usable), or
 * refused before reading when the client waits for 100 Continue. */
static void test_oversize(void **state)
{
    (void)state;
    size_t n = 70 * 1024;
    char *body = malloc(n + 64);
    int k = snprintf(body, n + 64, "{\"request_id\":\"big\",\"pad\":\"");
    memset(body + k, 'p', n);
    strcpy(body + k + n, "\"}");
    http_client_t *c = http_client_new(fx.base, 0);
    http_resp_t *r = http_client_call(c, "POST", "/v1/leases/acquire", worker, body, NULL, NULL);
    check_refused(r, "body", "70 KiB body");
    http_resp_free(r);
    /* the same connection serves the next request */
    r = http_client_call(c, "GET", "/healthz", NULL, NULL, NULL, NULL);
    assert_non_null(r);
    assert_int_equal(r->status, 200);
    http_resp_free(r);
    const char *expect[] = {"Expect: 100-continue", NULL};
    r = http_client_call(c, "POST", "/v1/leases/acquire", worker, body, expect, NULL);
    check_refused(r, "body", "70 KiB body with Expect");
    http_resp_free(r);
    http_client_free(c);
    free(body);

    /* exactly 64 KiB is not refused for its size */
    n = 64 * 1024;
    body = malloc(n + 1);
    memset(body, ' ', n);
    memcpy(body, "{\"unknown\":1}", 13);
    body[n] = '\0';
    r = call(fx.base, "POST", "/v1/leases/acquire", worker, body);
    check_refused(r, "unknown", "64 KiB body");
    http_resp_free(r);
    free(body);
}

/* Paths and methods the route table does not have. */
static void test_routes(void **state)
{
    (void)state;
    char longid[200];
    memset(longid, 'a', 150);
    strcpy(longid + 150, "");
    char path[256];
    snprintf(path, sizeof path, "/v1/leases/%s", longid);
    http_resp_t *r = call(fx.base, "GET", path, worker, NULL);
    check_refused(r, "lease_id", "long lease id");
    http_resp_free(r);
    r = call(fx.base, "GET", "/v1/leases/acquire", worker, NULL);
    check_refused(r, "method", "GET acquire");
    http_resp_free(r);
    r = call(fx.base, "POST", "/v1/nothing", worker, "{}");
    check_refused(r, "path", "unknown path");
    http_resp_free(r);
    r = call(fx.base, "GET", "/v1/leases/lease_x", worker, "{\"a\":1}");
    check_refused(r, "body", "GET with a body");
    http_resp_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),          cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_metadata_sizes), cmocka_unit_test(test_oversize),
        cmocka_unit_test(test_routes),
    };
    return cmocka_run_group_tests(tests, setup, http_fx_teardown);
}
