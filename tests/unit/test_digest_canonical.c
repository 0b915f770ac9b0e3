/*
 * test_digest_canonical.c - the digests that write their canonical text
 * directly (acquire, renew, release, force-release, revoke) equal, byte for
 * byte, the jansson form include/lease/digest.h defines: the object built
 * member by member and dumped with JSON_SORT_KEYS | JSON_COMPACT, hashed
 * with SHA-256. The oracle below is that form, kept here only. Digests are
 * stored with idempotency records, so a difference would make a retry
 * across an upgrade look like a different request.
 *
 * The requests are random: every field of every length up to its array
 * (unterminated at the full length), drawn from quotes, backslashes,
 * control characters, multi-byte UTF-8 and bytes that are not UTF-8
 * (overlong, surrogate, above U+10FFFF, stray continuation); metadata that
 * is absent, an object with reals and nesting, another JSON value, invalid
 * JSON, or not UTF-8; large and negative numbers.
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

#include "lease/digest.h"
#include "lease/hash.h"
#include "lease/hex.h"

#define ROUNDS 3000

/* ---- the oracle: the jansson tree, dumped sorted ---- */

static json_t *oracle_text(const char *s, size_t cap)
{
    size_t len = strnlen(s, cap);
    json_t *v = json_stringn(s, len);
    if (v)
        return v;
    char *hex = malloc(len * 2 + 1);
    lease_hex_encode((const unsigned char *)s, len, hex);
    v = json_pack("{s:s}", "hex", hex);
    free(hex);
    return v;
}

#define O_TEXT(obj, key, field)                                                                    \
    json_object_set_new((obj), (key), oracle_text((field), sizeof(field)))
#define O_INT(obj, key, v) json_object_set_new((obj), (key), json_integer((json_int_t)(v)))

static json_t *oracle_base(const char *op, const lease_call_t *call, const lease_identity_t *id)
{
    json_t *o = json_object();
    json_object_set_new(o, "op", json_string(op));
    O_TEXT(o, "tenant_id", id->tenant_id);
    O_TEXT(o, "program_id", id->program_id);
    O_TEXT(o, "target_namespace", id->target_namespace);
    O_TEXT(o, "target_id", id->target_id);
    O_TEXT(o, "actor_name", id->actor_name);
    O_TEXT(o, "workflow_name", id->workflow_name);
    O_TEXT(o, "operation_class", id->operation_class);
    O_TEXT(o, "principal_id", call->principal.principal_id);
    return o;
}

static void oracle_finish(json_t *o, char out[65])
{
    char *dump = json_dumps(o, JSON_SORT_KEYS | JSON_COMPACT);
    assert_non_null(dump);
    unsigned char md[32];
    assert_true(lease_sha256(dump, strlen(dump), md));
    lease_hex_encode(md, sizeof md, out);
    free(dump);
    json_decref(o);
}

static void oracle_acquire(const lease_acquire_req_t *r, char out[65])
{
    json_t *o = oracle_base("acquire", &r->call, &r->identity);
    O_TEXT(o, "service_instance_id", r->service_instance_id);
    O_TEXT(o, "execution_id", r->execution_id);
    O_TEXT(o, "job_id", r->job_id);
    O_TEXT(o, "trace_id", r->trace_id);
    O_INT(o, "ttl_ms", r->ttl_ms);
    O_INT(o, "maximum_lifetime_ms", r->maximum_lifetime_ms);
    size_t len = strnlen(r->metadata_json, sizeof r->metadata_json);
    json_error_t err;
    json_t *md = len == 0 ? json_object()
                          : json_loadb(r->metadata_json, len,
                                       JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &err);
    if (!md)
        md = oracle_text(r->metadata_json, sizeof r->metadata_json);
    json_object_set_new(o, "metadata", md);
    oracle_finish(o, out);
}

static void oracle_owner(const char *op, const lease_owner_req_t *r, bool with_ttl, char out[65])
{
    json_t *o = oracle_base(op, &r->call, &r->identity);
    O_TEXT(o, "lease_id", r->lease_id);
    O_INT(o, "fencing_token", r->fencing_token);
    O_TEXT(o, "service_instance_id", r->service_instance_id);
    if (with_ttl)
        O_INT(o, "ttl_ms", r->ttl_ms);
    oracle_finish(o, out);
}

static void oracle_admin(const lease_admin_req_t *r, bool revoke, char out[65])
{
    json_t *o = oracle_base(revoke ? "revoke" : "force_release", &r->call, &r->identity);
    O_TEXT(o, "lease_id", r->lease_id);
    O_INT(o, "fencing_token", r->fencing_token);
    O_TEXT(o, "reason", r->reason);
    O_TEXT(o, "incident_id", r->incident_id);
    oracle_finish(o, out);
}

/* ---- random requests ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint32_t rnd(uint32_t n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

/* Pieces a field is made of: plain, escaped, multi-byte, and not UTF-8. */
static const char *const pieces[] = {
    "a",
    "Z",
    "0",
    "-",
    "_",
    ".",
    " ",
    "/",
    "\"",
    "\\",
    "\n",
    "\t",
    "\b",
    "\f",
    "\r",
    "\x01",
    "\x1f",
    "\x7f",
    "\xc3\xa9",
    "\xe2\x82\xac",
    "\xf0\x9f\x98\x80",
    "\xef\xbf\xbf",
    "\xc0\xaf",
    "\xed\xa0\x80",
    "\xf4\x90\x80\x80",
    "\x80",
    "\xff",
    "\xc3",
    "\xe2\x82",
    "\xf5",
};

