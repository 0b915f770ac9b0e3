/*
 * valkey_functions.c - the leased_v1 function library's rules, FCALL by
 * FCALL against a real redis-server: the Valkey counterpart of the pgTAP
 * rules for acquire, renew, release, their batches, force-release, revoke,
 * inspect and fence_check (pgtap/03..07, 09, 12, 13), plus the incarnation guard and
 * epochs (docs/backends.md).
 *
 * Each test starts its own server; the namespace is bound with a minimum
 * TTL of 10 ms so that expiry is reached by sleeping a few hundred ms.
 */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "valkey_codec.h"
#include "valkey_service.h"

#define TOKEN_EPOCH_SPAN 4294967296LL /* 2^32: docs/backends.md, token layout */

static int by_text(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* Acquires target for principal p1; returns the answer (caller frees). */
static redisReply *acquire(vk_server_t *s, const char *rid, const char *target, int64_t ttl)
{
    return vk_fcall(s, "acquire", vk_acquire_req("p1", rid, 'a', target, "inst-1", ttl));
}

static void acquire_then_conflict(void **state)
{
    vk_server_t *s = *state;
    redisReply *a = acquire(s, "r1", "target_01", 0);
    vk_assert_code(a, "lease_acquired");
    const redisReply *l = vk_lease(a);
    assert_int_equal(vk_int(l, "fencing_token"), 1);
    assert_string_equal(vk_str(l, "state"), "active");
    assert_int_equal(vk_int(l, "ttl_ms"), 30000);
    assert_int_equal(vk_int(l, "expires_at") - vk_int(l, "acquired_at"), 30000);
    assert_string_equal(vk_str(l, "owner_principal_id"), "p1");
    assert_string_equal(vk_str(l, "metadata"), "{}");
    assert_int_equal(vk_int(a, "replayed"), 0);

    /* another principal, and the same identity written in upper case
     * (tenant, program, namespace fold; docs/contract.md) */
    json_t *req = vk_acquire_req("p2", "r2", 'b', "target_01", "inst-2", 0);
    json_object_set_new(json_object_get(req, "lock_identity"), "tenant_id",
                        json_string("TENANT-Main"));
    redisReply *c = vk_fcall(s, "acquire", req);
    vk_assert_code(c, "lease_conflict");
    long long retry = vk_int(c, "retry_after_ms");
    assert_true(retry >= 50 && retry <= 1000);
    assert_null(vk_lease(c));

    /* target_id is case-sensitive: another identity, its own counter */
    redisReply *o =
        vk_fcall(s, "acquire", vk_acquire_req("p2", "r3", 'c', "TARGET_01", "inst-2", 0));
    vk_assert_code(o, "lease_acquired");
    assert_int_equal(vk_int(vk_lease(o), "fencing_token"), 1);
    freeReplyObject(a);
    freeReplyObject(c);
    freeReplyObject(o);
}

static void invalid_requests_name_the_field(void **state)
{
    vk_server_t *s = *state;
    redisReply *r = acquire(s, "r1", "bad/target", 0);
    vk_assert_code(r, "invalid_lease_request");
    assert_string_equal(vk_str(r, "field"), "lock_identity.target_id");
    freeReplyObject(r);

    r = acquire(s, "r1", "target_01", 300001);
    vk_assert_code(r, "invalid_lease_request");
    assert_string_equal(vk_str(r, "field"), "ttl_ms");
    assert_string_equal(vk_str(r, "detail"), "ttl_ms must be greater than 10 and at most 300000");
    freeReplyObject(r);

    json_t *req = vk_acquire_req("p1", "r1", 'a', "target_01", "inst 1", 0);
    r = vk_fcall(s, "acquire", req);
    vk_assert_code(r, "invalid_lease_request");
    assert_string_equal(vk_str(r, "field"), "service_instance_id");
    freeReplyObject(r);

    req = vk_acquire_req("p1", "r1", 'a', "target_01", "inst-1", 0);
    json_object_set_new(req, "metadata_json", json_string("[1,2]"));
    r = vk_fcall(s, "acquire", req);
    vk_assert_code(r, "invalid_lease_request");
    assert_string_equal(vk_str(r, "field"), "metadata");
    freeReplyObject(r);

    /* a digest that is not 64 lower-case hex digits is a service bug:
     * refused as the backend being unable to answer (LS003 in Postgres) */
    req = vk_acquire_req("p1", "r1", 'A', "target_01", "inst-1", 0);
    r = vk_fcall(s, "acquire", req);
    vk_assert_code(r, "lease_backend_unavailable");
    assert_string_equal(vk_str(r, "reason"), "malformed_call");
    freeReplyObject(r);

    /* a deadline already passed at server TIME */
    req = vk_acquire_req("p1", "r1", 'a', "target_01", "inst-1", 0);
    json_object_set_new(req, "deadline_at_ms", json_integer(1000));
    r = vk_fcall(s, "acquire", req);
    vk_assert_code(r, "deadline_exceeded");
    freeReplyObject(r);

    /* none of these wrote a lease */
    r = vk_cmd(s, "SCARD lease:{t}:act");
    assert_int_equal(r->integer, 0);
    freeReplyObject(r);
}

/* An acquire of target_md by p1 with metadata_json input, its request id
 * prefix and k (the vector's index). */
static redisReply *acquire_with_metadata(vk_server_t *s, const char *prefix, size_t k,
                                         const char *input)
{
    char rid[32];
    snprintf(rid, sizeof rid, "%s%zu", prefix, k);
    json_t *q = vk_acquire_req("p1", rid, 'a', "target_md", "inst-1", 0);
    json_object_set_new(q, "metadata_json", json_string(input));
    return vk_fcall(s, "acquire", q);
}

/* The metadata rules of lease._bad_metadata, held to tests/vectors/
 * metadata.json as the C codec and PostgreSQL are: each accepted input is
 * stored and answered byte for byte, each rejected one answers
 * invalid_lease_request naming the vector's field and writes nothing. */
static void metadata_vectors(void **state)
{
    vk_server_t *s = *state;
    json_error_t err;
    json_t *v = json_load_file(LEASE_TEST_SOURCE_DIR "/tests/vectors/metadata.json", 0, &err);
    assert_non_null(v);
    json_t *accepted = json_object_get(v, "accepted"), *rejected = json_object_get(v, "rejected");
    assert_true(json_array_size(accepted) > 20 && json_array_size(rejected) > 30);
    size_t k;
    json_t *e;
    json_array_foreach(accepted, k, e)
    {
        const char *input = json_string_value(json_object_get(e, "input"));
        redisReply *r = acquire_with_metadata(s, "ma", k, input);
        char rid[32];
        const char *code = vk_str(r, "code");
        if (code == NULL || strcmp(code, "lease_acquired") != 0)
            fail_msg("accepted[%zu] (%s): %s field %s", k,
                     json_string_value(json_object_get(e, "why")), code ? code : "?",
                     vk_str(r, "field") ? vk_str(r, "field") : "-");
        const char *stored = vk_str(vk_lease(r), "metadata");
        /* the empty object is no metadata, "{}" either way */
        assert_string_equal(stored, input);
        const char *lid = vk_str(vk_lease(r), "lease_id");
        long long token = vk_int(vk_lease(r), "fencing_token");
        snprintf(rid, sizeof rid, "mx%zu", k);
        redisReply *x =
            vk_fcall(s, "release", vk_owner_req("p1", rid, 'b', "target_md", lid, token, "inst-1"));
        vk_assert_code(x, "lease_released");
        freeReplyObject(x);
        freeReplyObject(r);
    }
    redisReply *before = vk_cmd(s, "XLEN lease:{t}:audit");
    long long events = before->integer;
    freeReplyObject(before);
    json_array_foreach(rejected, k, e)
    {
        const char *input = json_string_value(json_object_get(e, "input"));
        const char *field = json_string_value(json_object_get(e, "field"));
        redisReply *r = acquire_with_metadata(s, "mr", k, input);
        const char *code = vk_str(r, "code"), *got = vk_str(r, "field");
        if (code == NULL || strcmp(code, "invalid_lease_request") != 0 || got == NULL ||
            strcmp(got, field) != 0)
            fail_msg("rejected[%zu] (%s): %s field %s, want %s", k,
                     json_string_value(json_object_get(e, "why")), code ? code : "?",
                     got ? got : "-", field);
        freeReplyObject(r);
    }
    /* nothing held, nothing audited, no idempotency record for the refusals */
    redisReply *r = vk_cmd(s, "SCARD lease:{t}:act");
    assert_int_equal(r->integer, 0);
    freeReplyObject(r);
    r = vk_cmd(s, "XLEN lease:{t}:audit");
    assert_int_equal(r->integer, events);
    freeReplyObject(r);
    r = vk_cmd(s, "KEYS lease:{t}:i:acquire:p1:mr*");
    assert_int_equal(r->elements, 0);
    freeReplyObject(r);
    json_decref(v);
}

static void renew_release_and_lost(void **state)
{
    vk_server_t *s = *state;
    redisReply *a = acquire(s, "r1", "target_01", 20000);
    vk_assert_code(a, "lease_acquired");
    const char *lid = vk_str(vk_lease(a), "lease_id");
    long long token = vk_int(vk_lease(a), "fencing_token");

    /* every owner field must match */
    redisReply *r =
        vk_fcall(s, "renew", vk_owner_req("p2", "n1", 'b', "target_01", lid, token, "inst-1"));
    vk_assert_code(r, "lease_lost");
    freeReplyObject(r);
    r = vk_fcall(s, "renew", vk_owner_req("p1", "n1", 'b', "target_01", lid, token, "inst-9"));
    vk_assert_code(r, "lease_lost");
    freeReplyObject(r);
    r = vk_fcall(s, "renew", vk_owner_req("p1", "n1", 'b', "target_01", lid, token + 1, "inst-1"));
    vk_assert_code(r, "lease_lost");
    freeReplyObject(r);
    r = vk_fcall(s, "renew",
                 vk_owner_req("p1", "n1", 'b', "target_01", "lease_other", token, "inst-1"));
    vk_assert_code(r, "lease_lost");
    freeReplyObject(r);

    json_t *req = vk_owner_req("p1", "n2", 'c', "target_01", lid, token, "inst-1");
    json_object_set_new(req, "ttl_ms", json_integer(60000));
    r = vk_fcall(s, "renew", req);
    vk_assert_code(r, "lease_renewed");
    const redisReply *l = vk_lease(r);
    assert_int_equal(vk_int(l, "fencing_token"), token); /* renewal keeps the token */
    assert_int_equal(vk_int(l, "ttl_ms"), 60000);
    assert_int_equal(vk_int(l, "expires_at") - vk_int(l, "renewed_at"), 60000);
    freeReplyObject(r);

    r = vk_fcall(s, "release", vk_owner_req("p1", "x1", 'd', "target_01", lid, token, "inst-1"));
    vk_assert_code(r, "lease_released");
    assert_string_equal(vk_str(vk_lease(r), "state"), "released");
    assert_true(vk_int(vk_lease(r), "ended_at") > 0);
    freeReplyObject(r);

    /* a released lease can be neither renewed nor released again */
    r = vk_fcall(s, "renew", vk_owner_req("p1", "n3", 'e', "target_01", lid, token, "inst-1"));
    vk_assert_code(r, "lease_lost");
    freeReplyObject(r);
    r = vk_fcall(s, "release", vk_owner_req("p1", "x2", 'e', "target_01", lid, token, "inst-1"));
    vk_assert_code(r, "lease_lost");
    freeReplyObject(r);

    /* the next acquisition gets a greater token */
    r = vk_fcall(s, "acquire", vk_acquire_req("p2", "r2", 'f', "target_01", "inst-2", 0));
    vk_assert_code(r, "lease_acquired");
    assert_true(vk_int(vk_lease(r), "fencing_token") > token);
    freeReplyObject(r);
    freeReplyObject(a);
}

static void expiry_takeover_gets_a_greater_token(void **state)
{
    vk_server_t *s = *state;
    redisReply *a = acquire(s, "r1", "target_01", 50);
    vk_assert_code(a, "lease_acquired");
    const char *lid = vk_str(vk_lease(a), "lease_id");
    long long token = vk_int(vk_lease(a), "fencing_token");
    sleep_ms(300);

    /* past expires_at at server TIME: lost for its owner */
    redisReply *r =
        vk_fcall(s, "renew", vk_owner_req("p1", "n1", 'b', "target_01", lid, token, "inst-1"));
    vk_assert_code(r, "lease_lost");
    freeReplyObject(r);
    r = vk_fcall(s, "release", vk_owner_req("p1", "x1", 'c', "target_01", lid, token, "inst-1"));
    vk_assert_code(r, "lease_lost");
    freeReplyObject(r);

    /* inspect reports it expired before anyone takes it */
    json_t *q = vk_call("p1", "q1", 'q');
    json_object_set_new(q, "scope",
                        json_pack("{s:s, s:s, s:[s]}", "tenant_id", "tenant-main", "program_id",
                                  "*", "actor_names", "*"));
    json_object_set_new(q, "lease_id", json_string(lid));
    r = vk_fcall(s, "inspect", json_deep_copy(q));
    vk_assert_code(r, "lease_inspected");
    assert_string_equal(vk_str(vk_lease(r), "state"), "expired");
    freeReplyObject(r);

    r = vk_fcall(s, "acquire", vk_acquire_req("p2", "r2", 'd', "target_01", "inst-2", 0));
    vk_assert_code(r, "lease_acquired");
    assert_true(vk_int(vk_lease(r), "fencing_token") > token);
    assert_string_equal(vk_str(r, "previous_state"), "expired");
    freeReplyObject(r);

    /* the old lease is terminal evidence now, still expired */
    r = vk_fcall(s, "inspect", q);
    vk_assert_code(r, "lease_inspected");
    assert_string_equal(vk_str(vk_lease(r), "state"), "expired");
    assert_int_equal(vk_int(vk_lease(r), "fencing_token"), token);
    freeReplyObject(r);
    freeReplyObject(a);
}

static void idempotent_replay_and_digest_conflict(void **state)
{
    vk_server_t *s = *state;
    redisReply *a = acquire(s, "r1", "target_01", 0);
    vk_assert_code(a, "lease_acquired");
    const char *lid = vk_str(vk_lease(a), "lease_id");
    long long token = vk_int(vk_lease(a), "fencing_token");

    redisReply *b = acquire(s, "r1", "target_01", 0);
    vk_assert_code(b, "lease_acquired");
    assert_string_equal(vk_str(vk_lease(b), "lease_id"), lid);
    assert_int_equal(vk_int(vk_lease(b), "fencing_token"), token);
    assert_int_equal(vk_int(b, "replayed"), 1);
    assert_string_equal(vk_str(b, "current_state"), "active");
    freeReplyObject(b);

    /* same request id, another digest */
    b = vk_fcall(s, "acquire", vk_acquire_req("p1", "r1", '0', "target_01", "inst-1", 0));
    vk_assert_code(b, "idempotency_conflict");
    assert_null(vk_lease(b));
    freeReplyObject(b);

    /* renew and release replay too */
    redisReply *n =
        vk_fcall(s, "renew", vk_owner_req("p1", "n1", 'b', "target_01", lid, token, "inst-1"));
    vk_assert_code(n, "lease_renewed");
    long long renewed_exp = vk_int(vk_lease(n), "expires_at");
    freeReplyObject(n);
    sleep_ms(20);
    n = vk_fcall(s, "renew", vk_owner_req("p1", "n1", 'b', "target_01", lid, token, "inst-1"));
    vk_assert_code(n, "lease_renewed");
    assert_int_equal(vk_int(n, "replayed"), 1);
    assert_int_equal(vk_int(vk_lease(n), "expires_at"), renewed_exp); /* the stored answer */
    freeReplyObject(n);

    redisReply *x =
        vk_fcall(s, "release", vk_owner_req("p1", "x1", 'c', "target_01", lid, token, "inst-1"));
    vk_assert_code(x, "lease_released");
    freeReplyObject(x);
    x = vk_fcall(s, "release", vk_owner_req("p1", "x1", 'c', "target_01", lid, token, "inst-1"));
    vk_assert_code(x, "lease_released");
    assert_int_equal(vk_int(x, "replayed"), 1);
    freeReplyObject(x);

    /* the acquire's id, repeated after its lease ended: its stored answer,
     * not a second lease, with the lease's state now */
    b = acquire(s, "r1", "target_01", 0);
    vk_assert_code(b, "lease_acquired");
    assert_string_equal(vk_str(vk_lease(b), "lease_id"), lid);
    assert_int_equal(vk_int(b, "replayed"), 1);
    assert_string_equal(vk_str(b, "current_state"), "released");
    freeReplyObject(b);
    redisReply *act = vk_cmd(s, "SCARD lease:{t}:act");
    assert_int_equal(act->integer, 0);
    freeReplyObject(act);

    /* a conflict is not stored: the same id acquires once the identity is free */
    redisReply *h =
        vk_fcall(s, "acquire", vk_acquire_req("p2", "r9", 'e', "target_01", "inst-2", 0));
    vk_assert_code(h, "lease_acquired");
    redisReply *c =
        vk_fcall(s, "acquire", vk_acquire_req("p3", "r7", '7', "target_01", "inst-3", 0));
    vk_assert_code(c, "lease_conflict");
    freeReplyObject(c);
    json_t *fr = vk_owner_req("admin", "f1", '8', "target_01", vk_str(vk_lease(h), "lease_id"),
                              vk_int(vk_lease(h), "fencing_token"), "x");
    json_object_set_new(fr, "reason", json_string("make room"));
    c = vk_fcall(s, "force_release", fr);
    vk_assert_code(c, "lease_released");
    freeReplyObject(c);
    c = vk_fcall(s, "acquire", vk_acquire_req("p3", "r7", '7', "target_01", "inst-3", 0));
    vk_assert_code(c, "lease_acquired");
    assert_int_equal(vk_int(c, "replayed"), 0);
    freeReplyObject(c);
    freeReplyObject(h);
    freeReplyObject(a);
}

static json_t *admin_req(const char *rid, char dg, const char *lid, long long token,
                         const char *reason)
{
    json_t *o = vk_call("admin", rid, dg);
    json_object_set_new(o, "lock_identity", vk_identity("target_01"));
    json_object_set_new(o, "lease_id", json_string(lid));
    json_object_set_new(o, "fencing_token", json_integer(token));
    if (reason)
        json_object_set_new(o, "reason", json_string(reason));
    return o;
}

/* Two replies are the same tree: types, integers, texts, elements. */
static bool same_reply(const redisReply *a, const redisReply *b)
{
    if (a->type != b->type)
        return false;
    switch (a->type) {
    case REDIS_REPLY_INTEGER:
        return a->integer == b->integer;
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
        return a->len == b->len && memcmp(a->str, b->str, a->len) == 0;
    case REDIS_REPLY_ARRAY:
        if (a->elements != b->elements)
            return false;
        for (size_t k = 0; k < a->elements; k++)
            if (!same_reply(a->element[k], b->element[k]))
                return false;
        return true;
    default:
        return true; /* nil */
    }
}

/* A replay is the original answer, member by member, but for the pairs
 * that say it is one (replayed, current_state). */
static void assert_replay_of(const redisReply *first, const redisReply *again)
{
    assert_int_equal(vk_int(first, "replayed"), 0);
    assert_int_equal(vk_int(again, "replayed"), 1);
    size_t k = 0, j = 0;
    for (;;) {
        while (k + 1 < first->elements && (strcmp(first->element[k]->str, "replayed") == 0 ||
                                           strcmp(first->element[k]->str, "current_state") == 0))
            k += 2;
        while (j + 1 < again->elements && (strcmp(again->element[j]->str, "replayed") == 0 ||
                                           strcmp(again->element[j]->str, "current_state") == 0))
            j += 2;
        if (k >= first->elements || j >= again->elements)
            break;
        assert_string_equal(again->element[j]->str, first->element[k]->str);
        if (!same_reply(first->element[k + 1], again->element[j + 1]))
            fail_msg("the replay's %s differs from the answer's", first->element[k]->str);
        k += 2;
        j += 2;
    }
    assert_int_equal(k, first->elements);
    assert_int_equal(j, again->elements);
}

/* An acquire with every optional member set: trace id, metadata, maximum
 * lifetime (the principal's client and credential ids are vk_call's). */
static json_t *acquire_every_member(const char *rid, char dg)
{
    json_t *q = vk_acquire_req("p1", rid, dg, "target_01", "inst-1", 5000);
    json_object_set_new(q, "trace_id", json_string("trace-77"));
    json_object_set_new(q, "metadata_json", json_string("{\"batch\":\"b-9\",\"n\":12}"));
    json_object_set_new(q, "maximum_lifetime_ms", json_integer(60000));
    return q;
}

/* The first byte of the stored answer of op's request rid (the
 * idempotency record's text after the digest, the lease id and a NUL;
 * docs/backends.md "Keys"). */
static int stored_answer_byte(vk_server_t *s, const char *op, const char *rid)
{
    redisReply *keys = vk_cmd(s, "KEYS lease:{t}:i:%s:*:%s:*", op, rid);
    assert_int_equal(keys->elements, 1);
    redisReply *r = vk_cmd(s, "GET %s", keys->element[0]->str);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    const char *nul = memchr(r->str + 64, '\0', r->len - 64);
    assert_non_null(nul);
    int first = (unsigned char)nul[1];
    freeReplyObject(r);
    freeReplyObject(keys);
    return first;
}

/* Each mutation's stored answer, replayed, is its answer: every member of
 * the lease, with every optional member set (trace id, metadata, the
 * principal's client and credential ids, an end's reason and incident).
 * The stored answer is the record's members joined by NUL (first byte 1);
 * a principal's id with a NUL in it, which that cannot hold, is stored
 * packed (cmsgpack) and replays the same. */
static void stored_answers_replay_every_member(void **state)
{
    vk_server_t *s = *state;
    json_t *q = acquire_every_member("r1", 'a');
    json_t *again = json_deep_copy(q);
    redisReply *a = vk_fcall(s, "acquire", q);
    vk_assert_code(a, "lease_acquired");
    assert_string_equal(vk_str(vk_lease(a), "trace_id"), "trace-77");
    assert_string_equal(vk_str(vk_lease(a), "owner_client_id"), "client-1");
    redisReply *b = vk_fcall(s, "acquire", again);
    assert_replay_of(a, b);
    assert_int_equal(stored_answer_byte(s, "acquire", "r1"), 1);
    freeReplyObject(b);
    const char *lid = vk_str(vk_lease(a), "lease_id");
    long long token = vk_int(vk_lease(a), "fencing_token");

    redisReply *n =
        vk_fcall(s, "renew", vk_owner_req("p1", "n1", 'b', "target_01", lid, token, "inst-1"));
    vk_assert_code(n, "lease_renewed");
    b = vk_fcall(s, "renew", vk_owner_req("p1", "n1", 'b', "target_01", lid, token, "inst-1"));
    assert_replay_of(n, b);
    freeReplyObject(b);
    freeReplyObject(n);

    json_t *rv = admin_req("v1", 'c', lid, token, "compromised host");
    json_object_set_new(rv, "incident_id", json_string("inc-7"));
    again = json_deep_copy(rv);
    redisReply *r = vk_fcall(s, "revoke", rv);
    vk_assert_code(r, "lease_revoked");
    b = vk_fcall(s, "revoke", again);
    assert_replay_of(r, b);
    assert_string_equal(vk_str(vk_lease(b), "incident_id"), "inc-7");
    assert_int_equal(stored_answer_byte(s, "revoke", "v1"), 1);
    freeReplyObject(b);
    freeReplyObject(r);
    freeReplyObject(a);

    /* a client id with a NUL: packed, and the same replay */
    q = vk_acquire_req("p1", "r2", 'd', "target_01", "inst-1", 0);
    json_object_set_new(json_object_get(q, "principal"), "client_id", json_stringn("client\0x", 8));
    again = json_deep_copy(q);
    a = vk_fcall(s, "acquire", q);
    vk_assert_code(a, "lease_acquired");
    b = vk_fcall(s, "acquire", again);
    assert_replay_of(a, b);
    assert_int_not_equal(stored_answer_byte(s, "acquire", "r2"), 1);
    freeReplyObject(b);
    lid = vk_str(vk_lease(a), "lease_id");
    token = vk_int(vk_lease(a), "fencing_token");
    redisReply *x =
        vk_fcall(s, "release", vk_owner_req("p1", "x1", 'e', "target_01", lid, token, "inst-1"));
    vk_assert_code(x, "lease_released");
    b = vk_fcall(s, "release", vk_owner_req("p1", "x1", 'e', "target_01", lid, token, "inst-1"));
    assert_replay_of(x, b);
    freeReplyObject(b);
    freeReplyObject(x);
    freeReplyObject(a);
}

/* ---- packed answers (what leased's adapter asks for) ---------------------- */

/* req sent three times: asking for the packed answer (the original), in
 * the table form (a replay), packed again (a replay). The packed original
 * must be one string that the adapter's decoder reads to exactly what it
 * reads from the table form, but for "replayed"; the packed replay to
 * exactly the table replay. Returns the original's result. */
static lease_result_t packed_as_table(vk_server_t *s, const char *fn, json_t *req)
{
    json_t *table = json_deep_copy(req), *again = json_deep_copy(req);
    json_object_set_new(req, "packed_answer", json_true());
    json_object_set_new(again, "packed_answer", json_true());
    redisReply *a = vk_fcall(s, fn, req);
    redisReply *b = vk_fcall(s, fn, table);
    redisReply *c = vk_fcall(s, fn, again);
    if (a->type != REDIS_REPLY_STRING)
        fail_msg("%s answered %s (%s), not packed", fn,
                 a->type == REDIS_REPLY_ARRAY && vk_str(a, "code") ? vk_str(a, "code") : "?",
                 a->type == REDIS_REPLY_ARRAY && vk_str(a, "reason") ? vk_str(a, "reason") : "");
    assert_int_equal(a->type, REDIS_REPLY_STRING);
    assert_int_equal(a->str[0], 1);
    assert_int_equal(b->type, REDIS_REPLY_ARRAY);
    assert_int_equal(c->type, REDIS_REPLY_STRING);
    lease_result_t ra, rb, rc;
    assert_true(valkey_decode_result(a, &ra));
    assert_true(valkey_decode_result(b, &rb));
    assert_true(valkey_decode_result(c, &rc));
    assert_true(ra.has_lease);
    assert_false(ra.replayed);
    assert_true(rb.replayed);
    assert_true(rc.replayed);
    /* member by member first, for a message that names the member */
    assert_string_equal(ra.lease.lease_id, rb.lease.lease_id);
    assert_string_equal(ra.lease.metadata_json, rb.lease.metadata_json);
    assert_string_equal(ra.lease.trace_id, rb.lease.trace_id);
    assert_string_equal(ra.lease.end_reason, rb.lease.end_reason);
    assert_string_equal(ra.lease.incident_id, rb.lease.incident_id);
    assert_int_equal(ra.lease.fencing_token, rb.lease.fencing_token);
    assert_int_equal(ra.lease.ended_at_ms, rb.lease.ended_at_ms);
    assert_int_equal(ra.current_state, rb.current_state);
    lease_result_t original = ra;
    ra.replayed = true;
    assert_memory_equal(&ra, &rb, sizeof ra);
    assert_memory_equal(&rc, &rb, sizeof rc);
    freeReplyObject(a);
    freeReplyObject(b);
    freeReplyObject(c);
    return original;
}

/* Every lease mutation, with every optional member set, asked for its
 * packed answer: the adapter reads the same result from it as from the
 * table form (and from the replays of each); a record that the packed text
 * cannot hold (a NUL in a principal's id) answers in the table form. */
static void packed_answers_decode_as_the_table_form(void **state)
{
    vk_server_t *s = *state;
    json_t *q = acquire_every_member("r1", 'a');
    lease_result_t a = packed_as_table(s, "acquire", q);
    assert_int_equal(a.code, LEASE_ACQUIRED);
    assert_string_equal(a.lease.metadata_json, "{\"batch\":\"b-9\",\"n\":12}");
    assert_int_equal(a.current_state, LEASE_STATE_ACTIVE);
    lease_result_t n = packed_as_table(s, "renew",
                                       vk_owner_req("p1", "n1", 'b', "target_01", a.lease.lease_id,
                                                    a.lease.fencing_token, "inst-1"));
    assert_int_equal(n.code, LEASE_RENEWED);
    json_t *rv = admin_req("v1", 'c', a.lease.lease_id, a.lease.fencing_token, "compromised host");
    json_object_set_new(rv, "incident_id", json_string("inc-7"));
    lease_result_t v = packed_as_table(s, "revoke", rv);
    assert_int_equal(v.code, LEASE_REVOKED);
    assert_string_equal(v.lease.incident_id, "inc-7");
    assert_int_equal(v.current_state, LEASE_STATE_REVOKED);

    lease_result_t b =
        packed_as_table(s, "acquire", vk_acquire_req("p1", "r2", 'd', "target_01", "inst-1", 0));
    lease_result_t x = packed_as_table(s, "release",
                                       vk_owner_req("p1", "x1", 'e', "target_01", b.lease.lease_id,
                                                    b.lease.fencing_token, "inst-1"));
    assert_int_equal(x.code, LEASE_RELEASED);
    assert_true(x.lease.ended_at_ms > 0);
    lease_result_t c =
        packed_as_table(s, "acquire", vk_acquire_req("p1", "r3", 'f', "target_01", "inst-1", 0));
    lease_result_t f = packed_as_table(
        s, "force_release", admin_req("f1", '1', c.lease.lease_id, c.lease.fencing_token, "stuck"));
    assert_int_equal(f.code, LEASE_RELEASED);
    assert_string_equal(f.lease.end_reason, "stuck");

    /* not every answer is packed: a conflict, a refusal are the table form */
    json_t *held = vk_acquire_req("p1", "r4", '2', "target_01", "inst-1", 0);
    json_object_set_new(held, "packed_answer", json_true());
    redisReply *r = vk_fcall(s, "acquire", held);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    freeReplyObject(r);
    json_t *other = vk_acquire_req("p2", "r5", '3', "target_01", "inst-2", 0);
    json_object_set_new(other, "packed_answer", json_true());
    r = vk_fcall(s, "acquire", other);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    vk_assert_code(r, "lease_conflict");
    freeReplyObject(r);

    /* a client id with a NUL: stored packed by cmsgpack, answered as a table */
    json_t *nul = vk_acquire_req("p1", "r6", '4', "target_02", "inst-1", 0);
    json_object_set_new(json_object_get(nul, "principal"), "client_id",
                        json_stringn("client\0x", 8));
    json_object_set_new(nul, "packed_answer", json_true());
    json_t *nul_again = json_deep_copy(nul);
    r = vk_fcall(s, "acquire", nul);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    vk_assert_code(r, "lease_acquired");
    freeReplyObject(r);
    r = vk_fcall(s, "acquire", nul_again);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(vk_int(r, "replayed"), 1);
    freeReplyObject(r);
}

static void force_release_and_revoke(void **state)
{
    vk_server_t *s = *state;
    redisReply *a = acquire(s, "r1", "target_01", 0);
    const char *lid = vk_str(vk_lease(a), "lease_id");
    long long token = vk_int(vk_lease(a), "fencing_token");

    redisReply *r = vk_fcall(s, "revoke", admin_req("v1", 'a', lid, token, NULL));
    vk_assert_code(r, "invalid_lease_request");
    assert_string_equal(vk_str(r, "field"), "reason");
    freeReplyObject(r);
    r = vk_fcall(s, "revoke", admin_req("v1", 'a', lid, token, "   "));
    assert_string_equal(vk_str(r, "field"), "reason");
    freeReplyObject(r);
    r = vk_fcall(s, "revoke", admin_req("v1", 'a', lid, token, "bad\nreason"));
    assert_string_equal(vk_str(r, "field"), "reason");
    freeReplyObject(r);
    /* force-release takes no incident */
    json_t *fr = admin_req("f1", 'b', lid, token, "stuck");
    json_object_set_new(fr, "incident_id", json_string("inc-1"));
    r = vk_fcall(s, "force_release", fr);
    assert_string_equal(vk_str(r, "field"), "incident_id");
    freeReplyObject(r);
    /* a stale token names no live lease */
    r = vk_fcall(s, "revoke", admin_req("v1", 'a', lid, token + 1, "compromised"));
    vk_assert_code(r, "lease_lost");
    freeReplyObject(r);

    json_t *rv = admin_req("v2", 'c', lid, token, "compromised host");
    json_object_set_new(rv, "incident_id", json_string("inc-7"));
    r = vk_fcall(s, "revoke", rv);
    vk_assert_code(r, "lease_revoked");
    assert_string_equal(vk_str(vk_lease(r), "state"), "revoked");
    assert_string_equal(vk_str(vk_lease(r), "end_reason"), "compromised host");
    assert_string_equal(vk_str(vk_lease(r), "incident_id"), "inc-7");
    freeReplyObject(r);

    /* the owner has lost it; an admin cannot end it twice */
    r = vk_fcall(s, "renew", vk_owner_req("p1", "n1", 'd', "target_01", lid, token, "inst-1"));
    vk_assert_code(r, "lease_lost");
    freeReplyObject(r);
    r = vk_fcall(s, "force_release", admin_req("f2", 'e', lid, token, "again"));
    vk_assert_code(r, "lease_lost");
    freeReplyObject(r);

    /* force-release of the next lease */
    redisReply *b = acquire(s, "r2", "target_01", 0);
    r = vk_fcall(s, "force_release",
                 admin_req("f3", 'f', vk_str(vk_lease(b), "lease_id"),
                           vk_int(vk_lease(b), "fencing_token"), "maintenance window"));
    vk_assert_code(r, "lease_released");
    assert_string_equal(vk_str(vk_lease(r), "state"), "released");
    assert_string_equal(vk_str(vk_lease(r), "end_reason"), "maintenance window");
    freeReplyObject(r);
    freeReplyObject(b);
    freeReplyObject(a);
}

/* The members of a hash or a Stream entry's field list, "name=value" joined
 * by '|', in the server's order (a Stream entry) or sorted (a hash, whose
 * order the server does not keep). */
static void joined(const redisReply *r, bool sort, char *out, size_t n)
{
    char *items[128];
    size_t k = 0;
    for (size_t i = 0; i + 1 < r->elements && k < 128; i += 2) {
        size_t len = strlen(r->element[i]->str) + strlen(r->element[i + 1]->str) + 2;
        items[k] = malloc(len);
        snprintf(items[k++], len, "%s=%s", r->element[i]->str, r->element[i + 1]->str);
    }
    if (sort)
        qsort(items, k, sizeof *items, by_text);
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < k; i++) {
        used +=
            (size_t)snprintf(out + used, used < n ? n - used : 0, "%s%s", i ? "|" : "", items[i]);
        free(items[i]);
    }
}

