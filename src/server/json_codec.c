/*
 * json_codec.c - strict decoding of request bodies into store requests.
 *
 * Every body is parsed by jansson with JSON_REJECT_DUPLICATES (NUL escapes
 * are refused too) and then walked field by field against one table of
 * allowed fields per operation: unknown fields, wrong JSON types, missing
 * required fields and out-of-range values fail closed with the field's
 * dotted path. Where jansson itself refuses the text (duplicate key, bad
 * syntax, integer overflow), the path is recovered from the error offset.
 * Encoding of responses lives in json_encode.c.
 */
#include "json_codec.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lease/clock.h"
#include "lease/identity.h"
#include "lease/json_text.h"
#include "copy_text.h"

/* Field presence rules, one table per operation. */
typedef enum presence {
    OPTIONAL = 0,
    REQUIRED,
} presence_t;

typedef struct field_rule {
    const char *name;
    presence_t presence;
} field_rule_t;

/* The body fields of each operation are lease/operations.h's; these are
 * the rules of the objects inside a body (an identity, a write). */
static const field_rule_t identity_fields[] = {
    {"tenant_id", REQUIRED},       {"program_id", REQUIRED}, {"target_namespace", REQUIRED},
    {"target_id", REQUIRED},       {"actor_name", REQUIRED}, {"workflow_name", REQUIRED},
    {"operation_class", OPTIONAL}, {NULL, OPTIONAL},
};
static const field_rule_t document_fields[] = {
    {"kind", REQUIRED}, {"key", REQUIRED}, {"expected_revision", REQUIRED},
    {"body", REQUIRED}, {NULL, OPTIONAL},
};
static const field_rule_t publication_fields[] = {
    {"kind", REQUIRED},
    {"topic", REQUIRED},
    {"payload", REQUIRED},
    {NULL, OPTIONAL},
};

/* The decoding state of one body: where errors go, and the path prefix of
 * the object being walked ("", "lock_identity.", "writes[1]."). */
typedef struct decoder {
    leased_codec_error_t *err;
    const leased_codec_limits_t *limits;
} decoder_t;

/* Field names are cut at LEASE_FIELD_MAX bytes (a client's own long key). */
static bool fail(decoder_t *d, const char *prefix, const char *name, const char *reason)
{
    size_t cap = sizeof d->err->field - 1;
    size_t a = strlen(prefix), b = strlen(name);
    if (a > cap)
        a = cap;
    if (b > cap - a)
        b = cap - a;
    memcpy(d->err->field, prefix, a);
    memcpy(d->err->field + a, name, b);
    d->err->field[a + b] = '\0';
    if (a + b == 0) /* a client's own empty key at the top: the body is wrong */
        snprintf(d->err->field, sizeof d->err->field, "body");
    d->err->reason = reason;
    return false;
}

/* Checks unknown and missing fields of obj against rules. */
static bool check_fields(decoder_t *d, json_t *obj, const field_rule_t *rules, const char *prefix)
{
    const char *key;
    json_t *value;
    json_object_foreach(obj, key, value)
    {
        bool known = false;
        for (const field_rule_t *r = rules; r->name; r++)
            if (strcmp(r->name, key) == 0)
                known = true;
        if (!known)
            return fail(d, prefix, key, "unknown field");
    }
    for (const field_rule_t *r = rules; r->name; r++)
        if (r->presence == REQUIRED && !json_object_get(obj, r->name))
            return fail(d, prefix, r->name, "required");
    return true;
}

/* Checks unknown and missing fields of a body against its operation's
 * fields (lease/operations.h); a DIGEST_ONLY row is not a body field. */
static bool check_body_fields(decoder_t *d, json_t *obj, const lease_field_t *fields,
                              const char *prefix)
{
    const char *key;
    json_t *value;
    json_object_foreach(obj, key, value)
    {
        bool known = false;
        for (const lease_field_t *f = fields; f->name; f++)
            if (f->presence != LEASE_FIELD_DIGEST_ONLY && strcmp(f->name, key) == 0)
                known = true;
        if (!known)
            return fail(d, prefix, key, "unknown field");
    }
    for (const lease_field_t *f = fields; f->name; f++)
        if (f->presence == LEASE_FIELD_REQUIRED && !json_object_get(obj, f->name))
            return fail(d, prefix, f->name, "required");
    return true;
}

/* A string field copied into out (size outsz, including NUL); absent is
 * fine when optional (out stays ""). */
