/*
 * relay.h - the delivery loop of leased-relay.
 *
 * One iteration: (re)connect the database and the broker with backoff,
 * measure the lag now and then, claim a batch in a transaction, publish its
 * rows (RabbitMQ, with confirms) or write them (CouchDB), wait for the
 * confirms, mark what was confirmed, defer what the destination refused
 * for now, commit. Per identity, a row is marked only when every earlier
 * row of the identity in the batch was: a later row is never recorded as
 * delivered ahead of an earlier one that is not.
 */
#ifndef LEASE_RELAY_H
#define LEASE_RELAY_H

#include <signal.h>
#include <stddef.h>

#include "lease/result.h"
#include "relay_config.h"
#include "relay_metrics.h"

typedef struct relay relay_t;

/* cfg and metrics are borrowed and must outlive the relay. NULL and err
 * when the routes or URLs are unusable. */
LEASE_MUST_USE relay_t *relay_new(const relay_config_t *cfg, relay_metrics_t *metrics, char *err,
                                  size_t errsz);
void relay_free(relay_t *r);

/*
 * Delivers until *stop is set (the batch in flight is finished first, then
 * the broker connection is closed politely) or, with cfg->once, until a
 * claim finds nothing. Returns the exit status: 0, or 1 when --once could
 * not deliver (database or broker unavailable).
 */
int relay_run(relay_t *r, volatile sig_atomic_t *stop);

#endif
