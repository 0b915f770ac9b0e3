/*
 * http_interface.c - the names of docs/api.md and docs/openapi.yaml
 * (and the contract's wire results) checked over real HTTP against a real
 * leased and Postgres: every route's success shape, field by field with its
 * JSON type; one documented error (code and status) per route; the headers
 * the interface names; the policy defaults and bounds a client sees; the
 * /healthz, /readyz and /metrics shapes; and the leasectl flags of
 * docs/executor.md that no other test passes. Other files check behaviour; this one checks
 * that every name is spelled and typed as the interface writes it.
 */
#include <ctype.h>
#include <regex.h>

#include "exec_common.h"

static http_fx_t fx;
static const char *worker, *other, *admin; /* owned by fx */

static int setup(void **state)
{
    http_fx_open(&fx, state, "http_interface");
    worker = http_fx_worker(&fx, "prn_iface_worker");
    other = http_fx_worker(&fx, "prn_iface_other");
    admin = http_fx_credential(&fx, "prn_iface_admin", "*",
                               "targets:force-release,targets:revoke,targets:read", true);
    http_fx_serve(&fx, NULL);
    return 0;
}

/* ------------------------------------------------------------------ */
/* Shape checks                                                        */

/* RFC 3339 UTC with exactly three fractional digits. */
static void assert_timestamp(json_t *v, const char *name)
{
    if (!json_is_string(v))
        fail_msg("%s is not a string", name);
    regex_t re;
    assert_int_equal(regcomp(&re,
                             "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z$",
                             REG_EXTENDED | REG_NOSUB),
                     0);
    int rc = regexec(&re, json_string_value(v), 0, NULL, 0);
    regfree(&re);
    if (rc != 0)
        fail_msg("%s = '%s' is not RFC 3339 UTC with milliseconds", name, json_string_value(v));
}

static void assert_string_member(json_t *obj, const char *key)
{
    if (!json_is_string(json_object_get(obj, key)))
        fail_msg("'%s' is missing or not a string", key);
}

static void assert_integer_member(json_t *obj, const char *key)
{
    if (!json_is_integer(json_object_get(obj, key)))
        fail_msg("'%s' is missing or not an integer", key);
}

/* Every member of obj is one of the names allowed (NULL-terminated). */
static void assert_only_members(json_t *obj, const char *const *allowed, const char *what)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v)
    {
        bool known = false;
        for (const char *const *a = allowed; *a; a++)
            known = known || strcmp(*a, key) == 0;
        if (!known)
            fail_msg("%s has a member '%s' that docs/api.md does not name", what, key);
    }
}

static const char *const identity_members[] = {"tenant_id",       "program_id", "target_namespace",
                                               "target_id",       "actor_name", "workflow_name",
                                               "operation_class", NULL};

/* The lease object of docs/api.md (plus ended_at on terminal
 * leases, metadata for the owner, owner ids with audit:read: docs/api.md). */
static const char *const lease_members[] = {"lock_identity",
                                            "lease_id",
                                            "fencing_token",
                                            "acquired_at",
                                            "renewed_at",
                                            "expires_at",
                                            "ended_at",
                                            "ttl_ms",
                                            "maximum_lifetime_ms",
                                            "service_instance_id",
                                            "execution_id",
                                            "job_id",
                                            "trace_id",
                                            "metadata",
                                            "state",
                                            "owner_principal_id",
                                            "owner_client_id",
                                            NULL};

static const char *const owner_private[] = {
    "service_instance_id", "execution_id", "job_id", "trace_id", "metadata", NULL};

/* A lease: every field named by docs/api.md, typed. The owner sees its
 * owner-private fields; a viewer that neither owns the lease nor holds
 * audit:read sees none of them (contract: "only authorized fields"). */
static void assert_lease_view(json_t *lease, const char *state, bool owner)
{
    assert_true(json_is_object(lease));
    assert_only_members(lease, lease_members, "lease");
    json_t *id = json_object_get(lease, "lock_identity");
    assert_true(json_is_object(id));
    assert_int_equal(json_object_size(id), 7);
    for (const char *const *k = identity_members; *k; k++)
        assert_string_member(id, *k);
    assert_string_member(lease, "lease_id");
    assert_int_equal(strncmp(json_string_value(json_object_get(lease, "lease_id")), "lease_", 6),
                     0);
    assert_integer_member(lease, "fencing_token");
    assert_true(json_integer_value(json_object_get(lease, "fencing_token")) >= 1);
    assert_timestamp(json_object_get(lease, "acquired_at"), "acquired_at");
    assert_timestamp(json_object_get(lease, "renewed_at"), "renewed_at");
    assert_timestamp(json_object_get(lease, "expires_at"), "expires_at");
    assert_integer_member(lease, "ttl_ms");
    assert_integer_member(lease, "maximum_lifetime_ms");
    if (owner) {
        assert_string_member(lease, "service_instance_id");
        assert_string_member(lease, "execution_id");
        assert_string_member(lease, "job_id");
        assert_true(json_is_object(json_object_get(lease, "metadata")));
    } else {
        for (const char *const *k = owner_private; *k; k++)
            if (json_object_get(lease, *k))
                fail_msg("a viewer that is not the owner sees '%s'", *k);
    }
    assert_string_member(lease, "state");
    assert_string_equal(json_string_value(json_object_get(lease, "state")), state);
    /* the lock key never crosses HTTP */
    assert_null(json_object_get(lease, "lock_key"));
}

static void assert_lease_shape(json_t *lease, const char *state)
{
    assert_lease_view(lease, state, true);
}

static const char *const envelope_ok[] = {
    "status",          "code",   "correlation_id", "lease", "leases", "replayed", "current_state",
    "next_page_token", "commit", "waited_ms",      NULL};
static const char *const envelope_err[] = {
    "status",         "code",  "msg",    "correlation_id",   "retryable",
    "retry_after_ms", "field", "reason", "current_revision", NULL};

/* check_reply plus: only envelope members docs/api.md
 * names, and on errors the field the interface names, when given. */
static void check_shape(const http_resp_t *r, long status, const char *code, const char *field)
{
    check_reply(r, status, code, NULL);
    assert_only_members(r->json, status == 200 ? envelope_ok : envelope_err, "envelope");
    assert_non_null(strstr(http_resp_header(r, "Content-Type"), "application/json"));
    if (field) {
        const char *f = http_resp_str(r, "field");
        if (!f || strcmp(f, field) != 0)
            fail_msg("expected field '%s', got '%s' in %s", field, f ? f : "(none)", r->body);
    }
}

/* ms since the epoch of a timestamp checked by assert_timestamp. */
static long long ts_ms(json_t *v)
{
    struct tm tm = {0};
    int ms = 0;
    assert_int_equal(sscanf(json_string_value(v), "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon,
                            &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms),
                     7);
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (long long)timegm(&tm) * 1000 + ms;
}

