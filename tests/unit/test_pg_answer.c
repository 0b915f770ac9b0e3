/*
 * test_pg_answer.c - a typed call's answer row (lease.answer) decodes as
 * the same answer written as a jsonb document decodes.
 *
 * The oracle is store_pg_decode_result, which the document form has always
 * gone through. Each document below is turned into the row lease._answer_of
 * makes of it (row_of: member by member, the lease record's flattened, a
 * JSON null and no member both NULL, numbers and booleans as PostgreSQL
 * prints them; pgtap/38_typed_answers.sql checks that _answer_of does so),
 * and both decodings must agree field for field: valid answers of every
 * kind, and each value the decoder refuses.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/pg_codec.h"

/* The row lease._answer_of makes of doc: text per column (NULL for SQL
 * null) kept in buf. */
typedef struct row {
    const char *v[LEASE_ANSWER_COLUMNS];
    char buf[LEASE_ANSWER_COLUMNS][4096];
} row_t;

static const char *const outer[] = {"code",  "replayed", "current_state", "retry_after_ms",
                                    "field", "reason",   "detail"};
static const char *const record[] = {
    "lease_id",           "fencing_token",       "state",           "acquired_at",
    "renewed_at",         "expires_at",          "ended_at",        "ttl_ms",
    "maximum_lifetime_ms", "owner_principal_id", "owner_client_id", "owner_credential_id",
    "service_instance_id", "execution_id",       "job_id",          "trace_id",
    "request_id",         "end_reason",          "incident_id",     "metadata"};

/* One member as PostgreSQL's ->> (or, for metadata, jsonb's text) gives it. */
static void put(row_t *r, int col, json_t *m, bool as_json)
{
    r->v[col] = NULL;
    if (!m || (json_is_null(m) && !as_json))
        return;
    char *text = NULL;
    if (as_json)
        text = json_dumps(m, JSON_COMPACT | JSON_ENCODE_ANY);
    else if (json_is_string(m))
        text = strdup(json_string_value(m));
    else if (json_is_true(m) || json_is_false(m))
        text = strdup(json_is_true(m) ? "t" : "f");
    else
        text = json_dumps(m, JSON_COMPACT | JSON_ENCODE_ANY);
    assert_non_null(text);
    snprintf(r->buf[col], sizeof r->buf[col], "%s", text);
    free(text);
    r->v[col] = r->buf[col];
}

static void row_of(const char *doc, row_t *r)
{
    json_error_t err;
    json_t *o = json_loads(doc, 0, &err);
    if (!o)
        fail_msg("test document does not parse: %s", doc);
    for (int i = 0; i < ANSWER_LEASE_ID; i++)
        put(r, i, json_object_get(o, outer[i]), false);
    json_t *lease = json_object_get(o, "lease");
    if (!json_is_object(lease))
        lease = NULL;
    for (int i = ANSWER_LEASE_ID; i < LEASE_ANSWER_COLUMNS; i++)
        put(r, i, lease ? json_object_get(lease, record[i - ANSWER_LEASE_ID]) : NULL,
            i == ANSWER_METADATA);
    json_decref(o);
}

#define T "\"2026-08-05T12:00:00.000Z\""
#define BRIEF_ACQUIRED                                                                             \
    "{\"lease_id\":\"lease_9\",\"fencing_token\":7,\"state\":\"active\",\"acquired_at\":" T       \
    ",\"renewed_at\":" T ",\"expires_at\":\"2026-08-05T12:00:30.000Z\",\"ttl_ms\":30000,"          \
    "\"maximum_lifetime_ms\":3600000,\"owner_client_id\":\"c\",\"owner_credential_id\":\"k\"}"
#define BRIEF_RENEWED                                                                              \
    "{\"state\":\"active\",\"acquired_at\":" T ",\"renewed_at\":\"2026-08-05T12:00:20.000Z\","    \
    "\"expires_at\":\"2026-08-05T12:00:50.000Z\",\"ttl_ms\":30000,"                                \
    "\"maximum_lifetime_ms\":3600000,\"owner_principal_id\":\"p1\",\"owner_client_id\":\"c\","     \
    "\"service_instance_id\":\"inst-1\",\"execution_id\":\"e\",\"job_id\":\"j\","                  \
    "\"trace_id\":null,\"metadata\":{\"z\":1,\"a\":\"x\"}}"
