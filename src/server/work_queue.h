/*
 * work_queue.h - a fixed pool of threads running queued jobs, fairly across
 * flows, and jobs that become ready after a delay.
 *
 * leased's request handlers block on the database; they run here, never on
 * the HTTP event thread. Each request belongs to a flow (its tenant, or
 * its client address when no cached credential vouches for it: http.c
 * classifies it as soon as its head is read). Every flow has a FIFO of its
 * own; idle workers serve the flows that have work in turn (round robin),
 * so one flow's backlog delays another flow's request by at most one turn.
 * A flow alone runs on at most all workers but one (so a request of another
 * flow never waits for a worker behind it); while other flows are active
 * (had work within the last second) each runs on an equal share of those
 * (at least one). A flow queues
 * at most max_queued jobs: past that, a push is refused at once and the
 * caller answers 429. A job that waits (an acquire backing off, a watch
 * woken) re-queues itself with a delay instead of sleeping, so waiting
 * requests hold no worker; when due it joins its flow's FIFO again, never
 * refused (it was admitted already).
 */
#ifndef LEASED_WORK_QUEUE_H
#define LEASED_WORK_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lease/result.h"

typedef struct leased_work_queue leased_work_queue_t;
typedef void (*leased_job_fn)(void *arg);
typedef struct leased_flow leased_flow_t;

/* A queued job, held by its caller (in the request it runs for): queuing
 * allocates nothing but its flow's record, the first time the flow has
 * work. One job is queued at most once at a time; the queue lets go of it
 * just before fn(arg) runs, so fn may queue it again. */
/* Longest flow key (a tenant id or a client address, with a prefix). */
#define LEASED_FLOW_KEY_MAX 160

typedef struct leased_job {
    leased_job_fn fn;
    void *arg;
    int64_t due_ns; /* delayed jobs */
    size_t cost;    /* in single requests: what it takes of its flow's share */
    struct leased_job *next;
    leased_flow_t *flow;           /* while queued or running */
    char key[LEASED_FLOW_KEY_MAX]; /* its flow, named by the first push */
} leased_job_t;

typedef enum leased_push_result {
    LEASED_PUSH_OK = 0,
    LEASED_PUSH_STOPPING,  /* the pool is stopping */
    LEASED_PUSH_FLOW_FULL, /* the flow holds max_queued jobs already */
} leased_push_result_t;

/* Starts n threads; a flow queues at most max_queued jobs (0: no bound).
 * NULL (with nothing left running) on failure. */
leased_work_queue_t *leased_work_queue_new(size_t n, size_t max_queued);
/* Queues fn(arg) as job of the flow named key (NULL: the flow ""), costing
 * cost single requests (0 counts as 1). */
LEASE_MUST_USE leased_push_result_t leased_work_queue_push(leased_work_queue_t *q,
                                                           leased_job_t *job, leased_job_fn fn,
                                                           void *arg, const char *key,
                                                           size_t cost);
/* Whether the flow named key holds max_queued jobs already (a push now
 * would be refused): a hint, the push itself decides. */
bool leased_work_queue_full(leased_work_queue_t *q, const char *key);
/* Queues fn(arg) as job, of the flow its first push named, to run no
 * sooner than delay_ms from now (sooner only when the pool is being
 * freed). Accepted while stopping and past the flow's bound, because it
 * continues a job already admitted. */
void leased_work_queue_push_after(leased_work_queue_t *q, leased_job_t *job, leased_job_fn fn,
                                  void *arg, int64_t delay_ms);
/* Jobs queued (ready, not delayed) in all flows, and flows with work. */
void leased_work_queue_depth(leased_work_queue_t *q, size_t *queued, size_t *flows);
/* Runs every queued job (delayed ones at once), then joins the threads and
 * frees; accepts NULL. */
void leased_work_queue_free(leased_work_queue_t *q);

#endif
