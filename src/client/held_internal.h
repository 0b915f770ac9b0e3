/*
 * held_internal.h - what the files of a held lease share, in layers from
 * the top: held.c (start, watch, release), renewals.c (the one thread per
 * client that renews every held lease, many in one call) and
 * held_renewal.c (one held lease's state and the judgement of each of its
 * renewals). Each calls only the ones below it. Not installed; callers use
 * lease/held.h.
 */
#ifndef LEASE_HELD_INTERNAL_H
#define LEASE_HELD_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "lease/client.h"
#include "lease/held.h"

typedef struct renewal_group renewal_group_t;

struct lease_held {
    lease_client_t *client;
    lease_held_config_t cfg;
    char service_instance_id[LEASE_ID_MAX + 1];
    int cancel_fd;
    bool started; /* callbacks and the eventfd only after start returned */
    pthread_t watch_thread;
    bool watch_running;
    bool watch_join_claimed;

    /* guarded by the group's lock: membership of the client's renewal
     * group, and whether the group thread is renewing this lease now (it
     * must not be freed meanwhile) */
    renewal_group_t *group;
    lease_held_t *group_next;
    bool in_group;
    bool in_flight;
    /* set at start, then read-only: kept alive by the keep-alive of the
     * client's session session_id (renewals.c), never renewed on its own */
    bool in_session;
    char session_id[LEASE_ID_MAX + 1];

    pthread_mutex_t lock;
    lease_record_t lease;
    lease_held_window_t window;
    bool capped;
    bool stop;
    int failures;
    lease_code_t code; /* last outcome: LEASE_RENEWED while healthy */
    lease_held_state_t state;
};

/* --- held_renewal.c --- */

/* One renewal attempt of one held lease: what was held and its window when
 * the attempt began, and the request (borrowing `held` and the lease). Keep it
 * in place between prepare and judge. */
typedef struct held_renewal {
    lease_held_t *h;
    lease_record_t held;
    lease_held_window_t window;
    int64_t started_ns;         /* when the attempt began: the anchor if none came back */
    int64_t answer_deadline_ns; /* halfway from started_ns to the cancel point */
    lease_client_owner_t req;
} held_renewal_t;

void held_renewal_prepare(lease_held_t *h, int64_t now_ns, held_renewal_t *r);
/* Judges one renewal's answer exactly as a renewal of its own: a grant
 * anchored at sent_ns (the request's first send), a late answer confirmed
 * by inspection, a temporary failure retried, anything else cancels this
 * held lease only. */
void held_renewal_judge(const held_renewal_t *r, lease_code_t code, const lease_result_t *res,
                        int64_t sent_ns, int64_t answered_ns);
/* One renewal on its own (lease_client_renew) and its judgement. */
void held_renew_once(lease_held_t *h);
/* Cancels when the cancel point has passed; true when it did (or the
 * held lease is no longer active). */
bool held_past_cancel_point(lease_held_t *h, int64_t now_ns);
/* When the held lease next needs the group thread: its renewal point, or its
 * cancel point when it cannot or need not renew before. INT64_MAX when it
 * is no longer active. *due: renewal due now; *gatherable: far enough into
 * its interval (half way) to be renewed early with a batch going out now. */
int64_t held_next_ns(lease_held_t *h, int64_t now_ns, bool *due, bool *gatherable);
void held_log(lease_held_t *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Leaves ACTIVE (the first caller wins) and tells the holder: the eventfd
 * and the cancel callback, once. */
void held_signal_cancel(lease_held_t *h, lease_held_state_t why, lease_code_t code);

/* A confirmed keep-alive of h's session, first sent at sent_ns: h's window
 * becomes the session's grant (capped by h's own lifetime), unless the
 * window h has reaches further. */
void held_session_extend(lease_held_t *h, int64_t sent_ns, const lease_session_t *session);
/* A keep-alive of h's session that may still pass (code transient): kept
 * as h's last outcome, which names the cause if its cancel point comes. */
void held_session_failed(lease_held_t *h, lease_code_t code);

/* --- renewals.c --- */

/* The client's renewal group (created with its thread on first use);
 * NULL when out of memory or no thread could be started. */
renewal_group_t *renewal_group_of(lease_client_t *client);
/* Adds h (active, window set) to g; the group renews it from now on. */
void renewal_group_join(renewal_group_t *g, lease_held_t *h);
/* Removes h and waits until the group thread no longer uses it (unless
 * called from the group thread itself, e.g. from a cancel callback). */
void renewal_group_leave(renewal_group_t *g, lease_held_t *h);
/* Whether h's lease is in g's open session (then h joins as its member:
 * in_session). */
bool renewal_group_session_is(renewal_group_t *g, const char *session_id);
/* lease_held_session on g (held.h). */
lease_code_t renewal_group_session(renewal_group_t *g, const char *service_instance_id,
                                   int64_t ttl_ms, const char *request_id, char *session_id,
                                   size_t session_id_size);
/* The service refused an acquisition in session_id (lease_lost): g opens a
 * new one next time. */
void renewal_group_session_ended(renewal_group_t *g, const char *session_id);
/* Stops and frees the group (through lease_client_free; no member left). */
void renewal_group_free(renewal_group_t *g);

#endif