#define BRIEF_ENDED                                                                                \
    "{\"state\":\"released\",\"acquired_at\":" T ",\"renewed_at\":" T                              \
    ",\"expires_at\":\"2026-08-05T12:00:30.000Z\",\"ended_at\":\"2026-08-05T12:00:10.000Z\","      \
    "\"ttl_ms\":30000,\"maximum_lifetime_ms\":3600000,\"owner_principal_id\":\"p1\","              \
    "\"metadata\":null,\"trace_id\":\"t-1\"}"

typedef struct doc_case {
    store_pg_op_t op;
    const char *doc;
} doc_case_t;

/* Answers of every kind the three typed calls give, and values the decoder
 * must refuse (each a document the oracle refuses too). */
static const doc_case_t cases[] = {
    {STORE_PG_OP_ACQUIRE,
     "{\"code\":\"lease_acquired\",\"replayed\":false,\"current_state\":\"active\",\"lease\":"
     BRIEF_ACQUIRED "}"},
    {STORE_PG_OP_ACQUIRE,
     "{\"code\":\"lease_acquired\",\"replayed\":true,\"lease\":" BRIEF_ACQUIRED "}"},
    {STORE_PG_OP_ACQUIRE,
     "{\"code\":\"lease_acquired\",\"replayed\":true,\"current_state\":\"expired\",\"lease\":"
     BRIEF_ACQUIRED "}"},
    {STORE_PG_OP_ACQUIRE, "{\"code\":\"lease_conflict\",\"retry_after_ms\":250}"},
    {STORE_PG_OP_ACQUIRE, "{\"code\":\"lease_backend_unavailable\",\"reason\":\"token_limit\"}"},
    {STORE_PG_OP_ACQUIRE, "{\"code\":\"lease_backend_unavailable\",\"reason\":\"sealed\"}"},
    {STORE_PG_OP_ACQUIRE, "{\"code\":\"invalid_lease_request\",\"field\":\"ttl_ms\","
                          "\"detail\":\"ttl_ms must be between 1000 and 3600000\"}"},
    {STORE_PG_OP_ACQUIRE, "{\"code\":\"idempotency_conflict\"}"},
    {STORE_PG_OP_ACQUIRE, "{\"code\":\"deadline_exceeded\"}"},
    {STORE_PG_OP_RENEW, "{\"code\":\"lease_renewed\",\"replayed\":false,\"current_state\":"
                        "\"active\",\"lease\":" BRIEF_RENEWED "}"},
    {STORE_PG_OP_RENEW, "{\"code\":\"lease_lost\"}"},
    {STORE_PG_OP_RENEW, "{\"code\":\"invalid_lease_request\",\"field\":\"fencing_token\"}"},
    {STORE_PG_OP_RELEASE, "{\"code\":\"lease_released\",\"replayed\":true,\"current_state\":"
                          "\"released\",\"lease\":" BRIEF_ENDED "}"},
    {STORE_PG_OP_RELEASE, "{\"code\":\"lease_released\",\"lease\":" BRIEF_ENDED "}"},
    {STORE_PG_OP_RELEASE, "{\"code\":\"lease_lost\"}"},
    /* refused */
    {STORE_PG_OP_ACQUIRE, "{}"},
    {STORE_PG_OP_ACQUIRE, "{\"code\":\"lease_exploded\"}"},
    {STORE_PG_OP_ACQUIRE, "{\"code\":\"lease_renewed\",\"lease\":" BRIEF_RENEWED "}"},
    {STORE_PG_OP_RENEW, "{\"code\":\"access_denied\"}"},
    {STORE_PG_OP_ACQUIRE, "{\"code\":\"lease_acquired\"}"},
    {STORE_PG_OP_ACQUIRE, "{\"code\":\"lease_acquired\",\"lease\":" BRIEF_RENEWED "}"},
    {STORE_PG_OP_RENEW, "{\"code\":\"lease_renewed\",\"lease\":{\"state\":\"active\"}}"},
    {STORE_PG_OP_ACQUIRE, "{\"code\":\"lease_conflict\",\"retry_after_ms\":-1}"},
    {STORE_PG_OP_ACQUIRE, "{\"code\":\"lease_conflict\",\"current_state\":\"zombie\"}"},
    {STORE_PG_OP_ACQUIRE,
     "{\"code\":\"lease_acquired\",\"lease\":{\"lease_id\":\"lease_9\",\"fencing_token\":0,"
     "\"state\":\"active\",\"acquired_at\":" T ",\"renewed_at\":" T ",\"expires_at\":" T
     ",\"ttl_ms\":1,\"maximum_lifetime_ms\":1}}"},
    {STORE_PG_OP_ACQUIRE,
     "{\"code\":\"lease_acquired\",\"lease\":{\"lease_id\":\"\",\"fencing_token\":1,"
     "\"state\":\"active\",\"acquired_at\":" T ",\"renewed_at\":" T ",\"expires_at\":" T
     ",\"ttl_ms\":1,\"maximum_lifetime_ms\":1}}"},
    {STORE_PG_OP_RENEW, "{\"code\":\"lease_renewed\",\"lease\":{\"state\":\"held\",\"acquired_at\":"
                        T ",\"renewed_at\":" T ",\"expires_at\":" T
                        ",\"ttl_ms\":1,\"maximum_lifetime_ms\":1}}"},
    {STORE_PG_OP_RENEW, "{\"code\":\"lease_renewed\",\"lease\":{\"state\":\"active\","
                        "\"acquired_at\":\"yesterday\",\"renewed_at\":" T ",\"expires_at\":" T
                        ",\"ttl_ms\":1,\"maximum_lifetime_ms\":1}}"},
    {STORE_PG_OP_RENEW, "{\"code\":\"lease_renewed\",\"lease\":{\"state\":\"active\","
                        "\"acquired_at\":" T ",\"renewed_at\":" T
                        ",\"expires_at\":\"2026-08-05T11:00:00.000Z\",\"ttl_ms\":1,"
                        "\"maximum_lifetime_ms\":1}}"},
    {STORE_PG_OP_RENEW, "{\"code\":\"lease_renewed\",\"lease\":{\"state\":\"active\","
                        "\"acquired_at\":" T ",\"renewed_at\":" T ",\"expires_at\":" T
                        ",\"ttl_ms\":-5,\"maximum_lifetime_ms\":1}}"},
    {STORE_PG_OP_RENEW, "{\"code\":\"lease_renewed\",\"lease\":{\"state\":\"active\","
                        "\"acquired_at\":" T ",\"renewed_at\":" T ",\"expires_at\":" T
                        ",\"ttl_ms\":1,\"maximum_lifetime_ms\":1,\"owner_principal_id\":"
                        "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}}"},
};