static bool get_string(decoder_t *d, json_t *obj, const char *prefix, const char *name,
                       const char **out)
{
    json_t *v = json_object_get(obj, name);
    *out = NULL;
    if (!v)
        return true;
    if (!json_is_string(v))
        return fail(d, prefix, name, "must be a string");
    *out = json_string_value(v);
    return true;
}

/* Identifier fields: 1..128 of [A-Za-z0-9._:-]. */
static bool get_id(decoder_t *d, json_t *obj, const char *prefix, const char *name, char *out,
                   size_t outsz)
{
    const char *s;
    if (!get_string(d, obj, prefix, name, &s))
        return false;
    if (!s)
        return true;
    if (!lease_id_valid(s) || strlen(s) >= outsz)
        return fail(d, prefix, name, "must be 1..128 of [A-Za-z0-9._:-]");
    leased_copy_text(out, outsz, s);
    return true;
}

static bool get_int(decoder_t *d, json_t *obj, const char *prefix, const char *name, int64_t min,
                    int64_t max, bool *present, int64_t *out)
{
    json_t *v = json_object_get(obj, name);
    if (present)
        *present = v != NULL;
    if (!v)
        return true;
    if (!json_is_integer(v))
        return fail(d, prefix, name, "must be an integer");
    json_int_t n = json_integer_value(v);
    if (n < min || n > max)
        return fail(d, prefix, name, "out of range");
    *out = (int64_t)n;
    return true;
}

/* Free text (reason): 1..max bytes of UTF-8 (jansson validated it) without
 * control characters. */
static bool get_text(decoder_t *d, json_t *obj, const char *name, char *out, size_t outsz)
{
    const char *s;
    if (!get_string(d, obj, "", name, &s))
        return false;
    if (!s)
        return true;
    size_t n = strlen(s);
    if (n == 0 || n >= outsz)
        return fail(d, "", name, "length out of range");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return fail(d, "", name, "control characters are not allowed");
    memcpy(out, s, n + 1);
    return true;
}

static bool decode_identity(decoder_t *d, json_t *body, lease_identity_t *out)
{
    static const char prefix[] = "lock_identity.";
    json_t *obj = json_object_get(body, "lock_identity");
    if (!json_is_object(obj))
        return fail(d, "", "lock_identity", "must be an object");
    if (!check_fields(d, obj, identity_fields, prefix))
        return false;
    lease_identity_input_t in;
    const char **slots[] = {&in.tenant_id, &in.program_id, &in.target_namespace,
                            &in.target_id, &in.actor_name, &in.workflow_name};
    for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++)
        if (!get_string(d, obj, prefix, identity_fields[i].name, slots[i]))
            return false;
    json_t *oc = json_object_get(obj, "operation_class");
    if (oc && !json_is_null(oc) && !json_is_string(oc))
        return fail(d, prefix, "operation_class", "must be a string or null");
    in.operation_class = oc && json_is_string(oc) ? json_string_value(oc) : NULL;
    const char *bad = NULL;
    if (!lease_identity_normalize(&in, out, &bad)) {
        /* a half-normalised identity must not be mistaken for one (audit
         * records identities of refused requests only when complete) */
        memset(out, 0, sizeof *out);
        return fail(d, prefix, bad ? bad : "tenant_id", "invalid identity component");
    }
    return true;
}

static bool decode_deadline(decoder_t *d, json_t *body, leased_deadline_input_t *out)
{
    json_t *ms = json_object_get(body, "deadline_ms");
    json_t *at = json_object_get(body, "deadline_at");
    out->kind = LEASED_DEADLINE_NONE;
    if (ms && at)
        return fail(d, "", "deadline_at", "deadline_ms and deadline_at are exclusive");
    if (ms) {
        int64_t v = 0;
        if (!get_int(d, body, "", "deadline_ms", 1, INT64_MAX / 1000000, NULL, &v))
            return false;
        out->kind = LEASED_DEADLINE_RELATIVE;
        out->ms = v;
    } else if (at) {
        int64_t wall = 0;
        if (!json_is_string(at))
            return fail(d, "", "deadline_at", "must be a string");
        if (!lease_time_parse(json_string_value(at), &wall))
            return fail(d, "", "deadline_at", "must be an RFC 3339 timestamp");
        out->kind = LEASED_DEADLINE_ABSOLUTE;
        out->ms = wall;
    }
    return true;
}

