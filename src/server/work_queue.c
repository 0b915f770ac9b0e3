/*
 * work_queue.c - worker threads over one mutex-guarded FIFO of ready jobs
 * and a list of delayed jobs sorted by due time.
 *
 * Idle workers sleep on a condition variable (monotonic clock) until a job
 * is pushed or the earliest delayed job falls due; due jobs move to the
 * ready FIFO. While the pool is being freed, delayed jobs run at once so
 * every job started is finished.
 */
#include "work_queue.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "lease/clock.h"

typedef leased_job_t job_t;

struct leased_work_queue {
    pthread_mutex_t mutex;
    pthread_cond_t ready;
    job_t *head, *tail; /* ready, FIFO */
    job_t *delayed;     /* sorted by due_ns */
    bool stopping;
    int pushing; /* atomic: pushes between their first step and their signal */
    size_t n;
    pthread_t *threads;
};

static void append_ready(leased_work_queue_t *q, job_t *j)
{
    j->next = NULL;
    if (q->tail)
        q->tail->next = j;
    else
        q->head = j;
    q->tail = j;
}

/* Moves delayed jobs that are due (all of them when stopping). */
static void promote(leased_work_queue_t *q)
{
    int64_t now = lease_mono_now_ns();
    while (q->delayed && (q->stopping || q->delayed->due_ns <= now)) {
        job_t *j = q->delayed;
        q->delayed = j->next;
        append_ready(q, j);
    }
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
        job_t *j = q->head;
        if (!j) {
            if (q->stopping && !q->delayed)
                break;
            wait_for_work(q);
            continue;
        }
        q->head = j->next;
        if (!q->head)
            q->tail = NULL;
        pthread_mutex_unlock(&q->mutex);
        j->fn(j->arg); /* j is its caller's again: not touched after */
        pthread_mutex_lock(&q->mutex);
    }
    pthread_mutex_unlock(&q->mutex);
    return NULL;
}

leased_work_queue_t *leased_work_queue_new(size_t n)
{
    leased_work_queue_t *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    q->threads = calloc(n, sizeof *q->threads);
    if (!q->threads) {
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

bool leased_work_queue_push(leased_work_queue_t *q, job_t *j, leased_job_fn fn, void *arg)
{
    *j = (job_t){fn, arg, 0, NULL};
    __atomic_add_fetch(&q->pushing, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_lock(&q->mutex);
    bool open = !q->stopping;
    if (open)
        append_ready(q, j);
    pthread_mutex_unlock(&q->mutex);
    /* Signalled after the unlock: a worker woken while the mutex is still
     * held would only go back to sleep on the mutex (a context switch and
     * two system calls more per request). An idle worker re-checks the
     * FIFO under the mutex, so the job is taken whoever takes it. The
     * queue is not freed while a push is still signalling (pushing). */
    if (open)
        pthread_cond_signal(&q->ready);
    __atomic_sub_fetch(&q->pushing, 1, __ATOMIC_SEQ_CST);
    return open;
}

void leased_work_queue_push_after(leased_work_queue_t *q, job_t *j, leased_job_fn fn, void *arg,
                                  int64_t delay_ms)
{
    *j = (job_t){fn, arg, lease_mono_now_ns() + (delay_ms > 0 ? delay_ms : 0) * 1000000, NULL};
    pthread_mutex_lock(&q->mutex);
    job_t **at = &q->delayed;
    while (*at && (*at)->due_ns <= j->due_ns)
        at = &(*at)->next;
    j->next = *at;
    *at = j;
    /* a sleeping worker may be waiting for a later due time */
    pthread_cond_broadcast(&q->ready);
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
    free(q->threads);
    free(q);
}
