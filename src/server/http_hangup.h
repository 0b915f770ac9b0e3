/*
 * http_hangup.h - waiting requests whose client went away.
 *
 * A request that waits (a parked watch, an acquire between attempts) keeps
 * its connection suspended in libmicrohttpd, which then watches neither the
 * socket nor the client. Its socket is registered here while it waits: one
 * thread sleeps in epoll on every such socket for a hang-up (FIN or reset)
 * and calls the request's function the moment one comes, so the waiting
 * work and its slots are released at once instead of when wait_ms ends.
 * The thread wakes only for hang-ups, never per request.
 */
#ifndef LEASED_HTTP_HANGUP_H
#define LEASED_HTTP_HANGUP_H

#include <stdbool.h>

typedef struct leased_hangup leased_hangup_t;

/* Called on the hangup thread for each hang-up: mark(arg) with the hangup
 * lock held (see leased_hangup_lock; it must not block nor call into this
 * module), then then(cls, arg) with no lock held, where arg may be freed
 * already: then may compare the pointer, never follow it. */
typedef void (*leased_hangup_mark_fn)(void *arg);
typedef void (*leased_hangup_then_fn)(void *cls, void *arg);

/* Starts the thread. NULL when out of memory or threads. */
leased_hangup_t *leased_hangup_start(leased_hangup_mark_fn mark, leased_hangup_then_fn then,
                                     void *cls);
/* Stops the thread and frees; accepts NULL. Nothing may be registered. */
void leased_hangup_stop(leased_hangup_t *hu);

/* Calls mark(arg), then then(cls, arg), once, when the peer of fd hangs
 * up, unless forgotten first. False when it cannot watch fd (the request
 * then waits as it would without this module). */
bool leased_hangup_watch(leased_hangup_t *hu, int fd, void *arg);
/* Stops watching fd: from return on, its function is not called and its
 * arg may be freed. Call before fd can be closed (before resuming the
 * connection). */
void leased_hangup_forget(leased_hangup_t *hu, int fd);

/* The lock under which hang-up functions run: a caller that checks what a
 * hang-up function sets, then acts on it, holds it across both. */
void leased_hangup_lock(leased_hangup_t *hu);
void leased_hangup_unlock(leased_hangup_t *hu);

#endif
