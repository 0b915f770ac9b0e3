/*
 * audit_queue.h - the bounded queue of audit events that did not happen
 * inside a mutation's own transaction (denied, invalid, conflict,
 * rate-limited, backend failure, reads).
 *
 * A background thread writes them in batches through
 * lease_store_record_audit. When the store refuses a batch, its events are
 * written to the JSON log instead (level warn, msg "audit_fallback"). The
 * queue is shared fairly per tenant: admission asks it whether a tenant may
 * start new work (leased_audit_queue_admit), so that an event of an
 * admitted request is not dropped however another tenant floods. Events
 * carry ids,
 * identities and codes only: the event struct has no field for tokens,
 * bodies, lock keys or metadata.
 */
#ifndef LEASED_AUDIT_QUEUE_H
#define LEASED_AUDIT_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lease/store.h"

typedef struct leased_audit_queue leased_audit_queue_t;

typedef struct leased_audit_stats {
    size_t depth;
    uint64_t written;    /* accepted by the store */
    uint64_t dropped;    /* the ring full beyond its growth room (or no memory) */
    uint64_t fallback;   /* logged because the store failed */
    uint64_t aggregated; /* refusals counted into aggregated events */
    uint64_t refused;    /* admissions refused: the tenant over its share */
} leased_audit_stats_t;

/* store is borrowed. capacity >= 1 (the events admission lets wait; the
 * ring grows past it for requests already admitted), batch >= 1. NULL when
 * out of memory. */
leased_audit_queue_t *leased_audit_queue_new(lease_store_t *store, size_t capacity, size_t batch);
/* Starts the writer thread; false when it cannot be created. */
LEASE_MUST_USE bool leased_audit_queue_start(leased_audit_queue_t *q);
/*
 * Whether a request of tenant_id (the caller's tenant; "" or NULL: none)
 * may start: true while the tenant has fewer events waiting than its fair
 * share (the capacity divided by the tenants with events waiting, itself
 * included). When false,
 * *retry_after_ms is the time the writer needs to catch up on the excess
 * (50..5000 ms) and the caller refuses the request (429). Never blocks on
 * the database.
 */
LEASE_MUST_USE bool leased_audit_queue_admit(leased_audit_queue_t *q, const char *tenant_id,
                                             int64_t *retry_after_ms);
/* Copies ev into the queue as tenant_id's event (never blocks on the
 * database; never drops it unless the ring is full past its growth room).
 * event_type, decision and backend_health must be static strings. */
void leased_audit_queue_push(leased_audit_queue_t *q, const char *tenant_id,
                             const lease_audit_event_t *ev);
/* The aggregation window of leased_audit_queue_count (LEASE_AUTH_AUDIT_WINDOW_MS);
 * call before start. */
void leased_audit_queue_set_window(leased_audit_queue_t *q, int64_t window_ms);
/* Counts one refusal before authentication: events of the same source
 * (ev->source_address), event_type and code within one window become one
 * event, the window's first with event_count = how many; it is queued when
 * the window ends (or at stop). Never blocks on the database. */
void leased_audit_queue_count(leased_audit_queue_t *q, const lease_audit_event_t *ev);
/* Writes what is queued (at most flush_ms more), then stops the thread.
 * Events still queued after that go to the log fallback. */
void leased_audit_queue_stop(leased_audit_queue_t *q, int64_t flush_ms);
void leased_audit_queue_stats(leased_audit_queue_t *q, leased_audit_stats_t *out);
/* Frees the queue (stop it first); accepts NULL. */
void leased_audit_queue_free(leased_audit_queue_t *q);

#endif
