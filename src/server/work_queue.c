/*
 * work_queue.c - worker threads over per-flow FIFOs served in turn, and a
 * list of delayed jobs sorted by due time (work_queue.h says why).
 *
 * Flows live in a small chained hash while they have work (queued, delayed
 * or running); the flows with queued jobs form a ring that a cursor walks,
 * one job per flow per turn. While flows share the workers, a flow's
 * share counts the cost of what it runs (a batch of n items costs about
 * n): one batch fills a share that n single requests would, so a tenant
 * sending batches takes no more of the machine than one sending single
 * requests (each flow still runs one job, however costly, at least). Idle workers sleep on a condition
 * variable (monotonic clock) until a job is pushed or the earliest delayed
 * job falls due; due jobs move to their flow's FIFO. While the pool is
 * being freed, delayed jobs run at once so every job started is finished.
 * All of it is under one mutex, held for a few pointer moves per job.
 */
#include "work_queue.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lease/clock.h"
#include "lease/hash.h"
#include "copy_text.h"

typedef leased_job_t job_t;

#define FLOW_BUCKETS 256
/* A flow that had work this recently still counts as active: a client that
 * sends one request at a time is a flow between its requests too. */
#define FLOW_LINGER_NS 1000000000LL
#define REAP_EVERY_NS 100000000LL

struct leased_flow {
    struct leased_flow *hnext;       /* in its hash bucket */
    struct leased_flow *prev, *next; /* in the ring of flows with queued jobs */
    job_t *head, *tail;              /* queued, FIFO */
    size_t queued;
    size_t running;
    size_t running_cost; /* the costs of its running jobs */
    size_t refs;           /* queued + delayed + running */
    int64_t idle_since_ns; /* refs reached 0 then; freed FLOW_LINGER_NS later */
    char key[LEASED_FLOW_KEY_MAX];
};

struct leased_work_queue {
    pthread_mutex_t mutex;
    pthread_cond_t ready;
    leased_flow_t *buckets[FLOW_BUCKETS];
    leased_flow_t *cursor; /* the ring's next flow to serve, NULL when empty */
    job_t *delayed;        /* sorted by due_ns */
    size_t queued, flows;  /* jobs queued, flows with queued jobs */
    size_t max_queued;     /* per flow, 0: no bound */
    size_t seats;          /* workers one flow may hold at once, alone */
    size_t active;         /* flows with work now or within FLOW_LINGER_NS (not "") */
    int64_t reaped_ns;     /* the last walk for flows idle past their linger */
    bool stopping;
    int pushing; /* atomic: pushes between their first step and their signal */
    size_t n;
    pthread_t *threads;
};

static size_t bucket_of(const char *key)
{
    return (size_t)(lease_fnv1a(key) % FLOW_BUCKETS);
}

/* The flow named key, NULL when it has none. */
static leased_flow_t *flow_find(leased_work_queue_t *q, const char *key)
{
    for (leased_flow_t *f = q->buckets[bucket_of(key)]; f; f = f->hnext)
        if (strcmp(f->key, key) == 0)
            return f;
    return NULL;
}

/* The flow named key, made when absent; NULL when out of memory. */
static leased_flow_t *flow_of(leased_work_queue_t *q, const char *key)
{
    leased_flow_t *f = flow_find(q, key);
    if (f)
        return f;
    leased_flow_t **b = &q->buckets[bucket_of(key)];
    f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    leased_copy_text(f->key, sizeof f->key, key);
    f->hnext = *b;
    *b = f;
    q->active += key[0] != '\0';
    return f;
}

/* One reference of f gone; with its last it starts to linger (reap). */
static void flow_unref(leased_work_queue_t *q, leased_flow_t *f)
{
    (void)q;
    if (--f->refs == 0)
        f->idle_since_ns = lease_mono_now_ns();
}

/* Frees the flows idle for FLOW_LINGER_NS (a walk every REAP_EVERY_NS at
 * most: flows are few, one per tenant or address with recent work). */
static void reap(leased_work_queue_t *q, int64_t now)
{
    if (now - q->reaped_ns < REAP_EVERY_NS)
        return;
    q->reaped_ns = now;
    for (size_t b = 0; b < FLOW_BUCKETS; b++)
        for (leased_flow_t **p = &q->buckets[b]; *p;) {
            leased_flow_t *f = *p;
            if (f->refs == 0 && f->key[0] && now - f->idle_since_ns >= FLOW_LINGER_NS) {
                *p = f->hnext;
                q->active--;
                free(f);
            } else {
                p = &f->hnext;
            }
        }
}

/* Whether flow f may start job j now: alone, on all workers but one (the
 * spare one is the next flow's, at once); while other flows are active, on
 * an equal share of those (at least one), counted in cost, so that a flow
 * of batches runs fewer at once than a flow of single requests (as API
 * Priority and Fairness counts a LIST as many seats). A flow with nothing
 * running may always start one job, whatever it costs. */