static http_resp_t *post(const char *path, const char *token, json_t *body)
{
    return call_owned(fx.base, "POST", path, token, dump(body));
}

/* A full acquire body: every optional field docs/api.md names. */
static json_t *full_acquire(const char *request_id, const char *target)
{
    return json_pack("{s:s, s:o, s:s, s:s, s:s, s:s, s:i, s:i, s:{s:s, s:i, s:b}, s:i, s:i}",
                     "request_id", request_id, "lock_identity", identity_json(target),
                     "service_instance_id", "inst_iface", "execution_id", "exec_iface", "job_id",
                     "job_iface", "trace_id", "trace_iface", "ttl_ms", 20000, "maximum_lifetime_ms",
                     600000, "metadata", "source", "iface", "attempt", 1, "dry_run", 0, "wait_ms",
                     0, "deadline_ms", 4000);
}

static json_t *owner_req_early(const char *rid, const char *target, json_t *lease)
{
    return parse_owned(owner_body(rid, target, lease));
}

/* ------------------------------------------------------------------ */
/* acquire                                                             */

static void test_acquire_shape(void **state)
{
    (void)state;
    json_t *body = full_acquire("if-acq-1", "t-acq");
    http_resp_t *r = post("/v1/leases/acquire", worker, json_deep_copy(body));
    check_shape(r, 200, "lease_acquired", NULL);
    json_t *lease = lease_of(r);
    assert_lease_shape(lease, "active");
    /* what was asked is what is answered */
    json_t *want =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "tenant_id", TENANT, "program_id", PROGRAM,
                  "target_namespace", NAMESPACE, "target_id", "t-acq", "actor_name", ACTOR,
                  "workflow_name", "default", "operation_class", "default");
    assert_true(json_equal(json_object_get(lease, "lock_identity"), want));
    json_decref(want);
    assert_int_equal(json_integer_value(json_object_get(lease, "ttl_ms")), 20000);
    assert_int_equal(json_integer_value(json_object_get(lease, "maximum_lifetime_ms")), 600000);
    assert_string_equal(json_string_value(json_object_get(lease, "service_instance_id")),
                        "inst_iface");
    assert_string_equal(json_string_value(json_object_get(lease, "execution_id")), "exec_iface");
    assert_string_equal(json_string_value(json_object_get(lease, "job_id")), "job_iface");
    assert_string_equal(json_string_value(json_object_get(lease, "trace_id")), "trace_iface");
    assert_true(json_equal(json_object_get(lease, "metadata"), json_object_get(body, "metadata")));
    /* renewed_at initially equals acquired_at; expires_at = acquired_at + ttl */
    long long acq = ts_ms(json_object_get(lease, "acquired_at"));
    assert_int_equal(ts_ms(json_object_get(lease, "renewed_at")), acq);
    assert_int_equal(ts_ms(json_object_get(lease, "expires_at")), acq + 20000);
    assert_null(json_object_get(r->json, "replayed"));
    /* granted by its first attempt: it waited 0 ms (docs/api.md) */
    assert_true(json_is_integer(json_object_get(r->json, "waited_ms")));
    assert_int_equal(json_integer_value(json_object_get(r->json, "waited_ms")), 0);
    json_t *first = json_deep_copy(lease);
    http_resp_free(r);

    /* a replay: same lease and token, "replayed": true, "current_state" */
    r = post("/v1/leases/acquire", worker, body);
    check_shape(r, 200, "lease_acquired", NULL);
    assert_true(json_is_true(json_object_get(r->json, "replayed")));
    assert_string_equal(http_resp_str(r, "current_state"), "active");
    assert_int_equal(json_integer_value(json_object_get(r->json, "waited_ms")), 0);
    assert_true(json_equal(http_resp_get(r, "lease.lease_id"), json_object_get(first, "lease_id")));
    assert_true(json_equal(http_resp_get(r, "lease.fencing_token"),
                           json_object_get(first, "fencing_token")));
    http_resp_free(r);

    /* the same request id with another body: idempotency_conflict (409) */
    json_t *changed = full_acquire("if-acq-1", "t-acq");
    json_object_set_new(changed, "ttl_ms", json_integer(25000));
    r = post("/v1/leases/acquire", worker, changed);
    check_shape(r, 409, "idempotency_conflict", NULL);
    http_resp_free(r);

    /* another owner: lease_conflict (409), nothing of the holder shown */
    r = post("/v1/leases/acquire", other, parse_owned(acquire_body("if-acq-2", "t-acq")));
    check_shape(r, 409, "lease_conflict", NULL);
    const char *const holder[] = {"inst_iface",  "exec_iface",       "job_iface",
                                  "trace_iface", "prn_iface_worker", NULL};
    check_reply(r, 409, "lease_conflict", holder);
    assert_null(json_object_get(r->json, "lease"));
    /* the contract's example: a conflict is retryable, with a hint */
    assert_true(json_is_true(json_object_get(r->json, "retryable")));
    assert_true(json_is_integer(json_object_get(r->json, "retry_after_ms")));
    assert_true(http_resp_int(r, "retry_after_ms") > 0);
    assert_string_equal(http_resp_str(r, "msg"), "Target lease is unavailable");
    http_resp_free(r);
    /* an identity outside the credential's scope: 403 access_denied */
    json_t *foreign = parse_owned(acquire_body("if-acq-3", "t-acq"));
    json_object_set_new(json_object_get(foreign, "lock_identity"), "program_id",
                        json_string("program-z"));
    r = post("/v1/leases/acquire", worker, foreign);
    check_shape(r, 403, "access_denied", NULL);
    http_resp_free(r);
    json_decref(first);
}

