/*
 * valkey_combiner.h - group commit of concurrent lease requests on the
 * Valkey backend (docs/backends.md, "Combined calls").
 *
 * The server runs one function at a time, and each call repeats work that
 * does not depend on the request (TIME, the namespace load, the
 * incarnation check, a socket read and write on each side). The combiner
 * lets at most max_calls calls be in flight at once: a request that finds
 * fewer in flight is sent at once, alone (no timer, no waiting for
 * company); one that finds the limit reached waits in a queue, and when a
 * call in flight ends, the first waiter takes up to max_items waiting
 * requests (itself first) and sends them as ONE call. Each waiter keeps its
 * own deadline: one whose deadline passes while it waits is answered
 * deadline_exceeded and never sent. A leader takes its pool connection
 * BEFORE it gathers the waiters: so a request waits for a connection only
 * as long as its own deadline allows (the leader its own, the waiters in
 * the queue theirs), never bound to another request's deadline.
 *
 * Scheduling only: how a batch is sent and answered is the send callback's
 * (store_valkey.c). One mutex; each waiter sleeps on a semaphore of its
 * own and is woken once, when it leads a batch or when its answer is in,
 * after the mutex is released; no thread of the combiner's own.
 */
#ifndef LEASE_VALKEY_COMBINER_H
#define LEASE_VALKEY_COMBINER_H

#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdint.h>

#include "lease/result.h"
#include "lease/store.h"
#include "lease/store_valkey.h"

typedef enum valkey_combined_state {
    COMBINED_QUEUED = 0, /* waiting in the queue */
    COMBINED_LEADING,    /* handed the turn of a call that ended: sends a batch */
    COMBINED_SENT,       /* taken into another's batch: its answer is coming */
    COMBINED_ANSWERED,   /* res is set (sent in another's batch, or refused unsent) */
} valkey_combined_state_t;

/* One request; lives on its caller's stack for the whole submit. */
typedef struct valkey_combined_item {
    const char *op;                   /* "acquire", "renew" or "release" */
    const char *arg;                  /* the request JSON leased_v1_<op> takes */
    const lease_deadline_t *deadline; /* the request's own */
    lease_result_t *res;              /* its answer, set by send (or deadline_exceeded) */
    /* the combiner's */
    struct valkey_combined_item *next;
    sem_t wake; /* posted once each time another thread sets state, after its unlock */
    valkey_combined_state_t state;
} valkey_combined_item_t;

/* The store's side, called without the combiner's lock:
 *   take: a connection of the pool, waiting for one until deadline; NULL
 *         when none came free in time;
 *   send: items[0..n) (n >= 1, in queue order) as one call on conn, every
 *         item's res set, conn given back;
 *   give: conn back unused (every item it was taken for was refused). */
typedef struct valkey_combiner_ops {
    void *(*take)(void *ctx, const lease_deadline_t *deadline);
    void (*send)(void *ctx, void *conn, valkey_combined_item_t **items, int n);
    void (*give)(void *ctx, void *conn);
} valkey_combiner_ops_t;

typedef struct valkey_combiner {
    pthread_mutex_t mu;
    valkey_combined_item_t *head, *tail; /* the waiters, oldest first */
    int in_flight;                       /* calls sent or being gathered */
    int max_calls;                       /* in flight at once (>= 1) */
    int max_items;                       /* requests a call (1: no combining) */
    valkey_combiner_ops_t ops;
    void *ctx;
    /* counts since open, under mu */
    uint64_t calls;          /* every call the combiner made */
    uint64_t combined_calls; /* ... of them, those that carried more than one request */
    uint64_t combined_items; /* requests carried by those */
} valkey_combiner_t;

#define VALKEY_COMBINE_ITEMS_MAX LEASE_VALKEY_COMBINE_ITEMS_LIMIT

/* max_items 1: every request is a call of its own, as without a combiner
 * (max_calls then bounds nothing: the pool does). */
void valkey_combiner_init(valkey_combiner_t *c, int max_calls, int max_items,
                          const valkey_combiner_ops_t *ops, void *ctx);
void valkey_combiner_destroy(valkey_combiner_t *c);

/* Sends item (alone, or in a batch) and returns when item->res is set.
 * item->op, arg, deadline and res are the caller's; the rest is set here. */
void valkey_combiner_submit(valkey_combiner_t *c, valkey_combined_item_t *item);

typedef struct valkey_combiner_stats {
    uint64_t calls;          /* calls made through the combiner */
    uint64_t combined_calls; /* of them, carrying two or more requests */
    uint64_t combined_items; /* the requests those carried */
} valkey_combiner_stats_t;

void valkey_combiner_stats(valkey_combiner_t *c, valkey_combiner_stats_t *out);

#endif
