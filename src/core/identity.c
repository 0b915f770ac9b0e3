/*
 * identity.c - validation and normalisation of the seven lock-identity
 * components, identifier syntax, and lock-key derivation.
 *
 * The rules are those of docs/contract.md ("Identity") and nothing else: the only
 * equivalences accepted are ASCII case folding where a component's rule says
 * so and an absent operation class meaning "default". Everything else that
 * does not match is rejected, never repaired. migrations/ implements the same
 * rules in SQL (lease.lock_key); tests/vectors/lock_keys.json holds both to
 * one answer.
 */
#include "lease/identity.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lease/hash.h"

/* The character rule of one kind of component. */
typedef enum component_kind {
    KIND_NAME,      /* tenant, program, actor, workflow: [a-z0-9][a-z0-9_-]*, folded */
    KIND_NAMESPACE, /* [a-z0-9][a-z0-9._-]*, no "..", folded */
    KIND_TARGET_ID, /* [A-Za-z0-9][A-Za-z0-9._:-]*, no "..", case preserved */
    KIND_OPCLASS,   /* closed enum, folded, NULL means "default" */
} component_kind_t;

typedef struct component {
    const char *name; /* the field name reported as bad_field */
    component_kind_t kind;
    size_t max_len;
    size_t offset;    /* of the value in lease_identity_t */
    size_t in_offset; /* of the raw value in lease_identity_input_t */
} component_t;

/* In canonical tuple order: the lock key's JSON array follows this table. */
static const component_t components[] = {
    {"tenant_id", KIND_NAME, LEASE_NAME_MAX, offsetof(lease_identity_t, tenant_id),
     offsetof(lease_identity_input_t, tenant_id)},
    {"program_id", KIND_NAME, LEASE_NAME_MAX, offsetof(lease_identity_t, program_id),
     offsetof(lease_identity_input_t, program_id)},
    {"target_namespace", KIND_NAMESPACE, LEASE_NAME_MAX,
     offsetof(lease_identity_t, target_namespace),
     offsetof(lease_identity_input_t, target_namespace)},
    {"target_id", KIND_TARGET_ID, LEASE_TARGET_ID_MAX, offsetof(lease_identity_t, target_id),
     offsetof(lease_identity_input_t, target_id)},
    {"actor_name", KIND_NAME, LEASE_NAME_MAX, offsetof(lease_identity_t, actor_name),
     offsetof(lease_identity_input_t, actor_name)},
    {"workflow_name", KIND_NAME, LEASE_NAME_MAX, offsetof(lease_identity_t, workflow_name),
     offsetof(lease_identity_input_t, workflow_name)},
    {"operation_class", KIND_OPCLASS, LEASE_OPCLASS_MAX,
     offsetof(lease_identity_t, operation_class),
     offsetof(lease_identity_input_t, operation_class)},
};
#define N_COMPONENTS (sizeof components / sizeof components[0])

static const char *const operation_classes[] = {"default", "collect", "enrich", "publish",
                                                "maintenance"};

/* ASCII only: locale-dependent <ctype.h> must not decide identity. */
static bool is_lower_alnum(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool is_alnum(unsigned char c)
{
    return is_lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

static unsigned char fold(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c - 'A' + 'a') : c;
}

/* Whether c may start a component of this kind (after folding). */
static bool allowed_first(component_kind_t kind, unsigned char c)
{
    switch (kind) {
    case KIND_NAME:
    case KIND_NAMESPACE:
        return is_lower_alnum(c);
    case KIND_TARGET_ID:
        return is_alnum(c);
    case KIND_OPCLASS:
        return c >= 'a' && c <= 'z';
    }
    return false;
}

/* Whether c may follow the first character of a component of this kind
 * (after folding where the kind folds). */
static bool allowed_rest(component_kind_t kind, unsigned char c)
{
    switch (kind) {
    case KIND_NAME:
        return is_lower_alnum(c) || c == '_' || c == '-';
    case KIND_NAMESPACE:
        return is_lower_alnum(c) || c == '_' || c == '-' || c == '.';
    case KIND_TARGET_ID:
        return is_alnum(c) || c == '_' || c == '-' || c == '.' || c == ':';
    case KIND_OPCLASS:
        return c >= 'a' && c <= 'z';
    }
    return false;
}

/*
 * Validates `value` as a component of `c` and writes its normalised form into
 * out (outsz bytes). Non-ASCII bytes fall outside every character class, so
 * UTF-8 validity needs no separate check: nothing but ASCII is ever accepted.
 */
static bool normalize_one(const component_t *c, const char *value, char *out, size_t outsz)
{
    if (c->kind == KIND_OPCLASS && value == NULL)
        value = "default";
    if (value == NULL)
        return false;
    size_t len = strnlen(value, c->max_len + 1);
    if (len == 0 || len > c->max_len || len + 1 > outsz)
        return false;

    bool folds = c->kind != KIND_TARGET_ID;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)value[i];
        if (folds)
            ch = fold(ch);
        if (!(i == 0 ? allowed_first(c->kind, ch) : allowed_rest(c->kind, ch)))
            return false;
        /* ".." is path syntax; a single '.' is an ordinary separator. */
        if (ch == '.' && i > 0 && out[i - 1] == '.')
            return false;
        out[i] = (char)ch;
    }
    out[len] = '\0';

    if (c->kind == KIND_OPCLASS) {
        for (size_t i = 0; i < sizeof operation_classes / sizeof operation_classes[0]; i++)
            if (strcmp(out, operation_classes[i]) == 0)
                return true;
        return false;
    }
    return true;
}

