/*
 * listener.h - the feed of ended leases behind GET /v1/leases/{id}/watch.
 *
 * One dedicated database session per leased, used by one thread (the watch
 * hub, src/server/watch.c) and nothing else:
 *
 * - LISTEN lease_ended: migration 0013 notifies the id of every lease that
 *   ended without its holder asking (force-release, revoke, expiry, epoch
 *   recovery), in the transaction that ended it, so the hub hears it right
 *   after that commit, whichever leased instance made it;
 * - a batched poll (lease.watch_ended(ids)): which of the watched leases are
 *   not active now. It covers what sends no notification (an ordinary
 *   release, e.g. by another process of the holder), anything missed while
 *   the session was being made again, and every end when LISTEN is not
 *   available.
 *
 * LISTEN needs a session that stays one backend: a direct connection (or
 * PgBouncer in session mode). Behind PgBouncer in transaction or statement
 * mode a LISTEN would land on whichever server connection ran it and its
 * notifications would go to other clients or nowhere. The listener notices
 * a pooler (the backend pid the server reports differs from the one in the
 * connection's cancel key, which PgBouncer always makes up) and then only
 * polls, saying so in the log once per session.
 *
 * No backend type crosses this header; the Postgres implementation is
 * src/store/pg_listener.c, the only one.
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
    LEASE_LISTENER_LISTENING, /* LISTEN lease_ended is in force: ends are pushed */
    LEASE_LISTENER_POLLING,   /* a session, but no LISTEN (switched off, or a pooler) */
} lease_listener_mode_t;

/* "down", "listening", "polling" */
const char *lease_listener_mode_name(lease_listener_mode_t mode);

/* One lease id that is (probably) no longer active. Borrowed string. */
typedef void (*lease_listener_ended_fn)(void *arg, const char *lease_id);

typedef struct lease_listener_pg_config {
    const char *conninfo;         /* libpq string or URI; a direct connection for LISTEN */
    int64_t connect_timeout_ms;   /* per attempt */
    const char *application_name; /* shown in pg_stat_activity */
    bool listen;                  /* false: poll only */
} lease_listener_pg_config_t;

/*
 * Makes the listener; the session is made lazily (by the first wait or
 * poll) and made again after any failure, with a backoff. Returns 0, or
 * -1 with a reason in err (bad conninfo, out of memory).
 */
LEASE_MUST_USE int lease_listener_pg_open(const lease_listener_pg_config_t *cfg,
                                          lease_listener_t **out, char *err, size_t errsz);
/* Closes the session and frees; accepts NULL. */
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
