/*
 * digest.c - request digests: the canonical encoding of every
 * behaviour-affecting input of a mutation, hashed for idempotency replay
 * checks. The rule (what is in, what is out, and why) is in
 * include/lease/digest.h; this file is its only implementation.
 */
#include "lease/digest.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "lease/hex.h"
#include "lease/hash.h"
#include "lease/json_text.h"

/* Adds value (consumed, may be NULL after a failed allocation) under key. */
static bool put(json_t *obj, const char *key, json_t *value)
{
    if (!value)
        return false;
    return json_object_set_new(obj, key, value) == 0;
}

static json_t *hex_of(const char *s, size_t len)
{
    json_t *wrapper = json_object();
    char *hex = malloc(len * 2 + 1);
    json_t *result = NULL;
    if (!wrapper || !hex)
        goto cleanup;
    lease_hex_encode((const unsigned char *)s, len, hex);
    if (!put(wrapper, "hex", json_string(hex)))
        goto cleanup;
    result = wrapper;
    wrapper = NULL;
cleanup:
    free(hex);
    json_decref(wrapper);
    return result;
}

/* A string field of at most cap bytes (fixed arrays need not be trusted to
 * be terminated). Bytes that are not UTF-8 become {"hex":...}, which no
 * JSON string equals, instead of failing the digest. */
static json_t *text(const char *s, size_t cap)
{
    size_t len = strnlen(s, cap);
    json_t *v = json_stringn(s, len);
    return v ? v : hex_of(s, len);
}

#define PUT_TEXT(obj, key, field) put((obj), (key), text((field), sizeof(field)))

static bool put_int(json_t *obj, const char *key, int64_t v)
{
    return put(obj, key, json_integer((json_int_t)v));
}

/* Parses JSON text strictly: any top-level value, duplicate keys rejected
 * (the HTTP layer rejects them too, so two texts that parse differently
 * elsewhere can never share a digest). NULL when invalid. */
static json_t *parse_strict(const char *s, size_t len)
{
    json_error_t err;
    return json_loadb(s, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &err);
}

/* The fields every operation shares. NULL on allocation failure. */
static json_t *base_object(const char *op, const lease_call_t *call, const lease_identity_t *id)
{
    json_t *obj = json_object();
    if (!obj)
        return NULL;
    if (!put(obj, "op", json_string(op)) || !PUT_TEXT(obj, "tenant_id", id->tenant_id) ||
        !PUT_TEXT(obj, "program_id", id->program_id) ||
        !PUT_TEXT(obj, "target_namespace", id->target_namespace) ||
        !PUT_TEXT(obj, "target_id", id->target_id) ||
        !PUT_TEXT(obj, "actor_name", id->actor_name) ||
        !PUT_TEXT(obj, "workflow_name", id->workflow_name) ||
        !PUT_TEXT(obj, "operation_class", id->operation_class) ||
        !PUT_TEXT(obj, "principal_id", call->principal.principal_id)) {
        json_decref(obj);
        return NULL;
    }
    return obj;
}

/* Hashes the canonical dump of obj (consumed) into out; false (out "") when
 * obj is NULL or the dump fails. */
static bool finish(json_t *obj, char out[65])
{
    char *dump = NULL;
    bool ok = false;
    out[0] = '\0';
    if (!obj)
        goto cleanup;
    dump = json_dumps(obj, JSON_SORT_KEYS | JSON_COMPACT);
    if (!dump)
        goto cleanup;
    unsigned char md[32];
    if (!lease_sha256(dump, strlen(dump), md))
        goto cleanup;
    lease_hex_encode(md, sizeof md, out); /* LEASE_DIGEST_HEX_LEN digits */
    ok = true;
cleanup:
    free(dump);
    json_decref(obj);
    return ok;
}

/*
 * The fixed-shape digests (every operation but commit) write their canonical
 * text directly: the members are collected, sorted by key as JSON_SORT_KEYS
 * sorts them (byte order), and written with json_text's escaping, which is
 * jansson's. The text is byte for byte what dumping the jansson object
 * would give (tests/unit/test_digest_canonical.c keeps that form as its
 * oracle);
 * building the tree cost a malloc and a hash insert per member, and was
 * most of a digest's instructions.
 */
typedef enum { MEMBER_TEXT, MEMBER_INT, MEMBER_RAW } member_kind_t;

typedef struct member {
    const char *key;
    member_kind_t kind;
    const char *text; /* MEMBER_TEXT: a field of at most cap bytes; MEMBER_RAW: JSON */
    size_t cap;
    long long number;
} member_t;

#define MEMBERS_MAX 20

typedef struct canonical {
    member_t m[MEMBERS_MAX];
    size_t n;
    bool overflow; /* a member did not fit: the digest fails closed */
} canonical_t;

