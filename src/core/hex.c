/*
 * hex.c - hexadecimal digits.
 */
#include "lease/hex.h"

int lease_hex_digit(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

void lease_hex_encode(const unsigned char *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}

bool lease_hex_decode(const char *hex, size_t n, unsigned char *out)
{
    for (size_t i = 0; i < n; i++) {
        int hi = lease_hex_digit((unsigned char)hex[2 * i]);
        int lo = lease_hex_digit((unsigned char)hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    return true;
}