/* The Stream's last entry's fields, joined. */
static void last_event(vk_server_t *s, char *out, size_t n)
{
    redisReply *x = vk_audit(s, "lease:{t}:audit", true);
    assert_int_equal(x->elements, 1);
    joined(x->element[0]->element[1], false, out, n);
    freeReplyObject(x);
}

/* What an ended lease leaves in history, and what a mutation leaves in the
 * audit Stream, member by member (docs/backends.md, "Keys" and "Audit
 * events"): the history record holds the lease and its end, not the
 * identity's counter; the event holds its members in one order, empty ones
 * left out, the trace id from the request when it names one, else from the
 * lease. */
static void history_and_audit_entries_keep_their_members(void **state)
{
    vk_server_t *s = *state;
    char got[4096], want[4096];
    json_t *req = vk_acquire_req("p1", "r1", 'a', "target_01", "inst-1", 20000);
    json_object_set_new(req, "trace_id", json_string("trace-a"));
    json_object_set_new(req, "metadata_json", json_string("{\"k\":\"v\"}"));
    redisReply *a = vk_fcall(s, "acquire", req);
    vk_assert_code(a, "lease_acquired");
    const char *lid = vk_str(vk_lease(a), "lease_id");
    long long token = vk_int(vk_lease(a), "fencing_token");
    long long at = vk_int(vk_lease(a), "acquired_at");
    last_event(s, got, sizeof got);
    snprintf(want, sizeof want,
             "event_type=target_lease_acquire|occurred_at_ms=%lld|code=lease_acquired|"
             "decision=allow|backend_health=ok|source=function|principal_id=p1|"
             "client_id=client-1|credential_id=key_1|request_id=r1|trace_id=trace-a|"
             "priority=normal|tenant_id=tenant-main|program_id=program-a|"
             "target_namespace=starintel-target|target_id=target_01|actor_name=usernamegen|"
             "workflow_name=default|operation_class=default|lease_id=%s|fencing_token=%lld|"
             "previous_state=none|resulting_state=active|service_instance_id=inst-1|"
             "execution_id=exec-1|job_id=job-1|requested_ttl_ms=20000|effective_ttl_ms=20000",
             at, lid, token);
    assert_string_equal(got, want);

    /* a release without a trace id: the lease's */
    redisReply *r =
        vk_fcall(s, "release", vk_owner_req("p1", "r2", 'b', "target_01", lid, token, "inst-1"));
    vk_assert_code(r, "lease_released");
    long long ended = vk_int(vk_lease(r), "ended_at");
    last_event(s, got, sizeof got);
    snprintf(want, sizeof want,
             "event_type=target_lease_release|occurred_at_ms=%lld|code=lease_released|"
             "decision=allow|backend_health=ok|source=function|principal_id=p1|"
             "client_id=client-1|credential_id=key_1|request_id=r2|trace_id=trace-a|"
             "priority=normal|tenant_id=tenant-main|program_id=program-a|"
             "target_namespace=starintel-target|target_id=target_01|actor_name=usernamegen|"
             "workflow_name=default|operation_class=default|lease_id=%s|fencing_token=%lld|"
             "previous_state=active|resulting_state=released|service_instance_id=inst-1|"
             "execution_id=exec-1|job_id=job-1|effective_ttl_ms=20000",
             ended, lid, token);
    assert_string_equal(got, want);

    /* history: the lease and its end, nothing of the identity's counter */
    redisReply *h = vk_cmd(s, "HGETALL lease:{t}:h:%s", lid);
    joined(h, true, got, sizeof got);
    snprintf(want, sizeof want,
             "acquired_at=%lld|actor_name=usernamegen|"
             "c=[\"v1\",\"tenant-main\",\"program-a\",\"starintel-target\",\"target_01\","
             "\"usernamegen\",\"default\",\"default\"]|end_reason=|ended_at=%lld|"
             "execution_id=exec-1|expires_at=%lld|incident_id=|job_id=job-1|lease_id=%s|"
             "maxlife_ms=%lld|metadata={\"k\":\"v\"}|operation_class=default|owner=p1|"
             "owner_client=client-1|owner_cred=key_1|program_id=program-a|renewed_at=%lld|"
             "request_id=r1|sid=inst-1|state=released|target_id=target_01|"
             "target_namespace=starintel-target|tenant_id=tenant-main|token=%lld|trace_id=trace-a|"
             "ttl_ms=20000|workflow_name=default",
             at, ended, vk_int(vk_lease(a), "expires_at"), lid,
             vk_int(vk_lease(a), "maximum_lifetime_ms"), at, token);
    assert_string_equal(got, want);
    freeReplyObject(h);
    /* the identity keeps its counter */
    h = vk_cmd(s, "HMGET lease:{t}:id:%s v epoch seq state",
               "[\"v1\",\"tenant-main\",\"program-a\",\"starintel-target\",\"target_01\","
               "\"usernamegen\",\"default\",\"default\"]");
    assert_string_equal(h->element[0]->str, "1");
    assert_non_null(h->element[1]->str);
    assert_string_equal(h->element[2]->str, "1");
    assert_string_equal(h->element[3]->str, "free");
    freeReplyObject(h);
    freeReplyObject(r);

    /* a revocation: high priority, its reason and incident */
    redisReply *b = acquire(s, "r3", "target_01", 0);
    json_t *rv = admin_req("v1", 'c', vk_str(vk_lease(b), "lease_id"),
                           vk_int(vk_lease(b), "fencing_token"), "compromised host");
    json_object_set_new(rv, "incident_id", json_string("inc-7"));
    r = vk_fcall(s, "revoke", rv);
    vk_assert_code(r, "lease_revoked");
    last_event(s, got, sizeof got);
    snprintf(want, sizeof want,
             "event_type=target_lease_revoke|occurred_at_ms=%lld|code=lease_revoked|"
             "decision=allow|backend_health=ok|source=function|principal_id=admin|"
             "client_id=client-1|credential_id=key_1|request_id=v1|priority=high|"
             "tenant_id=tenant-main|program_id=program-a|target_namespace=starintel-target|"
             "target_id=target_01|actor_name=usernamegen|workflow_name=default|"
             "operation_class=default|lease_id=%s|fencing_token=%lld|previous_state=active|"
             "resulting_state=revoked|service_instance_id=inst-1|execution_id=exec-1|"
             "job_id=job-1|effective_ttl_ms=30000|reason=compromised host|incident_id=inc-7",
             vk_int(vk_lease(r), "ended_at"), vk_str(vk_lease(b), "lease_id"),
             vk_int(vk_lease(b), "fencing_token"));
    assert_string_equal(got, want);
    freeReplyObject(r);
    freeReplyObject(b);
    freeReplyObject(a);
}