static bool may_start(const leased_work_queue_t *q, const leased_flow_t *f, const job_t *j)
{
    if (f->running == 0)
        return true;
    if (q->active <= 1)
        return f->running < q->seats;
    size_t share = q->seats / q->active;
    if (share == 0)
        share = 1;
    return f->running < share && f->running_cost + j->cost <= share;
}

static void ring_insert(leased_work_queue_t *q, leased_flow_t *f)
{
    q->flows++;
    if (!q->cursor) {
        f->prev = f->next = f;
        q->cursor = f;
        return;
    }
    /* behind the cursor: a new flow waits one turn of the others at most */
    f->next = q->cursor;
    f->prev = q->cursor->prev;
    f->prev->next = f;
    q->cursor->prev = f;
}

static void ring_remove(leased_work_queue_t *q, leased_flow_t *f)
{
    q->flows--;
    if (f->next == f) {
        q->cursor = NULL;
    } else {
        f->prev->next = f->next;
        f->next->prev = f->prev;
        if (q->cursor == f)
            q->cursor = f->next;
    }
    f->prev = f->next = NULL;
}

/* Appends j to its flow's FIFO (the flow holds a reference for it). */
static void append_ready(leased_work_queue_t *q, job_t *j)
{
    leased_flow_t *f = j->flow;
    j->next = NULL;
    if (f->tail)
        f->tail->next = j;
    else
        f->head = j;
    f->tail = j;
    if (f->queued++ == 0)
        ring_insert(q, f);
    q->queued++;
}

/* Moves delayed jobs that are due (all of them when stopping). */
static void promote(leased_work_queue_t *q)
{
    int64_t now = lease_mono_now_ns();
    while (q->delayed && (q->stopping || q->delayed->due_ns <= now)) {
        job_t *j = q->delayed;
        q->delayed = j->next;
        append_ready(q, j); /* its delayed reference becomes the queued one */
    }
}

/* The next job to run, in turn: the first flow from the cursor that may
 * take another worker gives its oldest job, and the cursor moves past it.
 * NULL when no flow may. */
static job_t *take_next(leased_work_queue_t *q)
{
    leased_flow_t *start = q->cursor, *f = start;
    if (!f)
        return NULL;
    do {
        if (may_start(q, f, f->head)) {
            job_t *j = f->head;
            f->head = j->next;
            if (!f->head)
                f->tail = NULL;
            q->queued--;
            f->running++;
            f->running_cost += j->cost;
            q->cursor = f->next;
            if (--f->queued == 0)
                ring_remove(q, f);
            return j;
        }
        f = f->next;
    } while (f != start);
    return NULL;
}

static void wait_for_work(leased_work_queue_t *q)
{
    if (!q->delayed) {
        pthread_cond_wait(&q->ready, &q->mutex);
        return;
    }
    int64_t due = q->delayed->due_ns;
    struct timespec ts = {(time_t)(due / 1000000000), (long)(due % 1000000000)};
    pthread_cond_timedwait(&q->ready, &q->mutex, &ts);
}

static void *worker_main(void *arg)
{
    leased_work_queue_t *q = arg;
    pthread_mutex_lock(&q->mutex);
    for (;;) {
        promote(q);
        job_t *j = take_next(q);
        if (!j) {
            if (q->stopping && !q->delayed && q->queued == 0)
                break;
            wait_for_work(q);
            continue;
        }
        leased_flow_t *f = j->flow;
        size_t cost = j->cost;
        pthread_mutex_unlock(&q->mutex);
        j->fn(j->arg); /* j is its caller's again: not touched after */
        pthread_mutex_lock(&q->mutex);
        f->running--;
        f->running_cost -= cost; /* this worker serves the flows again itself */
        flow_unref(q, f);
    }
    pthread_mutex_unlock(&q->mutex);
    return NULL;
}

leased_work_queue_t *leased_work_queue_new(size_t n, size_t max_queued)
{
    leased_work_queue_t *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    q->max_queued = max_queued;
    /* the flow "" is never freed: a delayed job whose own flow cannot be
     * made again (out of memory) runs in it */
    leased_flow_t *fallback = calloc(1, sizeof *fallback);
    if (!fallback) {
        free(q);
        return NULL;
    }
    fallback->refs = 1;
    q->buckets[bucket_of("")] = fallback;
    /* one worker stays free for another flow: its request never waits
     * behind this one's backlog (one worker: no choice) */
    q->seats = n > 1 ? n - 1 : 1;
    q->threads = calloc(n, sizeof *q->threads);
    if (!q->threads) {
        free(fallback);
        free(q);
        return NULL;
    }
    pthread_mutex_init(&q->mutex, NULL);
    pthread_condattr_t cattr;
    pthread_condattr_init(&cattr);
    pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
    pthread_cond_init(&q->ready, &cattr);
    pthread_condattr_destroy(&cattr);
    /* Handlers need little stack: bounded buffers, no recursion. */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 512 * 1024);
    for (size_t i = 0; i < n; i++) {
        if (pthread_create(&q->threads[i], &attr, worker_main, q) != 0) {
            pthread_attr_destroy(&attr);
            q->n = i;
            leased_work_queue_free(q);
            return NULL;
        }
    }
    pthread_attr_destroy(&attr);
    q->n = n;
    return q;
}

