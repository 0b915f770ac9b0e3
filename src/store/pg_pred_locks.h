/*
 * pg_pred_locks.h - whether the server keeps a renew-batch's predicate
 * locks per row (docs/operators.md, "Predicate locks for batch renewals").
 *
 * With PostgreSQL's defaults a SERIALIZABLE transaction's row locks are
 * promoted to a page lock past max_pred_locks_per_page rows of one page
 * and to a relation lock past max_pred_locks_per_relation locks in one
 * relation; a renew-batch of many leases crosses both, and then batches of
 * disjoint leases fail each other. Checked once, on the pool's first
 * session: one warning naming the settings when they are too low, nothing
 * otherwise. The check decides nothing and never fails a session.
 */
#ifndef LEASE_STORE_PG_PRED_LOCKS_H
#define LEASE_STORE_PG_PRED_LOCKS_H

#include "lease/clock.h"

struct pg_conn;

void store_pg_check_pred_locks(struct pg_conn *conn, int pool_size,
                               const lease_deadline_t *deadline);

#endif
