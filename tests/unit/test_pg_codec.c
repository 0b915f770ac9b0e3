/*
 * test_pg_codec.c - the adapter's JSON both ways, without a database:
 * requests carry every documented field (and omit empty optional ones);
 * results decode into store.h structs; every malformed result decodes to
 * lease_backend_unavailable with nothing half-filled.
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

#include "lease/schema.h"
#include "store/pg_codec.h"

/* 2026-08-05T12:00:00.000Z */
#define T0 1785931200000LL

static void fill_identity(lease_identity_t *id)
{
    memset(id, 0, sizeof *id);
    strcpy(id->tenant_id, "tenant-main");
    strcpy(id->program_id, "program-a");
    strcpy(id->target_namespace, "starintel-target");
    strcpy(id->target_id, "Target_01");
    strcpy(id->actor_name, "usernamegen");
    strcpy(id->workflow_name, "default");
    strcpy(id->operation_class, "collect");
}

static void fill_call(lease_call_t *c, int64_t now_mono)
{
    memset(c, 0, sizeof *c);
    strcpy(c->request_id, "req-1");
    strcpy(c->correlation_id, "corr_abc");
    strcpy(c->trace_id, "trace-call");
    strcpy(c->deadline_class, "client");
    c->deadline.wall_ms = T0 + 1234;
    c->deadline.mono_ns = now_mono + 1000000000LL;
    c->received_mono_ns = now_mono - 7 * 1000000LL;
    strcpy(c->principal.principal_id, "prn_1");
    strcpy(c->principal.client_id, "client_1");
    strcpy(c->principal.credential_id, "key_1");
    strcpy(c->principal.principal_class, "worker");
    memset(c->request_digest, 'a', 64);
}

/* A renewal or release of lease_id with token, by fill_call's caller. */
static void fill_owner(lease_owner_req_t *r, int64_t now_mono, const char *lease_id, int64_t token)
{
    memset(r, 0, sizeof *r);
    fill_call(&r->call, now_mono);
    fill_identity(&r->identity);
    snprintf(r->lease_id, sizeof r->lease_id, "%s", lease_id);
    r->fencing_token = token;
    strcpy(r->service_instance_id, "inst-1");
}

static json_t *parse(const char *text)
{
    assert_non_null(text);
    json_error_t err;
    json_t *o = json_loads(text, JSON_REJECT_DUPLICATES, &err);
    if (!o)
        fail_msg("not JSON (%s): %s", err.text, text);
    return o;
}

static const char *str(json_t *o, const char *path)
{
    json_t *v = o;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *tok = strtok(buf, "."); tok; tok = strtok(NULL, "."))
        v = json_object_get(v, tok);
    if (!json_is_string(v))
        fail_msg("%s is not a string", path);
    return json_string_value(v);
}

static void check_common(json_t *o)
{
    assert_string_equal(str(o, "deadline_at"), "2026-08-05T12:00:01.234Z");
    assert_string_equal(str(o, "request_id"), "req-1");
    assert_string_equal(str(o, "correlation_id"), "corr_abc");
    assert_string_equal(str(o, "deadline_class"), "client");
    assert_int_equal(strlen(str(o, "request_digest")), 64);
    assert_int_equal(json_integer_value(json_object_get(o, "latency_ms")), 7);
    assert_string_equal(str(o, "principal.principal_id"), "prn_1");
    assert_string_equal(str(o, "principal.client_id"), "client_1");
    assert_string_equal(str(o, "principal.credential_id"), "key_1");
    assert_string_equal(str(o, "principal.principal_class"), "worker");
}

static void check_identity(json_t *o)
{
    assert_string_equal(str(o, "lock_identity.tenant_id"), "tenant-main");
    assert_string_equal(str(o, "lock_identity.program_id"), "program-a");
    assert_string_equal(str(o, "lock_identity.target_namespace"), "starintel-target");
    assert_string_equal(str(o, "lock_identity.target_id"), "Target_01");
    assert_string_equal(str(o, "lock_identity.actor_name"), "usernamegen");
    assert_string_equal(str(o, "lock_identity.workflow_name"), "default");
    assert_string_equal(str(o, "lock_identity.operation_class"), "collect");
    assert_int_equal(json_object_size(json_object_get(o, "lock_identity")), 7);
}

/* The arguments a typed call sends, one literal per argument (NULL: SQL
 * NULL). The literals are what the jsonb request the adapter once sent
 * named for the same request, member by member (docs/sql-api.md, "Typed
 * calls"): nothing named differently, dropped or added. */
static void assert_args(const store_pg_typed_args_t *got, const char *const *want, int n)
{
    assert_int_equal(got->nargs, n);
    for (int i = 0; i < n; i++) {
        const char *g = got->values[i];
        if (!want[i] || !g ? want[i] != g : strcmp(want[i], g) != 0)
            fail_msg("argument %d: \"%s\" sent, \"%s\" expected", i + 1, g ? g : "NULL",
                     want[i] ? want[i] : "NULL");
    }
}

/* A composite's text literal read back by record_in's rules: "(" fields
 * ")", a field either double-quoted (backslash escapes the next byte, ""
 * is one quote) or unquoted, empty unquoted being SQL NULL (stored as NULL
 * in fields; the texts go into buf). Returns the number of fields. */
static int read_record(const char *lit, char *buf, const char **fields, int max)
{
    assert_int_equal(*lit, '(');
    const char *r = lit + 1;
    int n = 0;
    for (;;) {
        assert_true(n < max);
        if (*r == ',' || *r == ')') {
            fields[n++] = NULL;
        } else {
            fields[n++] = buf;
            while (*r != ',' && *r != ')') {
                assert_int_not_equal(*r, '\0');
                if (*r == '"') {
                    for (r++;; r++) {
                        if (*r == '\\')
                            *buf++ = *++r;
                        else if (r[0] == '"' && r[1] == '"')
                            *buf++ = '"', r++;
                        else if (*r == '"')
                            break;
                        else
                            *buf++ = *r;
                    }
                    r++;
                } else {
                    *buf++ = *r++;
                }
            }
            *buf++ = '\0';
        }
        if (*r++ == ')')
            break;
    }
    assert_int_equal(*r, '\0');
    return n;
}

/* A typed call's two arguments (lease.identity, and the operation's
 * request: lease.acquire_request, renew_request or release_request) read
 * back: the seven components (the eighth, bad_field, NULL), then the
 * request's fields, must be want, in order: the values the positional
 * call sent (assert_args). Frees got. */
static void assert_composite_args(store_pg_typed_args_t *got, const char *const *want, int n)
{
    assert_int_equal(got->nargs, 2);
    static char buf[2][8192];
    const char *identity[16], *request[32];
    assert_int_equal(read_record(got->values[0], buf[0], identity, 16),
                     STORE_PG_IDENTITY_FIELDS + 1);
    assert_null(identity[STORE_PG_IDENTITY_FIELDS]);
    int m = read_record(got->values[1], buf[1], request, 32);
    store_pg_typed_args_t flat = {.nargs = STORE_PG_IDENTITY_FIELDS + m};
    assert_true(flat.nargs <= STORE_PG_TYPED_MAX_ARGS);
    memcpy(flat.values, identity, STORE_PG_IDENTITY_FIELDS * sizeof *identity);
    memcpy(flat.values + STORE_PG_IDENTITY_FIELDS, request, (size_t)m * sizeof *request);
    assert_args(&flat, want, n);
    store_pg_typed_args_free(got);
}

#define DIGEST_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define NARGS(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Each typed call the service makes, whole: the function and how many
 * arguments it passes. Only the fields a decision reads go (docs/sql-api.md,
 * "One behaviour for every caller": no optimistic or existing flag); the
 * short answer is the function's own last argument, brief, named so that
 * no default is read at parse analysis (pg_codec_request.c). */
static void test_typed_calls(void **state)
{
    (void)state;
    assert_string_equal(store_pg_typed_calls[STORE_PG_TYPED_ACQUIRE].sql,
                        "SELECT lease.acquire_brief_typed($1::lease.identity, "
                        "$2::lease.acquire_request, true)::text");
    assert_string_equal(store_pg_typed_calls[STORE_PG_TYPED_RENEW].sql,
                        "SELECT lease.renew_brief_typed($1::lease.identity, "
                        "$2::lease.renew_request, true)::text");
    assert_string_equal(store_pg_typed_calls[STORE_PG_TYPED_RELEASE].sql,
                        "SELECT lease.release_brief_typed($1::lease.identity, "
                        "$2::lease.release_request)::text");
    assert_string_equal(store_pg_typed_calls[STORE_PG_TYPED_RENEW_MANY].sql,
                        "SELECT lease.renew_many_brief_typed($1::lease.identity[], "
                        "$2::lease.renew_request[])::text");
    assert_string_equal(store_pg_typed_calls[STORE_PG_TYPED_RELEASE_MANY].sql,
                        "SELECT lease.release_many_brief_typed($1::lease.identity[], "
                        "$2::lease.release_request[])::text");
}

