/*
 * pg_pool.c - fixed pool of connection slots with deadline-bounded waiting
 * (see pg_pool.h).
 *
 * One mutex guards the slot array and the counters; one condition variable
 * on CLOCK_MONOTONIC wakes a waiter whenever a slot comes back. Waiters are
 * not queued fairly: a waiter woken late simply retries until its deadline,
 * which bounds any unfairness by the deadline itself.
 */
#include "pg_pool.h"

#include <errno.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

struct store_pg_pool {
    pthread_mutex_t mu;
    pthread_cond_t freed;
    int size;
    int in_use;
    int waiting;
    store_pg_slot_t *slots;
};

store_pg_pool_t *store_pg_pool_new(int size)
{
    if (size < 1)
        return NULL;
    store_pg_pool_t *pool = calloc(1, sizeof *pool);
    pthread_condattr_t attr;
    bool attr_made = false;
    if (!pool)
        goto fail;
    pool->slots = calloc((size_t)size, sizeof *pool->slots);
    if (!pool->slots)
        goto fail;
    pool->size = size;
    if (pthread_condattr_init(&attr) != 0)
        goto fail;
    attr_made = true;
    if (pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) != 0 ||
        pthread_cond_init(&pool->freed, &attr) != 0)
        goto fail;
    if (pthread_mutex_init(&pool->mu, NULL) != 0) {
        pthread_cond_destroy(&pool->freed);
        goto fail;
    }
    pthread_condattr_destroy(&attr);
    return pool;
fail:
    if (attr_made)
        pthread_condattr_destroy(&attr);
    if (pool)
        free(pool->slots);
    free(pool);
    return NULL;
}

void store_pg_pool_free(store_pg_pool_t *pool)
{
    if (!pool)
        return;
    for (int i = 0; i < pool->size; i++)
        PQfinish((PGconn *)pool->slots[i].conn);
    pthread_cond_destroy(&pool->freed);
    pthread_mutex_destroy(&pool->mu);
    free(pool->slots);
    free(pool);
}

/* A free slot, preferring one that is already connected. Caller holds mu. */
static store_pg_slot_t *take_free_slot(store_pg_pool_t *pool)
{
    store_pg_slot_t *empty = NULL;
    for (int i = 0; i < pool->size; i++) {
        store_pg_slot_t *s = &pool->slots[i];
        if (s->busy)
            continue;
        if (s->conn) {
            s->busy = true;
            return s;
        }
        if (!empty)
            empty = s;
    }
    if (empty)
        empty->busy = true;
    return empty;
}

store_pg_slot_t *store_pg_pool_checkout(store_pg_pool_t *pool, const lease_deadline_t *deadline)
{
    struct timespec until = {(time_t)(deadline->mono_ns / 1000000000),
                             (long)(deadline->mono_ns % 1000000000)};
    store_pg_slot_t *slot = NULL;
    pthread_mutex_lock(&pool->mu);
    while (!lease_deadline_passed(deadline)) {
        slot = take_free_slot(pool);
        if (slot)
            break;
        pool->waiting++;
        int rc = pthread_cond_timedwait(&pool->freed, &pool->mu, &until);
        pool->waiting--;
        if (rc == ETIMEDOUT) {
            /* one last look: a slot freed exactly at the deadline is not lost */
            slot = take_free_slot(pool);
            break;
        }
    }
    if (slot) {
        if (lease_deadline_passed(deadline)) {
            slot->busy = false;
            slot = NULL;
            pthread_cond_signal(&pool->freed);
        } else {
            pool->in_use++;
        }
    }
    pthread_mutex_unlock(&pool->mu);
    return slot;
}

void store_pg_pool_checkin(store_pg_pool_t *pool, store_pg_slot_t *slot, bool discard)
{
    if (!slot)
        return;
    PGconn *dead = NULL;
    pthread_mutex_lock(&pool->mu);
    if (discard) {
        dead = (PGconn *)slot->conn;
        slot->conn = NULL;
        slot->prepared = false;
    }
    slot->busy = false;
    pool->in_use--;
    pthread_cond_signal(&pool->freed);
    pthread_mutex_unlock(&pool->mu);
    /* outside the lock: PQfinish may write a Terminate message */
    PQfinish(dead);
}

void store_pg_pool_stats(store_pg_pool_t *pool, store_pg_pool_stats_t *out)
{
    pthread_mutex_lock(&pool->mu);
    out->size = pool->size;
    out->in_use = pool->in_use;
    out->waiting = pool->waiting;
    out->idle_connected = 0;
    /* busy slots are being changed by their holder: only free ones are read */
    for (int i = 0; i < pool->size; i++)
        out->idle_connected += !pool->slots[i].busy && pool->slots[i].conn != NULL;
    pthread_mutex_unlock(&pool->mu);
}
