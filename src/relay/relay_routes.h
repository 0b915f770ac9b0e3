/*
 * relay_routes.h - where a topic goes: an exchange and routing key of
 * RabbitMQ, or a CouchDB database.
 *
 * LEASE_RELAY_ROUTES is a comma-separated list of PATTERN=DESTINATION:
 *
 *   results.*=amqp:leased.results            exchange leased.results, key = topic
 *   alerts.high=amqp:alerts/pager.high        exchange alerts, key pager.high
 *   target-state.*=couchdb:targets            document writes into database targets
 *
 * PATTERN is a topic, or a prefix ending in '*' ("*" alone matches every
 * topic). The first route whose pattern matches wins; a topic no route
 * matches goes to the default exchange (LEASE_RELAY_EXCHANGE) with the
 * topic as routing key. The empty exchange name is RabbitMQ's default
 * exchange (the routing key names a queue).
 */
#ifndef LEASE_RELAY_ROUTES_H
#define LEASE_RELAY_ROUTES_H

#include <stdbool.h>
#include <stddef.h>

#include "lease/result.h"

#define RELAY_TOPIC_MAX 256       /* lease.fenced_commit's bound */
#define RELAY_EXCHANGE_MAX 127    /* RabbitMQ's name rule, well within AMQP's 255 */
#define RELAY_ROUTING_KEY_MAX 255 /* AMQP short string */
#define RELAY_COUCHDB_NAME_MAX 238

typedef enum relay_dest_kind {
    RELAY_DEST_AMQP = 0, /* publish to an exchange with publisher confirms */
    RELAY_DEST_COUCHDB,  /* write the payload as a fenced CouchDB document */
} relay_dest_kind_t;

typedef struct relay_destination {
    relay_dest_kind_t kind;
    const char *target;      /* exchange or database name (borrowed from the routes) */
    const char *routing_key; /* AMQP: the key; NULL means the topic itself */
} relay_destination_t;

typedef struct relay_routes relay_routes_t;

/*
 * Parses spec (may be "" or NULL: no routes) with default_exchange for the
 * rest. Returns NULL and a message naming the bad entry in err on a
 * malformed list.
 */
LEASE_MUST_USE relay_routes_t *relay_routes_parse(const char *spec, const char *default_exchange,
                                                  char *err, size_t errsz);
void relay_routes_free(relay_routes_t *r);

/* The destination of a topic (never fails: the default route takes it). */
relay_destination_t relay_routes_lookup(const relay_routes_t *r, const char *topic);

/* The distinct exchanges the routes can publish to, default first
 * (borrowed); *n receives their number. */
const char *const *relay_routes_exchanges(const relay_routes_t *r, size_t *n);

/* Whether some route writes to CouchDB. */
bool relay_routes_use_couchdb(const relay_routes_t *r);

/* Whether s is a topic (or, with allow_star, a pattern) the routes accept. */
bool relay_routes_topic_valid(const char *s, bool allow_star);

#endif
