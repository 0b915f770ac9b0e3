/*
 * hash.h - one-shot SHA-256 with the algorithm fetched once per process.
 *
 * OpenSSL 3's SHA256() and EVP_Digest(..., EVP_sha256(), ...) look the
 * implementation up in the provider store on every call (a locked hash
 * lookup that cost more than the hash of a short input); the request path
 * hashes a bearer secret and a request digest per request.
 */
#ifndef LEASE_HASH_H
#define LEASE_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The SHA-256 of data[0..n) into out; false only when libcrypto fails. */
bool lease_sha256(const void *data, size_t n, unsigned char out[32]);

/* FNV-1a of a string: for the buckets of small in-memory tables (never
 * for anything a client could aim collisions at to any effect beyond a
 * longer chain). */
uint64_t lease_fnv1a(const char *s);

#endif
