/*
 * fuzz_http_frame.c - the front door's framing (src/server/http_frame.c):
 * request heads, chunked bodies and reply heads.
 *
 * Checks: an accepted head is within its limits, never carries both
 * Content-Length and chunked, has a path without %-escapes of control
 * characters or "/", and forwards as no longer than it came; the chunked
 * decoder never consumes more than it is given, and once a body ended no
 * later byte can belong to it.
 */
#include "fuzz_common.h"
#include "server/http_frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    size_t hl = leased_http_head_length(buf, size);
    if (hl > 0) {
        leased_http_head_t h;
        leased_http_reject_t rej;
        if (leased_http_parse_head(buf, hl, &h, &rej)) {
            FUZZ_CHECK(hl <= LEASED_HTTP_HEAD_MAX);
            FUZZ_CHECK(!(h.chunked && h.has_length));
            FUZZ_CHECK(h.path_len >= 1 && h.path[0] == '/');
            for (size_t i = 0; i < h.path_len; i++) {
                FUZZ_CHECK((unsigned char)h.path[i] > 0x20 && (unsigned char)h.path[i] < 0x7f);
                FUZZ_CHECK(h.path[i] != '?');
            }
            char *out = malloc(hl);
            FUZZ_CHECK(out);
            size_t fl = leased_http_forward_head(buf, hl, &h, out);
            FUZZ_CHECK(fl <= hl);
            FUZZ_CHECK(memcmp(out + fl - 4, "\r\n\r\n", 4) == 0);
            free(out);
        } else {
            FUZZ_CHECK(rej.status == 400 && rej.field && rej.field[0]);
        }
    }
    /* the same bytes as a chunked body, fed in two pieces */
    leased_http_chunked_t ch;
    memset(&ch, 0, sizeof ch);
    leased_http_reject_t rej;
    size_t cut = size / 2, used = 0;
    leased_http_chunked_status_t st =
        leased_http_chunked_feed(&ch, buf, cut, 64 * 1024, &used, &rej);
    FUZZ_CHECK(used <= cut);
    if (st == LEASED_CHUNKED_MORE) {
        FUZZ_CHECK(used == cut);
        st = leased_http_chunked_feed(&ch, buf + cut, size - cut, 64 * 1024, &used, &rej);
        FUZZ_CHECK(used <= size - cut);
    }
    if (st != LEASED_CHUNKED_BAD)
        FUZZ_CHECK(ch.total <= 64 * 1024);
    /* and as a reply head */
    leased_http_reply_head_t rh;
    if (hl > 0 && leased_http_parse_reply_head(buf, hl, &rh))
        FUZZ_CHECK(rh.status >= 0 && rh.status <= 999);
    return 0;
}