/* Everything a caller reads of a result, compared; what differs named. */
static void assert_same_result(size_t i, const lease_result_t *a, const lease_result_t *b)
{
#define SAME_INT(f)                                                                                \
    if (a->f != b->f)                                                                              \
    fail_msg("case %zu: %s %lld (row) and %lld (document)", i, #f, (long long)a->f,                \
             (long long)b->f)
#define SAME_STR(f)                                                                                \
    if (strcmp(a->f, b->f) != 0)                                                                   \
    fail_msg("case %zu: %s \"%s\" (row) and \"%s\" (document)", i, #f, a->f, b->f)
    SAME_INT(code);
    SAME_INT(replayed);
    SAME_INT(current_state);
    SAME_INT(retry_after_ms);
    SAME_INT(has_lease);
    SAME_STR(field);
    SAME_STR(reason);
    SAME_STR(detail);
    SAME_STR(lease.lease_id);
    SAME_INT(lease.fencing_token);
    SAME_INT(lease.state);
    SAME_INT(lease.acquired_at_ms);
    SAME_INT(lease.renewed_at_ms);
    SAME_INT(lease.expires_at_ms);
    SAME_INT(lease.ended_at_ms);
    SAME_INT(lease.ttl_ms);
    SAME_INT(lease.maximum_lifetime_ms);
    SAME_STR(lease.owner_principal_id);
    SAME_STR(lease.owner_client_id);
    SAME_STR(lease.owner_credential_id);
    SAME_STR(lease.service_instance_id);
    SAME_STR(lease.execution_id);
    SAME_STR(lease.job_id);
    SAME_STR(lease.trace_id);
    SAME_STR(lease.request_id);
    SAME_STR(lease.end_reason);
    SAME_STR(lease.incident_id);
    SAME_STR(lease.metadata_json);
#undef SAME_INT
#undef SAME_STR
}

static void test_row_decodes_as_document(void **state)
{
    (void)state;
    size_t refused = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        row_t *row = calloc(1, sizeof *row);
        assert_non_null(row);
        row_of(cases[i].doc, row);
        lease_result_t from_row, from_doc;
        lease_code_t a = store_pg_decode_answer(cases[i].op, row->v, LEASE_ANSWER_COLUMNS, &from_row);
        lease_code_t b = store_pg_decode_result(cases[i].op, cases[i].doc, &from_doc);
        if (a != b)
            fail_msg("case %zu: %s from the row, %s from the document", i, lease_code_name(a),
                     lease_code_name(b));
        assert_same_result(i, &from_row, &from_doc);
        refused += a == LEASE_OUTCOME_UNKNOWN;
        free(row);
    }
    assert_int_equal(refused, 16); /* the refused cases are refused, not read */
}