/* The policy defaults and bounds docs/config.md gives. */
static void test_acquire_policy(void **state)
{
    (void)state;
    /* no ttl_ms, no maximum_lifetime_ms: 30000 and 3600000 */
    http_resp_t *r =
        post("/v1/leases/acquire", worker, parse_owned(acquire_body("if-pol-1", "t-pol-1")));
    check_shape(r, 200, "lease_acquired", NULL);
    assert_int_equal(json_integer_value(http_resp_get(r, "lease.ttl_ms")), 30000);
    assert_int_equal(json_integer_value(http_resp_get(r, "lease.maximum_lifetime_ms")), 3600000);
    http_resp_free(r);

    /* maximum_ttl_ms is inclusive */
    json_t *b = parse_owned(acquire_body("if-pol-2", "t-pol-2"));
    json_object_set_new(b, "ttl_ms", json_integer(300000));
    r = post("/v1/leases/acquire", worker, b);
    check_shape(r, 200, "lease_acquired", NULL);
    assert_int_equal(json_integer_value(http_resp_get(r, "lease.ttl_ms")), 300000);
    http_resp_free(r);

    /* minimum_ttl_ms is exclusive (1000 < ttl_ms), and 300001 is over */
    const long long refused[] = {1000, 300001, 0, -5};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char rid[32];
        snprintf(rid, sizeof rid, "if-pol-bad-%zu", i);
        b = parse_owned(acquire_body(rid, "t-pol-3"));
        json_object_set_new(b, "ttl_ms", json_integer(refused[i]));
        r = post("/v1/leases/acquire", worker, b);
        check_shape(r, 400, "invalid_lease_request", "ttl_ms");
        assert_false(json_is_true(json_object_get(r->json, "retryable")));
        http_resp_free(r);
    }
    /* maximum_lifetime_ms above the policy's 3600000: 400 naming it */
    b = parse_owned(acquire_body("if-pol-5", "t-pol-5"));
    json_object_set_new(b, "maximum_lifetime_ms", json_integer(3600001));
    r = post("/v1/leases/acquire", worker, b);
    check_shape(r, 400, "invalid_lease_request", "maximum_lifetime_ms");
    http_resp_free(r);
    /* a lifetime shorter than the TTL: expires_at never passes
     * acquired_at + maximum_lifetime_ms, on acquire nor on renew */
    b = parse_owned(acquire_body("if-pol-6", "t-pol-6"));
    json_object_set_new(b, "ttl_ms", json_integer(120000));
    json_object_set_new(b, "maximum_lifetime_ms", json_integer(60000));
    r = post("/v1/leases/acquire", worker, b);
    check_shape(r, 200, "lease_acquired", NULL);
    json_t *l = json_deep_copy(lease_of(r));
    http_resp_free(r);
    long long acq = ts_ms(json_object_get(l, "acquired_at"));
    assert_int_equal(json_integer_value(json_object_get(l, "maximum_lifetime_ms")), 60000);
    assert_true(ts_ms(json_object_get(l, "expires_at")) <= acq + 60000);
    json_t *rb = owner_req_early("if-pol-6-renew", "t-pol-6", l);
    json_object_set_new(rb, "ttl_ms", json_integer(120000));
    r = post("/v1/leases/renew", worker, rb);
    check_shape(r, 200, "lease_renewed", NULL);
    assert_true(ts_ms(http_resp_get(r, "lease.expires_at")) <= acq + 60000);
    http_resp_free(r);
    json_decref(l);
    /* 1001 is the smallest accepted */
    b = parse_owned(acquire_body("if-pol-4", "t-pol-4"));
    json_object_set_new(b, "ttl_ms", json_integer(1001));
    r = post("/v1/leases/acquire", worker, b);
    check_shape(r, 200, "lease_acquired", NULL);
    http_resp_free(r);
}

/* Request fields: request_id, identity components, operation_class enum,
 * metadata bounds, deadlines (docs/contract.md, docs/api.md). */
