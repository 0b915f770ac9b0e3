/*
 * test_digest.c - request digests: pinned values for fixed requests
 * (computed independently with Python's json.dumps(sort_keys=True,
 * separators=(",",":")) and hashlib.sha256), a change of every
 * behaviour-affecting field changes the digest, fields outside the rule
 * (request id, deadline, correlation id, ...) do not, and metadata/body key
 * order and spacing do not matter.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "lease/digest.h"

#define PIN_ACQUIRE "75fab8f314fe926a535010c1a42a3589881fc5e874348eed904bc3e8a7ea5190"
#define PIN_RENEW "24a8e8d2b3864dd3af9d43301c352fe0eb1ad46daa9857c3277e2473d82c2867"
#define PIN_RELEASE "5af6fd2326899d82e3e5a0646e1379a67b0fe63b84330bad73661f69f29796d5"
#define PIN_FORCE "521aec6c78e1a1c83e5a0ad3386573f635856ddf8d74bcd53a3afac9ed17eb59"
#define PIN_REVOKE "ec96d76bbcd0061c899633b3e5a17457e595bbe9c81b43cdfe62639d301cd269"
#define PIN_COMMIT "bf7bb5bb5d62720b5fb551f108ac6e873e3d64c5cce82a07818adf0ad4064409"

#define SET(dst, text) snprintf((dst), sizeof(dst), "%s", (text))

static void fill_call(lease_call_t *c)
{
    memset(c, 0, sizeof *c);
    SET(c->request_id, "request_01");
    SET(c->correlation_id, "corr_01");
    SET(c->trace_id, "call_trace_01");
    SET(c->deadline_class, "client");
    c->deadline.wall_ms = 1785931205000;
    c->deadline.mono_ns = 123456789;
    c->received_mono_ns = 120000000;
    SET(c->principal.principal_id, "prn_actor_01");
    SET(c->principal.client_id, "client_01");
    SET(c->principal.credential_id, "key_01");
    SET(c->principal.principal_class, "worker");
}

static void fill_identity(lease_identity_t *id)
{
    memset(id, 0, sizeof *id);
    SET(id->tenant_id, "tenant-main");
    SET(id->program_id, "program-a");
    SET(id->target_namespace, "starintel-target");
    SET(id->target_id, "target_01");
    SET(id->actor_name, "usernamegen");
    SET(id->workflow_name, "default");
    SET(id->operation_class, "default");
}

static lease_acquire_req_t acquire_req(void)
{
    lease_acquire_req_t r;
    memset(&r, 0, sizeof r);
    fill_call(&r.call);
    fill_identity(&r.identity);
    SET(r.service_instance_id, "instance_01");
    SET(r.execution_id, "execution_01");
    SET(r.job_id, "job_01");
    SET(r.trace_id, "trace_01");
    r.ttl_ms = 30000;
    r.maximum_lifetime_ms = 300000;
    SET(r.metadata_json, "{\"zeta\":1,\"alpha\":\"x\",\"mid\":true}");
    return r;
}

static lease_owner_req_t owner_req(void)
{
    lease_owner_req_t r;
    memset(&r, 0, sizeof r);
    fill_call(&r.call);
    fill_identity(&r.identity);
    SET(r.lease_id, "lease_01");
    r.fencing_token = 42;
    SET(r.service_instance_id, "instance_01");
    r.ttl_ms = 15000;
    return r;
}

static lease_admin_req_t admin_req(const char *reason, const char *incident)
{
    lease_admin_req_t r;
    memset(&r, 0, sizeof r);
    fill_call(&r.call);
    fill_identity(&r.identity);
    SET(r.lease_id, "lease_01");
    r.fencing_token = 42;
    SET(r.reason, reason);
    SET(r.incident_id, incident);
    return r;
}

static const char *const commit_body = "{\"b\":[1,2,{\"y\":null,\"x\":\"\xc3\xa9\"}],\"a\":1}";
static const char *const commit_payload = "{\"n\":2,\"m\":\"ok\"}";

static lease_commit_req_t commit_req(void)
{
    lease_commit_req_t r;
    memset(&r, 0, sizeof r);
    fill_call(&r.call);
    fill_identity(&r.identity);
    SET(r.lease_id, "lease_01");
    r.fencing_token = 42;
    SET(r.execution_id, "execution_01");
    SET(r.trace_id, "trace_01");
    r.n_writes = 2;
    r.writes[0].kind = LEASE_WRITE_DOCUMENT;
    SET(r.writes[0].key, "targets/t1");
    r.writes[0].expected_revision = 3;
    r.writes[0].json = commit_body;
    r.writes[1].kind = LEASE_WRITE_PUBLICATION;
    SET(r.writes[1].key, "results.t1");
    r.writes[1].json = commit_payload;
    return r;
}

static void assert_hex64(const char *d)
{
    assert_int_equal(strlen(d), 64);
    for (const char *p = d; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            fail_msg("digest character '%c' is not lower-case hex", *p);
}

/* Digest of a mutated copy of a request, compared with the unmutated one. */
#define DIGEST_OF(type, make, fn, mutation, out)                                                   \
    do {                                                                                           \
        type r_ = make;                                                                            \
        mutation;                                                                                  \
        fn(&r_, out);                                                                              \
        assert_hex64(out);                                                                         \
    } while (0)