/* What a row has that a document has not: the shape of the row itself. */
static void test_row_shape(void **state)
{
    (void)state;
    row_t *row = calloc(1, sizeof *row);
    assert_non_null(row);
    row_of(cases[0].doc, row);
    lease_result_t r;
    assert_int_equal(store_pg_decode_answer(STORE_PG_OP_ACQUIRE, row->v, LEASE_ANSWER_COLUMNS, &r),
                     LEASE_ACQUIRED);
    assert_string_equal(r.lease.lease_id, "lease_9");
    assert_string_equal(r.lease.metadata_json, ""); /* not answered: the request's */
    /* one column short or long: not a lease.answer */
    assert_int_equal(
        store_pg_decode_answer(STORE_PG_OP_ACQUIRE, row->v, LEASE_ANSWER_COLUMNS - 1, &r),
        LEASE_OUTCOME_UNKNOWN);
    assert_int_equal(store_pg_decode_answer(STORE_PG_OP_INSPECT, NULL, 0, &r),
                     LEASE_BACKEND_UNAVAILABLE);
    /* a boolean PostgreSQL does not print */
    row->v[ANSWER_REPLAYED] = "true";
    assert_int_equal(store_pg_decode_answer(STORE_PG_OP_ACQUIRE, row->v, LEASE_ANSWER_COLUMNS, &r),
                     LEASE_OUTCOME_UNKNOWN);
    row->v[ANSWER_REPLAYED] = "f";
    /* an integer with trailing text */
    row->v[ANSWER_FENCING_TOKEN] = "7x";
    assert_int_equal(store_pg_decode_answer(STORE_PG_OP_ACQUIRE, row->v, LEASE_ANSWER_COLUMNS, &r),
                     LEASE_OUTCOME_UNKNOWN);
    assert_false(r.has_lease);
    row->v[ANSWER_FENCING_TOKEN] = "7";
    /* metadata: jsonb null reads as none, an object as compact text with
     * out-of-bound numbers null, anything else as null */
    static const struct {
        const char *stored, *read;
    } meta[] = {
        {"null", "{}"},
        {"{}", "{}"},
        {"{\"z\": 1, \"a\": \"x\"}", "{\"a\":\"x\",\"z\":1}"},
        {"{\"n\": 10000000000000000000}", "{\"n\":null}"},
        {"{\"n\": 1e400, \"s\": \"ok\"}", "{\"n\":null,\"s\":\"ok\"}"},
        {"[1, 2]", "null"},
        {"\"text\"", "null"},
    };
    for (size_t i = 0; i < sizeof meta / sizeof meta[0]; i++) {
        row->v[ANSWER_METADATA] = meta[i].stored;
        assert_int_equal(
            store_pg_decode_answer(STORE_PG_OP_ACQUIRE, row->v, LEASE_ANSWER_COLUMNS, &r),
            LEASE_ACQUIRED);
        assert_string_equal(r.lease.metadata_json, meta[i].read);
    }
    free(row);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_row_decodes_as_document),
        cmocka_unit_test(test_row_shape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