static void inspect_never_crosses_scope(void **state)
{
    vk_server_t *s = *state;
    redisReply *a = acquire(s, "r1", "target_01", 0);
    const char *lid = vk_str(vk_lease(a), "lease_id");
    const char *scopes[][3] = {
        {"tenant-other", "*", "*"},
        {"tenant-main", "program-b", "*"},
        {"tenant-main", "program-a", "someone-else"},
    };
    for (size_t i = 0; i < 3; i++) {
        for (int by_id = 0; by_id < 2; by_id++) {
            json_t *q = vk_call("p1", "q", 'q');
            json_object_set_new(q, "scope",
                                json_pack("{s:s, s:s, s:[s]}", "tenant_id", scopes[i][0],
                                          "program_id", scopes[i][1], "actor_names", scopes[i][2]));
            if (by_id)
                json_object_set_new(q, "lease_id", json_string(lid));
            else
                json_object_set_new(q, "lock_identity", vk_identity("target_01"));
            redisReply *r = vk_fcall(s, "inspect", q);
            vk_assert_code(r, "lease_not_found");
            assert_null(vk_lease(r));
            freeReplyObject(r);
        }
    }
    json_t *q = vk_call("p1", "q", 'q');
    json_object_set_new(q, "scope",
                        json_pack("{s:s, s:s, s:[s]}", "tenant_id", "tenant-main", "program_id",
                                  "program-a", "actor_names", "usernamegen"));
    json_object_set_new(q, "lock_identity", vk_identity("target_01"));
    redisReply *r = vk_fcall(s, "inspect", q);
    vk_assert_code(r, "lease_inspected");
    assert_string_equal(vk_str(vk_lease(r), "lease_id"), lid);
    freeReplyObject(r);
    freeReplyObject(a);
}