#define EXPECT_CHANGES_(type, make, fn, base, mutation)                                            \
    do {                                                                                           \
        char d_[65];                                                                               \
        DIGEST_OF(type, make, fn, mutation, d_);                                                   \
        if (strcmp(d_, base) == 0)                                                                 \
            fail_msg("digest unchanged by: %s", #mutation);                                        \
    } while (0)

#define EXPECT_SAME_(type, make, fn, base, mutation)                                               \
    do {                                                                                           \
        char d_[65];                                                                               \
        DIGEST_OF(type, make, fn, mutation, d_);                                                   \
        if (strcmp(d_, base) != 0)                                                                 \
            fail_msg("digest changed by: %s", #mutation);                                          \
    } while (0)

/* Call fields outside the digest rule: a retry may change any of them. */
#define NOT_DIGESTED_(type, make, fn, base)                                                        \
    do {                                                                                           \
        EXPECT_SAME(type, make, fn, base, SET(r_.call.request_id, "request_02"));                  \
        EXPECT_SAME(type, make, fn, base, SET(r_.call.correlation_id, "corr_02"));                 \
        EXPECT_SAME(type, make, fn, base, SET(r_.call.trace_id, "other_call_trace"));              \
        EXPECT_SAME(type, make, fn, base, SET(r_.call.deadline_class, "capped"));                  \
        EXPECT_SAME(type, make, fn, base, r_.call.deadline.wall_ms += 60000);                      \
        EXPECT_SAME(type, make, fn, base, r_.call.deadline.mono_ns += 7);                          \
        EXPECT_SAME(type, make, fn, base, r_.call.received_mono_ns = 1);                           \
        EXPECT_SAME(type, make, fn, base, SET(r_.call.principal.credential_id, "key_02"));         \
        EXPECT_SAME(type, make, fn, base, SET(r_.call.principal.client_id, "client_02"));          \
        EXPECT_SAME(type, make, fn, base, SET(r_.call.principal.principal_class, "admin"));        \
        EXPECT_SAME(type, make, fn, base, SET(r_.call.request_digest, "ff"));                      \
    } while (0)

/* Every identity component and the principal are digested. */
#define IDENTITY_DIGESTED_(type, make, fn, base)                                                   \
    do {                                                                                           \
        EXPECT_CHANGES(type, make, fn, base, SET(r_.identity.tenant_id, "tenant-other"));          \
        EXPECT_CHANGES(type, make, fn, base, SET(r_.identity.program_id, "program-b"));            \
        EXPECT_CHANGES(type, make, fn, base, SET(r_.identity.target_namespace, "ns"));             \
        EXPECT_CHANGES(type, make, fn, base, SET(r_.identity.target_id, "Target_01"));             \
        EXPECT_CHANGES(type, make, fn, base, SET(r_.identity.actor_name, "othergen"));             \
        EXPECT_CHANGES(type, make, fn, base, SET(r_.identity.workflow_name, "nightly"));           \
        EXPECT_CHANGES(type, make, fn, base, SET(r_.identity.operation_class, "collect"));         \
        EXPECT_CHANGES(type, make, fn, base, SET(r_.call.principal.principal_id, "prn_other"));    \
    } while (0)

/* Wrappers so a single macro naming (type, make, fn, base) can be passed as
 * the first argument: it expands before the inner macro sees its
 * parameters. */
#define EXPECT_CHANGES(...) EXPECT_CHANGES_(__VA_ARGS__)
#define EXPECT_SAME(...) EXPECT_SAME_(__VA_ARGS__)
#define NOT_DIGESTED(...) NOT_DIGESTED_(__VA_ARGS__)
#define IDENTITY_DIGESTED(...) IDENTITY_DIGESTED_(__VA_ARGS__)

static void commit_digest(lease_commit_req_t *r, char out[65])
{
    if (!lease_digest_commit(r, out))
        fail_msg("commit digest failed");
}

static void test_pinned(void **state)
{
    (void)state;
    char d[65];
    lease_acquire_req_t a = acquire_req();
    lease_digest_acquire(&a, d);
    assert_string_equal(d, PIN_ACQUIRE);

    lease_owner_req_t o = owner_req();
    lease_digest_renew(&o, d);
    assert_string_equal(d, PIN_RENEW);
    lease_digest_release(&o, d);
    assert_string_equal(d, PIN_RELEASE);

    lease_admin_req_t f = admin_req("stuck worker", "");
    lease_digest_admin(&f, false, d);
    assert_string_equal(d, PIN_FORCE);
    lease_admin_req_t v = admin_req("compromised key", "inc_7");
    lease_digest_admin(&v, true, d);
    assert_string_equal(d, PIN_REVOKE);

    lease_commit_req_t c = commit_req();
    assert_true(lease_digest_commit(&c, d));
    assert_string_equal(d, PIN_COMMIT);
}

static void test_acquire_fields(void **state)
{
    (void)state;
    const char *base = PIN_ACQUIRE;
#define A lease_acquire_req_t, acquire_req(), lease_digest_acquire, base
    IDENTITY_DIGESTED(A);
    EXPECT_CHANGES(A, SET(r_.service_instance_id, "instance_02"));
    EXPECT_CHANGES(A, SET(r_.execution_id, "execution_02"));
    EXPECT_CHANGES(A, SET(r_.job_id, "job_02"));
    EXPECT_CHANGES(A, SET(r_.trace_id, "trace_02"));
    EXPECT_CHANGES(A, SET(r_.trace_id, ""));
    EXPECT_CHANGES(A, r_.ttl_ms = 30001);
    EXPECT_CHANGES(A, r_.ttl_ms = 0);
    EXPECT_CHANGES(A, r_.maximum_lifetime_ms = 299999);
    EXPECT_CHANGES(A, SET(r_.metadata_json, "{\"zeta\":2,\"alpha\":\"x\",\"mid\":true}"));
    EXPECT_CHANGES(A, SET(r_.metadata_json, "{\"zeta\":\"1\",\"alpha\":\"x\",\"mid\":true}"));
    EXPECT_CHANGES(A, SET(r_.metadata_json, "{\"zeta\":1,\"alpha\":\"x\"}"));
    EXPECT_CHANGES(A, SET(r_.metadata_json, "{}"));
    /* a session changes what the acquisition does; none leaves the pin */
    EXPECT_CHANGES(A, SET(r_.session_id, "session_01"));
    EXPECT_CHANGES(A, SET(r_.session_id, "session_02"));
    NOT_DIGESTED(A);
    /* key order and spacing are not inputs */
    EXPECT_SAME(A, SET(r_.metadata_json, "{\"mid\":true,\"zeta\":1,\"alpha\":\"x\"}"));
    EXPECT_SAME(A, SET(r_.metadata_json, " { \"alpha\" : \"x\" ,\n\"mid\":true, \"zeta\":1 } "));
#undef A
}

static void test_metadata_edges(void **state)
{
    (void)state;
    char empty[65], braces[65], bad[65], bad2[65], dup[65];
    DIGEST_OF(lease_acquire_req_t, acquire_req(), lease_digest_acquire, SET(r_.metadata_json, ""),
              empty);
    DIGEST_OF(lease_acquire_req_t, acquire_req(), lease_digest_acquire, SET(r_.metadata_json, "{}"),
              braces);
    /* no metadata is the empty object */
    assert_string_equal(empty, braces);
    /* text that is not JSON still digests, distinctly from any object */
    DIGEST_OF(lease_acquire_req_t, acquire_req(), lease_digest_acquire,
              SET(r_.metadata_json, "{not json"), bad);
    DIGEST_OF(lease_acquire_req_t, acquire_req(), lease_digest_acquire,
              SET(r_.metadata_json, "{not json!"), bad2);
    assert_string_not_equal(bad, braces);
    assert_string_not_equal(bad, bad2);
    DIGEST_OF(lease_acquire_req_t, acquire_req(), lease_digest_acquire,
              SET(r_.metadata_json, "{\"a\":1,\"a\":2}"), dup);
    assert_string_not_equal(dup, braces);
    char one[65];
    DIGEST_OF(lease_acquire_req_t, acquire_req(), lease_digest_acquire,
              SET(r_.metadata_json, "{\"a\":2}"), one);
    assert_string_not_equal(dup, one);
}

static void test_renew_release_fields(void **state)
{
    (void)state;
    const char *renew = PIN_RENEW;
    const char *release = PIN_RELEASE;
#define R lease_owner_req_t, owner_req(), lease_digest_renew, renew
#define L lease_owner_req_t, owner_req(), lease_digest_release, release
    IDENTITY_DIGESTED(R);
    EXPECT_CHANGES(R, SET(r_.lease_id, "lease_02"));
    EXPECT_CHANGES(R, r_.fencing_token = 43);
    EXPECT_CHANGES(R, SET(r_.service_instance_id, "instance_02"));
    EXPECT_CHANGES(R, r_.ttl_ms = 0);
    NOT_DIGESTED(R);

    IDENTITY_DIGESTED(L);
    EXPECT_CHANGES(L, SET(r_.lease_id, "lease_02"));
    EXPECT_CHANGES(L, r_.fencing_token = 41);
    EXPECT_CHANGES(L, SET(r_.service_instance_id, "instance_02"));
    /* release takes no TTL */
    EXPECT_SAME(L, r_.ttl_ms = 99);
    NOT_DIGESTED(L);
#undef R
#undef L
    /* the same fields under two operations never share a digest */
    assert_string_not_equal(renew, release);
}

static void force_digest(lease_admin_req_t *r, char out[65])
{
    lease_digest_admin(r, false, out);
}

static void revoke_digest(lease_admin_req_t *r, char out[65])
{
    lease_digest_admin(r, true, out);
}

static void test_admin_fields(void **state)
{
    (void)state;
    char force[65], revoke[65];
    lease_admin_req_t same = admin_req("stuck worker", "inc_7");
    force_digest(&same, force);
    revoke_digest(&same, revoke);
    assert_string_not_equal(force, revoke);

#define F lease_admin_req_t, admin_req("stuck worker", "inc_7"), force_digest, force
#define V lease_admin_req_t, admin_req("stuck worker", "inc_7"), revoke_digest, revoke
    IDENTITY_DIGESTED(F);
    EXPECT_CHANGES(F, SET(r_.lease_id, "lease_02"));
    EXPECT_CHANGES(F, r_.fencing_token = 1);
    EXPECT_CHANGES(F, SET(r_.reason, "stuck worker."));
    EXPECT_CHANGES(F, SET(r_.incident_id, ""));
    NOT_DIGESTED(F);
    IDENTITY_DIGESTED(V);
    EXPECT_CHANGES(V, SET(r_.lease_id, "lease_02"));
    EXPECT_CHANGES(V, r_.fencing_token = 1);
    EXPECT_CHANGES(V, SET(r_.reason, "Stuck worker"));
    EXPECT_CHANGES(V, SET(r_.incident_id, "inc_8"));
    NOT_DIGESTED(V);
    /* a reason that is not UTF-8 still digests, and by its bytes */
    EXPECT_CHANGES(V, SET(r_.reason, "bad \xff"));
    char b1[65], b2[65];
    DIGEST_OF(lease_admin_req_t, admin_req("bad \xff", ""), revoke_digest, (void)0, b1);
    DIGEST_OF(lease_admin_req_t, admin_req("bad \xfe", ""), revoke_digest, (void)0, b2);
    assert_string_not_equal(b1, b2);
#undef F
#undef V
}

static void test_commit_fields(void **state)
{
    (void)state;
    const char *base = PIN_COMMIT;
    static const char *const reordered =
        "{ \"a\" : 1, \"b\":[1,2,{\"x\":\"\xc3\xa9\",\"y\":null}]}";
    static const char *const changed = "{\"b\":[2,1,{\"y\":null,\"x\":\"\xc3\xa9\"}],\"a\":1}";
#define C lease_commit_req_t, commit_req(), commit_digest, base
    IDENTITY_DIGESTED(C);
    EXPECT_CHANGES(C, SET(r_.lease_id, "lease_02"));
    EXPECT_CHANGES(C, r_.fencing_token = 43);
    EXPECT_CHANGES(C, SET(r_.execution_id, "execution_02"));
    EXPECT_CHANGES(C, SET(r_.trace_id, "trace_02"));
    EXPECT_CHANGES(C, SET(r_.writes[0].key, "targets/t2"));
    EXPECT_CHANGES(C, r_.writes[0].expected_revision = 0);
    EXPECT_CHANGES(C, r_.writes[0].json = changed);
    EXPECT_CHANGES(C, r_.writes[0].kind = LEASE_WRITE_PUBLICATION);
    EXPECT_CHANGES(C, SET(r_.writes[1].key, "results.t2"));
    EXPECT_CHANGES(C, r_.writes[1].json = "{\"n\":3,\"m\":\"ok\"}");
    EXPECT_CHANGES(C, r_.n_writes = 1);
    /* order of writes is the order they apply in */
    EXPECT_CHANGES(C, {
        lease_write_t t = r_.writes[0];
        r_.writes[0] = r_.writes[1];
        r_.writes[1] = t;
    });
    NOT_DIGESTED(C);
    EXPECT_SAME(C, r_.writes[0].json = reordered);
    EXPECT_SAME(C, r_.writes[1].json = "{\"m\":\"ok\",  \"n\":2}");
    /* a publication expects no revision */
    EXPECT_SAME(C, r_.writes[1].expected_revision = 17);
    /* slots past n_writes are not part of the request */
    EXPECT_SAME(C, r_.writes[2].json = "{}");
#undef C
}

static void expect_commit_fails(lease_commit_req_t *r, const char *what)
{
    char d[65];
    memset(d, 'x', sizeof d);
    if (lease_digest_commit(r, d))
        fail_msg("commit digest accepted %s", what);
    assert_string_equal(d, "");
}

static void test_commit_invalid(void **state)
{
    (void)state;
    lease_commit_req_t r = commit_req();
    r.writes[0].json = "{\"a\":";
    expect_commit_fails(&r, "truncated JSON");
    r = commit_req();
    r.writes[1].json = "{\"n\":1,\"n\":2}";
    expect_commit_fails(&r, "duplicate keys");
    r = commit_req();
    r.writes[0].json = NULL;
    expect_commit_fails(&r, "a missing body");
    r = commit_req();
    r.writes[0].json = "";
    expect_commit_fails(&r, "an empty body");
    r = commit_req();
    r.writes[0].json = "{\"a\":\"\xff\"}";
    expect_commit_fails(&r, "a body that is not UTF-8");
    r = commit_req();
    r.writes[0].kind = (lease_write_kind_t)9;
    expect_commit_fails(&r, "an unknown kind");
    r = commit_req();
    r.n_writes = LEASE_COMMIT_WRITES_MAX + 1;
    expect_commit_fails(&r, "too many writes");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pinned),         cmocka_unit_test(test_acquire_fields),
        cmocka_unit_test(test_metadata_edges), cmocka_unit_test(test_renew_release_fields),
        cmocka_unit_test(test_admin_fields),   cmocka_unit_test(test_commit_fields),
        cmocka_unit_test(test_commit_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
