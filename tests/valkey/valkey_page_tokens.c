/*
 * valkey_page_tokens.c - list page tokens on Valkey are signed with a key of
 * the namespace's own (docs/backends.md, "list and credentials on Valkey"),
 * as lease._page_token signs them on PostgreSQL: a token with any character
 * changed, cut short, spliced from two tokens, of another listing or of
 * another namespace is invalid_lease_request field page_token; a namespace
 * bound by an earlier build (no key) refuses to list until leasectl migrate
 * gives it one; and the key never leaves the server: no function answers
 * it, the audit Stream never holds it, leasectl migrate never prints it.
 * Against a real redis-server, the real adapter and the real leasectl.
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
#include "lease/store_valkey.h"
#include "valkey_service.h"

#define LEASES 4
#define KEY_HEX 64 /* the stored key: 32 bytes in hex */

typedef struct fixture {
    vk_server_t server;
    lease_valkey_t *v; /* on namespace "t" (VK_NS_KEY) */
} fixture_t;

static int setup_server(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    if (f == NULL || !vk_start(&f->server))
        return -1;
    *state = f;
    return 0;
}

/* The namespace bound as leasectl migrate binds it (the adapter's bind). */
static int setup_bound(void **state)
{
    if (setup_server(state) != 0)
        return -1;
    fixture_t *f = *state;
    f->v = vk_open_bound(&f->server, "t");
    return f->v != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    if (f->v != NULL)
        lease_valkey_close(f->v);
    vk_stop(&f->server);
    free(f);
    return 0;
}