static json_t *fence_req(const char *lid, long long token)
{
    json_t *o = vk_call("p1", "fc", 'a');
    json_object_set_new(o, "lock_identity", vk_identity("target_01"));
    json_object_set_new(o, "lease_id", json_string(lid));
    json_object_set_new(o, "fencing_token", json_integer(token));
    return o;
}

static void fence_check_accepts_only_the_live_lease(void **state)
{
    vk_server_t *s = *state;
    /* 1 s, not 50 ms: it must still be live at the first check, and under
     * a sanitizer beside other tests more than 50 ms passed before it (an
     * ASan run answered lease_lost there) */
    redisReply *a = acquire(s, "r1", "target_01", 1000);
    const char *lid = vk_str(vk_lease(a), "lease_id");
    long long token = vk_int(vk_lease(a), "fencing_token");
    redisReply *r = vk_fcall(s, "fence_check", fence_req(lid, token));
    vk_assert_code(r, "lease_inspected");
    assert_int_equal(vk_int(r, "expires_at"), vk_int(vk_lease(a), "expires_at"));
    freeReplyObject(r);
    redisReply *hw = vk_cmd(s, "HGET %s hw",
                            "lease:{t}:id:[\"v1\",\"tenant-main\",\"program-a\",\"starintel-"
                            "target\",\"target_01\",\"usernamegen\",\"default\",\"default\"]");
    assert_int_equal(hw->type, REDIS_REPLY_STRING);
    assert_int_equal(atoll(hw->str), token); /* recorded as accepted */
    freeReplyObject(hw);

    sleep_ms(1100); /* past its expiry, by the server's TIME too */
    r = vk_fcall(s, "fence_check", fence_req(lid, token));
    vk_assert_code(r, "lease_lost");
    assert_string_equal(vk_str(r, "reason"), "fence_lost");
    freeReplyObject(r);

    redisReply *b = acquire(s, "r2", "target_01", 0);
    r = vk_fcall(s, "fence_check", fence_req(lid, token)); /* the old holder */
    vk_assert_code(r, "lease_lost");
    freeReplyObject(r);
    r = vk_fcall(s, "fence_check",
                 fence_req(vk_str(vk_lease(b), "lease_id"), vk_int(vk_lease(b), "fencing_token")));
    vk_assert_code(r, "lease_inspected");
    freeReplyObject(r);
    /* below the token now accepted: stale (LS011), as lease.fence_check
     * answers it whether or not the lease is also gone */
    r = vk_fcall(s, "fence_check", fence_req(lid, token));
    vk_assert_code(r, "lease_lost");
    assert_string_equal(vk_str(r, "reason"), "fence_stale_token");
    freeReplyObject(r);
    freeReplyObject(b);
    freeReplyObject(a);
}

/* A fenced commit of target_01's lease (lid, token) by p1, execution exec-1. */
static json_t *commit_req(const char *rid, char dg, const char *lid, long long token,
                          json_t *writes)
{
    json_t *o = vk_call("p1", rid, dg);
    json_object_set_new(o, "lock_identity", vk_identity("target_01"));
    json_object_set_new(o, "lease_id", json_string(lid));
    json_object_set_new(o, "fencing_token", json_integer(token));
    json_object_set_new(o, "execution_id", json_string("exec-1"));
    json_object_set_new(o, "writes", writes);
    return o;
}

/* One document write, its body as JSON text. */
static json_t *doc_write(const char *key, json_int_t expected, const char *body)
{
    return json_pack("{s:s, s:s, s:I, s:s}", "kind", "document", "key", key, "expected_revision",
                     expected, "body_json", body);
}

/* How many fenced documents the namespace holds. */
static size_t documents(vk_server_t *s)
{
    redisReply *r = vk_cmd(s, "KEYS lease:{t}:d:*");
    size_t n = r->elements;
    freeReplyObject(r);
    return n;
}

/* lease._bad_writes' fields, the outbox refused, every revision compared
 * before the first write, the stored answer replayed, and the incarnation
 * check: nothing is written by a commit that is not accepted. */
