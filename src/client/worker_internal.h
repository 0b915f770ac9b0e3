/*
 * worker_internal.h - what worker.c (one held lease: its window, its
 * judgement of renewal answers, its watch) and worker_group.c (the one
 * thread per client that renews every held lease, many in one call) share.
 * Not installed; callers use lease/worker.h.
 */
#ifndef LEASE_WORKER_INTERNAL_H
#define LEASE_WORKER_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "lease/client.h"
#include "lease/worker.h"

typedef struct worker_group worker_group_t;

struct lease_worker {
    lease_client_t *client;
    lease_worker_config_t cfg;
    char service_instance_id[LEASE_ID_MAX + 1];
    int cancel_fd;
    bool started; /* callbacks and the eventfd only after start returned */
    pthread_t watch_thread;
    bool watch_running;
    bool watch_join_claimed;

    /* guarded by the group's lock: membership of the client's renewal
     * group, and whether the group thread is renewing this worker now (it
     * must not be freed meanwhile) */
    worker_group_t *group;
    lease_worker_t *group_next;
    bool in_group;
    bool in_flight;

    pthread_mutex_t lock;
    lease_record_t lease;
    lease_worker_window_t window;
    bool capped;
    bool stop;
    int failures;
    lease_code_t code; /* last outcome: LEASE_RENEWED while healthy */
    lease_worker_state_t state;
};

/* One renewal attempt of one worker: what was held and its window when the
 * attempt began, and the request (borrowing `held` and the worker). Keep it
 * in place between prepare and judge. */
typedef struct worker_renewal {
    lease_worker_t *w;
    lease_record_t held;
    lease_worker_window_t window;
    int64_t started_ns;         /* when the attempt began: the anchor if none came back */
    int64_t answer_deadline_ns; /* halfway from started_ns to the cancel point */
    lease_client_owner_t req;
} worker_renewal_t;

void worker_renewal_prepare(lease_worker_t *w, int64_t now_ns, worker_renewal_t *r);
/* Judges one renewal's answer exactly as a renewal of its own: a grant
 * anchored at sent_ns (the request's first send), a late answer confirmed
 * by inspection, a temporary failure retried, anything else cancels this
 * worker only. */
void worker_renewal_judge(const worker_renewal_t *r, lease_code_t code, const lease_result_t *res,
                          int64_t sent_ns, int64_t answered_ns);
/* One renewal on its own (lease_client_renew) and its judgement. */
void worker_renew_once(lease_worker_t *w);
/* Cancels when the cancel point has passed; true when it did (or the
 * worker is no longer active). */
bool worker_past_cancel_point(lease_worker_t *w, int64_t now_ns);
/* When the worker next needs the group thread: its renewal point, or its
 * cancel point when it cannot or need not renew before. INT64_MAX when it
 * is no longer active. *due: renewal due now; *gatherable: far enough into
 * its interval (half way) to be renewed early with a batch going out now. */
int64_t worker_next_ns(lease_worker_t *w, int64_t now_ns, bool *due, bool *gatherable);
void worker_log(lease_worker_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The client's renewal group (created with its thread on first use);
 * NULL when out of memory or no thread could be started. */
worker_group_t *worker_group_of(lease_client_t *client);
/* Adds w (active, window set) to g; the group renews it from now on. */
void worker_group_join(worker_group_t *g, lease_worker_t *w);
/* Removes w and waits until the group thread no longer uses it (unless
 * called from the group thread itself, e.g. from a cancel callback). */
void worker_group_leave(worker_group_t *g, lease_worker_t *w);
/* Stops and frees the group (lease_client_free; no member left). */
void worker_group_free(worker_group_t *g);

#endif