leased_push_result_t leased_work_queue_push(leased_work_queue_t *q, job_t *j, leased_job_fn fn,
                                            void *arg, const char *key, size_t cost)
{
    *j = (job_t){.fn = fn, .arg = arg, .cost = cost > 0 ? cost : 1};
    leased_copy_text(j->key, sizeof j->key, key ? key : "");
    __atomic_add_fetch(&q->pushing, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_lock(&q->mutex);
    leased_push_result_t r = LEASED_PUSH_STOPPING;
    reap(q, lease_mono_now_ns());
    /* out of memory for a new flow answers as stopping does (503) */
    leased_flow_t *f = q->stopping ? NULL : flow_of(q, j->key);
    if (f && q->max_queued > 0 && f->queued >= q->max_queued) {
        r = LEASED_PUSH_FLOW_FULL;
    } else if (f) {
        r = LEASED_PUSH_OK;
        f->refs++;
        j->flow = f;
        append_ready(q, j);
    }
    pthread_mutex_unlock(&q->mutex);
    /* Signalled after the unlock: a worker woken while the mutex is still
     * held would only go back to sleep on the mutex (a context switch and
     * two system calls more per request). An idle worker re-checks the
     * flows under the mutex, so the job is taken whoever takes it. The
     * queue is not freed while a push is still signalling (pushing). */
    if (r == LEASED_PUSH_OK)
        pthread_cond_signal(&q->ready);
    __atomic_sub_fetch(&q->pushing, 1, __ATOMIC_SEQ_CST);
    return r;
}

bool leased_work_queue_full(leased_work_queue_t *q, const char *key)
{
    if (q->max_queued == 0)
        return false;
    pthread_mutex_lock(&q->mutex);
    const leased_flow_t *f = flow_find(q, key);
    bool full = f && f->queued >= q->max_queued;
    pthread_mutex_unlock(&q->mutex);
    return full;
}

void leased_work_queue_push_after(leased_work_queue_t *q, job_t *j, leased_job_fn fn, void *arg,
                                  int64_t delay_ms)
{
    j->fn = fn;
    j->arg = arg;
    j->due_ns = lease_mono_now_ns() + (delay_ms > 0 ? delay_ms : 0) * 1000000;
    pthread_mutex_lock(&q->mutex);
    /* its flow by name: a parked job held no reference, the flow may have
     * gone (and out of memory, the flow "" takes it: it must run) */
    leased_flow_t *f = flow_of(q, j->key);
    if (!f)
        f = flow_of(q, "");
    j->flow = f;
    f->refs++;
    job_t **at = &q->delayed;
    while (*at && (*at)->due_ns <= j->due_ns)
        at = &(*at)->next;
    j->next = *at;
    *at = j;
    /* a sleeping worker may be waiting for a later due time */
    pthread_cond_broadcast(&q->ready);
    pthread_mutex_unlock(&q->mutex);
}

void leased_work_queue_depth(leased_work_queue_t *q, size_t *queued, size_t *flows)
{
    pthread_mutex_lock(&q->mutex);
    *queued = q->queued;
    *flows = q->flows;
    pthread_mutex_unlock(&q->mutex);
}

void leased_work_queue_free(leased_work_queue_t *q)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->mutex);
    q->stopping = true;
    pthread_cond_broadcast(&q->ready);
    pthread_mutex_unlock(&q->mutex);
    for (size_t i = 0; i < q->n; i++)
        pthread_join(q->threads[i], NULL);
    while (__atomic_load_n(&q->pushing, __ATOMIC_SEQ_CST) > 0)
        sched_yield(); /* a push that queued before stopping is still signalling */
    pthread_cond_destroy(&q->ready);
    pthread_mutex_destroy(&q->mutex);
    /* only the flow "" is left: every other went with its last job */
    for (size_t b = 0; b < FLOW_BUCKETS; b++)
        while (q->buckets[b]) {
            leased_flow_t *f = q->buckets[b];
            q->buckets[b] = f->hnext;
            free(f);
        }
    free(q->threads);
    free(q);
}
