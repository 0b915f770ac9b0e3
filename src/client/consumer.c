/*
 * consumer.c - duplicate and stale detection for consumers of the relay.
 *
 * Two open-addressing hash tables under one mutex:
 * - recorded message ids, with a FIFO ring of the last `window` of them so
 *   the oldest is forgotten first (deleted slots become tombstones; the
 *   table is rebuilt when they pile up);
 * - identities (keyed by their lock key, derived locally and never shown)
 *   to the highest recorded fencing token.
 */
#include "lease/consumer.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_WINDOW 65536
#define EMPTY 0
#define TOMBSTONE -1

typedef struct identity_slot {
    char *key; /* NULL: empty */
    int64_t max_token;
} identity_slot_t;

struct lease_consumer {
    pthread_mutex_t mu;
    /* message ids */
    int64_t *ids; /* EMPTY, TOMBSTONE or an id (> 0) */
    size_t ids_cap, ids_used, ids_tombs;
    int64_t *ring; /* recorded ids, oldest at ring_head */
    size_t window, ring_head, ring_len;
    /* identities */
    identity_slot_t *idents;
    size_t idents_cap, idents_len;
};

const char *lease_delivery_verdict_name(lease_delivery_verdict_t v)
{
    switch (v) {
    case LEASE_DELIVERY_NEW:
        return "new";
    case LEASE_DELIVERY_DUPLICATE:
        return "duplicate";
    case LEASE_DELIVERY_STALE:
        return "stale";
    }
    return "unknown";
}

/* ------------------------------------------------------------------ */
/* Parsing                                                               */

static bool parse_positive(const char *s, int64_t *out)
{
    if (!s || !*s || *s == '0' || strlen(s) > 19)
        return false;
    int64_t n = 0;
    for (const char *c = s; *c; c++) {
        if (*c < '0' || *c > '9')
            return false;
        if (n > (INT64_MAX - (*c - '0')) / 10)
            return false;
        n = n * 10 + (*c - '0');
    }
    *out = n;
    return true;
}

static const char *header(size_t n, const char *const *names, const char *const *values,
                          const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (names[i] && strcmp(names[i], name) == 0)
            return values[i];
    return NULL;
}

bool lease_delivery_parse(const char *message_id, size_t n_headers, const char *const *names,
                          const char *const *values, lease_delivery_t *out, const char **bad)
{
    const char *dummy;
    if (!bad)
        bad = &dummy;
    memset(out, 0, sizeof *out);
    if (!parse_positive(message_id, &out->outbox_id)) {
        *bad = "message_id";
        return false;
    }
    if (!parse_positive(header(n_headers, names, values, "fencing_token"), &out->fencing_token)) {
        *bad = "fencing_token";
        return false;
    }
    const char *lease_id = header(n_headers, names, values, "lease_id");
    if (!lease_id || !lease_id_valid(lease_id)) {
        *bad = "lease_id";
        return false;
    }
    snprintf(out->lease_id, sizeof out->lease_id, "%s", lease_id);
    const char *trace = header(n_headers, names, values, "trace_id");
    if (trace && !lease_id_valid(trace)) {
        *bad = "trace_id";
        return false;
    }
    snprintf(out->trace_id, sizeof out->trace_id, "%s", trace ? trace : "");
    lease_identity_input_t in = {
        header(n_headers, names, values, "tenant_id"),
        header(n_headers, names, values, "program_id"),
        header(n_headers, names, values, "target_namespace"),
        header(n_headers, names, values, "target_id"),
        header(n_headers, names, values, "actor_name"),
        header(n_headers, names, values, "workflow_name"),
        header(n_headers, names, values, "operation_class"),
    };
    if (!in.operation_class) {
        *bad = "operation_class";
        return false;
    }
    return lease_identity_normalize(&in, &out->identity, bad);
}

/* ------------------------------------------------------------------ */
/* Message ids                                                          */

static size_t hash_id(int64_t id, size_t cap)
{
    uint64_t x = (uint64_t)id * UINT64_C(0x9E3779B97F4A7C15);
    return (size_t)(x ^ (x >> 29)) & (cap - 1);
}

/* Slot of id, or of the empty slot where it would go. */
static size_t id_slot(const lease_consumer_t *c, int64_t id, bool *found)
{
    size_t i = hash_id(id, c->ids_cap);
    size_t first_tomb = SIZE_MAX;
    for (;;) {
        int64_t v = c->ids[i];
        if (v == id) {
            *found = true;
            return i;
        }
        if (v == EMPTY) {
            *found = false;
            return first_tomb != SIZE_MAX ? first_tomb : i;
        }
        if (v == TOMBSTONE && first_tomb == SIZE_MAX)
            first_tomb = i;
        i = (i + 1) & (c->ids_cap - 1);
    }
}