static bool metadata_key_valid(const char *k)
{
    size_t n = strlen(k);
    if (n == 0 || n > LEASED_METADATA_KEY_MAX)
        return false;
    for (; *k; k++)
        if (!((*k >= 'a' && *k <= 'z') || (*k >= '0' && *k <= '9') || *k == '_'))
            return false;
    return true;
}

/* The metadata rules of docs/api.md: a flat object of at most 16 keys
 * [a-z0-9_]{1,64}, values string (<= 256 bytes), number (magnitude at most
 * 2^53-1, so jsonb gives back exactly the value sent) or boolean, at most
 * 2 KiB compact (reals in their shortest form). Stored with sorted keys so the request digest does
 * not depend on the client's key order. */
static bool decode_metadata(decoder_t *d, json_t *body, char *out, size_t outsz)
{
    static const char prefix[] = "metadata.";
    json_t *md = json_object_get(body, "metadata");
    snprintf(out, outsz, "{}");
    if (!md)
        return true;
    if (!json_is_object(md))
        return fail(d, "", "metadata", "must be an object");
    if (json_object_size(md) > LEASED_METADATA_KEYS_MAX)
        return fail(d, "", "metadata", "too many keys");
    const char *key;
    json_t *v;
    json_object_foreach(md, key, v)
    {
        if (!metadata_key_valid(key))
            return fail(d, prefix, key, "key must be [a-z0-9_]{1,64}");
        if (json_is_string(v)) {
            if (json_string_length(v) > LEASED_METADATA_STRING_MAX)
                return fail(d, prefix, key, "string longer than 256 bytes");
        } else if (json_is_number(v)) {
            /* a number must come back from jsonb as the value sent */
            if (!lease_json_number_safe(v))
                return fail(d, prefix, key, "number magnitude above 2^53-1");
        } else if (!json_is_boolean(v)) {
            return fail(d, prefix, key, "must be a string, number or boolean");
        }
    }
    char *text = lease_json_dumps(md, JSON_SORT_KEYS);
    if (!text)
        return fail(d, "", "metadata", "cannot be encoded");
    size_t n = strlen(text);
    bool fits = n <= LEASE_METADATA_MAX && n < outsz;
    if (fits)
        memcpy(out, text, n + 1);
    free(text);
    return fits ? true : fail(d, "", "metadata", "larger than 2 KiB");
}

static bool write_key_valid(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n == 0 || n > max)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              strchr("._:/-", *s)))
            return false;
    return true;
}

static bool decode_write(decoder_t *d, json_t *item, size_t i, leased_request_t *req)
{
    char prefix[32];
    snprintf(prefix, sizeof prefix, "writes[%zu].", i);
    lease_write_t *w = &req->u.commit.writes[i];
    if (!json_is_object(item)) {
        char name[24];
        snprintf(name, sizeof name, "writes[%zu]", i);
        return fail(d, "", name, "must be an object");
    }
    json_t *kind = json_object_get(item, "kind");
    if (!kind)
        return fail(d, prefix, "kind", "required");
    if (!json_is_string(kind))
        return fail(d, prefix, "kind", "must be a string");
    const char *k = json_string_value(kind);
    const char *key_name, *json_name;
    if (strcmp(k, "document") == 0) {
        w->kind = LEASE_WRITE_DOCUMENT;
        key_name = "key";
        json_name = "body";
        if (!check_fields(d, item, document_fields, prefix))
            return false;
        if (!get_int(d, item, prefix, "expected_revision", 0, INT64_MAX, NULL,
                     &w->expected_revision))
            return false;
    } else if (strcmp(k, "publication") == 0) {
        w->kind = LEASE_WRITE_PUBLICATION;
        key_name = "topic";
        json_name = "payload";
        if (!check_fields(d, item, publication_fields, prefix))
            return false;
    } else {
        return fail(d, prefix, "kind", "must be document or publication");
    }
    const char *key;
    if (!get_string(d, item, prefix, key_name, &key))
        return false;
    if (w->kind == LEASE_WRITE_DOCUMENT && !write_key_valid(key, LEASE_DOC_KEY_MAX))
        return fail(d, prefix, key_name, "must be 1..256 of [A-Za-z0-9._:/-]");
    /* a topic the relay could never publish is refused here, not found out
     * by the relay (an AMQP routing key is a short string of 255 bytes) */
    if (w->kind == LEASE_WRITE_PUBLICATION && !write_key_valid(key, LEASE_TOPIC_MAX)) {
        d->err->bound = "topic must be 1 to 255 characters of [A-Za-z0-9._:/-] (an AMQP "
                        "routing key holds at most 255 bytes)";
        return fail(d, prefix, key_name,
                    "must be 1..255 of [A-Za-z0-9._:/-] (an AMQP routing key holds 255 bytes)");
    }
    leased_copy_text(w->key, sizeof w->key, key);
    json_t *content = json_object_get(item, json_name);
    if (!json_is_object(content))
        return fail(d, prefix, json_name, "must be an object");
    /* shortest reals: jsonb stores the decimal text it is given */
    req->write_json[i] = lease_json_dumps(content, JSON_SORT_KEYS);
    if (!req->write_json[i])
        return fail(d, prefix, json_name, "cannot be encoded");
    w->json = req->write_json[i];
    return true;
}

