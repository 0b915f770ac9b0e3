/*
 * valkey_commits.c - fenced commits on Valkey over real HTTP (POST
 * /v1/commits, docs/api.md; leased_v1_fenced_commit, docs/backends.md):
 * leased on a redis-server of the test's own. A commit with the current
 * token is accepted and its document stored with its fence (revision, body,
 * token, lease, execution, trace); repeating its request id answers the
 * stored result, with other inputs idempotency_conflict; a wrong expected
 * revision is a write_conflict that writes nothing, not even the writes
 * before it; a commit after the lease expired, one with the token a
 * takeover superseded, one of another execution and one by another
 * principal are refused 409 lease_lost, as on PostgreSQL; a commit with a
 * publication is refused 503 (the outbox needs PostgreSQL), nothing
 * written; after a restart the namespace is sealed for commits too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lease/clock.h"
#include "valkey_service.h"

#define AUDIT_KEY "lease:{leased}:audit"

static bool exists(vk_server_t *s, const char *key)
{
    redisReply *r = vk_cmd(s, "EXISTS %s", key);
    bool yes = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    return yes;
}

/* out: the key of document key of target's identity (tenant-main /
 * program-a, starintel-target, usernamegen, default, default). */
static void doc_key(char out[512], const char *target, const char *key)
{
    snprintf(out, 512,
             "lease:{leased}:d:[\"v1\",\"tenant-main\",\"program-a\",\"starintel-target\",\"%s\","
             "\"usernamegen\",\"default\",\"default\"]:%s",
             target, key);
}

/* Whether the document key of target exists. */
static bool doc_exists(vk_server_t *s, const char *target, const char *key)
{
    char k[512];
    doc_key(k, target, key);
    return exists(s, k);
}

/* writes of one write (consumed) */
static json_t *one(json_t *write)
{
    return json_pack("[o]", write);
}

/* One write: a document {"n": n} under key at expected revision. */
static json_t *document(const char *key, int expected, int n)
{
    return json_pack("{s:s, s:s, s:i, s:{s:i}}", "kind", "document", "key", key,
                     "expected_revision", expected, "body", "n", n);
}

/* The body of POST /v1/commits of writes (consumed) under the lease held. */
static json_t *commit_req(const char *rid, const char *target, const http_resp_t *held,
                          const char *execution, json_t *writes)
{
    return json_pack("{s:s, s:o, s:O, s:O, s:s, s:s, s:o}", "request_id", rid, "lock_identity",
                     vk_identity(target), "lease_id", http_resp_get(held, "lease.lease_id"),
                     "fencing_token", http_resp_get(held, "lease.fencing_token"), "execution_id",
                     execution, "trace_id", "trace_1", "writes", writes);
}

/* POST /v1/commits of writes (consumed) under the lease held; the answer
 * must have status and code. */
static http_resp_t *commit(const char *base, const char *token, const char *rid, const char *target,
                           const http_resp_t *held, const char *execution, json_t *writes,
                           long status, const char *code)
{
    return vk_post_expect(base, "/v1/commits", token,
                          commit_req(rid, target, held, execution, writes), status, code);
}

/* A field of a hash, or NULL when absent (heap). */
static char *hget(vk_server_t *s, const char *key, const char *field)
{
    redisReply *r = vk_cmd(s, "HGET %s %s", key, field);
    char *v = r->type == REDIS_REPLY_STRING ? strdup(r->str) : NULL;
    freeReplyObject(r);
    return v;
}

static void expect_field(vk_server_t *s, const char *key, const char *field, const char *want)
{
    char *got = hget(s, key, field);
    if (got == NULL || strcmp(got, want) != 0)
        fail_msg("%s %s: expected %s, got %s", key, field, want, got ? got : "(none)");
    free(got);
}

