/*
 * relay_amqp.h - one publishing connection to RabbitMQ (librabbitmq) with
 * publisher confirms. The only file of the relay that includes amqp.h.
 *
 * Channel 1 is put in confirm mode: every publish gets a delivery tag
 * (1, 2, ... per connection) and the broker later settles it with basic.ack
 * (the message is routed and, for a durable queue, persisted) or basic.nack
 * (the broker lost it). Messages are published mandatory: one no queue
 * takes comes back as basic.return before its ack, identified by its
 * message_id. A relay marks a row published only after an ack without a
 * return.
 */
#ifndef LEASE_RELAY_AMQP_H
#define LEASE_RELAY_AMQP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lease/result.h"

/* An application header: a string, or an integer when is_int. */
typedef struct relay_amqp_header {
    const char *name;
    const char *str;
    int64_t num;
    bool is_int;
} relay_amqp_header_t;

typedef struct relay_amqp_message {
    const char *exchange;
    const char *routing_key;
    const char *message_id;     /* the outbox id */
    const char *type;           /* the topic */
    const char *correlation_id; /* the trace id, or NULL */
    int64_t timestamp_s;        /* when the commit was accepted */
    const char *body;           /* JSON */
    size_t body_len;
    const relay_amqp_header_t *headers;
    size_t n_headers;
} relay_amqp_message_t;

typedef enum relay_settle {
    RELAY_SETTLE_PENDING = 0, /* no answer yet */
    RELAY_SETTLE_ACKED,       /* the broker took responsibility */
    RELAY_SETTLE_NACKED,      /* the broker refused or lost it */
} relay_settle_t;

/* Called for a message the broker returned (no queue was bound for it). */
typedef void (*relay_amqp_return_fn)(void *ctx, const char *message_id, int reply_code,
                                     const char *reply_text);

typedef struct relay_amqp relay_amqp_t;

/* TLS for amqps:// URLs (paths; NULL or "" when not set). The broker's
 * certificate is verified against cacert (default: the system's CAs, as
 * OpenSSL finds them) and must name the URL's host; cert and key (PEM,
 * both or neither) are a client certificate for brokers that ask for one. */
typedef struct relay_amqp_tls {
    const char *cacert;
    const char *cert;
    const char *key;
} relay_amqp_tls_t;

/* Parses url (amqp:// or amqps://user:password@host:port/vhost; copied,
 * wiped on free; an empty vhost means "/"). NULL and err on a bad URL, on
 * TLS settings with an amqp:// URL, on a client certificate without its
 * key (or the other way round), or on a TLS file that cannot be read. */
LEASE_MUST_USE relay_amqp_t *relay_amqp_new(const char *url, const relay_amqp_tls_t *tls, char *err,
                                            size_t errsz);
void relay_amqp_free(relay_amqp_t *a);

/* Connects, logs in (heartbeat 30 s), opens channel 1 in confirm mode and
 * declares the exchanges (durable topic exchanges; with declare false only
 * checks that they exist). Every step bounded by timeout_ms. */
LEASE_MUST_USE bool relay_amqp_connect(relay_amqp_t *a, const char *const *exchanges,
                                       size_t n_exchanges, bool declare, int64_t timeout_ms,
                                       char *err, size_t errsz);
bool relay_amqp_connected(const relay_amqp_t *a);
/* Closes the connection: politely (close handshake, bounded) when graceful. */
void relay_amqp_disconnect(relay_amqp_t *a, bool graceful);

/* Publishes one message (persistent, mandatory). Returns its delivery tag,
 * or 0 when the connection failed (it is then closed); *invalid is set when
 * the failure was the message itself (the library could not encode it). */
LEASE_MUST_USE uint64_t relay_amqp_publish(relay_amqp_t *a, const relay_amqp_message_t *m,
                                           char *err, size_t errsz, bool *invalid);

/*
 * Waits until every tag in [first, last] is settled; settles[i] belongs to
 * tag first + i. Returned messages are reported to on_return. Returns true
 * when all are settled; false when deadline_mono_ns passed or the
 * connection failed (err says which; the connection is then closed, since
 * its unsettled tags can never be told apart from new ones).
 */
LEASE_MUST_USE bool relay_amqp_wait(relay_amqp_t *a, uint64_t first, uint64_t last,
                                    relay_settle_t *settles, int64_t deadline_mono_ns,
                                    relay_amqp_return_fn on_return, void *ctx, char *err,
                                    size_t errsz);

/* While idle: sends heartbeats and notices a connection the broker closed.
 * Returns whether the connection is still up (err says why not). */
bool relay_amqp_service(relay_amqp_t *a, char *err, size_t errsz);

/* The broker's host:port, for logs (no credentials). */
const char *relay_amqp_endpoint(const relay_amqp_t *a);

#endif