static void fenced_commit_decides_before_writing(void **state)
{
    vk_server_t *s = *state;
    redisReply *a = acquire(s, "r1", "target_01", 0);
    const char *lid = vk_str(vk_lease(a), "lease_id");
    long long token = vk_int(vk_lease(a), "fencing_token");
    const struct {
        json_t *writes;
        const char *field;
    } bad[] = {
        {json_array(), "writes"},
        {json_pack("[o, o]", doc_write("doc-1", 0, "{}"), doc_write("doc-1", 0, "{}")),
         "writes[1].key"},
        {json_pack("[{s:s}]", "kind", "file"), "writes[0].kind"},
        {json_pack("[o]", doc_write("a b", 0, "{}")), "writes[0].key"},
        {json_pack("[o]", doc_write("doc-1", -1, "{}")), "writes[0].expected_revision"},
        {json_pack("[o]", doc_write("doc-1", 0, "[1]")), "writes[0].body"},
        {json_pack("[{s:s, s:s, s:s}]", "kind", "publication", "topic", "", "payload_json", "{}"),
         "writes[0].topic"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        redisReply *r =
            vk_fcall(s, "fenced_commit", commit_req("c0", 'b', lid, token, bad[i].writes));
        vk_assert_code(r, "invalid_lease_request");
        assert_string_equal(vk_str(r, "field"), bad[i].field);
        freeReplyObject(r);
    }
    /* a publication: the outbox is PostgreSQL's, the documents beside it
     * are not written either */
    redisReply *r = vk_fcall(
        s, "fenced_commit",
        commit_req("c1", 'c', lid, token,
                   json_pack("[o, {s:s, s:s, s:s}]", doc_write("doc-1", 0, "{}"), "kind",
                             "publication", "topic", "results", "payload_json", "{\"n\":1}")));
    vk_assert_code(r, "lease_backend_unavailable");
    assert_string_equal(vk_str(r, "reason"), "outbox_requires_postgres");
    freeReplyObject(r);
    assert_int_equal(documents(s), 0);

    r = vk_fcall(s, "fenced_commit",
                 commit_req("c2", 'd', lid, token,
                            json_pack("[o, o]", doc_write("doc-1", 0, "{\"n\": 1.50}"),
                                      doc_write("doc-2", 0, "{}"))));
    vk_assert_code(r, "commit_accepted");
    assert_int_equal(vk_int(r, "fencing_token"), token);
    assert_int_equal(vk_int(r, "replayed"), 0);
    const redisReply *results = NULL;
    for (size_t i = 0; i + 1 < r->elements; i += 2)
        if (strcmp(r->element[i]->str, "results") == 0)
            results = r->element[i + 1];
    assert_non_null(results);
    assert_int_equal(results->elements, 2);
    assert_int_equal(vk_int(results->element[0], "revision"), 1);
    assert_string_equal(vk_str(results->element[1], "key"), "doc-2");
    freeReplyObject(r);
    assert_int_equal(documents(s), 2);
    /* the body as given, byte for byte */
    r = vk_cmd(s, "HGET lease:{t}:d:[\"v1\",\"tenant-main\",\"program-a\",\"starintel-target\","
                  "\"target_01\",\"usernamegen\",\"default\",\"default\"]:doc-1 body");
    assert_string_equal(r->str, "{\"n\": 1.50}");
    freeReplyObject(r);

    /* doc-3 is new, doc-1 is at revision 1: the conflict writes nothing */
    r = vk_fcall(
        s, "fenced_commit",
        commit_req("c3", 'e', lid, token,
                   json_pack("[o, o]", doc_write("doc-3", 0, "{}"), doc_write("doc-1", 0, "{}"))));
    vk_assert_code(r, "write_conflict");
    assert_string_equal(vk_str(r, "field"), "writes[1].expected_revision");
    assert_int_equal(vk_int(r, "current_revision"), 1);
    freeReplyObject(r);
    assert_int_equal(documents(s), 2);

    /* the stored answer, not a conflict with its own revisions */
    r = vk_fcall(s, "fenced_commit",
                 commit_req("c2", 'd', lid, token,
                            json_pack("[o, o]", doc_write("doc-1", 0, "{\"n\": 1.50}"),
                                      doc_write("doc-2", 0, "{}"))));
    vk_assert_code(r, "commit_accepted");
    assert_int_equal(vk_int(r, "replayed"), 1);
    freeReplyObject(r);

    /* a restart: sealed before anything is written */
    assert_true(vk_restart(s, NULL));
    r = vk_fcall(s, "fenced_commit",
                 commit_req("c4", 'f', lid, token, json_pack("[o]", doc_write("doc-4", 0, "{}"))));
    vk_assert_code(r, "lease_backend_unavailable");
    assert_string_equal(vk_str(r, "reason"), "namespace_sealed");
    freeReplyObject(r);
    assert_int_equal(documents(s), 2);
    freeReplyObject(a);
}

#define TARGET_01_KEY                                                                              \
    "lease:{t}:id:[\"v1\",\"tenant-main\",\"program-a\",\"starintel-target\",\"target_01\","       \
    "\"usernamegen\",\"default\",\"default\"]"

/* The sorted member names of hash key, space-separated (heap). */
static char *hash_members(vk_server_t *s, const char *key)
{
    redisReply *r = vk_cmd(s, "EVAL %s 1 %s",
                           "local f = redis.call('HKEYS', KEYS[1]) table.sort(f) "
                           "return table.concat(f, ' ')",
                           key);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    char *out = strdup(r->str);
    freeReplyObject(r);
    return out;
}

/* An idempotency record is one string with its retention: the digest, the
 * lease id, NUL, the stored answer. A record an earlier build wrote (a hash
 * of d, r and lid) still replays, and still refuses another digest; a
 * string that is not a record fails closed. */
static void idempotency_records_of_either_form_replay(void **state)
{
    vk_server_t *s = *state;
    redisReply *a = acquire(s, "r1", "target_01", 0);
    vk_assert_code(a, "lease_acquired");
    const char *lid = vk_str(vk_lease(a), "lease_id");
    redisReply *keys = vk_cmd(s, "KEYS lease:{t}:i:acquire:p1:r1:*");
    assert_int_equal(keys->elements, 1);
    const char *key = keys->element[0]->str;
    redisReply *r = vk_cmd(s, "TYPE %s", key);
    assert_string_equal(r->str, "string");
    freeReplyObject(r);
    r = vk_cmd(s, "PTTL %s", key);
    assert_true(r->integer > 0 && r->integer <= 86400000);
    freeReplyObject(r);
    r = vk_cmd(s, "GET %s", key);
    assert_true(r->len > 64 + strlen(lid) + 1);
    assert_memory_equal(r->str + 64, lid, strlen(lid));
    assert_int_equal(r->str[64 + strlen(lid)], '\0');
    assert_int_equal(r->str[64 + strlen(lid) + 1], 1); /* the NUL-joined answer */

    /* the same record as an earlier build wrote it */
    redisReply *w = vk_cmd(s, "DEL %s", key);
    freeReplyObject(w);
    w = vk_cmd(s, "HSET %s d %b r %b lid %s", key, r->str, (size_t)64,
               r->str + 64 + strlen(lid) + 1, r->len - 64 - strlen(lid) - 1, lid);
    assert_int_equal(w->integer, 3);
    freeReplyObject(w);
    w = vk_cmd(s, "PEXPIRE %s 60000", key);
    freeReplyObject(w);
    freeReplyObject(r);
    redisReply *b = acquire(s, "r1", "target_01", 0);
    vk_assert_code(b, "lease_acquired");
    assert_string_equal(vk_str(vk_lease(b), "lease_id"), lid);
    assert_int_equal(vk_int(vk_lease(b), "fencing_token"), 1);
    assert_int_equal(vk_int(b, "replayed"), 1);
    freeReplyObject(b);
    b = vk_fcall(s, "acquire", vk_acquire_req("p1", "r1", '0', "target_01", "inst-1", 0));
    vk_assert_code(b, "idempotency_conflict");
    freeReplyObject(b);

    /* a string that is not a record: fails closed, takes nothing */
    w = vk_cmd(s, "DEL %s", key);
    freeReplyObject(w);
    w = vk_cmd(s, "SET %s %s", key, "not a record");
    freeReplyObject(w);
    b = acquire(s, "r1", "target_01", 0);
    vk_assert_code(b, "lease_backend_unavailable");
    assert_string_equal(vk_str(b, "reason"), "corrupt_record");
    freeReplyObject(b);
    r = vk_cmd(s, "HGET %s token", TARGET_01_KEY);
    assert_string_equal(r->str, "1");
    freeReplyObject(r);
    freeReplyObject(keys);
    freeReplyObject(a);
}

/* A mutation's audit entry is stored packed: its values in a fixed order
 * joined by NUL in the one field "m" (docs/backends.md "Audit events").
 * One whose value holds a NUL keeps one field a pair, and so do the
 * service's events and an entry an earlier build wrote. The export
 * (audit_read) answers every form as the same name/value pairs. */
static void audit_entries_of_either_form_export_alike(void **state)
{
    vk_server_t *s = *state;
    redisReply *a = acquire(s, "r1", "target_01", 0);
    vk_assert_code(a, "lease_acquired");
    const char *lid = vk_str(vk_lease(a), "lease_id");
    redisReply *raw = vk_cmd(s, "XREVRANGE lease:{t}:audit + - COUNT 1");
    assert_int_equal(raw->elements, 1);
    const redisReply *f = raw->element[0]->element[1];
    assert_int_equal(f->elements, 2);
    assert_string_equal(f->element[0]->str, "m");
    static const char head[] = "target_lease_acquire\0";
    assert_true(f->element[1]->len > sizeof head);
    assert_memory_equal(f->element[1]->str, head, sizeof head - 1);
    assert_non_null(memmem(f->element[1]->str, f->element[1]->len, lid, strlen(lid)));
    freeReplyObject(raw);

    /* a renewal by a principal whose client id holds a NUL: pairs */
    json_t *q = vk_owner_req("p1", "n1", 'c', "target_01", lid, 1, "inst-1");
    json_object_set_new(json_object_get(q, "principal"), "client_id", json_stringn("c\0d", 3));
    redisReply *r = vk_fcall(s, "renew", q);
    vk_assert_code(r, "lease_renewed");
    freeReplyObject(r);
    raw = vk_cmd(s, "XREVRANGE lease:{t}:audit + - COUNT 1");
    f = raw->element[0]->element[1];
    assert_true(f->elements > 2);
    assert_string_equal(vk_str(f, "event_type"), "target_lease_renew");
    freeReplyObject(raw);
    /* the service's event: pairs */
    r = vk_cmd(s, "FCALL leased_v1_record_audit 1 " VK_NS_KEY " %s",
               "{\"events\":[{\"event_type\":\"target_lease_inspect\","
               "\"code\":\"lease_inspected\",\"reason\":\"why\"}]}");
    vk_assert_code(r, "audit_recorded");
    freeReplyObject(r);
    /* an entry as a build before library version 5 wrote it */
    r = vk_cmd(s, "XADD lease:{t}:audit * event_type target_lease_release code lease_released");
    freeReplyObject(r);

    r = vk_fcall(s, "audit_read", json_pack("{s:i}", "count", 10));
    assert_string_equal(r->element[0]->str, "entries");
    const redisReply *e = r->element[1];
    assert_int_equal(e->elements, 4);
    const redisReply *packed = e->element[0]->element[1];
    assert_string_equal(vk_str(packed, "event_type"), "target_lease_acquire");
    assert_string_equal(vk_str(packed, "code"), "lease_acquired");
    assert_string_equal(vk_str(packed, "decision"), "allow");
    assert_string_equal(vk_str(packed, "principal_id"), "p1");
    assert_string_equal(vk_str(packed, "target_id"), "target_01");
    assert_string_equal(vk_str(packed, "lease_id"), lid);
    assert_string_equal(vk_str(packed, "fencing_token"), "1");
    assert_string_equal(vk_str(packed, "previous_state"), "none");
    assert_string_equal(vk_str(packed, "resulting_state"), "active");
    assert_null(vk_str(packed, "incident_id")); /* absent: left out */
    assert_int_equal(packed->elements % 2, 0);
    const redisReply *nul = e->element[1]->element[1];
    assert_string_equal(vk_str(nul, "event_type"), "target_lease_renew");
    const redisReply *client = NULL;
    for (size_t i = 0; i + 1 < nul->elements; i += 2)
        if (strcmp(nul->element[i]->str, "client_id") == 0)
            client = nul->element[i + 1];
    assert_non_null(client);
    assert_int_equal(client->len, 3);
    assert_memory_equal(client->str, "c\0d", 3);
    assert_string_equal(vk_str(e->element[2]->element[1], "reason"), "why");
    const redisReply *old = e->element[3]->element[1];
    assert_int_equal(old->elements, 4);
    assert_string_equal(vk_str(old, "event_type"), "target_lease_release");
    assert_string_equal(vk_str(old, "code"), "lease_released");
    freeReplyObject(r);
    freeReplyObject(a);
}

/* A free identity's record holds its counter and nothing of the lease that
 * ended (it is kept forever; the lease is in its history record), and the
 * next acquisition counts on from it. A free record an earlier build left
 * (every member of its last lease kept) counts on the same way. */
static void free_identity_keeps_only_its_counter(void **state)
{
    vk_server_t *s = *state;
    redisReply *a = acquire(s, "r1", "target_01", 0);
    vk_assert_code(a, "lease_acquired");
    const char *lid = vk_str(vk_lease(a), "lease_id");
    redisReply *x =
        vk_fcall(s, "release", vk_owner_req("p1", "x1", 'c', "target_01", lid, 1, "inst-1"));
    vk_assert_code(x, "lease_released");
    freeReplyObject(x);
    char *members = hash_members(s, TARGET_01_KEY);
    assert_string_equal(members, "c epoch seq state v");
    free(members);
    redisReply *r = vk_cmd(s, "HMGET %s state seq", TARGET_01_KEY);
    assert_string_equal(r->element[0]->str, "free");
    assert_string_equal(r->element[1]->str, "1");
    freeReplyObject(r);
    char hist[128];
    snprintf(hist, sizeof hist, "lease:{t}:h:%s", lid);
    members = hash_members(s, hist);
    assert_string_equal(members,
                        "acquired_at actor_name c end_reason ended_at execution_id expires_at "
                        "incident_id job_id lease_id maxlife_ms metadata operation_class owner "
                        "owner_client owner_cred program_id renewed_at request_id sid state "
                        "target_id target_namespace tenant_id token trace_id ttl_ms workflow_name");
    free(members);

    redisReply *b = acquire(s, "r2", "target_01", 0);
    vk_assert_code(b, "lease_acquired");
    assert_int_equal(vk_int(vk_lease(b), "fencing_token"), 2);
    const char *lid2 = vk_str(vk_lease(b), "lease_id");
    x = vk_fcall(s, "release", vk_owner_req("p1", "x2", 'c', "target_01", lid2, 2, "inst-1"));
    vk_assert_code(x, "lease_released");
    freeReplyObject(x);

    /* an earlier build's free record: the lease's members kept beside the
     * counter (copied back from the history record) */
    snprintf(hist, sizeof hist, "lease:{t}:h:%s", lid2);
    r = vk_cmd(
        s, "EVAL %s 2 %s %s",
        "local h = redis.call('HGETALL', KEYS[2]) "
        "for i = 1, #h, 2 do "
        "  if h[i] ~= 'state' and h[i] ~= 'ended_at' and h[i] ~= 'end_reason' "
        "     and h[i] ~= 'incident_id' then redis.call('HSET', KEYS[1], h[i], h[i + 1]) end "
        "end return redis.call('HLEN', KEYS[1])",
        TARGET_01_KEY, hist);
    assert_int_equal(r->integer, 28);
    freeReplyObject(r);
    redisReply *c = acquire(s, "r3", "target_01", 0);
    vk_assert_code(c, "lease_acquired");
    assert_int_equal(vk_int(vk_lease(c), "fencing_token"), 3);
    freeReplyObject(c);
    freeReplyObject(b);
    freeReplyObject(a);
}

/* An end of a lease writes the identity's counter again from the record it
 * read: a live record without its epoch, which rebind revokes like every
 * live lease, is still refused afterwards (corrupt_record), never given a
 * counter it did not have, and rebind completes. */
static void rebind_leaves_a_corrupt_record_corrupt(void **state)
{
    vk_server_t *s = *state;
    redisReply *a = acquire(s, "r1", "target_01", 0);
    vk_assert_code(a, "lease_acquired");
    freeReplyObject(a);
    redisReply *r = vk_cmd(s, "HDEL %s epoch", TARGET_01_KEY);
    assert_int_equal(r->integer, 1);
    freeReplyObject(r);
    r = vk_cmd(s, "FCALL leased_v1_rebind 1 %s %s", VK_NS_KEY, "{\"reason\":\"drill\"}");
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(vk_int(r, "leases_revoked"), 1);
    freeReplyObject(r);
    r = vk_cmd(s, "HMGET %s state epoch seq", TARGET_01_KEY);
    assert_string_equal(r->element[0]->str, "free");
    assert_int_equal(r->element[1]->type, REDIS_REPLY_NIL);
    assert_string_equal(r->element[2]->str, "1");
    freeReplyObject(r);
    r = acquire(s, "r2", "target_01", 0);
    vk_assert_code(r, "lease_backend_unavailable");
    assert_string_equal(vk_str(r, "reason"), "corrupt_record");
    freeReplyObject(r);
}

static void corrupt_record_fails_closed(void **state)
{
    vk_server_t *s = *state;
    redisReply *a = acquire(s, "r1", "target_01", 50);
    freeReplyObject(a);
    const char *key = "lease:{t}:id:[\"v1\",\"tenant-main\",\"program-a\",\"starintel-target\","
                      "\"target_01\",\"usernamegen\",\"default\",\"default\"]";
    redisReply *r = vk_cmd(s, "HSET %s c %s", key, "[\"v1\",\"someone-else\"]");
    freeReplyObject(r);
    sleep_ms(300);
    r = acquire(s, "r2", "target_01", 0);
    vk_assert_code(r, "lease_backend_unavailable");
    assert_string_equal(vk_str(r, "reason"), "corrupt_record");
    freeReplyObject(r);
    /* nothing was taken over */
    r = vk_cmd(s, "HGET %s token", key);
    assert_string_equal(r->str, "1");
    freeReplyObject(r);
}

/* The server restarts (kill -9, AOF replayed, a new run_id): every write
 * function answers sealed before writing anything; rebind raises the
 * epoch, revokes the old incarnation's leases, and tokens continue above
 * everything given before. */
static void restart_seals_and_rebind_never_regresses(void **state)
{
    vk_server_t *s = *state;
    long long highest = 0;
    char lid[64];
    for (int i = 0; i < 5; i++) {
        char rid[16];
        snprintf(rid, sizeof rid, "r%d", i);
        redisReply *a = acquire(s, rid, "target_01", 0);
        vk_assert_code(a, "lease_acquired");
        highest = vk_int(vk_lease(a), "fencing_token");
        snprintf(lid, sizeof lid, "%s", vk_str(vk_lease(a), "lease_id"));
        freeReplyObject(a);
        if (i < 4) {
            redisReply *x = vk_fcall(
                s, "release", vk_owner_req("p1", rid, '9', "target_01", lid, highest, "inst-1"));
            vk_assert_code(x, "lease_released");
            freeReplyObject(x);
        }
    }
    assert_int_equal(highest, 5);
    assert_true(vk_restart(s, NULL));

    redisReply *before = vk_cmd(s, "HGET lease:{t}:ns lid_seq");
    long long lid_seq = atoll(before->str);
    freeReplyObject(before);
    /* the library survives in the AOF; the lease survives, but nobody may decide */
    redisReply *r = acquire(s, "s1", "target_02", 0);
    vk_assert_code(r, "lease_backend_unavailable");
    assert_string_equal(vk_str(r, "reason"), "namespace_sealed");
    freeReplyObject(r);
    r = vk_fcall(s, "renew", vk_owner_req("p1", "s2", 'b', "target_01", lid, highest, "inst-1"));
    assert_string_equal(vk_str(r, "reason"), "namespace_sealed");
    freeReplyObject(r);
    r = vk_fcall(s, "release", vk_owner_req("p1", "s3", 'c', "target_01", lid, highest, "inst-1"));
    assert_string_equal(vk_str(r, "reason"), "namespace_sealed");
    freeReplyObject(r);
    r = vk_fcall(s, "fence_check", fence_req(lid, highest));
    assert_string_equal(vk_str(r, "reason"), "namespace_sealed");
    freeReplyObject(r);
    r = vk_cmd(s, "FCALL leased_v1_health 1 %s {}", VK_NS_KEY);
    assert_int_equal(vk_int(r, "sealed"), 1);
    freeReplyObject(r);
    /* nothing but the seal was written */
    r = vk_cmd(s, "HGET lease:{t}:ns lid_seq");
    assert_int_equal(atoll(r->str), lid_seq);
    freeReplyObject(r);
    r = vk_cmd(s, "EXISTS lease:{t}:id:[\"v1\",\"tenant-main\",\"program-a\",\"starintel-target\","
                  "\"target_02\",\"usernamegen\",\"default\",\"default\"]");
    assert_int_equal(r->integer, 0);
    freeReplyObject(r);
    /* bind does not unseal: that is rebind's */
    r = vk_cmd(s, "FCALL leased_v1_bind 1 %s {}", VK_NS_KEY);
    assert_non_null(vk_str(r, "error"));
    freeReplyObject(r);

    r = vk_cmd(s, "FCALL leased_v1_rebind 1 %s %s", VK_NS_KEY, "{\"reason\":\"drill\"}");
    assert_int_equal(vk_int(r, "epoch"), 1);
    assert_int_equal(vk_int(r, "leases_revoked"), 1);
    freeReplyObject(r);

    /* the old incarnation's lease was revoked */
    r = vk_fcall(s, "renew", vk_owner_req("p1", "s4", 'd', "target_01", lid, highest, "inst-1"));
    vk_assert_code(r, "lease_lost");
    freeReplyObject(r);
    /* an identity used before and one never used: both above every old token */
    r = acquire(s, "s5", "target_01", 0);
    vk_assert_code(r, "lease_acquired");
    assert_int_equal(vk_int(vk_lease(r), "fencing_token"), TOKEN_EPOCH_SPAN + 1);
    freeReplyObject(r);
    r = acquire(s, "s6", "target_02", 0);
    vk_assert_code(r, "lease_acquired");
    assert_int_equal(vk_int(vk_lease(r), "fencing_token"), TOKEN_EPOCH_SPAN + 1);
    freeReplyObject(r);
}

/* A restart from an older copy of the AOF (a restore, or a replica that
 * missed the last writes): tokens given after the copy are lost with it.
 * Sealed; after rebind every token is greater than all tokens given,
 * those lost included. */
static void older_aof_copy_seals_and_rebind_is_above_lost_tokens(void **state)
{
    vk_server_t *s = *state;
    long long token = 0;
    const char *copy = NULL;
    for (int i = 0; i < 6; i++) {
        if (i == 2)
            copy = vk_copy_aof(s, "aof-at-2");
        char rid[16];
        snprintf(rid, sizeof rid, "r%d", i);
        redisReply *a = acquire(s, rid, "target_01", 0);
        vk_assert_code(a, "lease_acquired");
        token = vk_int(vk_lease(a), "fencing_token");
        redisReply *x = vk_fcall(s, "release",
                                 vk_owner_req("p1", rid, '9', "target_01",
                                              vk_str(vk_lease(a), "lease_id"), token, "inst-1"));
        vk_assert_code(x, "lease_released");
        freeReplyObject(x);
        freeReplyObject(a);
    }
    assert_non_null(copy);
    assert_int_equal(token, 6);
    char saved[400];
    snprintf(saved, sizeof saved, "%s", copy);
    assert_true(vk_restart(s, saved));

    /* the restored data ends at token 2 */
    redisReply *r = vk_cmd(s, "HGET lease:{t}:id:[\"v1\",\"tenant-main\",\"program-a\","
                              "\"starintel-target\",\"target_01\",\"usernamegen\",\"default\","
                              "\"default\"] seq");
    assert_string_equal(r->str, "2");
    freeReplyObject(r);
    r = acquire(s, "t1", "target_01", 0);
    vk_assert_code(r, "lease_backend_unavailable");
    assert_string_equal(vk_str(r, "reason"), "namespace_sealed");
    freeReplyObject(r);

    r = vk_cmd(s, "FCALL leased_v1_rebind 1 %s %s", VK_NS_KEY, "{\"reason\":\"restore\"}");
    assert_int_equal(vk_int(r, "epoch"), 1);
    freeReplyObject(r);
    r = acquire(s, "t2", "target_01", 0);
    vk_assert_code(r, "lease_acquired");
    assert_true(vk_int(vk_lease(r), "fencing_token") > token);
    freeReplyObject(r);

    /* an operator who knows a higher token (from a copy older than the last
     * rebind) names it: the epoch goes above it */
    r = vk_cmd(s, "FCALL leased_v1_rebind 1 %s %s", VK_NS_KEY,
               "{\"reason\":\"older copy\",\"floor_token\":30064771077}"); /* 7 * 2^32 + 5 */
    assert_int_equal(vk_int(r, "epoch"), 8);
    freeReplyObject(r);
    r = acquire(s, "t3", "target_01", 0);
    vk_assert_code(r, "lease_acquired");
    assert_int_equal(vk_int(vk_lease(r), "fencing_token"), 8 * TOKEN_EPOCH_SPAN + 1);
    freeReplyObject(r);
}

/* A full server: the write function is refused whole (deny-oom), nothing
 * half-written; reads still answer. */
static void full_server_writes_nothing(void **state)
{
    vk_server_t *s = *state;
    redisReply *r = vk_cmd(s, "CONFIG SET maxmemory 1");
    freeReplyObject(r);
    r = acquire(s, "r1", "target_01", 0);
    assert_int_equal(r->type, REDIS_REPLY_ERROR);
    assert_true(strncmp(r->str, "OOM", 3) == 0);
    freeReplyObject(r);
    r = vk_cmd(s, "FCALL leased_v1_health 1 %s {}", VK_NS_KEY);
    assert_int_equal(vk_int(r, "active_leases"), 0);
    freeReplyObject(r);
    r = vk_cmd(s, "CONFIG SET maxmemory 0");
    freeReplyObject(r);
    r = vk_cmd(s, "EXISTS lease:{t}:act");
    assert_int_equal(r->integer, 0);
    freeReplyObject(r);
    r = acquire(s, "r1", "target_01", 0);
    vk_assert_code(r, "lease_acquired");
    assert_int_equal(vk_int(vk_lease(r), "fencing_token"), 1);
    freeReplyObject(r);
}

/* The expiry step (lease.expire_due): a lease nobody takes goes to
 * history once it expired grace_ms ago, oldest first, found through the
 * expiry index; a renewed one does not; its counter stays. */
static void expire_due_moves_leases_nobody_takes(void **state)
{
    vk_server_t *s = *state;
    redisReply *b = acquire(s, "r2", "target_02", 30000);
    vk_assert_code(b, "lease_acquired");
    const char *due = "{\"batch\":10,\"grace_ms\":0}";
    /* nothing expired yet: asked before the 50 ms lease exists, since on a
     * loaded machine (a sanitizer build beside other tests) 50 ms can pass
     * between its acquisition and the next call */
    redisReply *r = vk_cmd(s, "FCALL leased_v1_expire_due 1 %s %s", VK_NS_KEY, due);
    assert_int_equal(vk_int(r, "expired"), 0);
    freeReplyObject(r);
    redisReply *a = acquire(s, "r1", "target_01", 50);
    vk_assert_code(a, "lease_acquired");
    sleep_ms(300);
    /* a grace longer than the time since the expiry: not yet */
    r = vk_cmd(s, "FCALL leased_v1_expire_due 1 %s %s", VK_NS_KEY,
               "{\"batch\":10,\"grace_ms\":60000}");
    assert_int_equal(vk_int(r, "expired"), 0);
    freeReplyObject(r);
    r = vk_cmd(s, "FCALL leased_v1_expire_due 1 %s %s", VK_NS_KEY, due);
    assert_int_equal(vk_int(r, "ran"), 1);
    assert_int_equal(vk_int(r, "expired"), 1);
    assert_int_equal(vk_int(r, "more"), 0);
    assert_true(vk_int(r, "lag_ms") >= 200);
    freeReplyObject(r);
    /* in history, ended at its expiry; the identity free, out of the live
     * set and the index; target_02 untouched */
    const char *lid = vk_str(vk_lease(a), "lease_id");
    r = vk_cmd(s, "HGET lease:{t}:h:%s state", lid);
    assert_string_equal(r->str, "expired");
    freeReplyObject(r);
    r = vk_cmd(s, "HGET lease:{t}:h:%s ended_at", lid);
    assert_int_equal(atoll(r->str), vk_int(vk_lease(a), "expires_at"));
    freeReplyObject(r);
    r = vk_cmd(s, "SCARD lease:{t}:act");
    assert_int_equal(r->integer, 1);
    freeReplyObject(r);
    r = vk_cmd(s, "ZCARD lease:{t}:exp");
    assert_int_equal(r->integer, 1);
    freeReplyObject(r);
    r = vk_cmd(s, "FCALL leased_v1_expire_due 1 %s %s", VK_NS_KEY, due);
    assert_int_equal(vk_int(r, "expired"), 0);
    freeReplyObject(r);
    /* the counter stays: the next acquisition's token is the next one */
    r = acquire(s, "r3", "target_01", 0);
    vk_assert_code(r, "lease_acquired");
    assert_int_equal(vk_int(vk_lease(r), "fencing_token"), 2);
    assert_string_equal(vk_str(r, "previous_state"), "none");
    freeReplyObject(r);
    /* bad arguments; a sealed namespace: refused, nothing moved */
    r = vk_cmd(s, "FCALL leased_v1_expire_due 1 %s %s", VK_NS_KEY, "{\"batch\":0}");
    assert_non_null(vk_str(r, "error"));
    freeReplyObject(r);
    assert_true(vk_restart(s, NULL));
    r = vk_cmd(s, "FCALL leased_v1_expire_due 1 %s %s", VK_NS_KEY, due);
    assert_string_equal(vk_str(r, "error"), "namespace_sealed");
    freeReplyObject(r);
    freeReplyObject(b);
    freeReplyObject(a);
}

static void unbound_namespace_refuses(void **state)
{
    vk_server_t *s = *state;
    redisReply *r = vk_cmd(s, "DEL lease:{t}:ns");
    freeReplyObject(r);
    /* an empty server (all data lost) must not start tokens again at 1 */
    r = acquire(s, "r1", "target_01", 0);
    vk_assert_code(r, "lease_backend_unavailable");
    assert_string_equal(vk_str(r, "reason"), "namespace_unbound");
    freeReplyObject(r);
    r = vk_cmd(s, "FCALL leased_v1_bind 1 %s %s", VK_NS_KEY, "{\"floor_token\":4294967301}");
    assert_int_equal(vk_int(r, "epoch"), 2);
    freeReplyObject(r);
    r = acquire(s, "r1", "target_01", 0);
    assert_int_equal(vk_int(vk_lease(r), "fencing_token"), 2 * TOKEN_EPOCH_SPAN + 1);
    freeReplyObject(r);
}

/* renew_many / release_many: each item decided as the single function
 * decides it, in order; only the batch's shape refuses it whole. */
static void batches_decide_item_by_item(void **state)
{
    vk_server_t *s = *state;
    redisReply *a = acquire(s, "r1", "target_01", 0);
    redisReply *b =
        vk_fcall(s, "acquire", vk_acquire_req("p1", "r2", 'b', "target_02", "inst-1", 0));
    const char *la = vk_str(vk_lease(a), "lease_id");
    const char *lb = vk_str(vk_lease(b), "lease_id");

    json_t *items = json_array();
    json_array_append_new(items, vk_owner_req("p1", "n1", '1', "target_01", la, 1, "inst-1"));
    json_array_append_new(items, vk_owner_req("p1", "n2", '2', "target_02", lb, 7, "inst-1"));
    json_array_append_new(items, vk_owner_req("p1", "n3", '3', "target_02", lb, 0, "inst-1"));
    json_array_append_new(items, vk_owner_req("p1", "n1", '1', "target_01", la, 1, "inst-1"));
    json_array_append_new(items, vk_owner_req("p1", "n4", 'X', "target_02", lb, 1, "inst-1"));
    redisReply *r = vk_fcall(s, "renew_many", json_pack("{s:o}", "renewals", items));
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    const redisReply *res = r->element[1];
    assert_int_equal(res->elements, 5);
    vk_assert_code(res->element[0], "lease_renewed");
    assert_int_equal(vk_int(res->element[0], "replayed"), 0);
    vk_assert_code(res->element[1], "lease_lost"); /* wrong token */
    vk_assert_code(res->element[2], "invalid_lease_request");
    assert_string_equal(vk_str(res->element[2], "field"), "fencing_token");
    vk_assert_code(res->element[3], "lease_renewed"); /* the first item's request id again */
    assert_int_equal(vk_int(res->element[3], "replayed"), 1);
    vk_assert_code(res->element[4], "lease_backend_unavailable"); /* its digest is malformed */
    freeReplyObject(r);

    /* the shape: 1 to 100 items */
    r = vk_fcall(s, "renew_many", json_pack("{s:[]}", "renewals"));
    vk_assert_code(r, "invalid_lease_request");
    assert_string_equal(vk_str(r, "field"), "renewals");
    freeReplyObject(r);
    items = json_array();
    for (int i = 0; i < 101; i++)
        json_array_append_new(items, vk_owner_req("p1", "z", '1', "target_01", la, 1, "inst-1"));
    r = vk_fcall(s, "release_many", json_pack("{s:o}", "releases", items));
    vk_assert_code(r, "invalid_lease_request");
    assert_string_equal(vk_str(r, "field"), "releases");
    freeReplyObject(r);
    /* nothing of the refused batch was released */
    r = vk_cmd(s, "SCARD lease:{t}:act");
    assert_int_equal(r->integer, 2);
    freeReplyObject(r);

    items = json_array();
    json_array_append_new(items, vk_owner_req("p1", "x1", '4', "target_01", la, 1, "inst-1"));
    json_array_append_new(items, vk_owner_req("p1", "x2", '5', "target_02", lb, 1, "inst-1"));
    json_array_append_new(items, vk_owner_req("p1", "x3", '6', "target_01", la, 1, "inst-1"));
    r = vk_fcall(s, "release_many", json_pack("{s:o}", "releases", items));
    res = r->element[1];
    vk_assert_code(res->element[0], "lease_released");
    vk_assert_code(res->element[1], "lease_released");
    vk_assert_code(res->element[2], "lease_lost"); /* released by the first item */
    freeReplyObject(r);
    r = vk_cmd(s, "SCARD lease:{t}:act");
    assert_int_equal(r->integer, 0);
    freeReplyObject(r);
    freeReplyObject(a);
    freeReplyObject(b);
}

/* ---- leased_v1_combined: pairs op, request JSON in one call ----------- */

#define COMBINED_ITEMS_MAX 64

typedef struct combined_call {
    int n;
    const char *op[COMBINED_ITEMS_MAX];
    char *json[COMBINED_ITEMS_MAX];
} combined_call_t;

static void combined_add(combined_call_t *c, const char *op, json_t *req)
{
    c->op[c->n] = op;
    c->json[c->n] = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    c->n++;
}

static void combined_add_text(combined_call_t *c, const char *op, const char *text)
{
    c->op[c->n] = op;
    c->json[c->n] = strdup(text);
    c->n++;
}

/* FCALL leased_v1_combined 1 ns_key op json ... (the items are freed). */
static redisReply *combined_fcall(vk_server_t *s, const char *ns_key, combined_call_t *c)
{
    const char *argv[4 + 2 * COMBINED_ITEMS_MAX] = {"FCALL", "leased_v1_combined", "1", ns_key};
    int argc = 4;
    for (int i = 0; i < c->n; i++) {
        argv[argc++] = c->op[i];
        argv[argc++] = c->json[i];
    }
    redisReply *r = redisCommandArgv(s->c, argc, argv, NULL);
    assert_non_null(r);
    for (int i = 0; i < c->n; i++)
        free(c->json[i]);
    c->n = 0;
    return r;
}

/* The same items as single calls, one after another, on ns_key: an array
 * reply of their answers, as the combined call gives (caller frees each). */
static void single_calls(vk_server_t *s, const char *ns_key, combined_call_t *c,
                         redisReply **answers)
{
    for (int i = 0; i < c->n; i++) {
        char fn[64];
        snprintf(fn, sizeof fn, "leased_v1_%s", c->op[i]);
        const char *argv[5] = {"FCALL", fn, "1", ns_key, c->json[i]};
        answers[i] = redisCommandArgv(s->c, 5, argv, NULL);
        assert_non_null(answers[i]);
        free(c->json[i]);
    }
    c->n = 0;
}

static const char *ANSWER_FIELDS[] = {"code",          "field",          "reason", "replayed",
                                      "current_state", "previous_state", NULL};
static const char *LEASE_FIELDS_COMPARED[] = {
    "fencing_token", "state", "target_id", "request_id", "ttl_ms", "end_reason", NULL};

/* Two answers agree on everything that does not depend on the time of
 * the call or the namespace (lease ids carry the time). */
static void assert_same_answer(const redisReply *a, const redisReply *b, int item)
{
    char what[96];
    assert_int_equal(a->type, b->type);
    for (const char **f = ANSWER_FIELDS; *f; f++) {
        snprintf(what, sizeof what, "item %d: %s", item, *f);
        const char *sa = vk_str(a, *f), *sb = vk_str(b, *f);
        if (sa || sb) {
            if (!sa || !sb || strcmp(sa, sb) != 0)
                fail_msg("%s: %s vs %s", what, sa ? sa : "-", sb ? sb : "-");
        } else if (vk_int(a, *f) != vk_int(b, *f)) {
            fail_msg("%s: %lld vs %lld", what, vk_int(a, *f), vk_int(b, *f));
        }
    }
    const redisReply *la = vk_lease(a), *lb = vk_lease(b);
    assert_true((la == NULL) == (lb == NULL));
    for (const char **f = LEASE_FIELDS_COMPARED; la && *f; f++) {
        const char *sa = vk_str(la, *f), *sb = vk_str(lb, *f);
        if (sa || sb) {
            if (!sa || !sb || strcmp(sa, sb) != 0)
                fail_msg("item %d: lease.%s: %s vs %s", item, *f, sa ? sa : "-", sb ? sb : "-");
        } else if (vk_int(la, *f) != vk_int(lb, *f)) {
            fail_msg("item %d: lease.%s: %lld vs %lld", item, *f, vk_int(la, *f), vk_int(lb, *f));
        }
    }
}

/* The requests of the comparison, on the namespace whose lease target_01
 * is lid (token 1). */
static void comparison_items(combined_call_t *c, const char *lid)
{
    combined_add(c, "acquire", vk_acquire_req("p1", "r2", 'b', "target_02", "inst-1", 0));
    combined_add(c, "renew", vk_owner_req("p1", "n1", 'c', "target_01", lid, 1, "inst-1"));
    combined_add(c, "acquire", vk_acquire_req("p1", "r3", 'd', "bad/target", "inst-1", 0));
    /* the first item's request again: a replay */
    combined_add(c, "acquire", vk_acquire_req("p1", "r2", 'b', "target_02", "inst-1", 0));
    combined_add(c, "acquire", vk_acquire_req("p2", "r5", 'e', "target_02", "inst-2", 0));
    combined_add(c, "release", vk_owner_req("p1", "x1", 'f', "target_01", lid, 1, "inst-1"));
    combined_add(c, "renew", vk_owner_req("p1", "n2", '1', "target_01", lid, 1, "inst-1"));
    combined_add(c, "acquire", vk_acquire_req("p1", "r8", '2', "target_01", "inst-1", 0));
    combined_add_text(c, "release", "{");
    /* the release's request id with another digest */
    combined_add(c, "release", vk_owner_req("p1", "x1", '3', "target_01", lid, 1, "inst-1"));
}

static long long count_keys(vk_server_t *s, const char *pattern)
{
    redisReply *r = vk_cmd(s, "KEYS %s", pattern);
    long long n = (long long)r->elements;
    freeReplyObject(r);
    return n;
}

static const char *AUDIT_FIELDS[] = {"event_type",   "code",           "fencing_token",
                                     "request_id",   "previous_state", "resulting_state",
                                     "principal_id", "target_id",      NULL};

static void combined_answers_as_sequential_calls(void **state)
{
    vk_server_t *s = *state;
    redisReply *r = vk_cmd(s, "FCALL leased_v1_bind 1 lease:{u}:ns %s",
                           "{\"minimum_ttl_ms\":10,\"default_ttl_ms\":30000}");
    assert_int_equal(vk_int(r, "bound"), 1);
    freeReplyObject(r);
    /* the same lease of target_01 in both namespaces */
    redisReply *held_t = acquire(s, "r1", "target_01", 0);
    json_t *req_u = vk_acquire_req("p1", "r1", 'a', "target_01", "inst-1", 0);
    char *text = json_dumps(req_u, JSON_COMPACT);
    json_decref(req_u);
    const char *argv[5] = {"FCALL", "leased_v1_acquire", "1", "lease:{u}:ns", text};
    redisReply *held_u = redisCommandArgv(s->c, 5, argv, NULL);
    free(text);
    vk_assert_code(held_t, "lease_acquired");
    vk_assert_code(held_u, "lease_acquired");

    combined_call_t c = {0};
    comparison_items(&c, vk_str(vk_lease(held_u), "lease_id"));
    int n = c.n;
    redisReply *singles[COMBINED_ITEMS_MAX];
    single_calls(s, "lease:{u}:ns", &c, singles);
    comparison_items(&c, vk_str(vk_lease(held_t), "lease_id"));
    redisReply *comb = combined_fcall(s, VK_NS_KEY, &c);
    assert_int_equal(comb->type, REDIS_REPLY_ARRAY);
    assert_int_equal(comb->elements, n);
    for (int i = 0; i < n; i++)
        assert_same_answer(comb->element[i], singles[i], i);
    /* what the sequence is: spelled out, not only equal */
    vk_assert_code(comb->element[0], "lease_acquired");
    vk_assert_code(comb->element[1], "lease_renewed");
    vk_assert_code(comb->element[2], "invalid_lease_request");
    vk_assert_code(comb->element[3], "lease_acquired");
    assert_int_equal(vk_int(comb->element[3], "replayed"), 1);
    assert_string_equal(vk_str(vk_lease(comb->element[3]), "lease_id"),
                        vk_str(vk_lease(comb->element[0]), "lease_id"));
    vk_assert_code(comb->element[4], "lease_conflict");
    vk_assert_code(comb->element[5], "lease_released");
    vk_assert_code(comb->element[6], "lease_lost");
    vk_assert_code(comb->element[7], "lease_acquired");
    assert_int_equal(vk_int(vk_lease(comb->element[7]), "fencing_token"), 2);
    vk_assert_code(comb->element[8], "lease_backend_unavailable");
    assert_string_equal(vk_str(comb->element[8], "reason"), "malformed_call");
    vk_assert_code(comb->element[9], "idempotency_conflict");
    /* lease ids: each acquire counted on from the one before (lid_seq) */
    assert_string_not_equal(vk_str(vk_lease(comb->element[0]), "lease_id"),
                            vk_str(vk_lease(comb->element[7]), "lease_id"));

    /* the records: the same counters, idempotency records, live leases */
    redisReply *a = vk_cmd(s, "HGET lease:{t}:ns lid_seq");
    redisReply *b = vk_cmd(s, "HGET lease:{u}:ns lid_seq");
    assert_string_equal(a->str, b->str);
    assert_string_equal(a->str, "3");
    freeReplyObject(a);
    freeReplyObject(b);
    assert_int_equal(count_keys(s, "lease:{t}:i:*"), count_keys(s, "lease:{u}:i:*"));
    assert_int_equal(count_keys(s, "lease:{t}:h:*"), count_keys(s, "lease:{u}:h:*"));
    a = vk_cmd(s, "SMEMBERS lease:{t}:act");
    b = vk_cmd(s, "SMEMBERS lease:{u}:act");
    assert_int_equal(a->elements, b->elements);
    assert_int_equal(a->elements, 2); /* target_01 (again) and target_02 */
    for (size_t i = 0; i < a->elements; i++) {
        redisReply *m = vk_cmd(s, "SISMEMBER lease:{u}:act %s", a->element[i]->str);
        assert_int_equal(m->integer, 1);
        freeReplyObject(m);
    }
    freeReplyObject(a);
    freeReplyObject(b);
    /* the audit entries: the same events, in the same order */
    a = vk_audit(s, "lease:{t}:audit", false);
    b = vk_audit(s, "lease:{u}:audit", false);
    assert_int_equal(a->elements, b->elements);
    assert_int_equal(a->elements, 5); /* 2 acquires, a renewal, a release, an acquire */
    for (size_t i = 0; i < a->elements; i++)
        for (const char **f = AUDIT_FIELDS; *f; f++) {
            const char *sa = vk_str(a->element[i]->element[1], *f);
            const char *sb = vk_str(b->element[i]->element[1], *f);
            if ((sa == NULL) != (sb == NULL) || (sa && strcmp(sa, sb) != 0))
                fail_msg("audit entry %zu: %s: %s vs %s", i, *f, sa ? sa : "-", sb ? sb : "-");
        }
    freeReplyObject(a);
    freeReplyObject(b);
    for (int i = 0; i < n; i++)
        freeReplyObject(singles[i]);
    freeReplyObject(comb);
    freeReplyObject(held_t);
    freeReplyObject(held_u);
}

/* An acquire and a release of its own lease in one call: the release sees
 * the acquire's write. The lease id carries the call's TIME (ms) and the
 * namespace's lid_seq: one release is sent for each millisecond the call
 * may have run at; exactly the right one releases. */
static void combined_acquire_then_release_in_one_call(void **state)
{
    vk_server_t *s = *state;
    redisReply *tr = vk_cmd(s, "TIME");
    long long t0 = atoll(tr->element[0]->str) * 1000 + atoll(tr->element[1]->str) / 1000;
    freeReplyObject(tr);
    combined_call_t c = {0};
    combined_add(&c, "acquire", vk_acquire_req("p1", "r1", 'a', "target_01", "inst-1", 0));
    int candidates = COMBINED_ITEMS_MAX - 1;
    for (int k = 0; k < candidates; k++) {
        char lid[64], rid[16];
        snprintf(lid, sizeof lid, "lease_%012llx%04x%016x", t0 + k, 0, 1);
        snprintf(rid, sizeof rid, "x%d", k);
        combined_add(&c, "release", vk_owner_req("p1", rid, 'b', "target_01", lid, 1, "inst-1"));
    }
    redisReply *r = combined_fcall(s, VK_NS_KEY, &c);
    assert_int_equal(r->elements, COMBINED_ITEMS_MAX);
    vk_assert_code(r->element[0], "lease_acquired");
    const char *lid = vk_str(vk_lease(r->element[0]), "lease_id");
    int released = 0;
    for (int k = 1; k < COMBINED_ITEMS_MAX; k++) {
        const char *code = vk_str(r->element[k], "code");
        if (strcmp(code, "lease_released") == 0) {
            released++;
            assert_string_equal(vk_str(vk_lease(r->element[k]), "lease_id"), lid);
            assert_string_equal(vk_str(r->element[k], "current_state"), "released");
        } else {
            assert_string_equal(code, "lease_lost");
        }
    }
    assert_int_equal(released, 1);
    freeReplyObject(r);
    r = vk_cmd(s, "SCARD lease:{t}:act");
    assert_int_equal(r->integer, 0);
    freeReplyObject(r);
    r = vk_cmd(s, "XLEN lease:{t}:audit");
    assert_int_equal(r->integer, 2);
    freeReplyObject(r);
}

/* A runtime error in one item (a record of the wrong type: WRONGTYPE)
 * answers that item as its own call's error reply maps (unavailable,
 * server_error); the items around it are decided. A malformed call is
 * refused whole. */
static void combined_item_error_spares_the_others(void **state)
{
    vk_server_t *s = *state;
    redisReply *r =
        vk_cmd(s, "SET %s x",
               "lease:{t}:id:[\"v1\",\"tenant-main\",\"program-a\",\"starintel-target\","
               "\"target_09\",\"usernamegen\",\"default\",\"default\"]");
    freeReplyObject(r);
    r = acquire(s, "q1", "target_09", 0);
    assert_int_equal(r->type, REDIS_REPLY_ERROR); /* alone: an error reply */
    freeReplyObject(r);
    combined_call_t c = {0};
    combined_add(&c, "acquire", vk_acquire_req("p1", "r1", 'a', "target_08", "inst-1", 0));
    combined_add(&c, "acquire", vk_acquire_req("p1", "r2", 'b', "target_09", "inst-1", 0));
    combined_add(&c, "acquire", vk_acquire_req("p1", "r3", 'c', "target_07", "inst-1", 0));
    r = combined_fcall(s, VK_NS_KEY, &c);
    assert_int_equal(r->elements, 3);
    vk_assert_code(r->element[0], "lease_acquired");
    vk_assert_code(r->element[1], "lease_backend_unavailable");
    assert_string_equal(vk_str(r->element[1], "reason"), "server_error");
    vk_assert_code(r->element[2], "lease_acquired");
    assert_int_equal(vk_int(vk_lease(r->element[2]), "fencing_token"), 1);
    freeReplyObject(r);

    /* the call's shape: an odd ARGV, an unknown op: refused whole */
    combined_add(&c, "acquire", vk_acquire_req("p1", "r4", 'd', "target_06", "inst-1", 0));
    combined_add(&c, "inspect", vk_acquire_req("p1", "r5", 'e', "target_05", "inst-1", 0));
    r = combined_fcall(s, VK_NS_KEY, &c);
    vk_assert_code(r, "invalid_lease_request");
    assert_string_equal(vk_str(r, "field"), "items");
    freeReplyObject(r);
    r = vk_cmd(s, "FCALL leased_v1_combined 1 %s acquire", VK_NS_KEY);
    vk_assert_code(r, "invalid_lease_request");
    freeReplyObject(r);
    r = vk_cmd(s, "SCARD lease:{t}:act");
    assert_int_equal(r->integer, 2);
    freeReplyObject(r);
}

/* After a restart the first item seals the namespace; every item after it
 * answers namespace_sealed and nothing but the seal is written. */
static void combined_sealed_namespace_writes_nothing(void **state)
{
    vk_server_t *s = *state;
    redisReply *a = acquire(s, "r1", "target_01", 0);
    vk_assert_code(a, "lease_acquired");
    const char *lid = vk_str(vk_lease(a), "lease_id");
    assert_true(vk_restart(s, NULL));
    redisReply *before = vk_cmd(s, "HGET lease:{t}:ns lid_seq");
    redisReply *xlen = vk_cmd(s, "XLEN lease:{t}:audit");
    combined_call_t c = {0};
    combined_add(&c, "acquire", vk_acquire_req("p1", "s1", 'a', "target_02", "inst-1", 0));
    combined_add(&c, "renew", vk_owner_req("p1", "s2", 'b', "target_01", lid, 1, "inst-1"));
    combined_add(&c, "release", vk_owner_req("p1", "s3", 'c', "target_01", lid, 1, "inst-1"));
    combined_add(&c, "acquire", vk_acquire_req("p1", "s4", 'd', "target_03", "inst-1", 0));
    redisReply *r = combined_fcall(s, VK_NS_KEY, &c);
    assert_int_equal(r->elements, 4);
    for (size_t i = 0; i < r->elements; i++) {
        vk_assert_code(r->element[i], "lease_backend_unavailable");
        assert_string_equal(vk_str(r->element[i], "reason"), "namespace_sealed");
    }
    freeReplyObject(r);
    r = vk_cmd(s, "HGET lease:{t}:ns sealed");
    assert_string_equal(r->str, "1");
    freeReplyObject(r);
    r = vk_cmd(s, "HGET lease:{t}:ns lid_seq");
    assert_string_equal(r->str, before->str);
    freeReplyObject(r);
    r = vk_cmd(s, "XLEN lease:{t}:audit");
    assert_int_equal(r->integer, xlen->integer);
    freeReplyObject(r);
    assert_int_equal(count_keys(s, "lease:{t}:i:*"), 1); /* the first acquire's only */
    r = vk_cmd(s, "SCARD lease:{t}:act");
    assert_int_equal(r->integer, 1);
    freeReplyObject(r);
    freeReplyObject(before);
    freeReplyObject(xlen);
    freeReplyObject(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(acquire_then_conflict, vk_fixture_library_bound,
                                        vk_fixture_stop),
        cmocka_unit_test_setup_teardown(invalid_requests_name_the_field, vk_fixture_library_bound,
                                        vk_fixture_stop),
        cmocka_unit_test_setup_teardown(renew_release_and_lost, vk_fixture_library_bound,
                                        vk_fixture_stop),
        cmocka_unit_test_setup_teardown(expiry_takeover_gets_a_greater_token,
                                        vk_fixture_library_bound, vk_fixture_stop),
        cmocka_unit_test_setup_teardown(idempotent_replay_and_digest_conflict,
                                        vk_fixture_library_bound, vk_fixture_stop),
        cmocka_unit_test_setup_teardown(stored_answers_replay_every_member,
                                        vk_fixture_library_bound, vk_fixture_stop),
        cmocka_unit_test_setup_teardown(metadata_vectors, vk_fixture_library_bound,
                                        vk_fixture_stop),
        cmocka_unit_test_setup_teardown(packed_answers_decode_as_the_table_form,
                                        vk_fixture_library_bound, vk_fixture_stop),
        cmocka_unit_test_setup_teardown(force_release_and_revoke, vk_fixture_library_bound,
                                        vk_fixture_stop),
        cmocka_unit_test_setup_teardown(history_and_audit_entries_keep_their_members,
                                        vk_fixture_library_bound, vk_fixture_stop),
        cmocka_unit_test_setup_teardown(inspect_never_crosses_scope, vk_fixture_library_bound,
                                        vk_fixture_stop),
        cmocka_unit_test_setup_teardown(fence_check_accepts_only_the_live_lease,
                                        vk_fixture_library_bound, vk_fixture_stop),
        cmocka_unit_test_setup_teardown(fenced_commit_decides_before_writing,
                                        vk_fixture_library_bound, vk_fixture_stop),
        cmocka_unit_test_setup_teardown(idempotency_records_of_either_form_replay,
                                        vk_fixture_library_bound, vk_fixture_stop),
        cmocka_unit_test_setup_teardown(audit_entries_of_either_form_export_alike,
                                        vk_fixture_library_bound, vk_fixture_stop),
        cmocka_unit_test_setup_teardown(free_identity_keeps_only_its_counter,
                                        vk_fixture_library_bound, vk_fixture_stop),
        cmocka_unit_test_setup_teardown(rebind_leaves_a_corrupt_record_corrupt,
                                        vk_fixture_library_bound, vk_fixture_stop),
        cmocka_unit_test_setup_teardown(corrupt_record_fails_closed, vk_fixture_library_bound,
                                        vk_fixture_stop),
        cmocka_unit_test_setup_teardown(restart_seals_and_rebind_never_regresses,
                                        vk_fixture_library_bound, vk_fixture_stop),
        cmocka_unit_test_setup_teardown(older_aof_copy_seals_and_rebind_is_above_lost_tokens,
                                        vk_fixture_library_bound, vk_fixture_stop),
        cmocka_unit_test_setup_teardown(full_server_writes_nothing, vk_fixture_library_bound,
                                        vk_fixture_stop),
        cmocka_unit_test_setup_teardown(expire_due_moves_leases_nobody_takes,
                                        vk_fixture_library_bound, vk_fixture_stop),
        cmocka_unit_test_setup_teardown(unbound_namespace_refuses, vk_fixture_library_bound,
                                        vk_fixture_stop),
        cmocka_unit_test_setup_teardown(batches_decide_item_by_item, vk_fixture_library_bound,
                                        vk_fixture_stop),
        cmocka_unit_test_setup_teardown(combined_answers_as_sequential_calls,
                                        vk_fixture_library_bound, vk_fixture_stop),
        cmocka_unit_test_setup_teardown(combined_acquire_then_release_in_one_call,
                                        vk_fixture_library_bound, vk_fixture_stop),
        cmocka_unit_test_setup_teardown(combined_item_error_spares_the_others,
                                        vk_fixture_library_bound, vk_fixture_stop),
        cmocka_unit_test_setup_teardown(combined_sealed_namespace_writes_nothing,
                                        vk_fixture_library_bound, vk_fixture_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
