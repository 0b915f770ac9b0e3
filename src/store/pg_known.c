/*
 * pg_known.c - the set of identities whose row is known to exist (see
 * pg_known.h): fingerprints in a direct-mapped array of atomic words.
 */
#include "pg_known.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct store_pg_known {
    uint64_t mask;
    uint64_t *slots; /* 0: empty */
};

store_pg_known_t *store_pg_known_new(unsigned bits)
{
    if (bits < 1 || bits > 24)
        return NULL;
    store_pg_known_t *k = calloc(1, sizeof *k);
    if (!k)
        return NULL;
    k->mask = ((uint64_t)1 << bits) - 1;
    k->slots = calloc(k->mask + 1, sizeof *k->slots);
    if (!k->slots) {
        free(k);
        return NULL;
    }
    return k;
}

void store_pg_known_free(store_pg_known_t *k)
{
    if (!k)
        return;
    free(k->slots);
    free(k);
}

uint64_t store_pg_known_fingerprint(const lease_identity_t *id)
{
    /* only a complete identity has a key (lease_lock_key stops the process
     * on an incomplete one; a request with one is refused anyway) */
    if (!id->tenant_id[0] || !id->program_id[0] || !id->target_namespace[0] ||
        !id->target_id[0] || !id->actor_name[0] || !id->workflow_name[0])
        return 0;
    lease_identity_t full = *id;
    if (!full.operation_class[0])
        snprintf(full.operation_class, sizeof full.operation_class, "default");
    char key[LEASE_LOCK_KEY_LEN + 1];
    lease_lock_key(&full, key);
    /* the key is "starintel:target-lease:v1:" + base64url(SHA-256): mix the
     * digest's characters into 64 bits (FNV-1a; the digest is uniform) */
    uint64_t h = 14695981039346656037ull;
    for (const char *p = key; *p; p++) {
        h ^= (unsigned char)*p;
        h *= 1099511628211ull;
    }
    return h ? h : 1;
}

bool store_pg_known_has(store_pg_known_t *k, uint64_t fingerprint)
{
    if (!k || !fingerprint)
        return false;
    uint64_t v = __atomic_load_n(&k->slots[fingerprint & k->mask], __ATOMIC_RELAXED);
    return v == fingerprint;
}

void store_pg_known_add(store_pg_known_t *k, uint64_t fingerprint)
{
    if (!k || !fingerprint)
        return;
    __atomic_store_n(&k->slots[fingerprint & k->mask], fingerprint, __ATOMIC_RELAXED);
}