/* A field of random length up to cap: sometimes plain, sometimes anything,
 * sometimes filling the whole array with no terminator. */
static void fill(char *dst, size_t cap)
{
    size_t want = rnd(4) == 0 ? cap : rnd((uint32_t)(cap < 40 ? cap : 40) + 1);
    bool plain = rnd(3) == 0;
    size_t len = 0;
    memset(dst, 0, cap);
    while (len < want) {
        const char *p = plain ? pieces[rnd(8)] : pieces[rnd(sizeof pieces / sizeof pieces[0])];
        size_t n = strlen(p);
        if (len + n > want)
            n = want - len;
        memcpy(dst + len, p, n);
        len += n;
    }
}

#define FILL(field) fill((field), sizeof(field))

static int64_t number(void)
{
    static const int64_t edges[] = {0, 1, -1, 30000, INT64_MAX, INT64_MIN, 9007199254740993LL};
    return rnd(2) ? edges[rnd(7)] : (int64_t)rnd(1u << 31) * (rnd(2) ? 1 : -1);
}

static const char *const metadata[] = {
    "",
    "{}",
    "{\"zeta\":1,\"alpha\":\"x\",\"mid\":true}",
    "{ \"b\" : [1, 2.5, {\"y\": null, \"x\": \"\\u00e9\"}], \"a\": 0.1 }",
    "{\"n\":1e300,\"m\":-0.0,\"k\":123456789012345678}",
    "[1,\"two\"]",
    "\"text\"",
    "42",
    "{\"dup\":1,\"dup\":2}",
    "{\"unterminated\":",
    "{\"bad\":\"\xff\"}",
    "not json \xc3\xa9",
};

static void fill_common(lease_call_t *call, lease_identity_t *id)
{
    memset(call, 0, sizeof *call);
    memset(id, 0, sizeof *id);
    FILL(call->principal.principal_id);
    FILL(id->tenant_id);
    FILL(id->program_id);
    FILL(id->target_namespace);
    FILL(id->target_id);
    FILL(id->actor_name);
    FILL(id->workflow_name);
    FILL(id->operation_class);
}

static void assert_same(const char *direct, const char *oracle, int round, const char *op)
{
    if (strcmp(direct, oracle) != 0)
        fail_msg("%s digest differs from the jansson form in round %d: %s vs %s", op, round, direct,
                 oracle);
}

static void test_acquire_equals_jansson_form(void **state)
{
    (void)state;
    for (int i = 0; i < ROUNDS; i++) {
        lease_acquire_req_t r;
        memset(&r, 0, sizeof r);
        fill_common(&r.call, &r.identity);
        FILL(r.service_instance_id);
        FILL(r.execution_id);
        FILL(r.job_id);
        FILL(r.trace_id);
        r.ttl_ms = number();
        r.maximum_lifetime_ms = number();
        if (rnd(4) == 0)
            FILL(r.metadata_json);
        else
            snprintf(r.metadata_json, sizeof r.metadata_json, "%s",
                     metadata[rnd(sizeof metadata / sizeof metadata[0])]);
        char direct[65], oracle[65];
        lease_digest_acquire(&r, direct);
        oracle_acquire(&r, oracle);
        assert_same(direct, oracle, i, "acquire");
    }
}

static void test_owner_equals_jansson_form(void **state)
{
    (void)state;
    for (int i = 0; i < ROUNDS; i++) {
        lease_owner_req_t r;
        memset(&r, 0, sizeof r);
        fill_common(&r.call, &r.identity);
        FILL(r.lease_id);
        FILL(r.service_instance_id);
        r.fencing_token = number();
        r.ttl_ms = number();
        char direct[65], oracle[65];
        lease_digest_renew(&r, direct);
        oracle_owner("renew", &r, true, oracle);
        assert_same(direct, oracle, i, "renew");
        lease_digest_release(&r, direct);
        oracle_owner("release", &r, false, oracle);
        assert_same(direct, oracle, i, "release");
    }
}

static void test_admin_equals_jansson_form(void **state)
{
    (void)state;
    for (int i = 0; i < ROUNDS; i++) {
        lease_admin_req_t r;
        memset(&r, 0, sizeof r);
        fill_common(&r.call, &r.identity);
        FILL(r.lease_id);
        FILL(r.reason);
        FILL(r.incident_id);
        r.fencing_token = number();
        char direct[65], oracle[65];
        bool revoke = rnd(2) == 0;
        lease_digest_admin(&r, revoke, direct);
        oracle_admin(&r, revoke, oracle);
        assert_same(direct, oracle, i, revoke ? "revoke" : "force_release");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_acquire_equals_jansson_form),
        cmocka_unit_test(test_owner_equals_jansson_form),
        cmocka_unit_test(test_admin_equals_jansson_form),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
