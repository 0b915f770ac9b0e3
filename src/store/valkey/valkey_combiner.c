/*
 * valkey_combiner.c - group commit of concurrent lease requests: at most
 * max_calls calls in flight, the requests that arrive meanwhile sent
 * together by the next call (valkey_combiner.h).
 *
 * Hand-off: a call that ends with waiters queued does not give its slot
 * back; it hands it to the oldest waiter (state LEADING), which gathers the
 * waiters queued by then (itself first) and sends them. So in_flight drops
 * only when the queue is empty, and a queued request always has a call in
 * flight ahead of it that will hand it the turn or carry it. The thread
 * whose call ended returns its own answer at once: it never sends others'.
 *
 * A leader waits for its pool connection first and gathers after: had it
 * gathered first, the waiters it took would wait for the connection until
 * the earliest deadline among them, and a later one would be refused with
 * that earlier one's (tests/valkey/valkey_combine_race.c,
 * pool_wait_keeps_each_requests_deadline).
 */
#include "valkey_combiner.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "lease/clock.h"

void valkey_combiner_init(valkey_combiner_t *c, int max_calls, int max_items,
                          const valkey_combiner_ops_t *ops, void *ctx)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    c->max_calls = max_calls > 0 ? max_calls : 1;
    c->max_items = max_items < 1                          ? 1
                   : max_items > VALKEY_COMBINE_ITEMS_MAX ? VALKEY_COMBINE_ITEMS_MAX
                                                          : max_items;
    c->ops = *ops;
    c->ctx = ctx;
}

void valkey_combiner_destroy(valkey_combiner_t *c)
{
    pthread_mutex_destroy(&c->mu);
}

static bool expired(const valkey_combined_item_t *it)
{
    return it->deadline->mono_ns <= lease_mono_now_ns();
}

/* Answered without being sent: its deadline passed while it waited. */
static void refuse_unsent(valkey_combined_item_t *it)
{
    memset(it->res, 0, sizeof *it->res);
    it->res->code = LEASE_DEADLINE_EXCEEDED;
    it->state = COMBINED_ANSWERED;
}

static valkey_combined_item_t *pop(valkey_combiner_t *c)
{
    valkey_combined_item_t *it = c->head;
    if (it != NULL) {
        c->head = it->next;
        if (c->head == NULL)
            c->tail = NULL;
        it->next = NULL;
    }
    return it;
}

static void unlink_item(valkey_combiner_t *c, valkey_combined_item_t *it)
{
    valkey_combined_item_t **p = &c->head, *prev = NULL;
    while (*p != NULL && *p != it) {
        prev = *p;
        p = &(*p)->next;
    }
    if (*p == NULL)
        return;
    *p = it->next;
    if (c->tail == it)
        c->tail = prev;
    it->next = NULL;
}

/* Wakes the waiters this thread handed a state under mu (answered, or the
 * turn), after its unlock: one woken while the mutex is still held would
 * only sleep again on it (a context switch and two system calls more per
 * combined request; work_queue.c signals after its unlock for the same
 * reason). A condition variable of the waiter's own could not be signalled
 * so: a waiter that saw its new state first (its deadline's wake-up) could
 * return and destroy it before the signal. A semaphore's post is counted
 * instead, and a waiter returns only once it has taken the post of the
 * state it was handed (submit). */
static void post_all(valkey_combined_item_t **woken, int n)
{
    for (int i = 0; i < n; i++)
        sem_post(&woken[i]->wake);
}

/* Holds a slot of max_calls: takes a connection (waiting until first's
 * deadline), then sends first (unless its deadline passed) and the waiters
 * queued by then, then passes the slot on. Called without mu. */