static void test_request_fields(void **state)
{
    (void)state;
    struct {
        const char *key; /* top-level member to set (NULL: identity member) */
        const char *ident_key;
        json_t *value;
        const char *field; /* the field the error names */
    } bad[] = {
        {"request_id", NULL, json_string("has space"), "request_id"},
        {"request_id", NULL, json_string(""), "request_id"},
        {NULL, "target_id", json_string("a/b"), "lock_identity.target_id"},
        {NULL, "target_id", json_string("a..b"), "lock_identity.target_id"},
        {NULL, "tenant_id", json_string("tenant main"), "lock_identity.tenant_id"},
        {NULL, "operation_class", json_string("teleport"), "lock_identity.operation_class"},
        {NULL, "target_namespace", json_string("ns/x"), "lock_identity.target_namespace"},
        {"metadata", NULL, json_pack("{s:{}}", "nested"), "metadata.nested"},
        {"metadata", NULL, json_pack("{s:s}", "Upper", "x"), "metadata.Upper"},
        {"deadline_at", NULL, json_string("tomorrow"), "deadline_at"},
        {"lease_colour", NULL, json_string("red"), "lease_colour"},
        /* above LEASE_MAX_WAIT_MS (10000): refused (docs/contract.md) */
        {"wait_ms", NULL, json_integer(10001), "wait_ms"},
        {"deadline_ms", NULL, json_integer(0), "deadline_ms"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char rid[32];
        snprintf(rid, sizeof rid, "if-bad-%zu", i);
        json_t *b = parse_owned(acquire_body(rid, "t-fields"));
        if (bad[i].key)
            json_object_set_new(b, bad[i].key, bad[i].value);
        else
            json_object_set_new(json_object_get(b, "lock_identity"), bad[i].ident_key,
                                bad[i].value);
        http_resp_t *r = post("/v1/leases/acquire", worker, b);
        check_shape(r, 400, "invalid_lease_request", NULL);
        const char *f = http_resp_str(r, "field");
        if (!f || strcmp(f, bad[i].field) != 0)
            fail_msg("case %zu: expected field '%s', got %s", i, bad[i].field, r->body);
        http_resp_free(r);
    }
    /* request_id: 128 of [A-Za-z0-9._:-] are accepted, 129 are not */
    char rid[131];
    memset(rid, 'r', 129);
    memcpy(rid, "A.b_c:d-", 8);
    rid[128] = '\0';
    http_resp_t *r =
        post("/v1/leases/acquire", worker, parse_owned(acquire_body(rid, "t-rid-128")));
    check_shape(r, 200, "lease_acquired", NULL);
    http_resp_free(r);
    rid[128] = 'r';
    rid[129] = '\0';
    r = post("/v1/leases/acquire", worker, parse_owned(acquire_body(rid, "t-rid-129")));
    check_shape(r, 400, "invalid_lease_request", "request_id");
    http_resp_free(r);

    /* metadata: 16 keys pass, 17 do not */
    json_t *md = json_object();
    for (int i = 0; i < 17; i++) {
        char k[8];
        snprintf(k, sizeof k, "k%d", i);
        json_object_set_new(md, k, json_integer(i));
    }
    json_t *b = parse_owned(acquire_body("if-md-17", "t-md"));
    json_object_set_new(b, "metadata", json_deep_copy(md));
    r = post("/v1/leases/acquire", worker, b);
    check_shape(r, 400, "invalid_lease_request", NULL);
    assert_int_equal(strncmp(http_resp_str(r, "field"), "metadata", 8), 0);
    http_resp_free(r);
    json_object_del(md, "k16");
    b = parse_owned(acquire_body("if-md-16", "t-md"));
    json_object_set_new(b, "metadata", md);
    r = post("/v1/leases/acquire", worker, b);
    check_shape(r, 200, "lease_acquired", NULL);
    assert_int_equal(json_object_size(http_resp_get(r, "lease.metadata")), 16);
    http_resp_free(r);

    /* metadata values: a string of 256 bytes passes, 257 do not; null and
     * arrays are not among "string, number or boolean"; 2 KiB in all */
    char v256[258];
    memset(v256, 'v', 257);
    v256[256] = '\0';
    b = parse_owned(acquire_body("if-md-256", "t-md-256"));
    json_object_set_new(b, "metadata", json_pack("{s:s}", "note", v256));
    r = post("/v1/leases/acquire", worker, b);
    check_shape(r, 200, "lease_acquired", NULL);
    http_resp_free(r);
    v256[256] = 'v';
    v256[257] = '\0';
    json_t *bad_md[] = {json_pack("{s:s}", "note", v256), json_pack("{s:n}", "note"),
                        json_pack("{s:[i]}", "note", 1)};
    for (size_t i = 0; i < 3; i++) {
        b = parse_owned(acquire_body("if-md-bad", "t-md-bad"));
        json_object_set_new(b, "metadata", bad_md[i]);
        r = post("/v1/leases/acquire", worker, b);
        check_shape(r, 400, "invalid_lease_request", "metadata.note");
        http_resp_free(r);
    }
    md = json_object();
    v256[200] = '\0';
    for (int i = 0; i < 12; i++) { /* 12 values of 200 bytes: over 2 KiB */
        char k[8];
        snprintf(k, sizeof k, "k%d", i);
        json_object_set_new(md, k, json_string(v256));
    }
    b = parse_owned(acquire_body("if-md-2k", "t-md-2k"));
    json_object_set_new(b, "metadata", md);
    r = post("/v1/leases/acquire", worker, b);
    check_shape(r, 400, "invalid_lease_request", NULL);
    assert_int_equal(strncmp(http_resp_str(r, "field"), "metadata", 8), 0);
    http_resp_free(r);

    /* an operation class of the closed enum, ASCII case folding of tenant */
    b = parse_owned(acquire_body("if-oc-1", "t-oc"));
    json_object_set_new(json_object_get(b, "lock_identity"), "operation_class",
                        json_string("publish"));
    json_object_set_new(json_object_get(b, "lock_identity"), "tenant_id",
                        json_string("Tenant-Main"));
    r = post("/v1/leases/acquire", worker, b);
    check_shape(r, 200, "lease_acquired", NULL);
    assert_string_equal(json_string_value(http_resp_get(r, "lease.lock_identity.operation_class")),
                        "publish");
    assert_string_equal(json_string_value(http_resp_get(r, "lease.lock_identity.tenant_id")),
                        TENANT);
    http_resp_free(r);
    /* an explicit null operation class is "default" */
    b = parse_owned(acquire_body("if-oc-2", "t-oc"));
    json_object_set_new(json_object_get(b, "lock_identity"), "operation_class", json_null());
    r = post("/v1/leases/acquire", worker, b);
    check_shape(r, 200, "lease_acquired", NULL);
    assert_string_equal(json_string_value(http_resp_get(r, "lease.lock_identity.operation_class")),
                        "default");
    http_resp_free(r);

    /* deadline_at (RFC 3339) is accepted; a deadline_ms above the server
     * maximum is capped, not refused; one in the past is 408 */
    b = parse_owned(acquire_body("if-dl-1", "t-dl-1"));
    json_object_set_new(b, "deadline_at", json_string("9999-12-31T23:59:59.000Z"));
    r = post("/v1/leases/acquire", worker, b);
    check_shape(r, 200, "lease_acquired", NULL);
    http_resp_free(r);
    b = parse_owned(acquire_body("if-dl-2", "t-dl-2"));
    json_object_set_new(b, "deadline_ms", json_integer(3600000));
    r = post("/v1/leases/acquire", worker, b);
    check_shape(r, 200, "lease_acquired", NULL);
    http_resp_free(r);
    b = parse_owned(acquire_body("if-dl-3", "t-dl-3"));
    json_object_set_new(b, "deadline_at", json_string("2001-01-01T00:00:00Z"));
    r = post("/v1/leases/acquire", worker, b);
    check_shape(r, 408, "deadline_exceeded", NULL);
    http_resp_free(r);
}

/* ------------------------------------------------------------------ */
/* renew, release, force-release, revoke                               */

static json_t *owner_req(const char *rid, const char *target, json_t *lease)
{
    return parse_owned(owner_body(rid, target, lease));
}

static void test_renew_release_shape(void **state)
{
    (void)state;
    json_t *lease = acquire_lease(fx.base, worker, "if-rr-acq", "t-rr");

    json_t *b = owner_req("if-rr-renew", "t-rr", lease);
    json_object_set_new(b, "ttl_ms", json_integer(45000));
    http_resp_t *r = post("/v1/leases/renew", worker, b);
    check_shape(r, 200, "lease_renewed", NULL);
    assert_lease_shape(lease_of(r), "active");
    /* no trace was given, none is made up (docs/contract.md) */
    assert_null(http_resp_get(r, "lease.trace_id"));
    assert_true(json_equal(http_resp_get(r, "lease.fencing_token"),
                           json_object_get(lease, "fencing_token")));
    assert_true(
        json_equal(http_resp_get(r, "lease.acquired_at"), json_object_get(lease, "acquired_at")));
    assert_int_equal(json_integer_value(http_resp_get(r, "lease.ttl_ms")), 45000);
    assert_int_equal(ts_ms(http_resp_get(r, "lease.expires_at")),
                     ts_ms(http_resp_get(r, "lease.renewed_at")) + 45000);
    http_resp_free(r);

    /* a wrong instance: lease_lost (409) */
    b = owner_req("if-rr-renew-2", "t-rr", lease);
    json_object_set_new(b, "service_instance_id", json_string("inst_other"));
    r = post("/v1/leases/renew", worker, b);
    check_shape(r, 409, "lease_lost", NULL);
    http_resp_free(r);
    /* a renew without fencing_token: 400 naming it */
    b = owner_req("if-rr-renew-3", "t-rr", lease);
    json_object_del(b, "fencing_token");
    r = post("/v1/leases/renew", worker, b);
    check_shape(r, 400, "invalid_lease_request", "fencing_token");
    http_resp_free(r);

    r = post("/v1/leases/release", worker, owner_req("if-rr-rel", "t-rr", lease));
    check_shape(r, 200, "lease_released", NULL);
    assert_lease_shape(lease_of(r), "released");
    assert_timestamp(http_resp_get(r, "lease.ended_at"), "ended_at");
    http_resp_free(r);
    /* released again with a new request id: lease_lost (409) */
    r = post("/v1/leases/release", worker, owner_req("if-rr-rel-2", "t-rr", lease));
    check_shape(r, 409, "lease_lost", NULL);
    http_resp_free(r);
    /* release without service_instance_id: 400 naming it */
    b = owner_req("if-rr-rel-3", "t-rr", lease);
    json_object_del(b, "service_instance_id");
    r = post("/v1/leases/release", worker, b);
    check_shape(r, 400, "invalid_lease_request", "service_instance_id");
    http_resp_free(r);
    json_decref(lease);
}

static void test_admin_shape(void **state)
{
    (void)state;
    json_t *lease = acquire_lease(fx.base, worker, "if-adm-acq", "t-adm");

    /* a worker holds no targets:force-release: access_denied (403) */
    http_resp_t *r = call_owned(fx.base, "POST", "/v1/leases/force-release", worker,
                                admin_body("if-adm-fr-0", "t-adm", lease, "maintenance"));
    check_shape(r, 403, "access_denied", NULL);
    http_resp_free(r);
    /* no reason: 400 naming it; a reason of 513 characters too */
    r = call_owned(fx.base, "POST", "/v1/leases/force-release", admin,
                   admin_body("if-adm-fr-1", "t-adm", lease, NULL));
    check_shape(r, 400, "invalid_lease_request", "reason");
    http_resp_free(r);
    char long_reason[514];
    memset(long_reason, 'x', 513);
    long_reason[513] = '\0';
    r = call_owned(fx.base, "POST", "/v1/leases/force-release", admin,
                   admin_body("if-adm-fr-2", "t-adm", lease, long_reason));
    check_shape(r, 400, "invalid_lease_request", "reason");
    http_resp_free(r);
    long_reason[512] = '\0';
    r = call_owned(fx.base, "POST", "/v1/leases/force-release", admin,
                   admin_body("if-adm-fr-3", "t-adm", lease, long_reason));
    check_shape(r, 200, "lease_released", NULL);
    assert_lease_view(lease_of(r), "released", false);
    http_resp_free(r);
    json_decref(lease);

    /* revoke with an incident id: lease_revoked, state revoked */
    lease = acquire_lease(fx.base, worker, "if-adm-acq-2", "t-adm");
    json_t *b = parse_owned(admin_body("if-adm-rv-1", "t-adm", lease, "compromised host"));
    json_object_set_new(b, "incident_id", json_string("inc-42"));
    r = post("/v1/leases/revoke", admin, b);
    check_shape(r, 200, "lease_revoked", NULL);
    assert_lease_view(lease_of(r), "revoked", false);
    http_resp_free(r);
    /* the same lease revoked again: lease_lost (409) */
    r = call_owned(fx.base, "POST", "/v1/leases/revoke", admin,
                   admin_body("if-adm-rv-2", "t-adm", lease, "again"));
    check_shape(r, 409, "lease_lost", NULL);
    http_resp_free(r);
    json_decref(lease);
}

/* ------------------------------------------------------------------ */
/* inspect, list                                                       */

static void test_inspect_shape(void **state)
{
    (void)state;
    json_t *lease = acquire_lease(fx.base, worker, "if-ins-acq", "t-ins");
    char path[256];
    snprintf(path, sizeof path, "/v1/leases/%s",
             json_string_value(json_object_get(lease, "lease_id")));
    http_resp_t *r = call(fx.base, "GET", path, worker, NULL);
    check_shape(r, 200, "lease_inspected", NULL);
    assert_lease_shape(lease_of(r), "active");
    assert_true(json_equal(lease_of(r), lease));
    http_resp_free(r);

    r = call_owned(fx.base, "POST", "/v1/leases/inspect", worker, inspect_body("t-ins"));
    check_shape(r, 200, "lease_inspected", NULL);
    assert_true(json_equal(lease_of(r), lease));
    http_resp_free(r);

    /* a well-formed id nobody holds: 404 lease_not_found */
    r = call(fx.base, "GET", "/v1/leases/lease_00000000000000000000000000", worker, NULL);
    check_shape(r, 404, "lease_not_found", NULL);
    http_resp_free(r);
    /* a lease id that cannot be one (bad characters, too long) */
    r = call(fx.base, "GET", "/v1/leases/not%20an%20id", worker, NULL);
    check_shape(r, 400, "invalid_lease_request", "lease_id");
    http_resp_free(r);
    /* an identity with a bad component: 400 naming it */
    json_t *b = parse_owned(inspect_body("t-ins"));
    json_object_set_new(json_object_get(b, "lock_identity"), "actor_name", json_string("a b"));
    r = post("/v1/leases/inspect", worker, b);
    check_shape(r, 400, "invalid_lease_request", "lock_identity.actor_name");
    http_resp_free(r);
    /* an identity of another tenant: 403 access_denied */
    b = parse_owned(inspect_body("t-ins"));
    json_object_set_new(json_object_get(b, "lock_identity"), "tenant_id",
                        json_string("tenant-other"));
    r = post("/v1/leases/inspect", worker, b);
    check_shape(r, 403, "access_denied", NULL);
    http_resp_free(r);
    json_decref(lease);
}

static void test_list_shape(void **state)
{
    (void)state;
    const char *targets[] = {"t-list-1", "t-list-2", "t-list-3"};
    for (size_t i = 0; i < 3; i++) {
        char rid[32];
        snprintf(rid, sizeof rid, "if-list-acq-%zu", i);
        json_decref(acquire_lease(fx.base, other, rid, targets[i]));
    }
    /* by owner without any filter: the caller's own leases */
    json_t *seen = json_object();
    json_t *page_token = NULL;
    int pages = 0;
    do {
        json_t *b = json_pack("{s:s, s:i}", "by", "owner", "page_size", 2);
        if (page_token)
            json_object_set_new(b, "page_token", page_token);
        http_resp_t *r = post("/v1/leases/list", other, b);
        check_shape(r, 200, "lease_listed", NULL);
        json_t *leases = json_object_get(r->json, "leases");
        assert_true(json_is_array(leases));
        assert_true(json_array_size(leases) <= 2);
        size_t i;
        json_t *l;
        json_array_foreach(leases, i, l)
        {
            assert_lease_shape(l, "active");
            json_object_set(seen, json_string_value(json_object_get(l, "lease_id")), json_true());
        }
        json_t *next = json_object_get(r->json, "next_page_token");
        page_token = NULL;
        if (next) {
            assert_true(json_is_string(next));
            assert_true(json_string_length(next) > 0);
            page_token = json_string(json_string_value(next));
        }
        http_resp_free(r);
        pages++;
    } while (page_token && pages < 10);
    assert_int_equal(json_object_size(seen), 3);
    assert_int_equal(pages, 2);
    json_decref(seen);

    /* by program and by target */
    http_resp_t *r = call_owned(fx.base, "POST", "/v1/leases/list", other, list_body("program"));
    check_shape(r, 200, "lease_listed", NULL);
    assert_true(json_array_size(json_object_get(r->json, "leases")) >= 3);
    http_resp_free(r);
    json_t *b =
        json_pack("{s:s, s:s, s:s, s:s, s:s}", "by", "target", "tenant_id", TENANT, "program_id",
                  PROGRAM, "target_namespace", NAMESPACE, "target_id", "t-list-2");
    r = post("/v1/leases/list", other, b);
    check_shape(r, 200, "lease_listed", NULL);
    assert_int_equal(json_array_size(json_object_get(r->json, "leases")), 1);
    assert_null(json_object_get(r->json, "next_page_token"));
    http_resp_free(r);

    /* page_size 0 and above the server maximum (500): 400 naming it */
    const int sizes[] = {0, 501};
    for (size_t i = 0; i < 2; i++) {
        r = post("/v1/leases/list", other,
                 json_pack("{s:s, s:i}", "by", "owner", "page_size", sizes[i]));
        check_shape(r, 400, "invalid_lease_request", "page_size");
        http_resp_free(r);
    }
    r = post("/v1/leases/list", other, json_pack("{s:s, s:i}", "by", "owner", "page_size", 500));
    check_shape(r, 200, "lease_listed", NULL);
    http_resp_free(r);
    /* an unknown "by": 400 naming it; a program outside scope: 403 */
    r = post("/v1/leases/list", other, json_pack("{s:s}", "by", "everything"));
    check_shape(r, 400, "invalid_lease_request", "by");
    http_resp_free(r);
    r = post("/v1/leases/list", other,
             json_pack("{s:s, s:s, s:s}", "by", "program", "tenant_id", TENANT, "program_id",
                       "program-z"));
    check_shape(r, 403, "access_denied", NULL);
    http_resp_free(r);
}

/* ------------------------------------------------------------------ */
/* commit                                                              */

static json_t *commit_req(const char *rid, const char *target, json_t *lease, json_t *writes)
{
    return json_pack("{s:s, s:o, s:O, s:O, s:s, s:s, s:o}", "request_id", rid, "lock_identity",
                     identity_json(target), "lease_id", json_object_get(lease, "lease_id"),
                     "fencing_token", json_object_get(lease, "fencing_token"), "execution_id",
                     "exec_1", "trace_id", "trace_1", "writes", writes);
}

static void test_commit_shape(void **state)
{
    (void)state;
    json_t *lease = acquire_lease(fx.base, worker, "if-com-acq", "t-com");
    json_t *writes = json_pack("[{s:s, s:s, s:i, s:{s:i}}]", "kind", "document", "key", "doc-iface",
                               "expected_revision", 0, "body", "n", 1);
    http_resp_t *r = post("/v1/commits", worker, commit_req("if-com-1", "t-com", lease, writes));
    check_shape(r, 200, "commit_accepted", NULL);
    json_t *commit = json_object_get(r->json, "commit");
    assert_true(json_is_object(commit));
    assert_true(
        json_equal(json_object_get(commit, "lease_id"), json_object_get(lease, "lease_id")));
    assert_true(json_equal(json_object_get(commit, "fencing_token"),
                           json_object_get(lease, "fencing_token")));
    json_t *results = json_object_get(commit, "results");
    assert_int_equal(json_array_size(results), 1);
    json_t *doc = json_array_get(results, 0);
    assert_string_equal(json_string_value(json_object_get(doc, "kind")), "document");
    assert_string_equal(json_string_value(json_object_get(doc, "key")), "doc-iface");
    assert_int_equal(json_integer_value(json_object_get(doc, "revision")), 1);
    http_resp_free(r);

    /* the document's revision is 1 now: expected 0 is write_conflict (409) */
    writes = json_pack("[{s:s, s:s, s:i, s:{}}]", "kind", "document", "key", "doc-iface",
                       "expected_revision", 0, "body");
    r = post("/v1/commits", worker, commit_req("if-com-2", "t-com", lease, writes));
    check_shape(r, 409, "write_conflict", "writes[0].expected_revision");
    assert_int_equal(http_resp_int(r, "current_revision"), 1);
    http_resp_free(r);
    /* an empty list of writes: 400 naming it */
    r = post("/v1/commits", worker, commit_req("if-com-3", "t-com", lease, json_array()));
    check_shape(r, 400, "invalid_lease_request", "writes");
    http_resp_free(r);
    /* a stale token: lease_lost (409) */
    json_t *stale = json_deep_copy(lease);
    json_object_set_new(
        stale, "fencing_token",
        json_integer(json_integer_value(json_object_get(lease, "fencing_token")) + 7));
    writes = json_pack("[{s:s, s:s, s:i, s:{}}]", "kind", "document", "key", "doc-other",
                       "expected_revision", 0, "body");
    r = post("/v1/commits", worker, commit_req("if-com-4", "t-com", stale, writes));
    check_shape(r, 409, "lease_lost", NULL);
    http_resp_free(r);
    json_decref(stale);
    json_decref(lease);
}

/* A publication's result beside a document's: the outbox is PostgreSQL's
 * (on Valkey such a commit is refused whole, 503: docs/backends.md, and
 * tests/valkey/valkey_commits.c checks that refusal). */
static void test_commit_publication_shape(void **state)
{
    (void)state;
    json_t *lease = acquire_lease(fx.base, worker, "if-pub-acq", "t-com-pub");
    json_t *writes =
        json_pack("[{s:s, s:s, s:i, s:{s:i}}, {s:s, s:s, s:{s:s}}]", "kind", "document", "key",
                  "doc-iface-pub", "expected_revision", 0, "body", "n", 1, "kind", "publication",
                  "topic", "results.iface", "payload", "p", "q");
    http_resp_t *r =
        post("/v1/commits", worker, commit_req("if-pub-1", "t-com-pub", lease, writes));
    check_shape(r, 200, "commit_accepted", NULL);
    json_t *results = json_object_get(json_object_get(r->json, "commit"), "results");
    assert_int_equal(json_array_size(results), 2);
    json_t *doc = json_array_get(results, 0), *pub = json_array_get(results, 1);
    assert_string_equal(json_string_value(json_object_get(doc, "kind")), "document");
    assert_int_equal(json_integer_value(json_object_get(doc, "revision")), 1);
    assert_string_equal(json_string_value(json_object_get(pub, "kind")), "publication");
    assert_string_equal(json_string_value(json_object_get(pub, "topic")), "results.iface");
    assert_integer_member(pub, "outbox_id");
    http_resp_free(r);
    json_decref(lease);
}

/* ------------------------------------------------------------------ */
/* authentication, headers                                             */

/* /readyz once it answers 200. Readiness follows the sweeper's last health
 * probe (one a second): on a machine loaded by the other tests a probe can
 * come late or fail, and /readyz answers 503 until the next one succeeds
 * (a CI run met it). The shape checked is the ready answer's. */
static http_resp_t *readyz_when_ready(void)
{
    http_resp_t *r = NULL;
    (void)test_wait_until(
        15000,
        (http_resp_free(r), r = call(fx.base, "GET", "/readyz", NULL, NULL), r->status == 200));
    return r;
}

static void test_auth_and_headers(void **state)
{
    (void)state;
    /* no token, a malformed one, an unknown one: 401 invalid_credential */
    const char *tokens[] = {NULL, "not-a-token", "lsk_key_aaaaaaaaaaaaaaaaaaaaaaaaaa_bogus"};
    for (size_t i = 0; i < 3; i++) {
        http_resp_t *r = call_owned(fx.base, "POST", "/v1/leases/acquire", tokens[i],
                                    acquire_body("if-auth", "t-auth"));
        check_shape(r, 401, "invalid_credential", NULL);
        http_resp_free(r);
    }
    /* the auth scheme is case-insensitive (RFC 7235) */
    {
        char auth[512];
        snprintf(auth, sizeof auth, "Authorization: bearer %s", worker);
        const char *hdrs[] = {auth, NULL};
        char *body = list_body("owner");
        http_client_t *c = http_client_new(fx.base, 0);
        http_resp_t *p = http_client_call(c, "POST", "/v1/leases/list", NULL, body, hdrs, NULL);
        check_shape(p, 200, "lease_listed", NULL);
        http_resp_free(p);
        /* a method or path the table lacks: a typed 400 naming which
         * (docs/contract.md leased-2, framing errors) */
        p = http_client_call(c, "GET", "/v1/leases/acquire", worker, NULL, NULL, NULL);
        check_shape(p, 400, "invalid_lease_request", "method");
        http_resp_free(p);
        p = http_client_call(c, "GET", "/v2/nothing", worker, NULL, NULL, NULL);
        check_shape(p, 400, "invalid_lease_request", "path");
        http_resp_free(p);
        /* an administrator of every program names the program to list by owner */
        p = http_client_call(c, "POST", "/v1/leases/list", admin, "{\"by\":\"owner\"}", NULL, NULL);
        check_shape(p, 400, "invalid_lease_request", "program_id");
        http_resp_free(p);
        http_client_free(c);
        free(body);
    }
    /* the correlation id is fresh per request, the same in header and body
     * (check_reply), also on health answers */
    const char *paths[] = {"/healthz", "/readyz"};
    char seen[2][64];
    for (size_t i = 0; i < 2; i++) {
        http_resp_t *r = i == 1 ? readyz_when_ready() : call(fx.base, "GET", paths[i], NULL, NULL);
        assert_int_equal(r->status, 200);
        assert_non_null(http_resp_header(r, "X-Correlation-Id"));
        assert_string_equal(http_resp_header(r, "X-Correlation-Id"),
                            http_resp_str(r, "correlation_id"));
        snprintf(seen[i], sizeof seen[i], "%s", http_resp_str(r, "correlation_id"));
        http_resp_free(r);
    }
    assert_string_not_equal(seen[0], seen[1]);
    http_resp_t *r = call(fx.base, "GET", "/metrics", NULL, NULL);
    assert_non_null(http_resp_header(r, "X-Correlation-Id"));
    http_resp_free(r);

    /* a body that is not JSON, duplicate keys, a wrong type, over 64 KiB:
     * 400 invalid_lease_request */
    const char *bodies[] = {
        "{not json",
        "{\"by\":\"owner\",\"by\":\"program\"}",
        "{\"by\":7}",
    };
    for (size_t i = 0; i < 3; i++) {
        r = call(fx.base, "POST", "/v1/leases/list", worker, bodies[i]);
        check_shape(r, 400, "invalid_lease_request", NULL);
        http_resp_free(r);
    }
    size_t big = 64 * 1024 + 16;
    char *huge = malloc(big + 1);
    assert_non_null(huge);
    memset(huge, ' ', big);
    memcpy(huge, "{\"by\":\"owner\"", 13);
    huge[big - 1] = '}';
    huge[big] = '\0';
    r = call(fx.base, "POST", "/v1/leases/list", worker, huge);
    free(huge);
    check_shape(r, 400, "invalid_lease_request", NULL);
    http_resp_free(r);
}

/* 429 with Retry-After and retry_after_ms (docs/api.md: on 429 and 503). */
static void test_rate_limited(void **state)
{
    (void)state;
    http_fx_t own;
    http_fx_open(&own, NULL, "http_interface_rate");
    const char *tok = http_fx_worker(&own, "prn_iface_rate");
    const char *env[] = {"LEASE_RATE_LIMIT=1/s", NULL};
    http_fx_serve(&own, env);
    http_resp_t *r = NULL;
    int limited = 0;
    for (int i = 0; i < 50 && !limited; i++) {
        http_resp_free(r);
        r = call_owned(own.base, "POST", "/v1/leases/list", tok, list_body("owner"));
        limited = r->status == 429;
    }
    assert_true(limited);
    check_shape(r, 429, "lease_rate_limited", NULL); /* checks Retry-After too */
    assert_true(json_is_true(json_object_get(r->json, "retryable")));
    http_resp_free(r);
    http_fx_close(&own);
}

/* ------------------------------------------------------------------ */
/* health, readiness, metrics                                          */

static void test_health_shapes(void **state)
{
    (void)state;
    http_resp_t *r = call(fx.base, "GET", "/healthz", NULL, NULL);
    assert_int_equal(r->status, 200);
    assert_string_equal(http_resp_str(r, "status"), "ok");
    http_resp_free(r);
    r = readyz_when_ready();
    assert_int_equal(r->status, 200);
    assert_string_equal(http_resp_str(r, "status"), "ready");
    assert_true(json_is_integer(json_object_get(r->json, "schema_version")));
    assert_true(http_resp_int(r, "schema_version") >= 1);
    http_resp_free(r);

    /* Prometheus text: every sample's family has a # TYPE line first */
    r = call(fx.base, "GET", "/metrics", NULL, NULL);
    assert_int_equal(r->status, 200);
    assert_non_null(strstr(http_resp_header(r, "Content-Type"), "text/plain"));
    char *text = strdup(r->body);
    json_t *typed = json_object();
    int samples = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        char name[128];
        if (strncmp(line, "# TYPE ", 7) == 0) {
            assert_int_equal(sscanf(line + 7, "%127s", name), 1);
            json_object_set_new(typed, name, json_true());
            continue;
        }
        if (line[0] == '#')
            continue;
        size_t n = strcspn(line, "{ ");
        assert_true(n > 0 && n < sizeof name);
        memcpy(name, line, n);
        name[n] = '\0';
        for (size_t i = 0; i < n; i++)
            assert_true(isalnum((unsigned char)name[i]) || name[i] == '_' || name[i] == ':');
        /* histogram samples belong to the family without their suffix */
        const char *suffixes[] = {"_bucket", "_sum", "_count", NULL};
        bool found = json_object_get(typed, name) != NULL;
        for (const char *const *s = suffixes; !found && *s; s++) {
            size_t sl = strlen(*s);
            if (n > sl && strcmp(name + n - sl, *s) == 0) {
                name[n - sl] = '\0';
                found = json_object_get(typed, name) != NULL;
            }
        }
        if (!found)
            fail_msg("metric sample without a # TYPE line: %s", line);
        const char *value = strrchr(line, ' ');
        assert_non_null(value);
        char *end;
        (void)strtod(value + 1, &end);
        assert_true(*end == '\0');
        samples++;
    }
    assert_true(samples > 0);
    json_decref(typed);
    free(text);
    http_resp_free(r);
}