#define ADD_TEXT(c, k, field) add((c), (member_t){(k), MEMBER_TEXT, (field), sizeof(field), 0})
#define ADD_INT(c, k, v) add((c), (member_t){(k), MEMBER_INT, NULL, 0, (long long)(v)})

static void add(canonical_t *c, member_t m)
{
    /* the largest digest has 17 members; a dropped one would let two
     * different requests share a digest, so finish_canonical refuses */
    if (c->n < MEMBERS_MAX)
        c->m[c->n++] = m;
    else
        c->overflow = true;
}

static void add_base(canonical_t *c, const char *op, const lease_call_t *call,
                     const lease_identity_t *id)
{
    add(c, (member_t){"op", MEMBER_TEXT, op, strlen(op) + 1, 0});
    ADD_TEXT(c, "tenant_id", id->tenant_id);
    ADD_TEXT(c, "program_id", id->program_id);
    ADD_TEXT(c, "target_namespace", id->target_namespace);
    ADD_TEXT(c, "target_id", id->target_id);
    ADD_TEXT(c, "actor_name", id->actor_name);
    ADD_TEXT(c, "workflow_name", id->workflow_name);
    ADD_TEXT(c, "operation_class", id->operation_class);
    ADD_TEXT(c, "principal_id", call->principal.principal_id);
}

static int by_key(const void *a, const void *b)
{
    return strcmp(((const member_t *)a)->key, ((const member_t *)b)->key);
}

/* A field as text() enters it: a JSON string, or {"hex":...} of bytes that
 * are not UTF-8. */
static void write_text(lease_json_buf_t *b, const char *s, size_t cap)
{
    size_t len = strnlen(s, cap);
    if (lease_json_utf8_valid(s, len)) {
        lease_json_string(b, s, len);
        return;
    }
    char *hex = malloc(len * 2 + 1);
    if (!hex) {
        b->failed = true;
        return;
    }
    lease_hex_encode((const unsigned char *)s, len, hex);
    lease_json_raw(b, "{\"hex\":", 7);
    lease_json_string(b, hex, len * 2);
    lease_json_raw(b, "}", 1);
    free(hex);
}

/* Hashes the text of c's members in key order into out ("" on failure). */
static void finish_canonical(canonical_t *c, char out[65])
{
    lease_json_buf_t b = {0};
    out[0] = '\0';
    if (c->overflow)
        return;
    qsort(c->m, c->n, sizeof c->m[0], by_key);
    lease_json_raw(&b, "{", 1);
    for (size_t i = 0; i < c->n; i++) {
        const member_t *m = &c->m[i];
        if (i)
            lease_json_raw(&b, ",", 1);
        lease_json_string(&b, m->key, strlen(m->key));
        lease_json_raw(&b, ":", 1);
        if (m->kind == MEMBER_TEXT)
            write_text(&b, m->text, m->cap);
        else if (m->kind == MEMBER_INT)
            lease_json_int(&b, m->number);
        else if (m->text)
            lease_json_raw(&b, m->text, strlen(m->text));
        else
            b.failed = true; /* the metadata could not be written */
    }
    lease_json_raw(&b, "}", 1);
    char *text = lease_json_take(&b);
    unsigned char md[32];
    if (text && lease_sha256(text, strlen(text), md))
        lease_hex_encode(md, sizeof md, out); /* LEASE_DIGEST_HEX_LEN digits */
    free(text);
}

static json_t *metadata_value(const char *s, size_t cap)
{
    size_t len = strnlen(s, cap);
    if (len == 0)
        return json_object(); /* no metadata is the empty object */
    json_t *v = parse_strict(s, len);
    return v ? v : text(s, cap);
}

/* The metadata member's text, as jansson dumps the value metadata_value
 * builds (heap; NULL when out of memory). */
