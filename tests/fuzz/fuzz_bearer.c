/*
 * fuzz_bearer.c - the Authorization header parser (lease_auth_parse_bearer
 * and lease_token_parse).
 *
 * Checks: an accepted header is "Bearer" (any case), spaces, then exactly a
 * token of the documented shape; the id it yields is "key_" + 26 base32
 * characters, and generating the text back from id and secret gives the
 * token that was parsed.
 */
#include <openssl/crypto.h>
#include <strings.h>

#include "fuzz_common.h"
#include "server/auth.h"

static void secret_text(const unsigned char secret[LEASE_SECRET_BYTES], char out[64])
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t o = 0;
    for (size_t i = 0; i < LEASE_SECRET_BYTES; i += 3) {
        unsigned v = (unsigned)secret[i] << 16;
        if (i + 1 < LEASE_SECRET_BYTES)
            v |= (unsigned)secret[i + 1] << 8;
        if (i + 2 < LEASE_SECRET_BYTES)
            v |= secret[i + 2];
        int chars = i + 2 < LEASE_SECRET_BYTES ? 4 : i + 1 < LEASE_SECRET_BYTES ? 3 : 2;
        for (int k = 0; k < chars; k++)
            out[o++] = b64[(v >> (18 - 6 * k)) & 63];
    }
    out[o] = '\0';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *header = fuzz_cstr(data, size);
    char id[LEASE_CREDENTIAL_ID_LEN + 1];
    unsigned char secret[LEASE_SECRET_BYTES];
    if (lease_auth_parse_bearer(header, id, secret)) {
        FUZZ_CHECK(strncasecmp(header, "Bearer ", 7) == 0);
        FUZZ_CHECK(strlen(id) == LEASE_CREDENTIAL_ID_LEN && strncmp(id, "key_", 4) == 0);
        for (int i = 4; i < LEASE_CREDENTIAL_ID_LEN; i++)
            FUZZ_CHECK((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= '2' && id[i] <= '7'));
        const char *token = header + 7;
        while (*token == ' ')
            token++;
        char text[64], rebuilt[LEASE_TOKEN_MAX + 8];
        secret_text(secret, text);
        snprintf(rebuilt, sizeof rebuilt, "lsk_%s_%s", id, text);
        FUZZ_CHECK(strcmp(rebuilt, token) == 0);
    }
    OPENSSL_cleanse(secret, sizeof secret);
    free(header);
    return 0;
}
