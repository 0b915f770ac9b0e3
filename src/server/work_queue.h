/*
 * work_queue.h - a fixed pool of threads running queued jobs in FIFO order,
 * and jobs that become ready after a delay.
 *
 * leased's request handlers block on the database; they run here, never on
 * the HTTP event thread. A handler that must wait (an acquire backing off
 * between attempts) re-queues itself with a delay instead of sleeping, so
 * waiting requests hold no worker. The queue needs no bound of its own:
 * jobs are admitted by the global in-flight bound (admission.h) first.
 */
#ifndef LEASED_WORK_QUEUE_H
#define LEASED_WORK_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lease/result.h"

typedef struct leased_work_queue leased_work_queue_t;
typedef void (*leased_job_fn)(void *arg);

/* A queued job, held by its caller (in the request it runs for): queuing
 * allocates nothing and cannot fail for memory. One job is queued at most
 * once at a time; the queue lets go of it just before fn(arg) runs, so fn
 * may queue it again. */
typedef struct leased_job {
    leased_job_fn fn;
    void *arg;
    int64_t due_ns; /* delayed jobs */
    struct leased_job *next;
} leased_job_t;

/* Starts n threads; NULL (with nothing left running) on failure. */
leased_work_queue_t *leased_work_queue_new(size_t n);
/* Queues fn(arg) as job; false when the pool is stopping. */
LEASE_MUST_USE bool leased_work_queue_push(leased_work_queue_t *q, leased_job_t *job,
                                           leased_job_fn fn, void *arg);
/* Queues fn(arg) as job to run no sooner than delay_ms from now (sooner
 * only when the pool is being freed). Accepted while stopping, because it
 * continues a job already running. */
void leased_work_queue_push_after(leased_work_queue_t *q, leased_job_t *job, leased_job_fn fn,
                                  void *arg, int64_t delay_ms);
/* Runs every queued job (delayed ones at once), then joins the threads and
 * frees; accepts NULL. */
void leased_work_queue_free(leased_work_queue_t *q);

#endif