static void lead(valkey_combiner_t *c, valkey_combined_item_t *first)
{
    valkey_combined_item_t *batch[VALKEY_COMBINE_ITEMS_MAX];
    valkey_combined_item_t *woken[VALKEY_COMBINE_ITEMS_MAX + 1];
    int n = 0, n_woken = 0;
    void *conn = c->ops.take(c->ctx, first->deadline);
    pthread_mutex_lock(&c->mu);
    if (conn == NULL || expired(first))
        refuse_unsent(first); /* the pool gives up only at the deadline */
    else
        batch[n++] = first;
    while (conn != NULL && n < c->max_items && c->head != NULL) {
        valkey_combined_item_t *it = pop(c);
        if (expired(it)) {
            refuse_unsent(it);
            /* (any number of them: posted under mu, a rare path) */
            sem_post(&it->wake);
            continue;
        }
        it->state = COMBINED_SENT;
        batch[n++] = it;
    }
    pthread_mutex_unlock(&c->mu);

    if (n > 0)
        c->ops.send(c->ctx, conn, batch, n);
    else if (conn != NULL)
        c->ops.give(c->ctx, conn);

    pthread_mutex_lock(&c->mu);
    if (n > 0) {
        c->calls++;
        if (n > 1) {
            c->combined_calls++;
            c->combined_items += (uint64_t)n;
        }
    }
    for (int i = 0; i < n; i++) {
        if (batch[i] == first)
            continue;
        batch[i]->state = COMBINED_ANSWERED;
        woken[n_woken++] = batch[i];
    }
    valkey_combined_item_t *next = pop(c);
    if (next != NULL) {
        next->state = COMBINED_LEADING; /* the slot passes on: in_flight unchanged */
        woken[n_woken++] = next;
    } else {
        c->in_flight--;
    }
    pthread_mutex_unlock(&c->mu);
    post_all(woken, n_woken);
}

/* The post of the state another thread handed item (sem_wait, never
 * interrupted for good). */
static void take_post(valkey_combined_item_t *item)
{
    while (sem_wait(&item->wake) != 0 && errno == EINTR)
        ;
}

void valkey_combiner_submit(valkey_combiner_t *c, valkey_combined_item_t *item)
{
    item->next = NULL;
    item->state = COMBINED_QUEUED;
    if (c->max_items <= 1) {
        /* no combining: a call of its own, the pool bounding what is in flight */
        void *conn = c->ops.take(c->ctx, item->deadline);
        if (conn == NULL) {
            refuse_unsent(item);
            return;
        }
        c->ops.send(c->ctx, conn, &item, 1);
        pthread_mutex_lock(&c->mu);
        c->calls++;
        pthread_mutex_unlock(&c->mu);
        return;
    }
    pthread_mutex_lock(&c->mu);
    if (c->head == NULL && c->in_flight < c->max_calls) {
        c->in_flight++;
        pthread_mutex_unlock(&c->mu);
        lead(c, item);
        return;
    }
    sem_init(&item->wake, 0, 0);
    if (c->tail != NULL)
        c->tail->next = item;
    else
        c->head = item;
    c->tail = item;
    pthread_mutex_unlock(&c->mu);

    struct timespec until = {.tv_sec = item->deadline->mono_ns / 1000000000,
                             .tv_nsec = item->deadline->mono_ns % 1000000000};
    int rc;
    while ((rc = sem_clockwait(&item->wake, CLOCK_MONOTONIC, &until)) != 0 && errno == EINTR)
        ;
    pthread_mutex_lock(&c->mu);
    if (rc != 0 && item->state == COMBINED_QUEUED) {
        /* never sent: deadline_exceeded, as the pool's wait answers; no
         * other thread holds it any more, and none posts */
        unlink_item(c, item);
        refuse_unsent(item);
    } else if (rc != 0) {
        /* its deadline came as it was handed a state: in a batch (its
         * call's own timeout bounds the wait for the answer), answered or
         * the turn; it returns only after that state's post */
        pthread_mutex_unlock(&c->mu);
        take_post(item);
        pthread_mutex_lock(&c->mu);
    }
    /* read under mu: the state and the answer were set under it */
    bool leading = item->state == COMBINED_LEADING;
    pthread_mutex_unlock(&c->mu);
    if (leading)
        lead(c, item);
    /* nobody posts it any more: answered, or it led its own batch */
    sem_destroy(&item->wake);
}

void valkey_combiner_stats(valkey_combiner_t *c, valkey_combiner_stats_t *out)
{
    pthread_mutex_lock(&c->mu);
    out->calls = c->calls;
    out->combined_calls = c->combined_calls;
    out->combined_items = c->combined_items;
    pthread_mutex_unlock(&c->mu);
}