/* ------------------------------------------------------------------ */
/* leasectl: the option names of docs/executor.md                      */

#define IDF                                                                                        \
    "--tenant", TENANT, "--program", PROGRAM, "--namespace", NAMESPACE, "--actor", ACTOR,          \
        "--workflow", "default"

static void test_leasectl_options(void **state)
{
    (void)state;
    /* every identity and lease option, each landing in the answer */
    const char *acquire[] = {"acquire",
                             IDF,
                             "--target",
                             "t-ctl-1",
                             "--operation-class",
                             "collect",
                             "--ttl-ms",
                             "120000",
                             "--maximum-lifetime-ms",
                             "900000",
                             "--wait-ms",
                             "0",
                             "--service-instance",
                             "inst-ctl",
                             "--execution-id",
                             "exec-ctl",
                             "--job-id",
                             "job-ctl",
                             "--trace-id",
                             "trace-ctl",
                             "--request-id",
                             "req-ctl-1",
                             "--deadline-ms",
                             "4000",
                             NULL};
    json_t *a = NULL;
    assert_int_equal(ctl(acquire, fx.base, worker, NULL, &a), 0);
    assert_non_null(a);
    json_t *lease = json_object_get(a, "lease");
    assert_lease_shape(lease, "active");
    assert_string_equal(json_string_value(json_object_get(json_object_get(lease, "lock_identity"),
                                                          "operation_class")),
                        "collect");
    assert_int_equal(json_integer_value(json_object_get(lease, "ttl_ms")), 120000);
    assert_int_equal(json_integer_value(json_object_get(lease, "maximum_lifetime_ms")), 900000);
    assert_string_equal(json_string_value(json_object_get(lease, "service_instance_id")),
                        "inst-ctl");
    assert_string_equal(json_string_value(json_object_get(lease, "execution_id")), "exec-ctl");
    assert_string_equal(json_string_value(json_object_get(lease, "job_id")), "job-ctl");
    assert_string_equal(json_string_value(json_object_get(lease, "trace_id")), "trace-ctl");
    /* the same --request-id again is a replay of the same lease */
    json_t *b = NULL;
    assert_int_equal(ctl(acquire, fx.base, worker, NULL, &b), 0);
    assert_true(json_is_true(json_object_get(b, "replayed")));
    assert_true(json_equal(json_object_get(json_object_get(b, "lease"), "lease_id"),
                           json_object_get(lease, "lease_id")));
    json_decref(b);
    json_decref(a);

    /* held by another: --wait-ms waits, then lease_conflict, 75 */
    const char *held[] = {"acquire", IDF,         "--target", "t-ctl-1", "--operation-class",
                          "collect", "--wait-ms", "300",      NULL};
    assert_int_equal(ctl(held, fx.base, other, NULL, &b), 75);
    assert_non_null(b);
    assert_string_equal(json_string_value(json_object_get(b, "code")), "lease_conflict");
    json_decref(b);
    /* a TTL at the exclusive minimum: invalid_lease_request, 65 */
    const char *short_ttl[] = {"acquire", IDF, "--target", "t-ctl-3", "--ttl-ms", "1000", NULL};
    assert_int_equal(ctl(short_ttl, fx.base, worker, NULL, &b), 65);
    assert_non_null(b);
    assert_string_equal(json_string_value(json_object_get(b, "code")), "invalid_lease_request");
    json_decref(b);

    /* --token, the flag of LEASE_TOKEN, wins over the variable */
    const char *inspect_by_flag[] = {
        "inspect", IDF,       "--target", "t-ctl-1", "--operation-class",
        "collect", "--token", worker,     NULL};
    assert_int_equal(ctl(inspect_by_flag, fx.base, NULL, NULL, &b), 0);
    assert_string_equal(json_string_value(json_object_get(b, "code")), "lease_inspected");
    json_decref(b);
    const char *bad_flag[] = {"inspect",
                              IDF,
                              "--target",
                              "t-ctl-1",
                              "--operation-class",
                              "collect",
                              "--token",
                              "lsk_key_aaaaaaaaaaaaaaaaaaaaaaaaaa_bogus",
                              NULL};
    assert_int_equal(ctl(bad_flag, fx.base, worker, NULL, &b), 77);
    assert_string_equal(json_string_value(json_object_get(b, "code")), "invalid_credential");
    json_decref(b);

    /* --help of a command and of the program: 0; an unknown option: 2 */
    const char *help[] = {"acquire", "--help", NULL};
    assert_int_equal(ctl(help, fx.base, worker, NULL, NULL), 0);
    const char *top_help[] = {"--help", NULL};
    assert_int_equal(ctl(top_help, fx.base, worker, NULL, NULL), 0);
    const char *unknown[] = {"acquire", IDF, "--target", "t-ctl-2", "--colour", "red", NULL};
    assert_int_equal(ctl(unknown, fx.base, worker, NULL, NULL), 2);
    /* a credential without targets:force-release: access_denied, 77 */
    const char *fr[] = {"force-release",   IDF, "--target", "t-ctl-1", "--lease-id", "lease_x",
                        "--fencing-token", "1", "--reason", "testing", NULL};
    json_t *d = NULL;
    assert_int_equal(ctl(fr, fx.base, worker, NULL, &d), 77);
    assert_non_null(d);
    assert_string_equal(json_string_value(json_object_get(d, "code")), "access_denied");
    json_decref(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_acquire_shape),
        cmocka_unit_test(test_acquire_policy),
        cmocka_unit_test(test_request_fields),
        cmocka_unit_test(test_renew_release_shape),
        cmocka_unit_test(test_admin_shape),
        cmocka_unit_test(test_inspect_shape),
        cmocka_unit_test(test_list_shape),
        cmocka_unit_test(test_commit_shape),
        cmocka_unit_test(test_commit_publication_shape),
        cmocka_unit_test(test_auth_and_headers),
        cmocka_unit_test(test_rate_limited),
        cmocka_unit_test(test_health_shapes),
        cmocka_unit_test(test_leasectl_options),
    };
    static const http_pg_only_t pg_only[] = {
        {"test_commit_publication_shape", "publications (the outbox) need the PostgreSQL backend"},
        {NULL, NULL},
    };
    return http_fx_run_group("http_interface", tests, sizeof tests / sizeof tests[0], setup,
                             http_fx_teardown, pg_only);
}
