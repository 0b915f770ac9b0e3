/*
 * request_ids.h - the identifiers a request carries into logs, replies and
 * the audit: the correlation id leased gives it and the W3C trace id its
 * client may send (traceparent). Decoding only; no transport.
 */
#ifndef LEASED_REQUEST_IDS_H
#define LEASED_REQUEST_IDS_H

#include <stdbool.h>

/* A fresh correlation id: "corr_" + 26 lower-case base32 characters. */
void leased_correlation_id(char out[32]);

/* W3C traceparent: writes the 32-hex trace-id of a valid header into out
 * (33 bytes); false (out = "") for absent or invalid values. */
bool leased_traceparent_trace_id(const char *value, char out[33]);

#endif
