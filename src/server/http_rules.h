/*
 * http_rules.h - the request framing rules leased adds to libmicrohttpd's
 * parser, checked on what the library parsed (no second parser).
 *
 * They refuse what a proxy in front and leased could read differently
 * (request smuggling) or what could name another resource:
 *
 * - the raw target (MHD_OPTION_URI_LOG_CALLBACK sees it before the library
 *   unescapes it): origin-form of visible ASCII; a space makes the request
 *   line malformed ("request"); in the path, %-escapes must be well formed
 *   and must not decode to a control character, "/" or "\" ("path");
 * - the head (first call of the access handler): HTTP/1.0 or HTTP/1.1;
 *   a method that is a token; field names that are tokens and values
 *   without control characters; at most LEASED_HTTP_HEADER_LINES_MAX fields
 *   and LEASED_HTTP_HEAD_MAX bytes; HTTP/1.1 has exactly one Host; at most
 *   one Content-Length, at most one Transfer-Encoding and only "chunked"
 *   (HTTP/1.1), never both; at most one Authorization.
 *
 * A refusal names the request field of the 400 (static strings); the
 * transport answers it in the JSON envelope with Connection: close.
 * What the library refuses itself before leased sees the request is listed
 * in docs/contract.md.
 */
#ifndef LEASED_HTTP_RULES_H
#define LEASED_HTTP_RULES_H

#include <microhttpd.h>

#define LEASED_HTTP_HEAD_MAX (16 * 1024) /* request line + header fields, bytes */
#define LEASED_HTTP_HEADER_LINES_MAX 100 /* header fields per request */

/* The field to refuse the raw target with ("request", "path"), or NULL. */
const char *leased_http_rules_target(const char *uri);

/* The field to refuse the parsed head with, or NULL when it passes. */
const char *leased_http_rules_head(struct MHD_Connection *conn, const char *method,
                                   const char *version, const char *url);

#endif