static void test_encode_admin(void **state)
{
    (void)state;
    int64_t now = 5000000000LL;
    const char *bad;
    lease_admin_req_t a_req;
    memset(&a_req, 0, sizeof a_req);
    fill_call(&a_req.call, now);
    strcpy(a_req.call.principal.principal_class, "admin");
    fill_identity(&a_req.identity);
    strcpy(a_req.lease_id, "lease_1");
    a_req.fencing_token = 42;
    strcpy(a_req.reason, "stuck worker");
    strcpy(a_req.incident_id, "inc-9");
    char *text = store_pg_encode_admin(STORE_PG_OP_REVOKE, &a_req, now, &bad);
    json_t *o = parse(text);
    strcpy(a_req.call.principal.principal_class, "worker");
    check_identity(o);
    assert_string_equal(str(o, "lease_id"), "lease_1");
    assert_string_equal(str(o, "reason"), "stuck worker");
    assert_string_equal(str(o, "incident_id"), "inc-9");
    assert_string_equal(str(o, "principal.principal_class"), "admin");
    json_decref(o);
    free(text);
    text = store_pg_encode_admin(STORE_PG_OP_FORCE_RELEASE, &a_req, now, &bad);
    o = parse(text);
    check_common(o);
    assert_null(json_object_get(o, "incident_id"));
    assert_int_equal(json_integer_value(json_object_get(o, "fencing_token")), 42);
    json_decref(o);
    free(text);
}

static void test_encode_acquire_typed(void **state)
{
    (void)state;
    int64_t now = 5000000000LL;
    lease_acquire_req_t req;
    memset(&req, 0, sizeof req);
    fill_call(&req.call, now);
    fill_identity(&req.identity);
    strcpy(req.service_instance_id, "inst-1");
    strcpy(req.execution_id, "exec-1");
    strcpy(req.job_id, "job-1");
    req.ttl_ms = 30000;
    strcpy(req.metadata_json, "{\"attempt\":2,\"k\":\"v\",\"r\":0.1}");
    store_pg_typed_args_t args;
    const char *why = "x";
    assert_true(store_pg_encode_acquire_typed(&req, now, &args, &why));
    assert_null(why);
    assert_string_equal(args.sql, store_pg_typed_calls[STORE_PG_TYPED_ACQUIRE].sql);
    assert_string_equal(args.prepared, "lease_acquire_brief_typed");
    /* no acquire trace id: the call's; the metadata as the request holds it */
    static const char *const full[] = {
        "tenant-main", "program-a", "starintel-target", "Target_01",
        "usernamegen", "default",   "collect",          "inst-1",
        "exec-1",      "job-1",     "trace-call",       "30000",
        NULL,          "{\"attempt\":2,\"k\":\"v\",\"r\":0.1}",
        "prn_1",       "client_1",  "key_1",            "worker",
        "req-1",       DIGEST_A,    "2026-08-05T12:00:01.234Z",
        "corr_abc",    "client",    "7",              NULL};
    assert_composite_args(&args, full, NARGS(full));

    /* the acquire's own trace id; no metadata ({}); a lifetime, no TTL; no
     * optional call members */
    strcpy(req.trace_id, "trace-own");
    strcpy(req.metadata_json, "{}");
    req.ttl_ms = 0;
    req.maximum_lifetime_ms = 60000;
    req.identity.operation_class[0] = '\0';
    req.call.correlation_id[0] = req.call.deadline_class[0] = '\0';
    /* a session: the last argument, after brief (written in the statement) */
    strcpy(req.session_id, "session_01");
    assert_true(store_pg_encode_acquire_typed(&req, now, &args, &why));
    static const char *const sparse[] = {
        "tenant-main", "program-a", "starintel-target", "Target_01", "usernamegen", "default",
        NULL,          "inst-1",    "exec-1",           "job-1",     "trace-own",   NULL,
        "60000",       NULL,        "prn_1",            "client_1",  "key_1",       "worker",
        "req-1",       DIGEST_A,    "2026-08-05T12:00:01.234Z",      NULL,          NULL,
        "7",           "session_01"};
    assert_composite_args(&args, sparse, NARGS(sparse));

    /* no principal at all: a client id without one is not sent; no
     * metadata at all is the same as {} */
    memset(&req.call.principal, 0, sizeof req.call.principal);
    strcpy(req.call.principal.client_id, "orphan");
    req.metadata_json[0] = '\0';
    assert_true(store_pg_encode_acquire_typed(&req, now, &args, &why));
    static const char *const anonymous[] = {
        "tenant-main", "program-a", "starintel-target", "Target_01", "usernamegen", "default",
        NULL,          "inst-1",    "exec-1",           "job-1",     "trace-own",   NULL,
        "60000",       NULL,        NULL,               NULL,        NULL,          NULL,
        "req-1",       DIGEST_A,    "2026-08-05T12:00:01.234Z",      NULL,          NULL,
        "7",           "session_01"};
    assert_composite_args(&args, anonymous, NARGS(anonymous));

    /* what a composite's literal must quote comes back as it was: commas,
     * parentheses, quotes, backslashes, blanks */
    strcpy(req.job_id, "j, (1) \"q\" \\ ");
    assert_true(store_pg_encode_acquire_typed(&req, now, &args, &why));
    const char *quoted[NARGS(anonymous)];
    memcpy(quoted, anonymous, sizeof quoted);
    quoted[9] = "j, (1) \"q\" \\ ";
    assert_composite_args(&args, quoted, NARGS(quoted));
    strcpy(req.job_id, "job-1");

    /* bad metadata is the caller's input: named, nothing sent */
    const char *bad_meta[] = {"[1,2]", "{\"a\":", "\"x\"", "{\"a\":1,\"a\":2}", "{not json"};
    for (size_t i = 0; i < sizeof bad_meta / sizeof bad_meta[0]; i++) {
        strcpy(req.metadata_json, bad_meta[i]);
        why = NULL;
        assert_false(store_pg_encode_acquire_typed(&req, now, &args, &why));
        assert_non_null(why);
        assert_string_equal(why, "metadata");
    }
    strcpy(req.metadata_json, "{}");
    strcpy(req.job_id, "job\xff");
    assert_false(store_pg_encode_acquire_typed(&req, now, &args, &why));
    assert_null(why);
}

static void test_encode_owner_typed(void **state)
{
    (void)state;
    int64_t now = 5000000000LL;
    lease_owner_req_t req;
    fill_owner(&req, now, "lease_1", 42);
    req.ttl_ms = 5000;
    store_pg_typed_args_t args;
    assert_true(store_pg_encode_owner_typed(STORE_PG_OP_RENEW, &req, now, &args));
    assert_string_equal(args.sql, store_pg_typed_calls[STORE_PG_TYPED_RENEW].sql);
    assert_string_equal(args.prepared, "lease_renew_brief_typed");
    static const char *const renew[] = {
        "tenant-main", "program-a", "starintel-target", "Target_01", "usernamegen", "default",
        "collect",     "lease_1",   "42",               "5000",      "inst-1",      "prn_1",
        "worker",      "key_1",     "req-1",            DIGEST_A,    "2026-08-05T12:00:01.234Z",
        "corr_abc",    "trace-call", "client",          "7"};
    assert_composite_args(&args, renew, NARGS(renew));
    /* a release's fields are a renewal's without ttl_ms (the tenth value,
     * lease.renew_request's third field) */
    assert_true(store_pg_encode_owner_typed(STORE_PG_OP_RELEASE, &req, now, &args));
    assert_string_equal(args.sql, store_pg_typed_calls[STORE_PG_TYPED_RELEASE].sql);
    assert_string_equal(args.prepared, "lease_release_brief_typed");
    static const char *const release[] = {
        "tenant-main", "program-a", "starintel-target", "Target_01", "usernamegen",
        "default",     "collect",   "lease_1",          "42",        "inst-1",
        "prn_1",       "worker",    "key_1",            "req-1",     DIGEST_A,
        "2026-08-05T12:00:01.234Z", "corr_abc",         "trace-call", "client",
        "7"};
    assert_composite_args(&args, release, NARGS(release));

    /* the optional ones empty: SQL NULL (the default operation class
     * included); the client id is not an argument of either */
    req.ttl_ms = 0;
    req.identity.operation_class[0] = '\0';
    req.call.correlation_id[0] = req.call.trace_id[0] = req.call.deadline_class[0] = '\0';
    req.call.principal.principal_class[0] = '\0';
    assert_true(store_pg_encode_owner_typed(STORE_PG_OP_RENEW, &req, now, &args));
    static const char *const renew_sparse[] = {
        "tenant-main", "program-a", "starintel-target", "Target_01", "usernamegen", "default",
        NULL,          "lease_1",   "42",               NULL,        "inst-1",      "prn_1",
        NULL,          "key_1",     "req-1",            DIGEST_A,    "2026-08-05T12:00:01.234Z",
        NULL,          NULL,        NULL,               "7"};
    assert_composite_args(&args, renew_sparse, NARGS(renew_sparse));
    assert_true(store_pg_encode_owner_typed(STORE_PG_OP_RELEASE, &req, now, &args));
    static const char *const release_sparse[] = {
        "tenant-main", "program-a", "starintel-target", "Target_01", "usernamegen",
        "default",     NULL,        "lease_1",          "42",        "inst-1",
        "prn_1",       NULL,        "key_1",            "req-1",     DIGEST_A,
        "2026-08-05T12:00:01.234Z", NULL,               NULL,        NULL,
        "7"};
    assert_composite_args(&args, release_sparse, NARGS(release_sparse));

    /* a string that is not UTF-8 fails, before any call */
    strcpy(req.call.correlation_id, "corr\xff");
    assert_false(store_pg_encode_owner_typed(STORE_PG_OP_RENEW, &req, now, &args));
    assert_false(store_pg_encode_owner_typed(STORE_PG_OP_RELEASE, &req, now, &args));
}

