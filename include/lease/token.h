/*
 * token.h - bearer credential tokens: lsk_<credential_id>_<secret>.
 *
 * credential_id is "key_" + 26 lower-case base32 characters; the secret is
 * 32 random bytes (RAND_bytes) as 43 characters of unpadded base64url, so a
 * token parses from the right without ambiguity. Only a digest of the secret
 * is stored: HMAC-SHA256(pepper, secret) when a pepper is configured
 * (LEASE_TOKEN_PEPPER), else SHA-256(secret). Secrets are wiped with
 * OPENSSL_cleanse by whoever holds them.
 */
#ifndef LEASE_TOKEN_H
#define LEASE_TOKEN_H

#include <stdbool.h>
#include <stddef.h>

#include "lease/result.h"

#define LEASE_SECRET_BYTES 32
#define LEASE_SECRET_B64_LEN 43
#define LEASE_CREDENTIAL_ID_LEN 30 /* "key_" + 26 */
#define LEASE_TOKEN_MAX (4 + LEASE_CREDENTIAL_ID_LEN + 1 + LEASE_SECRET_B64_LEN)

/* Creates a fresh credential id and secret, and the token text. Returns
 * false only when the system random generator fails (RAND_bytes != 1). */
LEASE_MUST_USE bool lease_token_generate(char credential_id[LEASE_CREDENTIAL_ID_LEN + 1],
                                         unsigned char secret[LEASE_SECRET_BYTES],
                                         char token[LEASE_TOKEN_MAX + 1]);

/* Splits a token into credential id and secret bytes. False on any
 * malformation (prefix, lengths, alphabet). */
LEASE_MUST_USE bool lease_token_parse(const char *token,
                                      char credential_id[LEASE_CREDENTIAL_ID_LEN + 1],
                                      unsigned char secret[LEASE_SECRET_BYTES]);

/* The stored digest of a secret; pepper may be NULL or "". */
void lease_token_digest(const unsigned char secret[LEASE_SECRET_BYTES], const char *pepper,
                        unsigned char digest[32]);

/* Constant-time comparison of two digests. */
bool lease_token_digest_equal(const unsigned char a[32], const unsigned char b[32]);

#endif
