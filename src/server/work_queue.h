/*
 * work_queue.h - a fixed pool of threads running queued jobs in FIFO order.
 *
 * leased's request handlers block on the database; they run here, never on
 * the HTTP event thread. The queue needs no bound of its own: jobs are
 * admitted by the global in-flight bound (admission.h) before they are
 * pushed.
 */
#ifndef LEASED_WORK_QUEUE_H
#define LEASED_WORK_QUEUE_H

#include <stdbool.h>
#include <stddef.h>

#include "lease/result.h"

typedef struct leased_work_queue leased_work_queue_t;
typedef void (*leased_job_fn)(void *arg);

/* Starts n threads; NULL (with nothing left running) on failure. */
leased_work_queue_t *leased_work_queue_new(size_t n);
/* Queues fn(arg); false only when the pool is stopping. */
LEASE_MUST_USE bool leased_work_queue_push(leased_work_queue_t *q, leased_job_fn fn, void *arg);
/* Runs every queued job, then joins the threads and frees; accepts NULL. */
void leased_work_queue_free(leased_work_queue_t *q);

#endif