/* The elements of an array literal store_pg_encode_owner_many_typed wrote,
 * read back by array_in's rules for what it writes (NULL, or a quoted
 * element with \" and \\ escapes) into out[i] (NULL for NULL). */
static size_t read_array(const char *lit, char out[][1024], const char **v, size_t max)
{
    size_t n = 0;
    assert_int_equal(*lit++, '{');
    while (*lit != '}') {
        assert_true(n < max);
        if (strncmp(lit, "NULL", 4) == 0) {
            v[n++] = NULL;
            lit += 4;
        } else {
            assert_int_equal(*lit++, '"');
            size_t k = 0;
            while (*lit != '"') {
                if (*lit == '\\')
                    lit++;
                out[n][k++] = *lit++;
            }
            out[n][k] = '\0';
            v[n] = out[n];
            n++;
            lit++;
        }
        if (*lit == ',')
            lit++;
    }
    assert_string_equal(lit, "}");
    return n;
}

/* A typed batch: argument j is an array whose element i is what the single
 * typed call of request i sends as argument j (its composite's literal),
 * however the text is made: lease.identity[] and lease.renew_request[]
 * (release_request[]). */
static void test_encode_owner_many_typed(void **state)
{
    (void)state;
    int64_t now = 5000000000LL;
    lease_owner_req_t r[3];
    for (int i = 0; i < 3; i++) {
        char id[16];
        snprintf(id, sizeof id, "lease_%d", i);
        fill_owner(&r[i], now, id, i + 1);
        snprintf(r[i].call.request_id, sizeof r[i].call.request_id, "req-%d", i);
    }
    r[0].ttl_ms = 5000; /* the others keep their TTL: NULL fields */
    strcpy(r[1].call.correlation_id, "a\"b\\c,{NULL} d");
    strcpy(r[2].call.correlation_id, "NULL");
    r[2].call.trace_id[0] = '\0';
    strcpy(r[2].identity.target_id, "t\xc3\xa9");
    for (int op = 0; op < 2; op++) {
        store_pg_op_t many = op ? STORE_PG_OP_RELEASE_MANY : STORE_PG_OP_RENEW_MANY;
        store_pg_op_t one = op ? STORE_PG_OP_RELEASE : STORE_PG_OP_RENEW;
        store_pg_typed_many_t m;
        assert_true(store_pg_encode_owner_many_typed(many, r, 3, now, &m));
        assert_int_equal(m.nargs, 2);
        assert_non_null(
            strstr(m.sql, op ? "release_many_brief_typed(" : "renew_many_brief_typed("));
        static char buf[2][3][1024];
        const char *v[2][3];
        for (int j = 0; j < 2; j++)
            assert_int_equal(read_array(m.values[j], buf[j], v[j], 3), 3);
        for (size_t i = 0; i < 3; i++) {
            store_pg_typed_args_t single;
            assert_true(store_pg_encode_owner_typed(one, &r[i], now, &single));
            assert_int_equal(single.nargs, m.nargs);
            for (int j = 0; j < m.nargs; j++)
                if (!v[j][i] || strcmp(v[j][i], single.values[j]) != 0)
                    fail_msg("argument %d, item %zu: %s in the batch, %s alone", j + 1, i,
                             v[j][i] ? v[j][i] : "NULL", single.values[j]);
            store_pg_typed_args_free(&single);
            /* the element read back by record_in's rules: the values */
            char fb[2][8192];
            const char *identity[16], *request[32];
            assert_int_equal(read_record(v[0][i], fb[0], identity, 16),
                             STORE_PG_IDENTITY_FIELDS + 1);
            assert_int_equal(read_record(v[1][i], fb[1], request, 32), op ? 13 : 14);
            char want[16];
            snprintf(want, sizeof want, "lease_%zu", i);
            assert_string_equal(request[0], want);
            static const char *const corr[] = {"corr_abc", "a\"b\\c,{NULL} d", "NULL"};
            assert_string_equal(request[10 - op], corr[i]);
            if (!op && i == 0)
                assert_string_equal(request[2], "5000");
            else if (!op)
                assert_null(request[2]);
            if (i == 2)
                assert_string_equal(identity[3], "t\xc3\xa9");
        }
        store_pg_typed_many_free(&m);
        store_pg_typed_many_free(&m); /* freed once, then empty */
    }
    /* one string that is not UTF-8 fails the batch, as it fails the call */
    strcpy(r[1].service_instance_id, "\xc0\xaf");
    store_pg_typed_many_t m;
    assert_false(store_pg_encode_owner_many_typed(STORE_PG_OP_RELEASE_MANY, r, 3, now, &m));
    assert_null(m.arrays);
    assert_false(store_pg_encode_owner_many_typed(STORE_PG_OP_RENEW_MANY, r, 0, now, &m));
}

/* The encoders write their text directly (pg_codec_request.c): strings
 * with quotes, backslashes and control characters come back as they were,
 * a batch's items are separated, and a string that is not UTF-8 fails the
 * request (NULL, no field named) as jansson's json_string made it fail. */
static void test_encode_text_escapes(void **state)
{
    (void)state;
    int64_t now = 5000000000LL;
    const char *tricky = "a\"b\\c\n\t\x01\x1f/\xc3\xa9\xe2\x82\xac";
    lease_admin_req_t a;
    memset(&a, 0, sizeof a);
    fill_call(&a.call, now);
    fill_identity(&a.identity);
    strcpy(a.lease_id, "lease_1");
    a.fencing_token = 9;
    strcpy(a.reason, tricky);
    const char *bad = "x";
    char *text = store_pg_encode_admin(STORE_PG_OP_REVOKE, &a, now, &bad);
    assert_null(bad);
    json_t *o = parse(text);
    assert_string_equal(str(o, "reason"), tricky);
    json_decref(o);
    free(text);

    strcpy(a.reason, "not \xff UTF-8");
    assert_null(store_pg_encode_admin(STORE_PG_OP_REVOKE, &a, now, &bad));
    assert_null(bad);
}