static void ids_rebuild(lease_consumer_t *c)
{
    memset(c->ids, 0, c->ids_cap * sizeof *c->ids);
    c->ids_used = 0;
    c->ids_tombs = 0;
    for (size_t k = 0; k < c->ring_len; k++) {
        int64_t id = c->ring[(c->ring_head + k) % c->window];
        bool found;
        size_t s = id_slot(c, id, &found);
        c->ids[s] = id;
        c->ids_used++;
    }
}

static void ids_forget_oldest(lease_consumer_t *c)
{
    int64_t old = c->ring[c->ring_head];
    c->ring_head = (c->ring_head + 1) % c->window;
    c->ring_len--;
    bool found;
    size_t s = id_slot(c, old, &found);
    if (found) {
        c->ids[s] = TOMBSTONE;
        c->ids_used--;
        c->ids_tombs++;
    }
    if (c->ids_tombs > c->ids_cap / 4)
        ids_rebuild(c);
}

static void ids_add(lease_consumer_t *c, int64_t id)
{
    bool found;
    size_t s = id_slot(c, id, &found);
    if (found)
        return;
    if (c->ring_len == c->window) {
        ids_forget_oldest(c);
        s = id_slot(c, id, &found);
    }
    if (c->ids[s] == TOMBSTONE)
        c->ids_tombs--;
    c->ids[s] = id;
    c->ids_used++;
    c->ring[(c->ring_head + c->ring_len) % c->window] = id;
    c->ring_len++;
}

/* ------------------------------------------------------------------ */
/* Identities                                                           */

static size_t hash_str(const char *s, size_t cap)
{
    uint64_t h = UINT64_C(1469598103934665603);
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * UINT64_C(1099511628211);
    return (size_t)h & (cap - 1);
}

static identity_slot_t *ident_find(identity_slot_t *t, size_t cap, const char *key)
{
    size_t i = hash_str(key, cap);
    while (t[i].key && strcmp(t[i].key, key) != 0)
        i = (i + 1) & (cap - 1);
    return &t[i];
}

static bool idents_grow(lease_consumer_t *c)
{
    size_t cap = c->idents_cap * 2;
    identity_slot_t *t = calloc(cap, sizeof *t);
    if (!t)
        return false;
    for (size_t i = 0; i < c->idents_cap; i++)
        if (c->idents[i].key)
            *ident_find(t, cap, c->idents[i].key) = c->idents[i];
    free(c->idents);
    c->idents = t;
    c->idents_cap = cap;
    return true;
}

/* ------------------------------------------------------------------ */

static size_t pow2_at_least(size_t n)
{
    size_t p = 16;
    while (p < n)
        p *= 2;
    return p;
}

lease_consumer_t *lease_consumer_new(size_t window)
{
    lease_consumer_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->window = window ? window : DEFAULT_WINDOW;
    c->ids_cap = pow2_at_least(c->window * 2);
    c->ids = calloc(c->ids_cap, sizeof *c->ids);
    c->ring = calloc(c->window, sizeof *c->ring);
    c->idents_cap = 64;
    c->idents = calloc(c->idents_cap, sizeof *c->idents);
    if (!c->ids || !c->ring || !c->idents || pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c->ids);
        free(c->ring);
        free(c->idents);
        free(c);
        return NULL;
    }
    return c;
}

void lease_consumer_free(lease_consumer_t *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->idents_cap; i++)
        free(c->idents[i].key);
    free(c->idents);
    free(c->ids);
    free(c->ring);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

lease_delivery_verdict_t lease_consumer_classify(lease_consumer_t *c, const lease_delivery_t *d)
{
    char key[LEASE_LOCK_KEY_LEN + 1];
    lease_lock_key(&d->identity, key);
    pthread_mutex_lock(&c->mu);
    bool found;
    (void)id_slot(c, d->outbox_id, &found);
    lease_delivery_verdict_t v = LEASE_DELIVERY_NEW;
    if (found) {
        v = LEASE_DELIVERY_DUPLICATE;
    } else {
        const identity_slot_t *s = ident_find(c->idents, c->idents_cap, key);
        if (s->key && d->fencing_token < s->max_token)
            v = LEASE_DELIVERY_STALE;
    }
    pthread_mutex_unlock(&c->mu);
    return v;
}

bool lease_consumer_record(lease_consumer_t *c, const lease_delivery_t *d)
{
    char key[LEASE_LOCK_KEY_LEN + 1];
    lease_lock_key(&d->identity, key);
    bool ok = true;
    pthread_mutex_lock(&c->mu);
    if (c->idents_len + 1 > c->idents_cap / 2 && !idents_grow(c)) {
        ok = false;
        goto out;
    }
    identity_slot_t *s = ident_find(c->idents, c->idents_cap, key);
    if (!s->key) {
        s->key = strdup(key);
        if (!s->key) {
            ok = false;
            goto out;
        }
        s->max_token = d->fencing_token;
        c->idents_len++;
    } else if (d->fencing_token > s->max_token) {
        s->max_token = d->fencing_token;
    }
    ids_add(c, d->outbox_id);
out:
    pthread_mutex_unlock(&c->mu);
    return ok;
}