/* The namespace's stored key (heap; "" when it has none). */
static char *stored_key(vk_server_t *s, const char *ns_key)
{
    redisReply *r = vk_cmd(s, "HGET %s page_token_key", ns_key);
    char *key = strdup(r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject(r);
    return key;
}

/* LEASES leases of program-a in namespace key ns_key (raw FCALLs). */
static void acquire_leases(vk_server_t *s, const char *ns_key)
{
    for (int i = 0; i < LEASES; i++) {
        char rid[32], target[32];
        snprintf(rid, sizeof rid, "acq-%d", i);
        snprintf(target, sizeof target, "target_%02d", i);
        json_t *req = vk_acquire_req("p1", rid, 'a', target, "inst-1", 0);
        char *text = json_dumps(req, JSON_COMPACT);
        json_decref(req);
        redisReply *r = vk_cmd(s, "FCALL leased_v1_acquire 1 %s %s", ns_key, text);
        free(text);
        assert_string_equal(vk_str(r, "code"), "lease_acquired");
        freeReplyObject(r);
    }
}

/* One page of the program listing through the adapter (what leased sends). */
static lease_code_t list_page(lease_valkey_t *v, const char *token, lease_list_result_t *res)
{
    lease_list_req_t q;
    memset(&q, 0, sizeof q);
    vk_fill_call(&q.call, "p1", "", 'l', 5000);
    snprintf(q.scope.tenant_id, sizeof q.scope.tenant_id, VK_TENANT);
    snprintf(q.scope.program_id, sizeof q.scope.program_id, VK_PROGRAM);
    q.scope.all_actors = true;
    q.by = LEASE_LIST_BY_PROGRAM;
    snprintf(q.tenant_id, sizeof q.tenant_id, VK_TENANT);
    snprintf(q.program_id, sizeof q.program_id, VK_PROGRAM);
    q.page_size = 1;
    if (token != NULL)
        snprintf(q.page_token, sizeof q.page_token, "%s", token);
    return lease_valkey_list(v, &q, res);
}

static void expect_refused(lease_valkey_t *v, const char *token)
{
    lease_list_result_t res;
    lease_code_t code = list_page(v, token, &res);
    if (code != LEASE_INVALID_LEASE_REQUEST || strcmp(res.field, "page_token") != 0)
        fail_msg("token %s: %s field %s, expected invalid_lease_request page_token", token,
                 lease_code_name(code), res.field);
    lease_list_result_free(&res);
}

/* Walks every page (one lease each); tokens[i] is the token after page i. */
static void walk(lease_valkey_t *v, char tokens[LEASES][LEASE_PAGE_TOKEN_MAX + 1])
{
    const char *token = NULL;
    for (int page = 0; page < LEASES; page++) {
        lease_list_result_t res;
        assert_int_equal(list_page(v, token, &res), LEASE_LISTED);
        assert_int_equal(res.count, 1);
        char want[32];
        snprintf(want, sizeof want, "target_%02d", page);
        assert_string_equal(res.leases[0].identity.target_id, want);
        snprintf(tokens[page], LEASE_PAGE_TOKEN_MAX + 1, "%s", res.next_page_token);
        assert_true(page == LEASES - 1 ? tokens[page][0] == '\0' : tokens[page][0] != '\0');
        lease_list_result_free(&res);
        token = tokens[page];
    }
}

static void tokens_are_signed_and_bound_to_their_listing(void **state)
{
    fixture_t *f = *state;
    acquire_leases(&f->server, VK_NS_KEY);
    char tokens[LEASES][LEASE_PAGE_TOKEN_MAX + 1];
    walk(f->v, tokens);
    const char *good = tokens[0];
    size_t n = strlen(good);
    const char *dot = strchr(good, '.');
    assert_non_null(dot);
    /* payload '.' 128-bit MAC in hex, as on PostgreSQL */
    assert_int_equal(strlen(dot + 1), 32);

    /* every character changed, one at a time: refused. A change in the
     * payload names another identity, which an unsigned token accepted. */
    char bad[LEASE_PAGE_TOKEN_MAX + 1];
    for (size_t i = 0; i < n; i++) {
        snprintf(bad, sizeof bad, "%s", good);
        bad[i] = bad[i] == '0' ? '1' : '0';
        expect_refused(f->v, bad);
    }
    /* the payload of one real token with the MAC of another */
    const char *dot2 = strchr(tokens[1], '.');
    snprintf(bad, sizeof bad, "%.*s%s", (int)(dot2 - tokens[1]), tokens[1], dot);
    expect_refused(f->v, bad);
    /* cut short, lengthened, its parts alone */
    snprintf(bad, sizeof bad, "%.*s", (int)n - 1, good);
    expect_refused(f->v, bad);
    snprintf(bad, sizeof bad, "%s0", good);
    expect_refused(f->v, bad);
    snprintf(bad, sizeof bad, "%.*s", (int)(dot - good), good);
    expect_refused(f->v, bad);
    expect_refused(f->v, dot);

    /* the real tokens still work: each page once (walk asserted) */
    lease_list_result_t res;
    assert_int_equal(list_page(f->v, tokens[1], &res), LEASE_LISTED);
    assert_string_equal(res.leases[0].identity.target_id, "target_02");
    lease_list_result_free(&res);

    /* another namespace of the same server has a key of its own: the same
     * leases, the same listing, and its tokens are not this namespace's */
    lease_valkey_t *u = vk_open_bound(&f->server, "u");
    assert_non_null(u);
    acquire_leases(&f->server, "lease:{u}:ns");
    char utokens[LEASES][LEASE_PAGE_TOKEN_MAX + 1];
    walk(u, utokens);
    assert_string_not_equal(utokens[0], tokens[0]);
    expect_refused(f->v, utokens[0]);
    expect_refused(u, tokens[0]);
    char *kt = stored_key(&f->server, VK_NS_KEY), *ku = stored_key(&f->server, "lease:{u}:ns");
    assert_int_equal(strlen(kt), KEY_HEX);
    assert_int_equal(strlen(ku), KEY_HEX);
    assert_string_not_equal(kt, ku);
    free(kt);
    free(ku);
    lease_valkey_close(u);
}

/* leasectl migrate on namespace "t" of s; its exit status, *out its output. */
static int migrate(vk_server_t *s, char **out)
{
    char url[160];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d?namespace=t", s->port);
    const char *args[] = {"migrate", "--database-url", url, NULL};
    return vk_leasectl(args, NULL, out);
}

static void a_namespace_bound_without_a_key_gets_one_at_migrate(void **state)
{
    fixture_t *f = *state;
    /* bound as an earlier build bound it: no key */
    f->v = vk_open(&f->server, "t");
    assert_non_null(f->v);
    redisReply *r = vk_cmd(&f->server, "FCALL leased_v1_bind 1 %s {}", VK_NS_KEY);
    assert_int_equal(vk_int(r, "bound"), 1);
    freeReplyObject(r);
    acquire_leases(&f->server, VK_NS_KEY);
    /* nothing to sign with: listing is refused, typed, until migrate */
    lease_list_result_t res;
    assert_int_equal(list_page(f->v, NULL, &res), LEASE_BACKEND_UNAVAILABLE);
    lease_list_result_free(&res);
    json_t *q = vk_call("p1", "", 'l');
    json_object_set_new(q, "by", json_string("program"));
    json_object_set_new(q, "tenant_id", json_string(VK_TENANT));
    json_object_set_new(q, "program_id", json_string(VK_PROGRAM));
    json_object_set_new(q, "scope", json_pack("{s:s, s:s, s:[s]}", "tenant_id", VK_TENANT,
                                              "program_id", VK_PROGRAM, "actor_names", "*"));
    r = vk_fcall(&f->server, "list", q);
    assert_string_equal(vk_str(r, "code"), "lease_backend_unavailable");
    assert_string_equal(vk_str(r, "reason"), "page_token_key_missing");
    freeReplyObject(r);

    /* a malformed key is refused and not quoted; nothing stored */
    r = vk_cmd(&f->server, "FCALL leased_v1_bind 1 %s %s", VK_NS_KEY,
               "{\"page_token_key\":\"zz-not-a-key\"}");
    assert_non_null(vk_str(r, "error"));
    assert_null(strstr(vk_str(r, "error"), "zz-not-a-key"));
    freeReplyObject(r);
    char *none = stored_key(&f->server, VK_NS_KEY);
    assert_string_equal(none, "");
    free(none);

    /* the real leasectl migrate gives it a key, and prints none of it */
    char *out = NULL;
    assert_int_equal(migrate(&f->server, &out), 0);
    char *key = stored_key(&f->server, VK_NS_KEY);
    assert_int_equal(strlen(key), KEY_HEX);
    assert_null(strstr(out, key));
    free(out);
    char tokens[LEASES][LEASE_PAGE_TOKEN_MAX + 1];
    walk(f->v, tokens);

    /* migrate again: the key stays (the tokens it signed stay valid) */
    assert_int_equal(migrate(&f->server, &out), 0);
    free(out);
    char *again = stored_key(&f->server, VK_NS_KEY);
    assert_string_equal(again, key);
    free(again);
    assert_int_equal(list_page(f->v, tokens[0], &res), LEASE_LISTED);
    assert_string_equal(res.leases[0].identity.target_id, "target_01");
    lease_list_result_free(&res);
    free(key);
}

/* ---- the key never answered ---------------------------------------- */

typedef struct secret {
    char hex[KEY_HEX + 1];
    char upper[KEY_HEX + 1];
    unsigned char raw[KEY_HEX / 2];
} secret_t;

/* Whether text holds the key, any 16 of its hex digits in a row (either
 * case), or its raw bytes. */
static bool leaks(const secret_t *k, const char *text, size_t len)
{
    for (size_t at = 0; at + 16 <= KEY_HEX; at++) {
        char part[17], upart[17];
        memcpy(part, k->hex + at, 16);
        memcpy(upart, k->upper + at, 16);
        part[16] = upart[16] = '\0';
        if (memmem(text, len, part, 16) != NULL || memmem(text, len, upart, 16) != NULL)
            return true;
    }
    return memmem(text, len, k->raw, 8) != NULL;
}

/* Fails the test when any string of the answer (at any depth) leaks. */
static void assert_no_key(const secret_t *k, const redisReply *r, const char *what)
{
    switch (r->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
        if (leaks(k, r->str, r->len))
            fail_msg("%s answered the page-token key (or part of it)", what); /* not quoted */
        break;
    case REDIS_REPLY_ARRAY:
        for (size_t i = 0; i < r->elements; i++)
            assert_no_key(k, r->element[i], what);
        break;
    default:
        break;
    }
}

/* A member of a name/value array that is not a string (FUNCTION LIST's). */
static const redisReply *pairs_field(const redisReply *pairs, const char *name)
{
    for (size_t i = 0; i + 1 < pairs->elements; i += 2)
        if (pairs->element[i]->type == REDIS_REPLY_STRING &&
            strcmp(pairs->element[i]->str, name) == 0)
            return pairs->element[i + 1];
    return NULL;
}

#define CALLED_MAX 64

typedef struct calls {
    vk_server_t *s;
    const secret_t *k;
    char names[CALLED_MAX][64];
    int n;
} calls_t;

/* FCALL leased_v1_<fn> with req (consumed), checked; the answer. */
static redisReply *call(calls_t *c, const char *fn, json_t *req)
{
    char name[64];
    snprintf(name, sizeof name, "leased_v1_%s", fn);
    redisReply *r = vk_fcall(c->s, fn, req);
    assert_no_key(c->k, r, name);
    bool seen = false;
    for (int i = 0; i < c->n; i++)
        seen = seen || strcmp(c->names[i], name) == 0;
    if (!seen && c->n < CALLED_MAX)
        snprintf(c->names[c->n++], sizeof c->names[0], "%s", name);
    return r;
}

static void check(calls_t *c, const char *fn, json_t *req)
{
    freeReplyObject(call(c, fn, req));
}

/* FCALL leased_v1_watch_ended with lease ids (its arguments are ids, not a
 * request document), checked and recorded as call() does. */
static void check_watch_ended(calls_t *c, const char *lease_id)
{
    const char *name = "leased_v1_watch_ended";
    redisReply *r = vk_cmd(c->s, "FCALL %s 1 %s %s lease_0000", name, VK_NS_KEY, lease_id);
    assert_no_key(c->k, r, name);
    freeReplyObject(r);
    if (c->n < CALLED_MAX)
        snprintf(c->names[c->n++], sizeof c->names[0], "%s", name);
}

/* FCALL leased_v1_combined with an acquire and a release (consumed),
 * checked and recorded as call() does. */
static void check_combined(calls_t *c, json_t *acquire, json_t *release)
{
    const char *name = "leased_v1_combined";
    char *a = json_dumps(acquire, JSON_COMPACT), *x = json_dumps(release, JSON_COMPACT);
    json_decref(acquire);
    json_decref(release);
    redisReply *r = vk_cmd(c->s, "FCALL %s 1 %s acquire %s release %s", name, VK_NS_KEY, a, x);
    free(a);
    free(x);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(r->elements, 2);
    assert_no_key(c->k, r, name);
    freeReplyObject(r);
    if (c->n < CALLED_MAX)
        snprintf(c->names[c->n++], sizeof c->names[0], "%s", name);
}

static json_t *scope_all(void)
{
    return json_pack("{s:s, s:s, s:[s]}", "tenant_id", VK_TENANT, "program_id", VK_PROGRAM,
                     "actor_names", "*");
}

static json_t *list_req(const char *token)
{
    json_t *q = vk_call("p1", "", 'l');
    json_object_set_new(q, "by", json_string("program"));
    json_object_set_new(q, "tenant_id", json_string(VK_TENANT));
    json_object_set_new(q, "program_id", json_string(VK_PROGRAM));
    json_object_set_new(q, "scope", scope_all());
    json_object_set_new(q, "page_size", json_integer(1));
    if (token != NULL)
        json_object_set_new(q, "page_token", json_string(token));
    return q;
}

static json_t *with(json_t *o, const char *name, json_t *value)
{
    json_object_set_new(o, name, value);
    return o;
}

static void the_key_is_never_answered(void **state)
{
    fixture_t *f = *state;
    vk_server_t *s = &f->server;
    secret_t k;
    char *hex = stored_key(s, VK_NS_KEY);
    assert_int_equal(strlen(hex), KEY_HEX);
    memcpy(k.hex, hex, KEY_HEX + 1);
    free(hex);
    for (int i = 0; i < KEY_HEX; i++)
        k.upper[i] = (char)(k.hex[i] >= 'a' ? k.hex[i] - 'a' + 'A' : k.hex[i]);
    k.upper[KEY_HEX] = '\0';
    for (int i = 0; i < KEY_HEX / 2; i++) {
        unsigned int b;
        sscanf(k.hex + 2 * i, "%2x", &b);
        k.raw[i] = (unsigned char)b;
    }
    calls_t c = {.s = s, .k = &k};

    /* every function with a request it accepts, in the order of a life */
    redisReply *a = call(&c, "acquire", vk_acquire_req("p1", "r1", 'a', "target_01", "inst-1", 0));
    assert_string_equal(vk_str(a, "code"), "lease_acquired");
    char lid[64];
    snprintf(lid, sizeof lid, "%s", vk_str(vk_lease(a), "lease_id"));
    long long token = vk_int(vk_lease(a), "fencing_token");
    freeReplyObject(a);
    check(&c, "acquire", vk_acquire_req("p1", "r2", 'b', "target_02", "inst-1", 0));
    check(&c, "acquire", vk_acquire_req("p1", "r1", 'a', "target_01", "inst-1", 0)); /* replay */
    check(&c, "renew", vk_owner_req("p1", "n1", 'c', "target_01", lid, token, "inst-1"));
    check(&c, "inspect", with(with(vk_call("p1", "", 'i'), "scope", scope_all()), "lease_id",
                              json_string(lid)));
    redisReply *l = call(&c, "list", list_req(NULL));
    assert_string_equal(vk_str(l, "code"), "lease_listed");
    assert_non_null(vk_str(l, "next_page_token"));
    check(&c, "list", list_req(vk_str(l, "next_page_token")));
    freeReplyObject(l);
    check(&c, "list", list_req("00.00000000000000000000000000000000")); /* refused */
    json_t *fc = with(vk_call("p1", "fc", 'd'), "lock_identity", vk_identity("target_01"));
    check(&c, "fence_check",
          with(with(fc, "lease_id", json_string(lid)), "fencing_token", json_integer(token)));
    json_t *cm = with(vk_call("p1", "c1", 'e'), "lock_identity", vk_identity("target_01"));
    cm = with(with(with(cm, "lease_id", json_string(lid)), "fencing_token", json_integer(token)),
              "execution_id", json_string("exec-1"));
    check(&c, "fenced_commit",
          with(cm, "writes",
               json_pack("[{s:s, s:s, s:i, s:s}]", "kind", "document", "key", "doc-1",
                         "expected_revision", 0, "body_json", "{\"n\":1}")));
    check(&c, "renew_many",
          json_pack("{s:[o]}", "renewals",
                    vk_owner_req("p1", "m1", 'f', "target_01", lid, token, "inst-1")));
    check(&c, "release_many",
          json_pack("{s:[o]}", "releases",
                    vk_owner_req("p1", "m2", 'g', "target_09", lid, token, "inst-1")));
    json_t *ad = with(vk_call("admin", "f1", 'h'), "lock_identity", vk_identity("target_01"));
    ad = with(with(ad, "lease_id", json_string(lid)), "fencing_token", json_integer(token));
    check(&c, "force_release", with(ad, "reason", json_string("drill")));
    a = call(&c, "acquire", vk_acquire_req("p1", "r3", 'i', "target_03", "inst-1", 0));
    snprintf(lid, sizeof lid, "%s", vk_str(vk_lease(a), "lease_id"));
    token = vk_int(vk_lease(a), "fencing_token");
    freeReplyObject(a);
    ad = with(vk_call("admin", "v1", 'j'), "lock_identity", vk_identity("target_03"));
    ad = with(with(ad, "lease_id", json_string(lid)), "fencing_token", json_integer(token));
    check(&c, "revoke", with(ad, "reason", json_string("compromised")));
    a = call(&c, "acquire", vk_acquire_req("p1", "r4", 'k', "target_04", "inst-1", 0));
    snprintf(lid, sizeof lid, "%s", vk_str(vk_lease(a), "lease_id"));
    token = vk_int(vk_lease(a), "fencing_token");
    freeReplyObject(a);
    check(&c, "release", vk_owner_req("p1", "e1", 'l', "target_04", lid, token, "inst-1"));
    check_combined(&c, vk_acquire_req("p1", "r5", 'm', "target_05", "inst-1", 0),
                   vk_owner_req("p1", "e1", 'l', "target_04", lid, token, "inst-1"));
    check_watch_ended(&c, lid);
    check(&c, "expire_due", json_pack("{s:i, s:i}", "batch", 10, "grace_ms", 0));
    check(&c, "health", json_object());
    check(&c, "bind", json_object());
    check(&c, "bind", json_pack("{s:s}", "page_token_key", k.hex)); /* its own key, sent back */
    check(&c, "credential_create",
          json_pack("{s:s, s:s, s:s, s:s, s:s, s:[s], s:[s], s:s, s:s}", "credential_id",
                    "key_abcdefghijklmnopqrstuvwxyz", "principal_id", "p9", "client_id", "cl_p9",
                    "tenant_id", VK_TENANT, "program_id", VK_PROGRAM, "actor_names", "*",
                    "capabilities", "targets:lease", "secret_digest",
                    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                    "operator", "leasectl:test"));
    check(&c, "credential_lookup",
          json_pack("{s:s}", "credential_id", "key_abcdefghijklmnopqrstuvwxyz"));
    check(&c, "credential_list", json_object());
    check(&c, "credential_revoke",
          json_pack("{s:s}", "credential_id", "key_abcdefghijklmnopqrstuvwxyz"));
    check(&c, "record_audit",
          json_pack("{s:[{s:s, s:s, s:s}]}", "events", "event_type", "target_lease_inspect",
                    "code", "lease_inspected", "source", "service"));
    redisReply *rd = call(&c, "audit_read", json_pack("{s:i}", "count", 1000));
    const redisReply *entries = rd->element[1];
    assert_true(entries->elements > 0);
    char last[64];
    snprintf(last, sizeof last, "%s", entries->element[entries->elements - 1]->element[0]->str);
    freeReplyObject(rd);
    check(&c, "audit_ack", json_pack("{s:s}", "id", last));
    check(&c, "rebind", json_pack("{s:s, s:s}", "reason", "drill", "operator", "leasectl:test"));

    /* and every function with nothing in its request (refusals too) */
    redisReply *fl = vk_cmd(s, "FUNCTION LIST LIBRARYNAME leased_v1");
    assert_int_equal(fl->elements, 1);
    const redisReply *fns = pairs_field(fl->element[0], "functions");
    assert_non_null(fns);
    for (size_t i = 0; i < fns->elements; i++) {
        const char *name = vk_str(fns->element[i], "name");
        assert_non_null(name);
        redisReply *r = vk_cmd(s, "FCALL %s 1 %s {}", name, VK_NS_KEY);
        assert_no_key(&k, r, name);
        freeReplyObject(r);
        /* every function of the library was called with a real request */
        bool called = false;
        for (int j = 0; j < c.n; j++)
            called = called || strcmp(c.names[j], name) == 0;
        if (!called)
            fail_msg("%s is not exercised by this test: add a request for it", name);
    }
    assert_int_equal((int)fns->elements, c.n);
    freeReplyObject(fl);

    /* the audit Stream, every field of every entry */
    redisReply *x = vk_audit(s, "lease:{t}:audit", false);
    assert_true(x->elements >= 10);
    assert_no_key(&k, x, "the audit Stream");
    freeReplyObject(x);
    /* the key itself is still where bind put it, unchanged */
    char *after = stored_key(s, VK_NS_KEY);
    assert_string_equal(after, k.hex);
    free(after);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(tokens_are_signed_and_bound_to_their_listing,
                                        setup_bound, teardown),
        cmocka_unit_test_setup_teardown(a_namespace_bound_without_a_key_gets_one_at_migrate,
                                        setup_server, teardown),
        cmocka_unit_test_setup_teardown(the_key_is_never_answered, setup_bound, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
