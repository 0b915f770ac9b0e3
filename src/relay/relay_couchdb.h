/*
 * relay_couchdb.h - applying an outbox row to CouchDB as a fenced document
 * write (libcurl, HTTP JSON API).
 *
 * The row's payload is the document: {"_id": "...", ...fields} (no _rev,
 * no lease_fence, no _deleted: a deletion would make CouchDB forget the
 * document's token, see contrib/couchdb). The relay adds "lease_fence" (token, lease, identity,
 * outbox id, execution, trace) and writes with the document's current
 * "_rev", so the write is a compare-and-set: it lands only on the revision
 * the relay looked at. Before writing it compares the stored lease_fence:
 * a document already written by this row or a later one of the same
 * identity is left alone (a row delivered again after a crash), and one
 * written with a higher token is not overwritten. The validate_doc_update
 * function of contrib/couchdb/lease_fencing.json makes CouchDB itself refuse
 * stale tokens from any writer.
 */
#ifndef LEASE_RELAY_COUCHDB_H
#define LEASE_RELAY_COUCHDB_H

#include <stddef.h>
#include <stdint.h>

#include "lease/result.h"
#include "relay_db.h"

typedef enum relay_couch_outcome {
    RELAY_COUCH_APPLIED = 0, /* the document now holds this row's write */
    RELAY_COUCH_ALREADY,     /* it already held this row's write or a later one */
    RELAY_COUCH_REFUSED,     /* the fence refused it: a higher token (or another identity)
                                wrote the document; final */
    RELAY_COUCH_RETRY,       /* unreachable, timeout, 5xx, credentials, missing database,
                                conflicts that kept coming: try again later */
    RELAY_COUCH_INVALID,     /* the payload is not a document write the relay accepts */
} relay_couch_outcome_t;

typedef struct relay_couch relay_couch_t;

/* base_url: http(s)://[user:password@]host:port (copied, wiped on free;
 * never logged). timeout_ms bounds each HTTP call. */
LEASE_MUST_USE relay_couch_t *relay_couch_new(const char *base_url, int64_t timeout_ms);
void relay_couch_free(relay_couch_t *c);

/* Writes row's document into database db. detail receives a one-line
 * reason for every outcome but APPLIED (no payload, no credentials). */
LEASE_MUST_USE relay_couch_outcome_t relay_couch_apply(relay_couch_t *c, const char *db,
                                                       const relay_row_t *row, char *detail,
                                                       size_t detailsz);

const char *relay_couch_outcome_name(relay_couch_outcome_t o);

#endif
