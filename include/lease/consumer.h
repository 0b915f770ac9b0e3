/*
 * consumer.h - the consumer's side of the outbox relay: drop duplicate and
 * stale deliveries (docs/relay.md, "Consumers").
 *
 * leased-relay delivers every accepted publication at least once, in order
 * per lock identity for first deliveries; after a crash or a broker failure
 * a message may come again. Each message carries its outbox id as AMQP
 * message_id and the lease that wrote it in its headers. A consumer:
 *
 *   lease_delivery_t d;
 *   if (!lease_delivery_parse(message_id, n, names, values, &d, &bad))
 *       reject (not from the relay, or tampered with);
 *   switch (lease_consumer_classify(c, &d)) {
 *   case LEASE_DELIVERY_NEW:       apply it; lease_consumer_record(c, &d); ack; break;
 *   case LEASE_DELIVERY_DUPLICATE: ack, do nothing (seen this message id);
 *   case LEASE_DELIVERY_STALE:     ack, do nothing (a newer holder of the
 *                                  identity has already published);
 *   }
 *
 * Record only after the effect is durable: a message whose processing
 * failed must still classify as NEW when it is redelivered.
 *
 * The state is in memory: message ids of the last `window` recorded
 * deliveries, and the highest recorded token per identity (one small entry
 * per identity, kept for the consumer's life). A consumer that restarts or
 * runs as several processes keeps the same two facts in its own database,
 * in the transaction that applies the effect (docs/relay.md has the SQL).
 * Thread-safe.
 */
#ifndef LEASE_CONSUMER_H
#define LEASE_CONSUMER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lease/identity.h"
#include "lease/result.h"

typedef enum lease_delivery_verdict {
    LEASE_DELIVERY_NEW = 0,   /* not seen: apply it, then lease_consumer_record */
    LEASE_DELIVERY_DUPLICATE, /* its message id was recorded: drop it */
    LEASE_DELIVERY_STALE,     /* a higher fencing token of its identity was recorded: drop it */
} lease_delivery_verdict_t;

/* What a consumer needs from one message (copied out of it). */
typedef struct lease_delivery {
    int64_t outbox_id;         /* AMQP message_id */
    lease_identity_t identity; /* headers tenant_id ... operation_class, normalised */
    int64_t fencing_token;     /* header fencing_token */
    char lease_id[LEASE_ID_MAX + 1];
    char trace_id[LEASE_ID_MAX + 1]; /* "" when the commit named none */
} lease_delivery_t;

/*
 * Reads a delivery from the message id and the headers, given as parallel
 * arrays of names and values (integers in decimal). Returns false when a
 * required header is missing or malformed, or message_id is not a positive
 * decimal; *bad (may be NULL) then names it.
 */
LEASE_MUST_USE bool lease_delivery_parse(const char *message_id, size_t n_headers,
                                         const char *const *names, const char *const *values,
                                         lease_delivery_t *out, const char **bad);

typedef struct lease_consumer lease_consumer_t;

/* window: how many recorded message ids to remember (0: 65536). Choose it
 * larger than the number of messages that can arrive between a first
 * delivery and its redelivery (a few relay batches). NULL when out of
 * memory. */
LEASE_MUST_USE lease_consumer_t *lease_consumer_new(size_t window);
void lease_consumer_free(lease_consumer_t *c);

/* The verdict on d; changes nothing. Duplicate is checked before stale. */
lease_delivery_verdict_t lease_consumer_classify(lease_consumer_t *c, const lease_delivery_t *d);

/* Records d as applied: its message id as seen, its token as the highest of
 * its identity (never lowered). Returns false when out of memory. */
LEASE_MUST_USE bool lease_consumer_record(lease_consumer_t *c, const lease_delivery_t *d);

const char *lease_delivery_verdict_name(lease_delivery_verdict_t v);

#endif
