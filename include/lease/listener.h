/*
 * listener.h - the feed of ended leases behind GET /v1/leases/{id}/watch.
 *
 * One dedicated connection (or two) per leased, used by one thread (the
 * watch hub, src/server/watch.c) and nothing else:
 *
 * - pushed ends: the backend tells the listener the id of a lease that
 *   ended, right after the call or transaction that ended it, whichever
 *   leased instance made it;
 * - a batched poll: which of the watched leases are not active now. It
 *   covers what is not pushed, anything missed while the connection was
 *   being made again, and every end when nothing is pushed at all.
 *
 * Two implementations, each opened by its adapter's header:
 *
 * - PostgreSQL (src/store/pg_listener.c, lease_listener_pg_open in
 *   store_pg.h): LISTEN lease_ended, notified by migration 0013's trigger
 *   for the ends the holder did not ask for; the poll is
 *   lease.watch_ended(ids). LISTEN needs a session that stays one backend: a
 *   direct connection (or PgBouncer in session mode). Behind PgBouncer in
 *   transaction or statement mode a LISTEN would land on whichever server
 *   connection ran it; the listener notices a pooler (the backend pid the
 *   server reports differs from the one in the connection's cancel key,
 *   which PgBouncer always makes up) and then only polls, saying so in the
 *   log once per session.
 * - Valkey/Redis (src/store/valkey/valkey_listener.c,
 *   lease_valkey_listener_open in store_valkey.h): SUBSCRIBE
 *   lease:{ns}:ended, published by every function of leased_v1 that ends a
 *   lease; the poll is FCALL_RO leased_v1_watch_ended.
 *
 * Both are at-most-once (a notification or message sent while the
 * connection is down is never delivered): the hub polls at once after
 * every new session, and every poll interval while anything is parked.
 */
#ifndef LEASE_LISTENER_H
#define LEASE_LISTENER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lease/clock.h"
#include "lease/result.h"

typedef struct lease_listener lease_listener_t;

typedef enum lease_listener_mode {
    LEASE_LISTENER_DOWN = 0,  /* no session: nothing is heard, polls fail */
    LEASE_LISTENER_LISTENING, /* LISTEN / SUBSCRIBE is in force: ends are pushed */
    LEASE_LISTENER_POLLING,   /* a session, but nothing pushed (switched off, or a pooler) */
} lease_listener_mode_t;

/* "down", "listening", "polling" */
const char *lease_listener_mode_name(lease_listener_mode_t mode);

/* One lease id that is (probably) no longer active. Borrowed string. */
typedef void (*lease_listener_ended_fn)(void *arg, const char *lease_id);

/* What each listener implements; callers use the functions below. */
typedef struct lease_listener_ops {
    lease_listener_mode_t (*wait)(lease_listener_t *l, int wake_fd, int64_t timeout_ms,
                                  lease_listener_ended_fn ended, void *arg, bool *new_session);
    lease_code_t (*poll)(lease_listener_t *l, const char *const *ids, size_t n,
                         const lease_deadline_t *deadline, lease_listener_ended_fn ended,
                         void *arg);
    void (*close)(lease_listener_t *l);
} lease_listener_ops_t;

/* The part every listener begins with. mode is written by the hub's thread
 * (lease_listener_set_mode) and read from any thread (lease_listener_mode:
 * /metrics, /readyz). */
struct lease_listener {
    const lease_listener_ops_t *ops;
    lease_listener_mode_t mode;
};

/* For implementations: the mode from now on (an atomic store). */
void lease_listener_set_mode(lease_listener_t *l, lease_listener_mode_t mode);

/* Closes the session and frees; accepts NULL. Each listener's session is
 * made lazily (by the first wait or poll) and made again after any
 * failure, with a backoff. */
void lease_listener_close(lease_listener_t *l);

/*
 * Waits at most timeout_ms for notifications, or until wake_fd (>= 0) is
 * readable (it is not read here). Makes the session first when there is
 * none and the backoff allows. Calls ended(arg, id) for every notification
 * heard. *new_session is set when a session was made during this call: ends
 * that happened while there was none were not heard, so the caller should
 * poll. Returns the mode after the wait.
 */
lease_listener_mode_t lease_listener_wait(lease_listener_t *l, int wake_fd, int64_t timeout_ms,
                                          lease_listener_ended_fn ended, void *arg,
                                          bool *new_session);

/*
 * Asks which of ids (n of them, each 1..128 of [A-Za-z0-9._:-]) are not
 * active now, within the deadline, and calls ended(arg, id) for each (and
 * for notifications that arrived meanwhile). Returns LEASE_INSPECTED, or
 * LEASE_BACKEND_UNAVAILABLE (no session, or it failed: the session is
 * dropped and made again later).
 */
LEASE_MUST_USE lease_code_t lease_listener_poll(lease_listener_t *l, const char *const *ids,
                                                size_t n, const lease_deadline_t *deadline,
                                                lease_listener_ended_fn ended, void *arg);

/* The current mode (no I/O); safe from any thread. */
lease_listener_mode_t lease_listener_mode(const lease_listener_t *l);

#endif