static void test_encode_reads(void **state)
{
    (void)state;
    int64_t now = 5000000000LL;
    lease_inspect_req_t in;
    memset(&in, 0, sizeof in);
    fill_call(&in.call, now);
    in.call.request_id[0] = '\0';
    in.call.request_digest[0] = '\0';
    strcpy(in.scope.tenant_id, "tenant-main");
    strcpy(in.scope.program_id, "*");
    in.scope.all_actors = true;
    strcpy(in.lease_id, "lease_7");
    const char *bad;
    char *text = store_pg_encode_inspect(&in, now, &bad);
    json_t *o = parse(text);
    /* reads carry no request id or digest */
    assert_null(json_object_get(o, "request_id"));
    assert_null(json_object_get(o, "request_digest"));
    assert_string_equal(str(o, "lease_id"), "lease_7");
    assert_null(json_object_get(o, "lock_identity"));
    assert_string_equal(str(o, "scope.program_id"), "*");
    json_t *actors = json_object_get(json_object_get(o, "scope"), "actor_names");
    assert_int_equal(json_array_size(actors), 1);
    assert_string_equal(json_string_value(json_array_get(actors, 0)), "*");
    json_decref(o);
    free(text);

    in.by_identity = true;
    fill_identity(&in.identity);
    in.scope.all_actors = false;
    in.scope.n_actors = 2;
    strcpy(in.scope.actor_names[0], "a1");
    strcpy(in.scope.actor_names[1], "a2");
    text = store_pg_encode_inspect(&in, now, &bad);
    o = parse(text);
    check_identity(o);
    assert_null(json_object_get(o, "lease_id"));
    actors = json_object_get(json_object_get(o, "scope"), "actor_names");
    assert_int_equal(json_array_size(actors), 2);
    assert_string_equal(json_string_value(json_array_get(actors, 1)), "a2");
    json_decref(o);
    free(text);

    lease_list_req_t l;
    memset(&l, 0, sizeof l);
    fill_call(&l.call, now);
    l.scope = in.scope;
    l.by = LEASE_LIST_BY_TARGET;
    strcpy(l.tenant_id, "tenant-main");
    strcpy(l.program_id, "program-a");
    strcpy(l.target_namespace, "ns");
    strcpy(l.target_id, "T1");
    l.page_size = 10;
    text = store_pg_encode_list(&l, now, &bad);
    o = parse(text);
    assert_string_equal(str(o, "target_namespace"), "ns");
    assert_string_equal(str(o, "target_id"), "T1");
    assert_int_equal(json_integer_value(json_object_get(o, "page_size")), 10);
    assert_true(json_is_null(json_object_get(o, "page_token")));
    assert_null(json_object_get(o, "owner_principal_id"));
    json_decref(o);
    free(text);
    assert_int_equal(store_pg_list_op(l.by), STORE_PG_OP_LIST_BY_TARGET);

    l.by = LEASE_LIST_BY_OWNER;
    strcpy(l.owner_principal_id, "prn_1");
    strcpy(l.page_token, "tok");
    l.page_size = 0;
    text = store_pg_encode_list(&l, now, &bad);
    o = parse(text);
    assert_string_equal(str(o, "owner_principal_id"), "prn_1");
    assert_string_equal(str(o, "page_token"), "tok");
    assert_null(json_object_get(o, "page_size"));
    assert_null(json_object_get(o, "target_id"));
    json_decref(o);
    free(text);

    l.by = (lease_list_by_t)9;
    assert_null(store_pg_encode_list(&l, now, &bad));
    assert_string_equal(bad, "by");
}

static void test_encode_commit(void **state)
{
    (void)state;
    int64_t now = 5000000000LL;
    lease_commit_req_t c;
    memset(&c, 0, sizeof c);
    fill_call(&c.call, now);
    fill_identity(&c.identity);
    strcpy(c.lease_id, "lease_1");
    c.fencing_token = 3;
    strcpy(c.execution_id, "exec-1");
    c.n_writes = 2;
    c.writes[0] =
        (lease_write_t){.kind = LEASE_WRITE_DOCUMENT, .expected_revision = 0, .json = "{\"a\":1}"};
    strcpy(c.writes[0].key, "doc/1");
    c.writes[1] = (lease_write_t){.kind = LEASE_WRITE_PUBLICATION, .json = "{\"b\":true}"};
    strcpy(c.writes[1].key, "topic.x");
    const char *bad;
    char *text = store_pg_encode_commit(&c, now, &bad);
    json_t *o = parse(text);
    check_identity(o);
    json_t *w = json_object_get(o, "writes");
    assert_int_equal(json_array_size(w), 2);
    assert_string_equal(str(json_array_get(w, 0), "kind"), "document");
    assert_string_equal(str(json_array_get(w, 0), "key"), "doc/1");
    assert_true(json_is_integer(json_object_get(json_array_get(w, 0), "expected_revision")));
    assert_non_null(json_object_get(json_array_get(w, 0), "body"));
    assert_string_equal(str(json_array_get(w, 1), "kind"), "publication");
    assert_string_equal(str(json_array_get(w, 1), "topic"), "topic.x");
    assert_true(
        json_is_true(json_object_get(json_object_get(json_array_get(w, 1), "payload"), "b")));
    json_decref(o);
    free(text);

    c.writes[1].json = "not json";
    assert_null(store_pg_encode_commit(&c, now, &bad));
    assert_string_equal(bad, "writes[1].payload");
    c.writes[1].json = NULL;
    assert_null(store_pg_encode_commit(&c, now, &bad));
    assert_string_equal(bad, "writes[1].payload");
    c.writes[0].json = "[]";
    assert_null(store_pg_encode_commit(&c, now, &bad));
    assert_string_equal(bad, "writes[0].body");
    c.n_writes = 0;
    assert_null(store_pg_encode_commit(&c, now, &bad));
    assert_string_equal(bad, "writes");
}

static void test_encode_audit(void **state)
{
    (void)state;
    lease_audit_event_t e[2];
    memset(e, 0, sizeof e);
    e[0].event_type = "target_lease_acquire";
    e[0].occurred_at_ms = T0;
    e[0].code = LEASE_CONFLICT;
    e[0].decision = "deny";
    e[0].has_identity = true;
    fill_identity(&e[0].identity);
    fill_call(&e[0].call, 5000000000LL);
    e[1].event_type = "target_lease_inspect";
    e[1].code = LEASE_BACKEND_UNAVAILABLE;
    const char *bad;
    char *text = store_pg_encode_audit(e, 2, &bad);
    json_t *a = parse(text);
    assert_int_equal(json_array_size(a), 2);
    assert_string_equal(str(json_array_get(a, 0), "result_code"), "lease_conflict");
    assert_string_equal(str(json_array_get(a, 0), "occurred_at"), "2026-08-05T12:00:00.000Z");
    assert_string_equal(str(json_array_get(a, 0), "target_id"), "Target_01");
    assert_null(json_object_get(json_array_get(a, 1), "target_id"));
    json_decref(a);
    free(text);
    e[1].event_type = NULL;
    assert_null(store_pg_encode_audit(e, 2, &bad));
    assert_string_equal(bad, "events[1].event_type");
}

#define LEASE_JSON                                                                                 \
    "{\"lock_identity\":{\"tenant_id\":\"tenant-main\",\"program_id\":\"program-a\","              \
    "\"target_namespace\":\"starintel-target\",\"target_id\":\"Target_01\","                       \
    "\"actor_name\":\"usernamegen\",\"workflow_name\":\"default\",\"operation_class\":null},"      \
    "\"lease_id\":\"lease_1\",\"fencing_token\":42,\"state\":\"active\","                          \
    "\"acquired_at\":\"2026-08-05T12:00:00.000Z\",\"renewed_at\":\"2026-08-05T12:00:20.000Z\","    \
    "\"expires_at\":\"2026-08-05T12:00:50.000Z\",\"ended_at\":null,\"ttl_ms\":30000,"              \
    "\"maximum_lifetime_ms\":3600000,\"owner_principal_id\":\"prn_1\","                            \
    "\"owner_client_id\":\"client_1\",\"owner_credential_id\":\"key_1\","                          \
    "\"service_instance_id\":\"inst-1\",\"execution_id\":\"exec-1\",\"job_id\":\"job-1\","         \
    "\"trace_id\":null,\"request_id\":\"req-1\",\"metadata\":{\"z\":1,\"a\":\"x\"},"               \
    "\"end_reason\":null,\"incident_id\":null}"

