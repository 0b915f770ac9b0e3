/*
 * work_queue.c - worker threads over one mutex-guarded FIFO of jobs.
 */
#include "server/work_queue.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct job {
    leased_job_fn fn;
    void *arg;
    struct job *next;
} job_t;

struct leased_work_queue {
    pthread_mutex_t mutex;
    pthread_cond_t ready;
    job_t *head, *tail;
    bool stopping;
    size_t n;
    pthread_t *threads;
};

static void *worker_main(void *arg)
{
    leased_work_queue_t *q = arg;
    pthread_mutex_lock(&q->mutex);
    for (;;) {
        while (!q->head && !q->stopping)
            pthread_cond_wait(&q->ready, &q->mutex);
        job_t *j = q->head;
        if (!j)
            break; /* stopping and drained */
        q->head = j->next;
        if (!q->head)
            q->tail = NULL;
        pthread_mutex_unlock(&q->mutex);
        j->fn(j->arg);
        free(j);
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
    pthread_cond_init(&q->ready, NULL);
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

bool leased_work_queue_push(leased_work_queue_t *q, leased_job_fn fn, void *arg)
{
    job_t *j = malloc(sizeof *j);
    if (!j)
        return false;
    j->fn = fn;
    j->arg = arg;
    j->next = NULL;
    pthread_mutex_lock(&q->mutex);
    if (q->stopping) {
        pthread_mutex_unlock(&q->mutex);
        free(j);
        return false;
    }
    if (q->tail)
        q->tail->next = j;
    else
        q->head = j;
    q->tail = j;
    pthread_cond_signal(&q->ready);
    pthread_mutex_unlock(&q->mutex);
    return true;
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
    pthread_cond_destroy(&q->ready);
    pthread_mutex_destroy(&q->mutex);
    free(q->threads);
    free(q);
}
