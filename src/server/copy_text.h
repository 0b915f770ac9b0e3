/*
 * copy_text.h - snprintf(dst, size, "%s", src) without a format to
 * interpret: the same bytes (src cut to size - 1 and terminated; nothing
 * written when size is 0). The request path copied some thirty fields a
 * request that way, ~600 instructions each in vfprintf
 * (docs/benchmarks.md, "leased on Valkey"). dst and src must not overlap,
 * as with snprintf.
 */
#ifndef LEASED_COPY_TEXT_H
#define LEASED_COPY_TEXT_H

#include <stddef.h>
#include <string.h>

static inline void leased_copy_text(char *dst, size_t size, const char *src)
{
    if (size == 0)
        return;
    /* byte by byte: src may be a literal shorter than size (strnlen's
     * bound would read past it, as far as the compiler can tell) */
    size_t n = 0;
    while (n + 1 < size && src[n] != '\0') {
        dst[n] = src[n];
        n++;
    }
    dst[n] = '\0';
}

/* snprintf(dst, size, "%s%s", a, b). */
static inline void leased_copy_text2(char *dst, size_t size, const char *a, const char *b)
{
    if (size == 0)
        return;
    leased_copy_text(dst, size, a);
    size_t n = strlen(dst);
    leased_copy_text(dst + n, size - n, b);
}

#endif