static bool decode_writes(decoder_t *d, json_t *body, leased_request_t *req)
{
    json_t *arr = json_object_get(body, "writes");
    if (!json_is_array(arr))
        return fail(d, "", "writes", "must be an array");
    size_t n = json_array_size(arr);
    if (n == 0 || n > LEASE_COMMIT_WRITES_MAX)
        return fail(d, "", "writes", "must hold 1..32 writes");
    for (size_t i = 0; i < n; i++)
        if (!decode_write(d, json_array_get(arr, i), i, req))
            return false;
    req->u.commit.n_writes = n;
    return true;
}

static bool decode_batch(decoder_t *d, json_t *b, leased_request_t *req, bool renew);

/*
 * Reads the fields of one body (or batch item) into the store request at
 * base, in the order of their list: the first that fails is the one the
 * answer names. req is the whole request (wait, deadline, items, writes);
 * check_body_fields has run.
 */
static bool decode_fields(decoder_t *d, json_t *b, const lease_field_t *fields, void *base,
                          leased_request_t *req)
{
    for (const lease_field_t *f = fields; f->name; f++) {
        char *member = (char *)base + f->offset;
        bool ok = true;
        switch (f->kind) {
        case LEASE_FIELD_ID:
            ok = f->presence == LEASE_FIELD_DIGEST_ONLY ||
                 get_id(d, b, "", f->name, member, f->size);
            break;
        case LEASE_FIELD_INT:
            ok = get_int(d, b, "", f->name, f->min, f->max, NULL, (int64_t *)(void *)member);
            break;
        case LEASE_FIELD_TEXT:
            ok = get_text(d, b, f->name, member, f->size);
            break;
        case LEASE_FIELD_IDENTITY:
            ok = decode_identity(d, b, (lease_identity_t *)(void *)member);
            break;
        case LEASE_FIELD_METADATA:
            ok = decode_metadata(d, b, member, f->size);
            break;
        case LEASE_FIELD_WAIT:
            ok = get_int(d, b, "", f->name, 0, d->limits->max_wait_ms, NULL, &req->wait_ms);
            break;
        case LEASE_FIELD_DEADLINE_MS:
            ok = decode_deadline(d, b, &req->deadline); /* deadline_at with it */
            break;
        case LEASE_FIELD_ITEMS:
            ok = decode_batch(d, b, req, lease_operation_item(req->op) == LEASED_OP_RENEW);
            break;
        case LEASE_FIELD_WRITES:
            ok = decode_writes(d, b, req);
            break;
        default: /* DEADLINE_AT (read with DEADLINE_MS); LIST_FILTER (decode_list) */
            break;
        }
        if (!ok)
            return false;
    }
    return true;
}

/* One renewal (or release) of a batch. Its fields are checked as a
 * renewal's (release's), then the failing field's name is placed under
 * "renewals[i]." ("releases[i]."). */
static bool decode_batch_item(decoder_t *d, json_t *b, const char *list, size_t i, bool renew,
                              lease_owner_req_t *o)
{
    const lease_field_t *fields = renew ? lease_renew_item_fields : lease_release_item_fields;
    bool ok = json_is_object(b) && check_body_fields(d, b, fields, "") &&
              decode_fields(d, b, fields, o, NULL);
    if (ok)
        return true;
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%s[%zu]", list, i);
    if (!json_is_object(b))
        return fail(d, "", prefix, "must be an object");
    char inner[sizeof d->err->field];
    leased_copy_text(inner, sizeof inner, d->err->field);
    const char *reason = d->err->reason;
    snprintf(prefix, sizeof prefix, "%s[%zu].", list, i);
    fail(d, prefix, inner, reason);
    return false;
}

