/*
 * request_ids.c - correlation ids and traceparent trace ids (see
 * request_ids.h).
 */
#include "request_ids.h"

#include <stddef.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>

#include "lease/clock.h"

/* Random bytes for correlation ids, drawn from getrandom a batch at a time
 * per thread: one system call per CORRELATION_BATCH ids, not one per
 * request. */
#define CORRELATION_BATCH 64
static __thread unsigned char correlation_pool[26 * CORRELATION_BATCH];
static __thread size_t correlation_used = sizeof correlation_pool;

void leased_correlation_id(char out[32])
{
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz234567";
    if (correlation_used + 26 > sizeof correlation_pool) {
        if (getrandom(correlation_pool, sizeof correlation_pool, 0) !=
            (ssize_t)sizeof correlation_pool) {
            /* getrandom on Linux does not fail for small requests once the
             * pool is initialised; jitter is unique enough for a
             * correlation id */
            for (size_t i = 0; i < sizeof correlation_pool; i++)
                correlation_pool[i] = (unsigned char)lease_jitter(256);
        }
        correlation_used = 0;
    }
    const unsigned char *raw = correlation_pool + correlation_used;
    correlation_used += 26;
    memcpy(out, "corr_", 5);
    for (size_t i = 0; i < 26; i++)
        out[5 + i] = alphabet[raw[i] & 31];
    out[31] = '\0';
}

static bool all_hex(const char *s, size_t n, bool *all_zero)
{
    *all_zero = true;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return false;
        if (c != '0')
            *all_zero = false;
    }
    return true;
}

/* version "-" trace-id(32) "-" parent-id(16) "-" flags(2); lower-case hex;
 * version ff and all-zero ids are invalid; version 00 has nothing after
 * the flags, later versions may append "-..." fields. */
bool leased_traceparent_trace_id(const char *v, char out[33])
{
    out[0] = '\0';
    if (!v)
        return false;
    size_t n = strlen(v);
    bool zero;
    if (n < 55 || v[2] != '-' || v[35] != '-' || v[52] != '-')
        return false;
    if (!all_hex(v, 2, &zero) || strncmp(v, "ff", 2) == 0)
        return false;
    if (strncmp(v, "00", 2) == 0 ? n != 55 : (n > 55 && v[55] != '-'))
        return false;
    if (!all_hex(v + 3, 32, &zero) || zero)
        return false;
    if (!all_hex(v + 36, 16, &zero) || zero)
        return false;
    if (!all_hex(v + 53, 2, &zero))
        return false;
    memcpy(out, v + 3, 32);
    out[32] = '\0';
    return true;
}
