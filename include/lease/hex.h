/*
 * hex.h - hexadecimal digits: token digests, request digests, percent
 * escapes and chunk sizes all spell bytes this way.
 */
#ifndef LEASE_HEX_H
#define LEASE_HEX_H

#include <stdbool.h>
#include <stddef.h>

#include "lease/result.h"

/* The value of one hexadecimal digit of either case; -1 for any other c
 * (pass characters as unsigned char). */
int lease_hex_digit(int c);

/* n bytes as 2n lower-case digits and a NUL: out holds 2n + 1 bytes. */
void lease_hex_encode(const unsigned char *in, size_t n, char *out);

/* 2n digits of either case into n bytes; false at the first character that
 * is not a digit (out is then partly written). */
LEASE_MUST_USE bool lease_hex_decode(const char *hex, size_t n, unsigned char *out);

#endif
