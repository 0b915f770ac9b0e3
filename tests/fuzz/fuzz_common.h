/*
 * fuzz_common.h - shared bits of the libFuzzer targets (tests/fuzz/README.md).
 *
 * Each target feeds arbitrary bytes to one parser of untrusted input and
 * checks what the parser promises (it never reads past its input, refuses
 * instead of repairing, and what it accepts satisfies its rules); the
 * sanitizers (address, undefined) catch the rest. FUZZ_CHECK aborts, which
 * libFuzzer reports as a crash with the input that caused it.
 */
#ifndef LEASE_FUZZ_COMMON_H
#define LEASE_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lease/log.h"

#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FUZZ_CHECK failed at %s:%d: %s\n", __FILE__, __LINE__, #cond);        \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* The input as a NUL-terminated heap string (embedded NULs cut it short). */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        abort();
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* Logs at error level only: malformed input is expected to be logged. */
static inline void fuzz_quiet(void)
{
    static int done;
    if (!done) {
        lease_log_init((lease_log_level_t)(LEASE_LOG_ERROR + 1), LEASE_LOG_TEXT);
        done = 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