/* Brief answers (docs/sql-api.md): what the database decided, no more. */
static void test_decode_brief(void **state)
{
    (void)state;
    lease_result_t r;
    const char *acquired =
        "{\"code\":\"lease_acquired\",\"replayed\":false,\"current_state\":\"active\","
        "\"lease\":{\"lease_id\":\"lease_9\",\"fencing_token\":7,\"state\":\"active\","
        "\"acquired_at\":\"2026-08-05T12:00:00.000Z\",\"renewed_at\":\"2026-08-05T12:00:00.000Z\","
        "\"expires_at\":\"2026-08-05T12:00:30.000Z\",\"ttl_ms\":30000,"
        "\"maximum_lifetime_ms\":3600000,\"owner_client_id\":\"c\",\"owner_credential_id\":\"k\"}}";
    assert_int_equal(store_pg_decode_result(STORE_PG_OP_ACQUIRE, acquired, &r), LEASE_ACQUIRED);
    assert_string_equal(r.lease.lease_id, "lease_9");
    assert_int_equal(r.lease.fencing_token, 7);
    assert_string_equal(r.lease.identity.tenant_id, ""); /* the request's */
    assert_string_equal(r.lease.metadata_json, "");      /* the request's */
    /* an acquisition's answer must name its lease: without it, it is not
     * readable, and a mutation whose answer cannot be read may have happened */
    const char *anonymous =
        "{\"code\":\"lease_acquired\",\"lease\":{\"state\":\"active\","
        "\"acquired_at\":\"2026-08-05T12:00:00.000Z\",\"renewed_at\":\"2026-08-05T12:00:00.000Z\","
        "\"expires_at\":\"2026-08-05T12:00:30.000Z\",\"ttl_ms\":30000,\"maximum_lifetime_ms\":1}}";
    assert_int_equal(store_pg_decode_result(STORE_PG_OP_ACQUIRE, anonymous, &r),
                     LEASE_OUTCOME_UNKNOWN);
    /* a renewal's names neither lease nor token: the request did */
    const char *renewed =
        "{\"code\":\"lease_renewed\",\"lease\":{\"state\":\"active\","
        "\"acquired_at\":\"2026-08-05T12:00:00.000Z\",\"renewed_at\":\"2026-08-05T12:00:20.000Z\","
        "\"expires_at\":\"2026-08-05T12:00:50.000Z\",\"ttl_ms\":30000,"
        "\"maximum_lifetime_ms\":3600000,\"execution_id\":\"e\",\"metadata\":{\"k\":1}}}";
    assert_int_equal(store_pg_decode_result(STORE_PG_OP_RENEW, renewed, &r), LEASE_RENEWED);
    assert_int_equal(r.lease.fencing_token, 0);
    assert_string_equal(r.lease.execution_id, "e");
    assert_string_equal(r.lease.metadata_json, "{\"k\":1}");
    /* an inspection must answer a whole record */
    assert_int_equal(
        store_pg_decode_result(STORE_PG_OP_INSPECT,
                               "{\"code\":\"lease_inspected\",\"lease\":"
                               "{\"state\":\"active\",\"acquired_at\":\"2026-08-05T12:00:00.000Z\","
                               "\"renewed_at\":\"2026-08-05T12:00:00.000Z\","
                               "\"expires_at\":\"2026-08-05T12:00:30.000Z\","
                               "\"ttl_ms\":1,\"maximum_lifetime_ms\":1}}",
                               &r),
        LEASE_BACKEND_UNAVAILABLE);
}

/* A batch answer: each item decoded as the single answer would be, in its
 * own slot; an unreadable item is that item's unknown outcome, not the
 * batch's; a count that does not match the request is the batch's. */
static void test_decode_many(void **state)
{
    (void)state;
    lease_result_t r[3];
    const char *renewed =
        "{\"code\":\"lease_renewed\",\"replayed\":false,\"current_state\":\"active\","
        "\"lease\":{\"state\":\"active\",\"acquired_at\":\"2026-08-05T12:00:00.000Z\","
        "\"renewed_at\":\"2026-08-05T12:00:20.000Z\",\"expires_at\":\"2026-08-05T12:00:50.000Z\","
        "\"ttl_ms\":30000,\"maximum_lifetime_ms\":3600000,\"execution_id\":\"e\"}}";
    char text[2048];
    snprintf(text, sizeof text, "{\"results\":[%s,{\"code\":\"lease_lost\"},7]}", renewed);
    assert_int_equal(store_pg_decode_renew_many(text, 3, r), LEASE_RENEWED);
    assert_int_equal(r[0].code, LEASE_RENEWED);
    assert_string_equal(r[0].lease.execution_id, "e");
    assert_true(r[0].lease.expires_at_ms > 0);
    assert_int_equal(r[1].code, LEASE_LOST);
    assert_false(r[1].has_lease);
    assert_int_equal(r[2].code, LEASE_OUTCOME_UNKNOWN); /* not an object */
    /* a renewal's code in a release batch is not a release's answer */
    snprintf(text, sizeof text, "{\"results\":[%s]}", renewed);
    assert_int_equal(store_pg_decode_release_many(text, 1, r), LEASE_RELEASED);
    assert_int_equal(r[0].code, LEASE_OUTCOME_UNKNOWN);
    assert_int_equal(store_pg_decode_renew_many(text, 2, r), LEASE_OUTCOME_UNKNOWN);
    assert_int_equal(store_pg_decode_renew_many("{\"results\":{}}", 1, r), LEASE_OUTCOME_UNKNOWN);
}

static void test_decode_success(void **state)
{
    (void)state;
    lease_result_t r;
    lease_code_t c = store_pg_decode_result(
        STORE_PG_OP_ACQUIRE, "{\"code\":\"lease_acquired\",\"lease\":" LEASE_JSON "}", &r);
    assert_int_equal(c, LEASE_ACQUIRED);
    assert_int_equal(r.code, LEASE_ACQUIRED);
    assert_true(r.has_lease);
    assert_false(r.replayed);
    assert_string_equal(r.lease.identity.target_id, "Target_01");
    assert_string_equal(r.lease.identity.operation_class, "default");
    assert_string_equal(r.lease.lease_id, "lease_1");
    assert_int_equal(r.lease.fencing_token, 42);
    assert_int_equal(r.lease.state, LEASE_STATE_ACTIVE);
    assert_int_equal(r.lease.acquired_at_ms, T0);
    assert_int_equal(r.lease.renewed_at_ms, T0 + 20000);
    assert_int_equal(r.lease.expires_at_ms, T0 + 50000);
    assert_int_equal(r.lease.ended_at_ms, 0);
    assert_int_equal(r.lease.ttl_ms, 30000);
    assert_int_equal(r.lease.maximum_lifetime_ms, 3600000);
    assert_string_equal(r.lease.owner_principal_id, "prn_1");
    assert_string_equal(r.lease.service_instance_id, "inst-1");
    assert_string_equal(r.lease.trace_id, "");
    assert_string_equal(r.lease.metadata_json, "{\"a\":\"x\",\"z\":1}");

    c = store_pg_decode_result(STORE_PG_OP_ACQUIRE,
                               "{\"code\":\"lease_acquired\",\"replayed\":true,"
                               "\"current_state\":\"expired\",\"lease\":" LEASE_JSON "}",
                               &r);
    assert_int_equal(c, LEASE_ACQUIRED);
    assert_true(r.replayed);
    assert_int_equal(r.current_state, LEASE_STATE_EXPIRED);

    c = store_pg_decode_result(STORE_PG_OP_ACQUIRE,
                               "{\"code\":\"lease_conflict\",\"retry_after_ms\":250}", &r);
    assert_int_equal(c, LEASE_CONFLICT);
    assert_int_equal(r.retry_after_ms, 250);
    assert_false(r.has_lease);

    c = store_pg_decode_result(STORE_PG_OP_RENEW,
                               "{\"code\":\"invalid_lease_request\",\"field\":\"ttl_ms\"}", &r);
    assert_int_equal(c, LEASE_INVALID_LEASE_REQUEST);
    assert_string_equal(r.field, "ttl_ms");

    c = store_pg_decode_result(STORE_PG_OP_RELEASE, "{\"code\":\"lease_lost\",\"extra\":[1]}", &r);
    assert_int_equal(c, LEASE_LOST);

    c = store_pg_decode_result(STORE_PG_OP_INSPECT, "{\"code\":\"lease_not_found\"}", &r);
    assert_int_equal(c, LEASE_NOT_FOUND);
}