bool lease_identity_normalize(const lease_identity_input_t *in, lease_identity_t *out,
                              const char **bad_field)
{
    if (bad_field)
        *bad_field = NULL;
    for (size_t i = 0; i < N_COMPONENTS; i++) {
        const component_t *c = &components[i];
        const char *value = in ? *(const char *const *)((const char *)in + c->in_offset) : NULL;
        char *dst = (char *)out + c->offset;
        if (!normalize_one(c, value, dst, c->max_len + 1)) {
            if (bad_field)
                *bad_field = c->name;
            return false;
        }
    }
    return true;
}

bool lease_identity_component_normalize(const char *field, const char *value, char *out,
                                        size_t outsz)
{
    if (!field || !out || outsz == 0)
        return false;
    for (size_t i = 0; i < N_COMPONENTS; i++)
        if (strcmp(field, components[i].name) == 0)
            return normalize_one(&components[i], value, out, outsz);
    return false;
}

bool lease_identity_equal(const lease_identity_t *a, const lease_identity_t *b)
{
    for (size_t i = 0; i < N_COMPONENTS; i++) {
        const char *x = (const char *)a + components[i].offset;
        const char *y = (const char *)b + components[i].offset;
        if (strncmp(x, y, components[i].max_len + 1) != 0)
            return false;
    }
    return true;
}

/* RFC 4648 section 5 alphabet, no padding. */
static size_t base64url_encode(const unsigned char *in, size_t n, char *out)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t o = 0;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[o++] = alphabet[(v >> 18) & 63];
        out[o++] = alphabet[(v >> 12) & 63];
        out[o++] = alphabet[(v >> 6) & 63];
        out[o++] = alphabet[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)in[i] << 16;
        out[o++] = alphabet[(v >> 18) & 63];
        out[o++] = alphabet[(v >> 12) & 63];
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
        out[o++] = alphabet[(v >> 18) & 63];
        out[o++] = alphabet[(v >> 12) & 63];
        out[o++] = alphabet[(v >> 6) & 63];
    }
    out[o] = '\0';
    return o;
}

/* A lock key must never be derived from an identity that skipped
 * normalisation: it would name a different lock than SQL derives. This is a
 * caller bug, so it stops the process instead of returning a wrong key. */
static void fatal(const char *why) __attribute__((noreturn));
static void fatal(const char *why)
{
    fprintf(stderr, "lease_lock_key: %s\n", why);
    abort();
}

void lease_lock_key(const lease_identity_t *id, char out[LEASE_LOCK_KEY_LEN + 1])
{
    /* ["v1", then 7 quoted values and separators: bounded by the field sizes */
    char json[8 + N_COMPONENTS * (LEASE_TARGET_ID_MAX + 3) + 2];
    size_t n = 0;
    memcpy(json, "[\"v1\"", 5);
    n = 5;
    for (size_t i = 0; i < N_COMPONENTS; i++) {
        const char *v = (const char *)id + components[i].offset;
        size_t len = strnlen(v, components[i].max_len + 1);
        if (len == 0 || len > components[i].max_len)
            fatal("identity component is empty or unterminated");
        /* Normalised components are printable ASCII without '"' or '\\', so
         * the compact JSON text is the bytes themselves, no escaping. */
        for (size_t j = 0; j < len; j++) {
            unsigned char ch = (unsigned char)v[j];
            if (ch < 0x20 || ch > 0x7e || ch == '"' || ch == '\\')
                fatal("identity component would need JSON escaping");
        }
        json[n++] = ',';
        json[n++] = '"';
        memcpy(json + n, v, len);
        n += len;
        json[n++] = '"';
    }
    json[n++] = ']';

    unsigned char md[32];
    if (!lease_sha256(json, n, md))
        fatal("SHA-256 failed");

    size_t prefix = sizeof(LEASE_LOCK_KEY_PREFIX) - 1;
    memcpy(out, LEASE_LOCK_KEY_PREFIX, prefix);
    base64url_encode(md, sizeof md, out + prefix);
}

bool lease_id_valid(const char *s)
{
    if (!s)
        return false;
    size_t len = strnlen(s, LEASE_ID_MAX + 1);
    if (len == 0 || len > LEASE_ID_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!(is_alnum(c) || c == '.' || c == '_' || c == ':' || c == '-'))
            return false;
    }
    return true;
}
