/*
 * token.c - bearer credential tokens (see include/lease/token.h).
 *
 * Owns the token text format lsk_<credential_id>_<secret>, the random
 * generation of ids and secrets, the stored digest of a secret and its
 * constant-time comparison. The secret's base64url alphabet contains '_', so
 * a token is split by position from the right: the last 43 characters are the
 * secret, the character before them is the separator, and what remains after
 * "lsk_" is the credential id. Every length is fixed, so a token either has
 * exactly this shape or is rejected; nothing is trimmed or repaired.
 */
#include "lease/token.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <string.h>

#include "lease/hash.h"

#define TOKEN_PREFIX "lsk_"
#define TOKEN_PREFIX_LEN 4
#define ID_PREFIX "key_"
#define ID_PREFIX_LEN 4
#define ID_RANDOM_LEN (LEASE_CREDENTIAL_ID_LEN - ID_PREFIX_LEN) /* 26 */

/* RFC 4648 base32 alphabet, lower-cased: ids are case-sensitive text, so
 * only one case is ever produced or accepted. */
static const char base32_alphabet[] = "abcdefghijklmnopqrstuvwxyz234567";
static const char base64url_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

_Static_assert(LEASE_TOKEN_MAX ==
                   TOKEN_PREFIX_LEN + LEASE_CREDENTIAL_ID_LEN + 1 + LEASE_SECRET_B64_LEN,
               "token layout");
_Static_assert(LEASE_SECRET_B64_LEN == (LEASE_SECRET_BYTES * 8 + 5) / 6, "secret encoding");

static bool is_base32_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '2' && c <= '7');
}

/* Value of a base64url character, or -1. */
static int base64url_value(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '-')
        return 62;
    if (c == '_')
        return 63;
    return -1;
}

/* Unpadded base64url of exactly LEASE_SECRET_BYTES bytes. */
static void encode_secret(const unsigned char in[LEASE_SECRET_BYTES],
                          char out[LEASE_SECRET_B64_LEN + 1])
{
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < LEASE_SECRET_BYTES; i++) {
        acc = (acc << 8) | in[i];
        bits += 8;
        while (bits >= 6) {
            bits -= 6;
            out[o++] = base64url_alphabet[(acc >> bits) & 0x3f];
        }
    }
    if (bits > 0)
        out[o++] = base64url_alphabet[(acc << (6 - bits)) & 0x3f];
    out[o] = '\0';
    acc = 0;
}

/*
 * Decodes exactly LEASE_SECRET_B64_LEN characters. The last character carries
 * two padding bits that must be zero: otherwise four different texts would
 * decode to the same secret, and a token would have more than one spelling.
 */
static bool decode_secret(const char *in, unsigned char out[LEASE_SECRET_BYTES])
{
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < LEASE_SECRET_B64_LEN; i++) {
        int v = base64url_value(in[i]);
        if (v < 0)
            return false;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    /* 43 * 6 = 258 bits: 256 decoded, 2 left over that must be zero. */
    bool canonical = o == LEASE_SECRET_BYTES && acc == 0;
    acc = 0;
    return canonical;
}

bool lease_token_generate(char credential_id[LEASE_CREDENTIAL_ID_LEN + 1],
                          unsigned char secret[LEASE_SECRET_BYTES], char token[LEASE_TOKEN_MAX + 1])
{
    unsigned char id_random[ID_RANDOM_LEN];
    bool ok = false;

    /* 256 is a multiple of 32, so masking a byte to 5 bits is unbiased. */
    if (RAND_bytes(id_random, sizeof id_random) != 1)
        goto cleanup;
    if (RAND_bytes(secret, LEASE_SECRET_BYTES) != 1)
        goto cleanup;

    memcpy(credential_id, ID_PREFIX, ID_PREFIX_LEN);
    for (size_t i = 0; i < ID_RANDOM_LEN; i++)
        credential_id[ID_PREFIX_LEN + i] = base32_alphabet[id_random[i] & 0x1f];
    credential_id[LEASE_CREDENTIAL_ID_LEN] = '\0';

    char *p = token;
    memcpy(p, TOKEN_PREFIX, TOKEN_PREFIX_LEN);
    p += TOKEN_PREFIX_LEN;
    memcpy(p, credential_id, LEASE_CREDENTIAL_ID_LEN);
    p += LEASE_CREDENTIAL_ID_LEN;
    *p++ = '_';
    encode_secret(secret, p);
    ok = true;

cleanup:
    OPENSSL_cleanse(id_random, sizeof id_random);
    if (!ok) {
        OPENSSL_cleanse(secret, LEASE_SECRET_BYTES);
        credential_id[0] = '\0';
        token[0] = '\0';
    }
    return ok;
}

bool lease_token_parse(const char *token, char credential_id[LEASE_CREDENTIAL_ID_LEN + 1],
                       unsigned char secret[LEASE_SECRET_BYTES])
{
    if (!token)
        return false;
    /* Bounded scan: an attacker-sized header is never walked to its end. */
    size_t len = strnlen(token, LEASE_TOKEN_MAX + 1);
    if (len != LEASE_TOKEN_MAX)
        return false;
    if (memcmp(token, TOKEN_PREFIX, TOKEN_PREFIX_LEN) != 0)
        return false;

    const char *secret_text = token + len - LEASE_SECRET_B64_LEN;
    if (secret_text[-1] != '_')
        return false;
    const char *id = token + TOKEN_PREFIX_LEN;
    if (memcmp(id, ID_PREFIX, ID_PREFIX_LEN) != 0)
        return false;
    for (size_t i = ID_PREFIX_LEN; i < LEASE_CREDENTIAL_ID_LEN; i++)
        if (!is_base32_char(id[i]))
            return false;

    if (!decode_secret(secret_text, secret)) {
        OPENSSL_cleanse(secret, LEASE_SECRET_BYTES);
        return false;
    }
    memcpy(credential_id, id, LEASE_CREDENTIAL_ID_LEN);
    credential_id[LEASE_CREDENTIAL_ID_LEN] = '\0';
    return true;
}

void lease_token_digest(const unsigned char secret[LEASE_SECRET_BYTES], const char *pepper,
                        unsigned char digest[32])
{
    if (pepper && *pepper) {
        unsigned int n = 32;
        if (!HMAC(EVP_sha256(), pepper, (int)strlen(pepper), secret, LEASE_SECRET_BYTES, digest,
                  &n) ||
            n != 32) {
            /* Unreachable with a working libcrypto; an all-zero digest never
             * equals a stored one made by a working libcrypto. */
            memset(digest, 0, 32);
        }
        return;
    }
    if (!lease_sha256(secret, LEASE_SECRET_BYTES, digest))
        memset(digest, 0, 32); /* as above: never equals a stored digest */
}

bool lease_token_digest_equal(const unsigned char a[32], const unsigned char b[32])
{
    return CRYPTO_memcmp(a, b, 32) == 0;
}