static void test_decode_malformed(void **state)
{
    (void)state;
    char long_id[300];
    memset(long_id, 'x', sizeof long_id - 1);
    long_id[sizeof long_id - 1] = '\0';
    char long_lease[1200];
    snprintf(long_lease, sizeof long_lease,
             "{\"code\":\"lease_acquired\",\"lease\":{\"lease_id\":\"%s\"}}", long_id);
    char big_meta[4000];
    int n = snprintf(big_meta, sizeof big_meta, "{\"code\":\"lease_acquired\",\"lease\":");
    /* a valid record whose metadata is larger than the bound */
    const char *rec = LEASE_JSON;
    const char *meta_at = strstr(rec, "\"metadata\":");
    n += snprintf(big_meta + n, sizeof big_meta - (size_t)n, "%.*s\"metadata\":{\"k\":\"",
                  (int)(meta_at - rec), rec);
    for (int i = 0; i < 2100; i++)
        big_meta[n++] = 'm';
    snprintf(big_meta + n, sizeof big_meta - (size_t)n, "\"}}}");

    struct {
        store_pg_op_t op;
        const char *text;
    } cases[] = {
        {STORE_PG_OP_ACQUIRE, NULL},
        {STORE_PG_OP_ACQUIRE, ""},
        {STORE_PG_OP_ACQUIRE, "not json"},
        {STORE_PG_OP_ACQUIRE, "[]"},
        {STORE_PG_OP_ACQUIRE, "{}"},
        {STORE_PG_OP_ACQUIRE, "{\"code\":42}"},
        {STORE_PG_OP_ACQUIRE, "{\"code\":\"lease_exploded\"}"},
        /* a code the operation cannot give */
        {STORE_PG_OP_ACQUIRE, "{\"code\":\"lease_renewed\",\"lease\":" LEASE_JSON "}"},
        {STORE_PG_OP_INSPECT, "{\"code\":\"lease_conflict\"}"},
        {STORE_PG_OP_RENEW, "{\"code\":\"access_denied\"}"},
        /* success without its lease */
        {STORE_PG_OP_ACQUIRE, "{\"code\":\"lease_acquired\"}"},
        {STORE_PG_OP_ACQUIRE, "{\"code\":\"lease_acquired\",\"lease\":null}"},
        {STORE_PG_OP_ACQUIRE, "{\"code\":\"lease_acquired\",\"lease\":[]}"},
        {STORE_PG_OP_ACQUIRE, long_lease},
        {STORE_PG_OP_ACQUIRE, "{\"code\":\"lease_conflict\",\"retry_after_ms\":-1}"},
        {STORE_PG_OP_ACQUIRE, "{\"code\":\"lease_conflict\",\"retry_after_ms\":\"1\"}"},
        {STORE_PG_OP_ACQUIRE, "{\"code\":\"lease_conflict\",\"replayed\":1}"},
        {STORE_PG_OP_ACQUIRE, "{\"code\":\"lease_conflict\",\"current_state\":\"zombie\"}"},
        {STORE_PG_OP_ACQUIRE, "{\"code\":\"lease_conflict\",\"code\":\"lease_acquired\"}"},
        {STORE_PG_OP_ACQUIRE, "{\"code\":\"lease_conflict\",\"field\":7}"},
    };
    /* a read answers backend_unavailable; a mutation's function ran, so an
     * answer that cannot be read is outcome_unknown, never "nothing done" */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lease_result_t r;
        memset(&r, 0x5a, sizeof r);
        lease_code_t want =
            store_pg_op_resolvable(cases[i].op) ? LEASE_OUTCOME_UNKNOWN : LEASE_BACKEND_UNAVAILABLE;
        lease_code_t c = store_pg_decode_result(cases[i].op, cases[i].text, &r);
        if (c != want || r.code != want || r.has_lease || r.replayed || r.lease.fencing_token != 0)
            fail_msg("case %zu decoded to %s", i, lease_code_name(c));
    }

    /* metadata larger than the bound makes the metadata unreadable, not
     * the lease: it reads as null */
    lease_result_t big;
    assert_int_equal(store_pg_decode_result(STORE_PG_OP_ACQUIRE, big_meta, &big), LEASE_ACQUIRED);
    assert_true(big.has_lease);
    assert_string_equal(big.lease.metadata_json, "null");

    /* each field of a record, broken one at a time */
    struct {
        const char *from, *to;
    } edits[] = {
        {"\"fencing_token\":42", "\"fencing_token\":0"},
        {"\"fencing_token\":42", "\"fencing_token\":\"42\""},
        {"\"fencing_token\":42", "\"fencing_token\":4.2"},
        {"\"state\":\"active\"", "\"state\":\"held\""},
        {"\"state\":\"active\"", "\"state\":null"},
        {"\"acquired_at\":\"2026-08-05T12:00:00.000Z\"", "\"acquired_at\":\"yesterday\""},
        {"\"expires_at\":\"2026-08-05T12:00:50.000Z\"",
         "\"expires_at\":\"2026-08-05T11:00:50.000Z\""},
        {"\"expires_at\":\"2026-08-05T12:00:50.000Z\",", ""},
        {"\"ended_at\":null", "\"ended_at\":5"},
        {"\"ttl_ms\":30000", "\"ttl_ms\":-5"},
        {"\"lease_id\":\"lease_1\"", "\"lease_id\":\"\""},
        {"\"target_id\":\"Target_01\",", ""},
        {"\"tenant_id\":\"tenant-main\"", "\"tenant_id\":[\"x\"]"},
        {"\"operation_class\":null", "\"operation_class\":\"extraordinarily-long-class\""},
        {"\"owner_principal_id\":\"prn_1\"", "\"owner_principal_id\":1"},
        {"\"end_reason\":null", "\"end_reason\":false"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        char rec_text[2048];
        const char *at = strstr(LEASE_JSON, edits[i].from);
        assert_non_null(at);
        snprintf(rec_text, sizeof rec_text, "{\"code\":\"lease_renewed\",\"lease\":%.*s%s%s}",
                 (int)(at - LEASE_JSON), LEASE_JSON, edits[i].to, at + strlen(edits[i].from));
        lease_result_t r;
        lease_code_t c = store_pg_decode_result(STORE_PG_OP_RENEW, rec_text, &r);
        if (c != LEASE_OUTCOME_UNKNOWN || r.has_lease)
            fail_msg("edit %zu (%s) decoded to %s", i, edits[i].to, lease_code_name(c));
        c = store_pg_decode_result(STORE_PG_OP_INSPECT, rec_text, &r);
        if (c != LEASE_BACKEND_UNAVAILABLE || r.has_lease)
            fail_msg("edit %zu (%s) inspected to %s", i, edits[i].to, lease_code_name(c));
    }
}

/* A lease with the given metadata text, as lease.inspect answers it. */
static lease_code_t decode_with_metadata(store_pg_op_t op, const char *metadata, lease_result_t *r)
{
    static const char from[] = "\"metadata\":{\"z\":1,\"a\":\"x\"}";
    char text[8192];
    const char *at = strstr(LEASE_JSON, from);
    assert_non_null(at);
    snprintf(text, sizeof text, "{\"code\":\"%s\",\"lease\":%.*s\"metadata\":%s%s}",
             op == STORE_PG_OP_INSPECT ? "lease_inspected" : "lease_acquired",
             (int)(at - LEASE_JSON), LEASE_JSON, metadata, at + strlen(from));
    return store_pg_decode_result(op, text, r);
}

/* Metadata is the caller's data: a value jsonb holds but the decoder cannot
 * (or that is outside the request bound) reads as null and never makes the
 * lease unreadable; reals keep their shortest form. */
static void test_decode_metadata_numbers(void **state)
{
    (void)state;
    static const struct {
        const char *stored, *read;
    } cases[] = {
        {"{\"n\": 10000000000000000000}", "{\"n\":null}"},
        {"{\"n\": 9300000000000000000, \"s\": \"ok\"}", "{\"n\":null,\"s\":\"ok\"}"},
        {"{\"n\": 12345678901234567890.5}", "{\"n\":null}"},
        {"{\"n\": 1e400, \"m\": -1e400}", "{\"m\":null,\"n\":null}"},
        {"{\"n\": 9007199254740991, \"r\": 0.1}", "{\"n\":9007199254740991,\"r\":0.1}"},
        {"{\"n\": -9007199254740992}", "{\"n\":null}"},
        {"{\"r\": 2.5e-8, \"b\": true}", "{\"b\":true,\"r\":2.5e-08}"},
        {"\"text\"", "null"},
        {"[1, 2]", "null"},
        {"null", "{}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int op = 0; op < 2; op++) {
            lease_result_t r;
            store_pg_op_t o = op ? STORE_PG_OP_INSPECT : STORE_PG_OP_ACQUIRE;
            lease_code_t c = decode_with_metadata(o, cases[i].stored, &r);
            if (!lease_code_is_success(c) || strcmp(r.lease.metadata_json, cases[i].read) != 0)
                fail_msg("metadata %s decoded to %s: %s", cases[i].stored, lease_code_name(c),
                         r.lease.metadata_json);
            assert_int_equal(r.lease.fencing_token, 42);
        }
    }
    /* the same number in a field that must be exact fails the record */
    lease_result_t r;
    char text[4096];
    const char *at = strstr(LEASE_JSON, "\"fencing_token\":42");
    snprintf(text, sizeof text, "{\"code\":\"lease_inspected\",\"lease\":%.*s%s%s}",
             (int)(at - LEASE_JSON), LEASE_JSON, "\"fencing_token\":10000000000000000000",
             at + strlen("\"fencing_token\":42"));
    assert_int_equal(store_pg_decode_result(STORE_PG_OP_INSPECT, text, &r),
                     LEASE_BACKEND_UNAVAILABLE);

    /* a list with one lease whose metadata holds such a value lists both */
    lease_list_result_t l;
    snprintf(text, sizeof text, "{\"code\":\"lease_listed\",\"leases\":[%s,%.*s%s%s]}", LEASE_JSON,
             (int)(strstr(LEASE_JSON, "\"metadata\"") - LEASE_JSON), LEASE_JSON,
             "\"metadata\":{\"n\":1e19999}",
             strstr(LEASE_JSON, "\"metadata\"") + strlen("\"metadata\":{\"z\":1,\"a\":\"x\"}"));
    assert_int_equal(store_pg_decode_list(STORE_PG_OP_LIST_BY_PROGRAM, text, &l), LEASE_LISTED);
    assert_int_equal(l.count, 2);
    assert_string_equal(l.leases[0].metadata_json, "{\"a\":\"x\",\"z\":1}");
    assert_string_equal(l.leases[1].metadata_json, "{\"n\":null}");
    lease_list_result_free(&l);
}