/* The items of POST /v1/leases/renew-batch (renew) or /release-batch. */
static bool decode_batch(decoder_t *d, json_t *b, leased_request_t *req, bool renew)
{
    const char *list = renew ? "renewals" : "releases";
    json_t *items = json_object_get(b, list);
    size_t n = json_array_size(items);
    if (!json_is_array(items) || n < 1 || n > LEASE_RENEW_BATCH_MAX) {
        d->err->bound = renew ? "renewals must be an array of 1 to 100 renewals"
                              : "releases must be an array of 1 to 100 releases";
        return fail(d, "", list,
                    renew ? "must be an array of 1 to 100 renewals"
                          : "must be an array of 1 to 100 releases");
    }
    req->items = calloc(n, sizeof *req->items);
    if (!req->items)
        return fail(d, "", "body", "out of memory");
    req->n_items = n;
    for (size_t i = 0; i < n; i++)
        if (!decode_batch_item(d, json_array_get(items, i), list, i, renew, &req->items[i]))
            return false;
    return true;
}

static bool get_component(decoder_t *d, json_t *b, const char *name, char *out, size_t outsz)
{
    const char *s;
    if (!get_string(d, b, "", name, &s))
        return false;
    if (!s)
        return true;
    if (!lease_identity_component_normalize(name, s, out, outsz))
        return fail(d, "", name, "invalid identity component");
    return true;
}

static bool decode_list(decoder_t *d, json_t *b, leased_request_t *req)
{
    lease_list_req_t *l = &req->u.list;
    const char *by;
    if (!get_string(d, b, "", "by", &by))
        return false;
    if (strcmp(by, "owner") == 0)
        l->by = LEASE_LIST_BY_OWNER;
    else if (strcmp(by, "target") == 0)
        l->by = LEASE_LIST_BY_TARGET;
    else if (strcmp(by, "program") == 0)
        l->by = LEASE_LIST_BY_PROGRAM;
    else
        return fail(d, "", "by", "must be owner, target or program");
    bool by_target = l->by == LEASE_LIST_BY_TARGET;
    static const char *const scope_filters[] = {"tenant_id", "program_id"};
    for (size_t i = 0; i < 2 && l->by != LEASE_LIST_BY_OWNER; i++)
        if (!json_object_get(b, scope_filters[i]))
            return fail(d, "", scope_filters[i], "required");
    static const char *const target_filters[] = {"target_namespace", "target_id"};
    for (size_t i = 0; i < 2; i++) {
        bool present = json_object_get(b, target_filters[i]) != NULL;
        if (by_target && !present)
            return fail(d, "", target_filters[i], "required");
        if (!by_target && present)
            return fail(d, "", target_filters[i], "only with by=target");
    }
    int64_t page_size = 0;
    const char *token;
    if (!get_component(d, b, "tenant_id", l->tenant_id, sizeof l->tenant_id) ||
        !get_component(d, b, "program_id", l->program_id, sizeof l->program_id) ||
        !get_component(d, b, "target_namespace", l->target_namespace, sizeof l->target_namespace) ||
        !get_component(d, b, "target_id", l->target_id, sizeof l->target_id) ||
        !get_int(d, b, "", "page_size", 1, LEASED_PAGE_SIZE_CAP, NULL, &page_size) ||
        !get_string(d, b, "", "page_token", &token) || !decode_deadline(d, b, &req->deadline))
        return false;
    l->page_size = (int)page_size;
    if (token) {
        size_t n = strlen(token);
        if (n == 0 || n > LEASE_PAGE_TOKEN_MAX)
            return fail(d, "", "page_token", "length out of range");
        for (const char *p = token; *p; p++)
            if (*p <= 0x20 || *p >= 0x7f)
                return fail(d, "", "page_token", "not a page token");
        memcpy(l->page_token, token, n + 1);
    }
    return true;
}

/*
 * The dotted path of the value being read at byte offset pos of a JSON text
 * that jansson accepted up to there. Tracks objects (with their current key)
 * and arrays (with their current index); "body" when at the top.
 */
