/*
 * valkey_connect.h - one connection to the store's server, authenticated:
 * what the adapter's pool (store_valkey.c) and the watch feed
 * (valkey_listener.c) open their connections with.
 */
#ifndef LEASE_VALKEY_CONNECT_H
#define LEASE_VALKEY_CONNECT_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

/* Connects to host:port within timeout_ms and, when password is not "",
 * sends AUTH [user] password (separate arguments: never formatted into a
 * command text or a message). NULL with why in err (the server's reason,
 * which never quotes the password). */
redisContext *valkey_connect(const char *host, int port, int64_t timeout_ms, const char *user,
                             const char *password, char *err, size_t errlen);

#endif