static void test_decode_list(void **state)
{
    (void)state;
    lease_list_result_t l;
    lease_code_t c = store_pg_decode_list(STORE_PG_OP_LIST_BY_PROGRAM,
                                          "{\"code\":\"lease_listed\",\"leases\":[" LEASE_JSON
                                          "," LEASE_JSON "],\"next_page_token\":\"p2\"}",
                                          &l);
    assert_int_equal(c, LEASE_LISTED);
    assert_int_equal(l.count, 2);
    assert_int_equal(l.leases[1].fencing_token, 42);
    assert_string_equal(l.next_page_token, "p2");
    lease_list_result_free(&l);
    assert_null(l.leases);

    c = store_pg_decode_list(STORE_PG_OP_LIST_BY_OWNER,
                             "{\"code\":\"lease_listed\",\"leases\":[],\"next_page_token\":null}",
                             &l);
    assert_int_equal(c, LEASE_LISTED);
    assert_int_equal(l.count, 0);
    assert_string_equal(l.next_page_token, "");
    lease_list_result_free(&l);

    c = store_pg_decode_list(STORE_PG_OP_LIST_BY_OWNER,
                             "{\"code\":\"invalid_lease_request\",\"field\":\"page_token\"}", &l);
    assert_int_equal(c, LEASE_INVALID_LEASE_REQUEST);
    assert_string_equal(l.field, "page_token");

    const char *bad[] = {
        "{\"code\":\"lease_listed\"}",
        "{\"code\":\"lease_listed\",\"leases\":{}}",
        "{\"code\":\"lease_listed\",\"leases\":[" LEASE_JSON ",{\"lease_id\":1}]}",
        "{\"code\":\"lease_inspected\",\"leases\":[]}",
        "{\"code\":\"lease_listed\",\"leases\":[],\"next_page_token\":5}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        c = store_pg_decode_list(STORE_PG_OP_LIST_BY_TARGET, bad[i], &l);
        if (c != LEASE_BACKEND_UNAVAILABLE || l.leases || l.count)
            fail_msg("list case %zu decoded to %s", i, lease_code_name(c));
    }
}

static void test_decode_commit(void **state)
{
    (void)state;
    lease_commit_result_t r;
    lease_code_t c =
        store_pg_decode_commit("{\"code\":\"commit_accepted\",\"replayed\":false,\"results\":["
                               "{\"kind\":\"document\",\"key\":\"d\",\"revision\":3},"
                               "{\"kind\":\"publication\",\"topic\":\"t\",\"outbox_id\":77}]}",
                               2, &r);
    assert_int_equal(c, LEASE_COMMIT_ACCEPTED);
    assert_int_equal(r.n_writes, 2);
    assert_int_equal(r.revisions[0], 3);
    assert_int_equal(r.revisions[1], 77);

    c = store_pg_decode_commit(
        "{\"code\":\"write_conflict\",\"field\":\"writes[1].expected_revision\","
        "\"current_revision\":4}",
        2, &r);
    assert_int_equal(c, LEASE_WRITE_CONFLICT);
    assert_string_equal(r.field, "writes[1].expected_revision");
    assert_int_equal(r.current_revision, 4);

    const char *bad[] = {
        "{\"code\":\"commit_accepted\",\"results\":[{\"kind\":\"document\",\"revision\":3}]}",
        "{\"code\":\"commit_accepted\"}",
        "{\"code\":\"commit_accepted\",\"results\":[{\"kind\":\"file\",\"revision\":3},"
        "{\"kind\":\"document\",\"revision\":3}]}",
        "{\"code\":\"commit_accepted\",\"results\":[{\"kind\":\"document\",\"revision\":0},"
        "{\"kind\":\"document\",\"revision\":3}]}",
        "{\"code\":\"lease_acquired\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        c = store_pg_decode_commit(bad[i], 2, &r);
        if (c != LEASE_OUTCOME_UNKNOWN || r.n_writes)
            fail_msg("commit case %zu decoded to %s", i, lease_code_name(c));
    }
}

/* lease.expire_due's and lease.purge_due's answers (the SQL side:
 * pgtap/40_housekeeping_bounded_oldest_first.sql): each field where the sweeper reads it, "did not run" carries no
 * counts, and a missing field is malformed, never a zero. */
static void test_decode_housekeeping(void **state)
{
    (void)state;
    lease_housekeeping_result_t h;
    assert_int_equal(store_pg_decode_housekeeping(
                         LEASE_STEP_EXPIRE,
                         "{\"ran\":true,\"expired\":7,\"more\":true,\"lag_ms\":1500}", &h),
                     LEASE_INSPECTED);
    assert_true(h.ran);
    assert_true(h.more);
    assert_int_equal(h.expired, 7);
    assert_int_equal(h.lag_ms, 1500);
    assert_int_equal(
        store_pg_decode_housekeeping(
            LEASE_STEP_PURGE,
            "{\"ran\":true,\"more\":false,\"idempotency_purged\":1,\"history_purged\":2,"
            "\"lease_index_purged\":3,\"audit_purged\":4,\"idempotency_lag_ms\":5,"
            "\"history_lag_ms\":6,\"lease_index_lag_ms\":7,\"audit_lag_ms\":8}",
            &h),
        LEASE_INSPECTED);
    assert_false(h.more);
    assert_int_equal(h.purged[LEASE_TABLE_IDEMPOTENCY], 1);
    assert_int_equal(h.purged[LEASE_TABLE_HISTORY], 2);
    assert_int_equal(h.purged[LEASE_TABLE_LEASE_INDEX], 3);
    assert_int_equal(h.purged[LEASE_TABLE_AUDIT], 4);
    assert_int_equal(h.purge_lag_ms[LEASE_TABLE_IDEMPOTENCY], 5);
    assert_int_equal(h.purge_lag_ms[LEASE_TABLE_AUDIT], 8);
    assert_int_equal(store_pg_decode_housekeeping(LEASE_STEP_PURGE,
                                                  "{\"ran\":false,\"more\":false}", &h),
                     LEASE_INSPECTED);
    assert_false(h.ran);
    assert_int_equal(h.purged[LEASE_TABLE_AUDIT], 0);
    /* a purge answer without its lag, an expiry without its count, no
     * answer at all: malformed */
    assert_int_equal(store_pg_decode_housekeeping(
                         LEASE_STEP_PURGE,
                         "{\"ran\":true,\"more\":false,\"idempotency_purged\":1,"
                         "\"history_purged\":2,\"lease_index_purged\":3,\"audit_purged\":4}",
                         &h),
                     LEASE_BACKEND_UNAVAILABLE);
    assert_int_equal(store_pg_decode_housekeeping(LEASE_STEP_EXPIRE,
                                                  "{\"ran\":true,\"more\":false}", &h),
                     LEASE_BACKEND_UNAVAILABLE);
    assert_false(h.ran);
    assert_int_equal(store_pg_decode_housekeeping(LEASE_STEP_EXPIRE, NULL, &h),
                     LEASE_BACKEND_UNAVAILABLE);
}