static long long revision_of(const http_resp_t *r, size_t i)
{
    json_t *rev =
        json_object_get(json_array_get(http_resp_get(r, "commit.results"), i), "revision");
    if (!json_is_integer(rev))
        fail_msg("no commit.results[%zu].revision in %s", i, r->body);
    return (long long)json_integer_value(rev);
}

static void fenced_commits_over_http(void **state)
{
    (void)state;
    vk_server_t s;
    memset(&s, 0, sizeof s);
    assert_true(vk_start(&s));
    char *alice = vk_worker(&s, "alice");
    char *bob = vk_worker(&s, "bob");
    leased_proc_t *srv = vk_leased_start(&s, NULL);
    const char *base = leased_proc_url(srv);

    http_resp_t *a =
        vk_post_expect(base, "/v1/leases/acquire", alice,
                       vk_http_acquire("a1", "t1", "inst_a", 30000), 200, "lease_acquired");
    long long token = vk_token_of(a);
    char token_text[32];
    snprintf(token_text, sizeof token_text, "%lld", token);

    /* the current token: accepted, the document stored with its fence */
    http_resp_t *r = commit(base, alice, "c1", "t1", a, "exec_1", one(document("doc-1", 0, 1)), 200,
                            "commit_accepted");
    assert_int_equal(revision_of(r, 0), 1);
    assert_int_equal(json_integer_value(http_resp_get(r, "commit.fencing_token")), token);
    assert_string_equal(json_string_value(http_resp_get(r, "commit.lease_id")),
                        json_string_value(http_resp_get(a, "lease.lease_id")));
    assert_null(http_resp_get(r, "replayed"));
    http_resp_free(r);
    char d1[512], d2[512];
    doc_key(d1, "t1", "doc-1");
    expect_field(&s, d1, "revision", "1");
    expect_field(&s, d1, "body", "{\"n\":1}");
    expect_field(&s, d1, "fencing_token", token_text);
    expect_field(&s, d1, "lease_id", json_string_value(http_resp_get(a, "lease.lease_id")));
    expect_field(&s, d1, "execution_id", "exec_1");
    expect_field(&s, d1, "trace_id", "trace_1");
    /* the token is recorded as accepted (the identity's high-water mark) */
    expect_field(&s,
                 "lease:{leased}:id:[\"v1\",\"tenant-main\",\"program-a\",\"starintel-target\","
                 "\"t1\",\"usernamegen\",\"default\",\"default\"]",
                 "hw", token_text);

    /* the same request id: the stored answer, not a conflict with itself */
    r = commit(base, alice, "c1", "t1", a, "exec_1", one(document("doc-1", 0, 1)), 200,
               "commit_accepted");
    assert_true(json_is_true(http_resp_get(r, "replayed")));
    assert_int_equal(revision_of(r, 0), 1);
    http_resp_free(r);
    r = commit(base, alice, "c1", "t1", a, "exec_1", one(document("doc-1", 0, 2)), 409,
               "idempotency_conflict");
    http_resp_free(r);
    expect_field(&s, d1, "body", "{\"n\":1}");

    /* a stale expected revision: write_conflict, and the write before it
     * in the same commit is not made */
    r = commit(base, alice, "c2", "t1", a, "exec_1",
               json_pack("[o, o]", document("doc-2", 0, 1), document("doc-1", 0, 3)), 409,
               "write_conflict");
    assert_string_equal(http_resp_str(r, "field"), "writes[1].expected_revision");
    assert_int_equal(http_resp_int(r, "current_revision"), 1);
    http_resp_free(r);
    assert_false(doc_exists(&s, "t1", "doc-2"));
    expect_field(&s, d1, "revision", "1");
    /* the next revision, from the one stored */
    r = commit(base, alice, "c3", "t1", a, "exec_1", one(document("doc-1", 1, 4)), 200,
               "commit_accepted");
    assert_int_equal(revision_of(r, 0), 2);
    http_resp_free(r);
    expect_field(&s, d1, "body", "{\"n\":4}");

    /* a publication needs PostgreSQL's outbox: refused whole */
    json_t *mixed = json_pack("[o, {s:s, s:s, s:{s:i}}]", document("doc-3", 0, 1), "kind",
                              "publication", "topic", "results", "payload", "n", 1);
    r = commit(base, alice, "c4", "t1", a, "exec_1", mixed, 503, "lease_backend_unavailable");
    http_resp_free(r);
    assert_false(doc_exists(&s, "t1", "doc-3"));

    /* another execution, another principal: not the lease's */
    r = commit(base, alice, "c5", "t1", a, "exec_2", one(document("doc-1", 2, 5)), 409,
               "lease_lost");
    http_resp_free(r);
    r = commit(base, bob, "c6", "t1", a, "exec_1", one(document("doc-1", 2, 6)), 409, "lease_lost");
    http_resp_free(r);
    expect_field(&s, d1, "revision", "2");

    /* after expiry: refused */
    http_resp_t *b =
        vk_post_expect(base, "/v1/leases/acquire", alice,
                       vk_http_acquire("a2", "t2", "inst_a", 1500), 200, "lease_acquired");
    r = commit(base, alice, "c7", "t2", b, "exec_1", one(document("doc-1", 0, 7)), 200,
               "commit_accepted");
    http_resp_free(r);
    lease_sleep_ms(1700);
    r = commit(base, alice, "c8", "t2", b, "exec_1", one(document("doc-1", 1, 8)), 409,
               "lease_lost");
    http_resp_free(r);

    /* a takeover: the new holder's token commits, the old one is stale */
    http_resp_t *c =
        vk_post_expect(base, "/v1/leases/acquire", bob,
                       vk_http_acquire("b1", "t2", "inst_b", 30000), 200, "lease_acquired");
    assert_true(vk_token_of(c) > vk_token_of(b));
    r = commit(base, bob, "c9", "t2", c, "exec_1", one(document("doc-1", 1, 9)), 200,
               "commit_accepted");
    assert_int_equal(revision_of(r, 0), 2);
    http_resp_free(r);
    r = commit(base, alice, "c10", "t2", b, "exec_1", one(document("doc-1", 2, 10)), 409,
               "lease_lost");
    http_resp_free(r);
    doc_key(d2, "t2", "doc-1");
    expect_field(&s, d2, "revision", "2");
    expect_field(&s, d2, "body", "{\"n\":9}");
    snprintf(token_text, sizeof token_text, "%lld", vk_token_of(c));
    expect_field(&s, d2, "fencing_token", token_text);

    /* each accepted commit audited by the function, in the same call */
    assert_int_equal(
        vk_audit_count(&s, AUDIT_KEY, "event_type", "target_lease_commit", "source", "function"),
        4);

    /* a restart seals the namespace for commits as for every write */
    assert_true(vk_restart(&s, NULL));
    json_t *again = commit_req("c11", "t2", c, "exec_1", one(document("doc-1", 2, 11)));
    char *body = json_dumps(again, JSON_COMPACT);
    json_decref(again);
    for (int i = 0; i < 3; i++) {
        /* the connection the restart cut may answer lease_outcome_unknown */
        r = http_call(base, "POST", "/v1/commits", bob, body);
        assert_non_null(r);
        if (strcmp(http_resp_str(r, "code"), "lease_outcome_unknown") != 0)
            break;
        http_resp_free(r);
        r = NULL;
    }
    free(body);
    assert_non_null(r);
    vk_expect_code(r, 503, "lease_backend_unavailable");
    http_resp_free(r);
    /* sealed by the commit's incarnation check, the first write since */
    expect_field(&s, "lease:{leased}:ns", "sealed", "1");
    expect_field(&s, d2, "revision", "2");

    http_resp_free(c);
    http_resp_free(b);
    http_resp_free(a);
    assert_int_equal(leased_proc_stop(srv), 0);
    free(alice);
    free(bob);
    vk_stop(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fenced_commits_over_http),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
