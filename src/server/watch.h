/*
 * watch.h - the hub behind GET /v1/leases/{lease_id}/watch: parked watch
 * requests, and the one thread that wakes them.
 *
 * A watch request first inspects its lease on a worker (routes.c). While
 * the lease is active it is parked here: its connection stays suspended,
 * no worker and no in-flight slot is held, and the hub calls its wake
 * function once, when one of these happens first:
 *
 * - the lease's id is heard on the feed of ended leases (lease/listener.h):
 *   LISTEN lease_ended on PostgreSQL (some transaction, on any leased
 *   instance or in psql, ended it without its holder asking), SUBSCRIBE
 *   lease:{ns}:ended on Valkey (any function call that ended it);
 * - the batched poll (every poll_ms while anything is parked) reports it is
 *   no longer active (an ordinary release, an end missed while the listening
 *   session was being made again, or every end when LISTEN is unavailable);
 * - its wait ends (until_mono_ns);
 * - the hub is released for shutdown (leased_watch_release_all).
 *
 * The woken request inspects again and answers (or parks again when the
 * lease is still active and time is left), so a wake never has to be
 * exact: a spurious one costs one inspect.
 *
 * Ids heard (or polled) recently are kept in a ring, numbered: a request
 * records the number before its inspect and parks with it, so an end heard
 * between the inspect and the park is not missed.
 *
 * Cost: parked requests are an array scanned linearly on each notification,
 * timeout and poll; at most max_watches of them (LEASE_MAX_WATCHES).
 */
#ifndef LEASED_WATCH_H
#define LEASED_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lease/listener.h"
#include "lease/result.h"

typedef struct leased_watch leased_watch_t;

/* Called once per park, on the hub's thread or on the parking thread,
 * with no hub lock held. It must not block (it queues the request). */
typedef void (*leased_watch_wake_fn)(void *arg);

typedef struct leased_watch_config {
    int64_t poll_ms;     /* LEASE_WATCH_POLL_MS */
    int64_t max_watches; /* LEASE_MAX_WATCHES */
} leased_watch_config_t;

typedef enum leased_watch_park_result {
    LEASED_WATCH_PARKED = 0, /* wake will be called later (or already was) */
    LEASED_WATCH_FULL,       /* max_watches parked already: refused */
    LEASED_WATCH_STOPPING,   /* released for shutdown: refused */
} leased_watch_park_result_t;

typedef struct leased_watch_stats {
    size_t parked;
    lease_listener_mode_t mode;
    uint64_t heard;         /* notifications heard */
    uint64_t polls;         /* batched polls that answered */
    uint64_t poll_failures; /* batched polls that did not */
    uint64_t woken_by_end;  /* parked requests woken by a heard or polled end */
    uint64_t refused_full;  /* parks refused: max_watches reached */
} leased_watch_stats_t;

/* listener is taken (closed by leased_watch_free). NULL when out of memory. */
leased_watch_t *leased_watch_new(lease_listener_t *listener, const leased_watch_config_t *cfg);
/* Starts the hub thread. */
LEASE_MUST_USE bool leased_watch_start(leased_watch_t *w);
/* Wakes every parked request now and refuses new parks from then on. */
void leased_watch_release_all(leased_watch_t *w);
/* Whether leased_watch_release_all was called. */
bool leased_watch_stopping(leased_watch_t *w);
/* Releases everything, stops the thread, closes the listener, frees;
 * accepts NULL. */
void leased_watch_free(leased_watch_t *w);

/* The number of the newest id heard or polled so far. */
uint64_t leased_watch_seq(leased_watch_t *w);

/*
 * Parks a request on lease_id until it ends or until_mono_ns. seen_seq is
 * leased_watch_seq() taken before the inspect that found the lease active:
 * an end of that lease heard since then wakes the request at once (on this
 * thread, before returning). The caller must not touch what arg names once
 * this returned LEASED_WATCH_PARKED.
 */
LEASE_MUST_USE leased_watch_park_result_t leased_watch_park(leased_watch_t *w, const char *lease_id,
                                                            uint64_t seen_seq,
                                                            int64_t until_mono_ns,
                                                            leased_watch_wake_fn wake, void *arg);

/* The client of the request parked with arg went away: if it is still
 * parked, it is taken out and woken now (on this thread). False when it
 * was not parked (woken already, or never parked). */
bool leased_watch_cancel(leased_watch_t *w, void *arg);

void leased_watch_stats(leased_watch_t *w, leased_watch_stats_t *out);

#endif