static char *metadata_text(const char *s, size_t cap)
{
    json_t *v = metadata_value(s, cap);
    char *text = v ? json_dumps(v, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    json_decref(v);
    return text;
}

/* The value of an integer field (lease/operations.h: INT members are
 * int64_t; any other size fails the digest closed). */
static bool int_member(const lease_field_t *f, const char *p, long long *out)
{
    int64_t v;
    if (f->size != sizeof v)
        return false;
    memcpy(&v, p, sizeof v);
    *out = (long long)v;
    return true;
}

bool lease_digest_fields(const char *op, const lease_call_t *call, const lease_identity_t *id,
                         const void *req, const lease_field_t *fields, char out[65])
{
    canonical_t c = {.n = 0};
    char *metadata = NULL;
    add_base(&c, op, call, id);
    for (const lease_field_t *f = fields; f->name; f++) {
        if (!f->digest)
            continue;
        const char *p = (const char *)req + f->offset;
        long long n = 0;
        size_t md_len;
        switch (f->kind) {
        case LEASE_FIELD_ID:
        case LEASE_FIELD_TEXT:
            if (f->presence == LEASE_FIELD_OPTIONAL_SET && !p[0])
                break; /* not given: the digest it had before the field existed */
            add(&c, (member_t){f->name, MEMBER_TEXT, p, f->size, 0});
            break;
        case LEASE_FIELD_INT:
            if (!int_member(f, p, &n))
                c.overflow = true;
            add(&c, (member_t){f->name, MEMBER_INT, NULL, 0, n});
            break;
        case LEASE_FIELD_METADATA:
            /* no metadata is the empty object: the common case needs no parse */
            md_len = strnlen(p, f->size);
            if (md_len > 0 && !metadata)
                metadata = metadata_text(p, f->size);
            add(&c, (member_t){f->name, MEMBER_RAW, md_len == 0 ? "{}" : metadata, 0, 0});
            break;
        default:
            c.overflow = true; /* a kind with a form of its own (writes): never dropped */
            break;
        }
    }
    finish_canonical(&c, out);
    free(metadata);
    return strlen(out) == LEASE_DIGEST_HEX_LEN;
}

void lease_digest_acquire(const lease_acquire_req_t *r, char out[65])
{
    (void)lease_digest_fields("acquire", &r->call, &r->identity, r,
                              lease_operation(LEASED_OP_ACQUIRE)->fields, out);
}

void lease_digest_renew(const lease_owner_req_t *r, char out[65])
{
    (void)lease_digest_fields("renew", &r->call, &r->identity, r,
                              lease_operation(LEASED_OP_RENEW)->fields, out);
}

/* Release has no TTL: a ttl_ms left in the shared struct changes nothing. */
void lease_digest_release(const lease_owner_req_t *r, char out[65])
{
    (void)lease_digest_fields("release", &r->call, &r->identity, r,
                              lease_operation(LEASED_OP_RELEASE)->fields, out);
}

void lease_digest_admin(const lease_admin_req_t *r, bool revoke, char out[65])
{
    leased_op_t op = revoke ? LEASED_OP_REVOKE : LEASED_OP_FORCE_RELEASE;
    (void)lease_digest_fields(lease_operation(op)->name, &r->call, &r->identity, r,
                              lease_operation(op)->fields, out);
}

/* One write as it enters the digest; NULL when its JSON is invalid, its kind
 * unknown, or on allocation failure. */
static json_t *write_value(const lease_write_t *w)
{
    json_t *item = json_object();
    json_t *doc = NULL;
    json_t *result = NULL;
    if (!item || !w->json)
        goto cleanup;
    doc = parse_strict(w->json, strlen(w->json));
    if (!doc)
        goto cleanup;
    bool ok;
    switch (w->kind) {
    case LEASE_WRITE_DOCUMENT:
        ok = put(item, "kind", json_string("document")) && PUT_TEXT(item, "key", w->key) &&
             put_int(item, "expected_revision", w->expected_revision) &&
             put(item, "body", json_incref(doc));
        break;
    case LEASE_WRITE_PUBLICATION:
        /* A publication has no revision to expect: the field is ignored. */
        ok = put(item, "kind", json_string("publication")) && PUT_TEXT(item, "topic", w->key) &&
             put(item, "payload", json_incref(doc));
        break;
    default:
        ok = false;
        break;
    }
    if (!ok)
        goto cleanup;
    result = item;
    item = NULL;
cleanup:
    json_decref(doc);
    json_decref(item);
    return result;
}

bool lease_digest_commit(const lease_commit_req_t *r, char out[65])
{
    json_t *obj = base_object("commit", &r->call, &r->identity);
    json_t *writes = json_array();
    bool ok = false;
    out[0] = '\0';
    if (!obj || !writes || r->n_writes > LEASE_COMMIT_WRITES_MAX)
        goto cleanup;
    for (size_t i = 0; i < r->n_writes; i++) {
        json_t *item = write_value(&r->writes[i]);
        if (!item || json_array_append_new(writes, item) != 0)
            goto cleanup;
    }
    if (!PUT_TEXT(obj, "lease_id", r->lease_id) ||
        !put_int(obj, "fencing_token", r->fencing_token) ||
        !PUT_TEXT(obj, "execution_id", r->execution_id) ||
        !PUT_TEXT(obj, "trace_id", r->trace_id) || !put(obj, "writes", json_incref(writes)))
        goto cleanup;
    ok = finish(obj, out);
    obj = NULL; /* finish consumed it */
cleanup:
    json_decref(writes);
    json_decref(obj);
    return ok;
}