static void path_at(const char *text, size_t len, size_t pos, char *out, size_t outsz)
{
    enum { DEPTH = 16 };
    struct frame {
        bool is_array;
        size_t index;
        bool expect_key;
        char key[LEASE_FIELD_MAX + 1];
    } st[DEPTH];
    int depth = 0; /* frames in use; deeper nesting is tracked but not named */
    int overflow = 0;
    bool top_closed = false; /* the top value ended: what follows is the body's fault */
    if (pos > len)
        pos = len;
    for (size_t i = 0; i < pos && !top_closed; i++) {
        char c = text[i];
        struct frame *top = depth > 0 && !overflow ? &st[depth - 1] : NULL;
        if (c == '{' || c == '[') {
            if (depth == DEPTH) {
                overflow++;
                continue;
            }
            st[depth] = (struct frame){.is_array = c == '[', .expect_key = c == '{'};
            depth++;
        } else if (c == '}' || c == ']') {
            if (overflow)
                overflow--;
            else if (depth > 0 && --depth == 0)
                top_closed = true;
        } else if (c == ',' && top) {
            if (top->is_array)
                top->index++;
            else
                top->expect_key = true;
        } else if (c == ':' && top && !top->is_array) {
            top->expect_key = false;
        } else if (c == '"') {
            size_t start = ++i;
            while (i < pos && text[i] != '"')
                i += text[i] == '\\' ? 2 : 1;
            if (top && !top->is_array && top->expect_key) {
                size_t n = (i < pos ? i : pos) - start;
                if (n > LEASE_FIELD_MAX)
                    n = LEASE_FIELD_MAX;
                memcpy(top->key, text + start, n);
                top->key[n] = '\0';
            }
        }
    }
    size_t used = 0;
    out[0] = '\0';
    if (top_closed)
        depth = 0;
    for (int f = 0; f < depth && used < outsz; f++) {
        int n;
        if (st[f].is_array)
            n = snprintf(out + used, outsz - used, "[%zu]", st[f].index);
        else if (st[f].key[0])
            n = snprintf(out + used, outsz - used, "%s%s", used ? "." : "", st[f].key);
        else
            n = 0;
        if (n < 0)
            break;
        used += (size_t)n;
    }
    if (!out[0])
        snprintf(out, outsz, "body");
}

bool leased_codec_decode(leased_op_t op, const char *body, size_t len, const char *lease_id,
                         const leased_codec_limits_t *limits, leased_request_t *req,
                         leased_codec_error_t *err)
{
    decoder_t d = {err, limits};
    err->field[0] = '\0';
    err->reason = NULL;
    err->bound = NULL;
    if (lease_operation(op)->shape == LEASE_SHAPE_GET) {
        if (len > 0)
            return fail(&d, "", "body", "GET takes no body");
        if (!lease_id || !lease_id_valid(lease_id))
            return fail(&d, "", "lease_id", "must be 1..128 of [A-Za-z0-9._:-]");
        leased_copy_text(req->u.inspect.lease_id, sizeof req->u.inspect.lease_id, lease_id);
        req->u.inspect.by_identity = false;
        return true;
    }
    if (len == 0)
        return fail(&d, "", "body", "a JSON object is required");
    if (len > LEASED_BODY_MAX)
        return fail(&d, "", "body", "larger than 64 KiB");
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        /* a body cut short is wrong as a whole, not at its last field */
        if (json_error_code(&jerr) == json_error_premature_end_of_input)
            snprintf(err->field, sizeof err->field, "body");
        else
            path_at(body, len, (size_t)(jerr.position > 0 ? jerr.position : 0), err->field,
                    sizeof err->field);
        err->reason =
            json_error_code(&jerr) == json_error_duplicate_key ? "duplicate key" : "not valid JSON";
        return false;
    }
    bool ok;
    if (!json_is_object(root)) {
        ok = fail(&d, "", "body", "must be a JSON object");
        goto cleanup;
    }
    const lease_operation_t *desc = lease_operation(op);
    if (desc->shape == LEASE_SHAPE_NONE) {
        ok = fail(&d, "", "body", "this route takes no body");
        goto cleanup;
    }
    if (desc->shape == LEASE_SHAPE_INSPECT)
        req->u.inspect.by_identity = true; /* its body names an identity */
    ok = check_body_fields(&d, root, desc->fields, "");
    if (ok && desc->shape == LEASE_SHAPE_LIST)
        ok = decode_list(&d, root, req); /* rules between its filters */
    else if (ok)
        ok = decode_fields(&d, root, desc->fields, &req->u, req);
    if (ok && desc->shape == LEASE_SHAPE_SESSION && lease_id && lease_id[0]) {
        /* keep-alive and close: the session the path names */
        if (!lease_id_valid(lease_id))
            ok = fail(&d, "", "session_id", "must be 1..128 of [A-Za-z0-9._:-]");
        else
            leased_copy_text(req->u.session.session_id, sizeof req->u.session.session_id, lease_id);
    }
cleanup:
    json_decref(root);
    return ok;
}
