/*
 * test_token.c - bearer token format, parsing and digests (src/core/token.c).
 *
 * Known answers were computed independently with Python:
 *   secret = bytes(range(32))
 *   base64.urlsafe_b64encode(secret).rstrip(b'=')
 *   hashlib.sha256(secret).hexdigest()
 *   hmac.new(b"pepper-one", secret, hashlib.sha256).hexdigest()
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "lease/token.h"

#define KNOWN_ID "key_abcdefghijklmnopqrstuvwxyz"
#define KNOWN_SECRET_B64 "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"
#define KNOWN_TOKEN "lsk_" KNOWN_ID "_" KNOWN_SECRET_B64
#define KNOWN_SHA256 "630dcd2966c4336691125448bbb25b4ff412a49c732db2c8abc1b8581bd710dd"
#define KNOWN_HMAC "27927f6e7dc51bb4b47515a34719d3c42f1b7651641b019f5399b3bf95c2be2e"

static void known_secret(unsigned char s[LEASE_SECRET_BYTES])
{
    for (int i = 0; i < LEASE_SECRET_BYTES; i++)
        s[i] = (unsigned char)i;
}

static void to_hex(const unsigned char d[32], char out[65])
{
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static bool parses(const char *token)
{
    char id[LEASE_CREDENTIAL_ID_LEN + 1];
    unsigned char secret[LEASE_SECRET_BYTES];
    return lease_token_parse(token, id, secret);
}

static void test_generate_shape_and_round_trip(void **state)
{
    (void)state;
    char id[LEASE_CREDENTIAL_ID_LEN + 1];
    unsigned char secret[LEASE_SECRET_BYTES];
    char token[LEASE_TOKEN_MAX + 1];
    assert_true(lease_token_generate(id, secret, token));

    assert_int_equal(strlen(id), LEASE_CREDENTIAL_ID_LEN);
    assert_int_equal(strlen(token), LEASE_TOKEN_MAX);
    assert_memory_equal(id, "key_", 4);
    for (size_t i = 4; i < LEASE_CREDENTIAL_ID_LEN; i++)
        assert_true((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= '2' && id[i] <= '7'));
    assert_memory_equal(token, "lsk_", 4);
    assert_memory_equal(token + 4, id, LEASE_CREDENTIAL_ID_LEN);
    assert_int_equal(token[4 + LEASE_CREDENTIAL_ID_LEN], '_');

    char pid[LEASE_CREDENTIAL_ID_LEN + 1];
    unsigned char psecret[LEASE_SECRET_BYTES];
    assert_true(lease_token_parse(token, pid, psecret));
    assert_string_equal(pid, id);
    assert_memory_equal(psecret, secret, LEASE_SECRET_BYTES);
}

static void test_generate_is_random(void **state)
{
    (void)state;
    char id1[LEASE_CREDENTIAL_ID_LEN + 1], id2[LEASE_CREDENTIAL_ID_LEN + 1];
    unsigned char s1[LEASE_SECRET_BYTES], s2[LEASE_SECRET_BYTES];
    char t1[LEASE_TOKEN_MAX + 1], t2[LEASE_TOKEN_MAX + 1];
    assert_true(lease_token_generate(id1, s1, t1));
    assert_true(lease_token_generate(id2, s2, t2));
    assert_string_not_equal(id1, id2);
    assert_true(memcmp(s1, s2, LEASE_SECRET_BYTES) != 0);
}

/* Many generated tokens all parse back: covers every final-character value
 * of the secret encoding, not only the one a single run happens to draw. */
static void test_many_round_trips(void **state)
{
    (void)state;
    for (int n = 0; n < 2000; n++) {
        char id[LEASE_CREDENTIAL_ID_LEN + 1], pid[LEASE_CREDENTIAL_ID_LEN + 1];
        unsigned char s[LEASE_SECRET_BYTES], ps[LEASE_SECRET_BYTES];
        char t[LEASE_TOKEN_MAX + 1];
        assert_true(lease_token_generate(id, s, t));
        assert_true(lease_token_parse(t, pid, ps));
        assert_string_equal(pid, id);
        assert_memory_equal(ps, s, LEASE_SECRET_BYTES);
    }
}

