/*
 * valkey_transport.h - one connection to a Valkey/Redis server, over plain
 * TCP or TLS: send a command, read its reply, read what the server pushes.
 *
 * Why this is ours: Debian 12 packages hiredis 0.14.1 (libhiredis-dev),
 * which has no TLS (hiredis_ssl arrived in 1.0) and whose redisContext
 * reads and writes its socket itself, with no hook to put TLS under it.
 * So hiredis gives the protocol (redisvFormatCommand, redisFormatCommandArgv
 * and its reply reader) and its TCP connect with a timeout (the socket taken
 * over with redisFreeKeepFd), OpenSSL gives TLS, and this file only moves
 * the bytes between them. Plain connections go the same way, so every
 * Valkey test runs through it.
 *
 * Timeouts are the socket's (SO_RCVTIMEO, SO_SNDTIMEO), as redisSetTimeout
 * sets them: a read or write that waits longer fails, and a connection that
 * failed is only freed (its next user connects again).
 */
#ifndef LEASE_VALKEY_TRANSPORT_H
#define LEASE_VALKEY_TRANSPORT_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* TLS settings of a rediss:// / valkeys:// store URL. The files are read at
 * every connect (a renewed certificate is used from the next one). */
typedef struct valkey_tls {
    bool on;              /* rediss:// or valkeys:// */
    char ca_file[1024];   /* "": the system's CAs */
    char cert_file[1024]; /* "": no client certificate; else with key_file */
    char key_file[1024];
} valkey_tls_t;

typedef struct valkey_transport valkey_transport_t;

/* Connects to host:port within timeout_ms; with tls->on, the TLS handshake
 * too, the server's certificate verified against the CA file (or the
 * system's CAs) and against host (a DNS name, also sent as SNI, or an IP
 * address). The socket timeouts are timeout_ms afterwards. NULL with why in
 * err (for a certificate: what was wrong with it). */
valkey_transport_t *valkey_transport_connect(const char *host, int port, int64_t timeout_ms,
                                             const valkey_tls_t *tls, char *err, size_t errlen);
void valkey_transport_free(valkey_transport_t *t);

/* Bounds every later read and write (ms, at least 1). False on failure. */
bool valkey_transport_set_timeout(valkey_transport_t *t, int64_t ms);

/* Sends a command (redisCommand's format: each %s one argument) and reads
 * its reply; NULL when the connection failed (valkey_transport_error says
 * how; the connection is then unusable). The caller frees the reply with
 * valkey_reply_free. */
redisReply *valkey_transport_command(valkey_transport_t *t, const char *fmt, ...);
redisReply *valkey_transport_command_argv(valkey_transport_t *t, int argc, const char **argv,
                                          const size_t *argvlen);

/* Frees a reply of this transport (and accepts NULL). Its objects are
 * redisReply structs in blocks of the transport's own (valkey_transport.c):
 * freeReplyObject must never be given one. */
void valkey_reply_free(redisReply *r);

/* The socket, to poll for what the server pushes (a subscriber's messages). */
int valkey_transport_fd(const valkey_transport_t *t);
/* Reads what has arrived, once, without waiting for more (after poll said
 * the socket is readable), as redisBufferRead does. False when the server
 * closed the connection or it failed. */
bool valkey_transport_read_available(valkey_transport_t *t);
/* The next complete reply read so far (valkey_reply_free): true with
 * *reply NULL when none is complete yet; false on a protocol error. */
bool valkey_transport_next_reply(valkey_transport_t *t, redisReply **reply);

/* An idle connection (no command in flight) the server has closed, or that
 * has something unexpected to read: either way, not to be used. TLS's own
 * messages (a session ticket) do not count. */
bool valkey_transport_closed_while_idle(valkey_transport_t *t);

/* Why the last call failed (never a command's arguments). */
const char *valkey_transport_error(const valkey_transport_t *t);

/* Formats a message into the caller's error buffer (nothing when err is
 * NULL or errlen 0): the transport's and the adapter's one way to fill it. */
__attribute__((format(printf, 3, 4))) void valkey_set_err(char *err, size_t errlen, const char *fmt,
                                                          ...);

#endif