static void test_decode_internal(void **state)
{
    (void)state;
    lease_sweep_result_t s;
    assert_int_equal(store_pg_decode_sweep("{\"ran\":true,\"expired\":3}",
                                           "{\"ran\":true,\"idempotency_purged\":4,"
                                           "\"history_purged\":5,\"audit_purged\":6}",
                                           &s),
                     LEASE_INSPECTED);
    assert_true(s.ran);
    assert_int_equal(s.expired, 3);
    assert_int_equal(s.idempotency_purged, 4);
    assert_int_equal(s.history_purged, 5);
    assert_int_equal(s.audit_purged, 6);
    assert_int_equal(store_pg_decode_sweep("{\"expired\":3}", "{}", &s), LEASE_BACKEND_UNAVAILABLE);
    assert_false(s.ran);
    assert_int_equal(store_pg_decode_sweep(NULL, NULL, &s), LEASE_BACKEND_UNAVAILABLE);

    lease_credential_t cred;
    bool found = true;
    char row[1024];
    const char *digest = "00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff0a0B";
    snprintf(row, sizeof row,
             "{\"credential_id\":\"key_1\",\"principal_id\":\"prn_1\",\"client_id\":\"c1\","
             "\"tenant_id\":\"tenant-main\",\"program_id\":\"*\",\"actor_names\":[\"a\",\"b\"],"
             "\"capabilities\":[\"targets:lease\",\"audit:read\",\"future:thing\"],"
             "\"admin\":false,\"secret_digest\":\"%s\",\"created_at\":\"2026-08-05T12:00:00Z\","
             "\"expires_at\":null,\"revoked_at\":null,\"revoked\":false,\"expires_in_ms\":null}",
             digest);
    assert_int_equal(store_pg_decode_credential(row, &cred, &found), LEASE_INSPECTED);
    assert_true(found);
    assert_string_equal(cred.credential_id, "key_1");
    assert_string_equal(cred.scope.program_id, "*");
    assert_false(cred.scope.all_actors);
    assert_int_equal(cred.scope.n_actors, 2);
    assert_string_equal(cred.scope.actor_names[1], "b");
    assert_int_equal(cred.capabilities, LEASE_CAP_LEASE | LEASE_CAP_AUDIT_READ);
    assert_int_equal(cred.secret_digest[1], 0xff);
    assert_int_equal(cred.secret_digest[31], 0x0b);
    assert_int_equal(cred.created_at_ms, T0);
    assert_false(cred.has_expiry); /* no expiry, said explicitly */
    assert_false(cred.revoked);

    /* an expiry in the past is "0 ms left", never "no expiry"; the rendered
     * timestamps are not read (a -infinity renders as "") */
    char expired_row[1100];
    snprintf(expired_row, sizeof expired_row, "%s", row);
    char *tail = strstr(expired_row, "\"expires_at\":null");
    assert_non_null(tail);
    snprintf(tail, sizeof expired_row - (size_t)(tail - expired_row),
             "\"expires_at\":\"\",\"revoked_at\":\"\",\"revoked\":true,\"expires_in_ms\":0}");
    assert_int_equal(store_pg_decode_credential(expired_row, &cred, &found), LEASE_INSPECTED);
    assert_true(cred.has_expiry);
    assert_int_equal(cred.expires_in_ms, 0);
    assert_true(cred.revoked);
    /* without the backend's judgement, or with a negative remainder, the
     * row is malformed: fail closed */
    snprintf(tail, sizeof expired_row - (size_t)(tail - expired_row),
             "\"expires_at\":null,\"revoked_at\":null,\"revoked\":false,\"expires_in_ms\":-1}");
    assert_int_equal(store_pg_decode_credential(expired_row, &cred, &found),
                     LEASE_BACKEND_UNAVAILABLE);
    assert_false(found);
    snprintf(tail, sizeof expired_row - (size_t)(tail - expired_row),
             "\"expires_at\":null,\"revoked_at\":null}");
    assert_int_equal(store_pg_decode_credential(expired_row, &cred, &found),
                     LEASE_BACKEND_UNAVAILABLE);

    assert_int_equal(store_pg_decode_credential(NULL, &cred, &found), LEASE_NOT_FOUND);
    assert_false(found);
    assert_int_equal(store_pg_decode_credential("null", &cred, &found), LEASE_NOT_FOUND);
    assert_false(found);
    char bad_row[1024];
    snprintf(bad_row, sizeof bad_row, "%s", row);
    memcpy(strstr(bad_row, digest), "zz", 2);
    assert_int_equal(store_pg_decode_credential(bad_row, &cred, &found), LEASE_BACKEND_UNAVAILABLE);
    assert_false(found);
    assert_int_equal(cred.secret_digest[1], 0);
    assert_int_equal(store_pg_decode_credential("{\"credential_id\":\"k\"}", &cred, &found),
                     LEASE_BACKEND_UNAVAILABLE);

    lease_health_t h = {.reachable = true};
    char health[256];
    snprintf(health, sizeof health,
             "{\"schema_version\":%d,\"sealed\":false,\"sealed_reason\":null,\"epoch\":0,"
             "\"active_leases\":9}",
             LEASE_SCHEMA_VERSION);
    assert_int_equal(store_pg_decode_health(health, &h), LEASE_INSPECTED);
    assert_int_equal(h.schema_version, LEASE_SCHEMA_VERSION);
    assert_int_equal(h.expected_schema_version, LEASE_SCHEMA_VERSION);
    assert_true(h.reachable);
    assert_true(h.schema_current);
    assert_false(h.sealed);
    assert_int_equal(h.active_leases, 9);
    assert_int_equal(store_pg_decode_health("{\"schema_version\":9999,\"sealed\":true}", &h),
                     LEASE_INSPECTED);
    assert_false(h.schema_current);
    assert_true(h.sealed);
    assert_int_equal(store_pg_decode_health("{\"sealed\":true}", &h), LEASE_BACKEND_UNAVAILABLE);
    assert_int_equal(store_pg_decode_health("{\"schema_version\":7,\"sealed\":\"no\"}", &h),
                     LEASE_BACKEND_UNAVAILABLE);

    assert_int_equal(store_pg_decode_audit_count("3", 3), LEASE_INSPECTED);
    assert_int_equal(store_pg_decode_audit_count("2", 3), LEASE_BACKEND_UNAVAILABLE);
    assert_int_equal(store_pg_decode_audit_count("3x", 3), LEASE_BACKEND_UNAVAILABLE);
    assert_int_equal(store_pg_decode_audit_count(NULL, 3), LEASE_BACKEND_UNAVAILABLE);
}

static void test_op_table(void **state)
{
    (void)state;
    assert_string_equal(store_pg_op_name(STORE_PG_OP_FORCE_RELEASE), "force_release");
    /* reads and internal writes are not resolved by a caller's request id */
    assert_false(store_pg_op_resolvable(STORE_PG_OP_INSPECT));
    assert_false(store_pg_op_resolvable(STORE_PG_OP_LIST_BY_OWNER));
    assert_false(store_pg_op_resolvable(STORE_PG_OP_HEALTH));
    assert_false(store_pg_op_resolvable(STORE_PG_OP_SWEEP));
    assert_false(store_pg_op_resolvable(STORE_PG_OP_RECORD_AUDIT));
    assert_true(store_pg_op_resolvable(STORE_PG_OP_ACQUIRE));
    assert_true(store_pg_op_resolvable(STORE_PG_OP_FENCED_COMMIT));
    assert_true(store_pg_op_resolvable(STORE_PG_OP_RENEW_MANY));
    assert_true(store_pg_op_allows(STORE_PG_OP_ACQUIRE, LEASE_CONFLICT));
    assert_false(store_pg_op_allows(STORE_PG_OP_RENEW, LEASE_CONFLICT));
    assert_true(store_pg_op_allows(STORE_PG_OP_REVOKE, LEASE_REVOKED));
    assert_false(store_pg_op_allows(STORE_PG_OP_REVOKE, LEASE_RELEASED));
    assert_true(store_pg_op_allows(STORE_PG_OP_FENCED_COMMIT, LEASE_WRITE_CONFLICT));
    /* the adapter itself decides outcome-unknown, never the function */
    for (int op = 0; op < STORE_PG_OP_COUNT; op++)
        assert_false(store_pg_op_allows((store_pg_op_t)op, LEASE_OUTCOME_UNKNOWN));
    assert_false(store_pg_op_allows(STORE_PG_OP_COUNT, LEASE_ACQUIRED));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_typed_calls),
        cmocka_unit_test(test_encode_admin),
        cmocka_unit_test(test_encode_owner_typed),
        cmocka_unit_test(test_encode_acquire_typed),
        cmocka_unit_test(test_encode_owner_many_typed),
        cmocka_unit_test(test_encode_reads),
        cmocka_unit_test(test_encode_text_escapes),
        cmocka_unit_test(test_encode_commit),
        cmocka_unit_test(test_encode_audit),
        cmocka_unit_test(test_decode_success),
        cmocka_unit_test(test_decode_brief),
        cmocka_unit_test(test_decode_many),
        cmocka_unit_test(test_decode_malformed),
        cmocka_unit_test(test_decode_metadata_numbers),
        cmocka_unit_test(test_decode_list),
        cmocka_unit_test(test_decode_commit),
        cmocka_unit_test(test_decode_internal),
        cmocka_unit_test(test_decode_housekeeping),
        cmocka_unit_test(test_op_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