static void test_parse_known_token(void **state)
{
    (void)state;
    char id[LEASE_CREDENTIAL_ID_LEN + 1];
    unsigned char secret[LEASE_SECRET_BYTES], expect[LEASE_SECRET_BYTES];
    known_secret(expect);
    assert_true(lease_token_parse(KNOWN_TOKEN, id, secret));
    assert_string_equal(id, KNOWN_ID);
    assert_memory_equal(secret, expect, LEASE_SECRET_BYTES);
}

/* A secret made only of '_' characters still splits from the right. */
static void test_parse_secret_with_underscores(void **state)
{
    (void)state;
    const char *token = "lsk_" KNOWN_ID "_"
                        "__________________________________________8";
    char id[LEASE_CREDENTIAL_ID_LEN + 1];
    unsigned char secret[LEASE_SECRET_BYTES], expect[LEASE_SECRET_BYTES];
    memset(expect, 0xff, sizeof expect);
    assert_true(lease_token_parse(token, id, secret));
    assert_string_equal(id, KNOWN_ID);
    assert_memory_equal(secret, expect, LEASE_SECRET_BYTES);
}

static void test_parse_rejects_malformations(void **state)
{
    (void)state;
    char buf[256];

    assert_false(lease_token_parse(NULL, (char[LEASE_CREDENTIAL_ID_LEN + 1]){0},
                                   (unsigned char[LEASE_SECRET_BYTES]){0}));
    assert_false(parses(""));
    assert_false(parses("lsk_"));
    assert_false(parses("lsk_" KNOWN_ID));
    assert_false(parses("lsk_" KNOWN_ID "_"));

    /* one character short / long, anywhere */
    assert_false(parses("lsk_" KNOWN_ID "_"
                        "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh"));
    assert_false(parses(KNOWN_TOKEN "A"));
    assert_false(parses("lsk_key_abcdefghijklmnopqrstuvwxy_" KNOWN_SECRET_B64));
    assert_false(parses("lsk_key_abcdefghijklmnopqrstuvwxyza_" KNOWN_SECRET_B64));

    /* prefixes and separators */
    assert_false(parses("LSK_" KNOWN_ID "_" KNOWN_SECRET_B64));
    assert_false(parses("lsk-" KNOWN_ID "_" KNOWN_SECRET_B64));
    assert_false(parses("lsx_" KNOWN_ID "_" KNOWN_SECRET_B64));
    assert_false(parses("lsk_kez_abcdefghijklmnopqrstuvwxyz_" KNOWN_SECRET_B64));
    assert_false(parses("lsk_KEY_abcdefghijklmnopqrstuvwxyz_" KNOWN_SECRET_B64));
    assert_false(parses("lsk_key-abcdefghijklmnopqrstuvwxyz_" KNOWN_SECRET_B64));
    assert_false(parses("lsk_" KNOWN_ID "-" KNOWN_SECRET_B64));
    assert_false(parses("lsk_" KNOWN_ID "." KNOWN_SECRET_B64));

    /* credential id outside lower-case base32: upper case, 0 1 8 9, '_' */
    const char *bad_id_chars = "A018 9_-=.Z\x80";
    for (const char *c = bad_id_chars; *c; c++) {
        snprintf(buf, sizeof buf, "%s", KNOWN_TOKEN);
        buf[4 + 4 + 7] = *c;
        assert_false(parses(buf));
    }

    /* secret outside base64url: standard base64, padding, space, controls */
    const char *bad_secret_chars = "+/= \t\n.%\x7f\xc3";
    for (const char *c = bad_secret_chars; *c; c++) {
        for (size_t pos = 0; pos < LEASE_SECRET_B64_LEN; pos += 21) {
            snprintf(buf, sizeof buf, "%s", KNOWN_TOKEN);
            buf[4 + LEASE_CREDENTIAL_ID_LEN + 1 + pos] = *c;
            assert_false(parses(buf));
        }
    }

    /* non-canonical final character: the two padding bits must be zero
     * ('8' = 60 is canonical for all-ones, '9' = 61 sets a padding bit) */
    assert_false(parses("lsk_" KNOWN_ID "_"
                        "__________________________________________9"));
    assert_false(parses("lsk_" KNOWN_ID "_"
                        "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh9"));
    assert_false(parses("lsk_" KNOWN_ID "_"
                        "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh_"));

    /* whitespace around, embedded NUL */
    assert_false(parses(" " KNOWN_TOKEN));
    assert_false(parses(KNOWN_TOKEN " "));
    assert_false(parses("Bearer " KNOWN_TOKEN));
    memcpy(buf, KNOWN_TOKEN, sizeof KNOWN_TOKEN);
    buf[40] = '\0';
    assert_false(parses(buf));

    /* a very long input is rejected without walking all of it */
    char big[8192];
    memset(big, 'A', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    memcpy(big, KNOWN_TOKEN, sizeof KNOWN_TOKEN - 1);
    assert_false(parses(big));
}

static void test_digest_known_values(void **state)
{
    (void)state;
    unsigned char secret[LEASE_SECRET_BYTES], d[32];
    char hex[65];
    known_secret(secret);

    lease_token_digest(secret, NULL, d);
    to_hex(d, hex);
    assert_string_equal(hex, KNOWN_SHA256);

    lease_token_digest(secret, "", d); /* empty pepper = no pepper */
    to_hex(d, hex);
    assert_string_equal(hex, KNOWN_SHA256);

    lease_token_digest(secret, "pepper-one", d);
    to_hex(d, hex);
    assert_string_equal(hex, KNOWN_HMAC);
}

static void test_pepper_changes_digest(void **state)
{
    (void)state;
    unsigned char secret[LEASE_SECRET_BYTES], a[32], b[32], c[32];
    known_secret(secret);
    lease_token_digest(secret, NULL, a);
    lease_token_digest(secret, "pepper-one", b);
    lease_token_digest(secret, "pepper-two", c);
    assert_false(lease_token_digest_equal(a, b));
    assert_false(lease_token_digest_equal(b, c));
    assert_false(lease_token_digest_equal(a, c));

    /* and the same pepper is deterministic */
    unsigned char b2[32];
    lease_token_digest(secret, "pepper-one", b2);
    assert_true(lease_token_digest_equal(b, b2));
}

static void test_digest_equal(void **state)
{
    (void)state;
    unsigned char a[32], b[32];
    for (int i = 0; i < 32; i++)
        a[i] = b[i] = (unsigned char)(i * 7);
    assert_true(lease_token_digest_equal(a, b));
    for (int byte = 0; byte < 32; byte += 31) {
        for (int bit = 0; bit < 8; bit++) {
            b[byte] ^= (unsigned char)(1u << bit);
            assert_false(lease_token_digest_equal(a, b));
            b[byte] ^= (unsigned char)(1u << bit);
        }
    }
    assert_true(lease_token_digest_equal(a, b));
}

/* A different secret under the same id gives a different digest: a tampered
 * token cannot match the stored digest. */
static void test_tampered_secret_differs(void **state)
{
    (void)state;
    char id[LEASE_CREDENTIAL_ID_LEN + 1], pid[LEASE_CREDENTIAL_ID_LEN + 1];
    unsigned char s[LEASE_SECRET_BYTES], ps[LEASE_SECRET_BYTES], d1[32], d2[32];
    char t[LEASE_TOKEN_MAX + 1];
    assert_true(lease_token_generate(id, s, t));
    lease_token_digest(s, "p", d1);
    /* flip the first secret character to another valid one */
    char *first = t + 4 + LEASE_CREDENTIAL_ID_LEN + 1;
    *first = *first == 'A' ? 'B' : 'A';
    assert_true(lease_token_parse(t, pid, ps));
    assert_string_equal(pid, id);
    lease_token_digest(ps, "p", d2);
    assert_false(lease_token_digest_equal(d1, d2));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generate_shape_and_round_trip),
        cmocka_unit_test(test_generate_is_random),
        cmocka_unit_test(test_many_round_trips),
        cmocka_unit_test(test_parse_known_token),
        cmocka_unit_test(test_parse_secret_with_underscores),
        cmocka_unit_test(test_parse_rejects_malformations),
        cmocka_unit_test(test_digest_known_values),
        cmocka_unit_test(test_pepper_changes_digest),
        cmocka_unit_test(test_digest_equal),
        cmocka_unit_test(test_tampered_secret_differs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
