/*
 * pg_pool.h - a fixed-size pool of Postgres connection slots.
 *
 * The pool only hands out slots and keeps the books (in use, waiting); it
 * never connects. A slot's connection may be NULL (never made, or discarded
 * after a failure): the caller connects into the slot and gives it back,
 * discarding it when it broke. Waiting for a free slot is bounded by the
 * call's deadline on CLOCK_MONOTONIC, so time spent queueing counts against
 * the deadline like everything else.
 *
 * Thread safety: every function may be called from any thread.
 */
#ifndef LEASE_STORE_PG_POOL_H
#define LEASE_STORE_PG_POOL_H

#include <stdbool.h>

#include "lease/clock.h"
#include "lease/result.h"

struct pg_conn; /* libpq's PGconn; only src/store includes libpq-fe.h */

typedef struct store_pg_slot {
    struct pg_conn *conn; /* NULL until connected; owned by the pool */
    bool busy;
    bool prepared; /* conn prepared the typed calls (store_pg.c); false without conn */
} store_pg_slot_t;

typedef struct store_pg_pool store_pg_pool_t;

/* A pool of `size` (>= 1) empty slots, or NULL when out of memory. */
store_pg_pool_t *store_pg_pool_new(int size);
/* Closes every connection (PQfinish) and frees the pool; NULL is accepted.
 * No slot may be checked out. */
void store_pg_pool_free(store_pg_pool_t *pool);

/*
 * Takes a free slot, waiting until `deadline` at most. Slots that hold a
 * live connection are preferred over empty ones. Returns the slot, or NULL
 * when the deadline passed first (the caller answers deadline_exceeded: no
 * database was touched).
 */
LEASE_MUST_USE store_pg_slot_t *store_pg_pool_checkout(store_pg_pool_t *pool,
                                                       const lease_deadline_t *deadline);
/* Gives a slot back. With `discard`, its connection is closed first and the
 * slot is left empty, so a broken session is never handed out again. */
void store_pg_pool_checkin(store_pg_pool_t *pool, store_pg_slot_t *slot, bool discard);

typedef struct store_pg_pool_stats {
    int size;
    int in_use;
    int waiting;
    int idle_connected; /* free slots holding a live connection */
} store_pg_pool_stats_t;

void store_pg_pool_stats(store_pg_pool_t *pool, store_pg_pool_stats_t *out);

#endif
