/*
 * pg_known.h - identities whose lock row this process has seen exist.
 *
 * A row of lease.locks, once created, is never deleted, so an identity the
 * adapter has seen acquired, renewed or released has a row. lease.acquire
 * then takes the hint "existing": it updates the row first instead of
 * probing with an insert (measured: the probe is about a twentieth of an
 * acquire/release pair). The set is a hint, never a decision: a collision
 * or a row an operator deleted only makes the function insert after all.
 *
 * A fixed array of 64-bit fingerprints (the first eight bytes of the lock
 * key's SHA-256), one slot each, newer entries overwriting older ones.
 * Thread safety: every function may be called from any thread (relaxed
 * atomics; a torn read cannot happen on 64-bit words).
 */
#ifndef LEASE_STORE_PG_KNOWN_H
#define LEASE_STORE_PG_KNOWN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lease/identity.h"

typedef struct store_pg_known store_pg_known_t;

/* A set of 2^bits slots (bits 1..24), or NULL when out of memory. */
store_pg_known_t *store_pg_known_new(unsigned bits);
void store_pg_known_free(store_pg_known_t *k);

/* The fingerprint of a normalised identity; 0 (no hint) for an incomplete one. */
uint64_t store_pg_known_fingerprint(const lease_identity_t *id);

bool store_pg_known_has(store_pg_known_t *k, uint64_t fingerprint);
void store_pg_known_add(store_pg_known_t *k, uint64_t fingerprint);

#endif
