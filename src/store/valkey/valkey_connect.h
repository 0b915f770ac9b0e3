/*
 * valkey_connect.h - one connection to the store's server, authenticated:
 * what the adapter's pool (store_valkey.c) and the watch feed
 * (valkey_listener.c) open their connections with, over plain TCP or TLS
 * (valkey_transport.h).
 */
#ifndef LEASE_VALKEY_CONNECT_H
#define LEASE_VALKEY_CONNECT_H

#include <stddef.h>
#include <stdint.h>

#include "lease/store_valkey.h"
#include "valkey_transport.h"

/* Where and as whom to connect: a copy of lease_valkey_config_t's
 * connection settings, kept by the adapter and by the watch feed. */
typedef struct valkey_endpoint {
    char host[256];
    int port;
    int64_t connect_timeout_ms;
    char user[128];
    char password[512]; /* "": no AUTH; valkey_endpoint_wipe when done */
    valkey_tls_t tls;
} valkey_endpoint_t;

/* Copies cfg's connection settings into e; false (why in err) when one
 * does not fit. */
bool valkey_endpoint_set(valkey_endpoint_t *e, const lease_valkey_config_t *cfg, char *err,
                         size_t errlen);
/* Overwrites the password. */
void valkey_endpoint_wipe(valkey_endpoint_t *e);

/* Connects within the connect timeout (TLS too, with e->tls.on) and, when
 * the password is not "", sends AUTH [user] password (separate arguments:
 * never formatted into a command text or a message). NULL with why in err
 * (the server's reason, which never quotes the password). */
valkey_transport_t *valkey_connect(const valkey_endpoint_t *e, char *err, size_t errlen);

#endif
