/*
 * fuzz_page_token.c - the page token of a list request as the decoder
 * takes it: the input becomes the page_token string of an otherwise valid
 * list body (JSON-escaped, so every byte reaches the validator).
 *
 * Checks: an accepted token is 1..LEASE_PAGE_TOKEN_MAX bytes of visible
 * ASCII and arrives unchanged; anything else is refused naming page_token.
 */
#include <jansson.h>

#include "fuzz_common.h"
#include "server/json_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet();
    json_t *token = json_stringn((const char *)data, size);
    if (!token)
        return 0; /* not UTF-8: no JSON string can carry it */
    json_t *body = json_pack("{s:s, s:s, s:s, s:o}", "by", "program", "tenant_id", "tenant-main",
                             "program_id", "program-a", "page_token", token);
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    if (!text)
        return 0;
    leased_request_t *req = leased_request_new(LEASED_OP_LIST);
    leased_codec_limits_t limits = {10000};
    leased_codec_error_t err;
    if (req && leased_codec_decode(LEASED_OP_LIST, text, strlen(text), NULL, &limits, req, &err)) {
        const char *t = req->u.list.page_token;
        size_t n = strlen(t);
        FUZZ_CHECK(n == size && n >= 1 && n <= LEASE_PAGE_TOKEN_MAX);
        FUZZ_CHECK(memcmp(t, data, size) == 0);
        for (size_t i = 0; i < n; i++)
            FUZZ_CHECK((unsigned char)t[i] > 0x20 && (unsigned char)t[i] < 0x7f);
    } else if (req) {
        FUZZ_CHECK(strcmp(err.field, "page_token") == 0);
    }
    leased_request_free(req);
    free(text);
    return 0;
}
