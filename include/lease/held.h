/*
 * held.h - a held lease: a lease (an acquire's answer) that this process
 * keeps renewed in the background, with its loss signalled at once (the
 * executor's half of the target lease contract: "lease loss reaches the
 * actor/job cancellation path"). The same thing is HeldLease in the Python
 * and Go clients (docs/clients.md, "Names"); lease/worker.h keeps the
 * earlier names (lease_worker_*) as deprecated aliases.
 *
 * Every held lease started on one lease_client_t is renewed by that
 * client's one renewal thread: the renewals due in the same period (a
 * lease at its renewal point R, and every other at least half way to its
 * own) go out as one POST /v1/leases/renew-batch, one call per period
 * however many leases the process holds. Each item's answer is judged
 * below exactly as a renewal of its own; lease_lost cancels that held
 * lease only. A lease held in the client's session (lease_held_acquire,
 * the default; "Sessions" below) is not renewed at all: one keep-alive per
 * session period keeps every such lease alive. Callbacks may
 * therefore run on the client's renewal thread: keep them short.
 *
 * Local authority is judged on CLOCK_MONOTONIC only, never on the service's
 * wall-clock timestamps: a confirmed acquire or renewal anchored at
 * monotonic time S, granting G ms (the lease's ttl_ms, or less when the
 * maximum lifetime caps expires_at), gives authority until
 *
 *     local expiry   E = S + G            (the service cannot expire it sooner)
 *     cancel point   C = E - margin       (no confirmed renewal by then: cancel)
 *     renewal        R = S + G * renew_permille/1000  +/- jitter, R <= S + (C-S)/2
 *
 * The anchor S is the moment the request (id) was first sent, moved later
 * by the wait the service reports for a waited acquire and never past the
 * answer's arrival: S = min(first send + waited_ms, arrival)
 * (lease_held_anchor_ns; lease_client_call_t.anchor_mono_ns). Safe
 * without a shared clock: leased received the request after its first send
 * and began the granting transaction after receipt + waited_ms, so the
 * service's expiry is at least S + G.
 *
 * A renewal attempt sent at T must be answered by its answer deadline
 * A = T + (C - T)/2. An answer arriving after A grants nothing by itself:
 * the held lease inspects the lease and keeps authority only if the inspection,
 * answered before C, shows the same lease active with that renewal applied.
 *
 * Cancellation (callback once, and the cancel fd becomes readable for good)
 * happens when: a renewal answers lease_lost (expired, force-released,
 * revoked, superseded) or is refused for good (credential, scope, invalid);
 * the watch reports the lease ended; no renewal is confirmed by C
 * (partition, service or database down, late answers); the maximum
 * lifetime ends; the holder releases or stops.
 *
 * The watch (unless no_watch): a second thread long-polls
 * GET /v1/leases/{lease_id}/watch, so an end the holder did not ask for
 * (an administrator's force-release or revoke through any leased instance,
 * expiry, recovery, a release by another process of the holder) cancels
 * within milliseconds instead of at the next renewal. It only ever cancels:
 * a watch that fails or is not offered by the service (an older leased, a
 * credential without the right) changes nothing, renewal stays the safety
 * net and the authority. Only a typed answer naming this lease in a state
 * other than active counts.
 */
#ifndef LEASE_HELD_H
#define LEASE_HELD_H

#include <stdbool.h>
#include <stdint.h>

#include "lease/client.h"
#include "lease/result.h"
#include "lease/types.h"

typedef enum lease_held_state {
    LEASE_HELD_ACTIVE = 0,  /* renewing; local authority held */
    LEASE_HELD_LOST,        /* the service said lease_lost, or refused renewal for good */
    LEASE_HELD_UNCONFIRMED, /* no renewal confirmed before the cancel point */
    LEASE_HELD_EXPIRED,     /* the lease reached its maximum lifetime */
    LEASE_HELD_RELEASED,    /* the holder released the lease */
    LEASE_HELD_STOPPED,     /* the holder stopped renewing without releasing */
} lease_held_state_t;

/* "active", "lost", "unconfirmed", "expired", "released", "stopped" */
const char *lease_held_state_name(lease_held_state_t state);

/* Called once, from the thread that observed the loss, without any
 * lock of the held lease taken; it must not free the held lease. code is the typed result that led
 * to it (LEASE_LOST, LEASE_BACKEND_UNAVAILABLE, ...; LEASE_RELEASED for a
 * release; the last renewal outcome for a stop). */
typedef void (*lease_held_cancel_fn)(void *arg, lease_held_state_t why, lease_code_t code);
/* Diagnostic lines (no secrets, no trailing newline). */
typedef void (*lease_held_log_fn)(void *arg, const char *message);

#define LEASE_HELD_RENEW_PERMILLE 333  /* renew a third into the grant */
#define LEASE_HELD_JITTER_PERMILLE 100 /* +/- 10 % of the renewal interval */
#define LEASE_HELD_MARGIN_MIN_MS 100
#define LEASE_HELD_MARGIN_MAX_MS 5000
#define LEASE_HELD_WATCH_WAIT_MS 30000 /* within leased's default cap (60 s) */

typedef struct lease_held_config {
    int renew_permille;              /* 0: LEASE_HELD_RENEW_PERMILLE (1..900) */
    int jitter_permille;             /* 0: LEASE_HELD_JITTER_PERMILLE; < 0: no jitter */
    int64_t margin_ms;               /* 0: lease_held_margin_ms default */
    int64_t ttl_ms;                  /* renew with this TTL; 0 keeps the lease's */
    bool no_watch;                   /* true: renewal only, no watch thread (and no session) */
    int64_t watch_wait_ms;           /* one long-poll's wait; 0: LEASE_HELD_WATCH_WAIT_MS */
    const char *service_instance_id; /* NULL: the lease record's */
    lease_held_cancel_fn on_cancel;
    void *cancel_arg;
    lease_held_log_fn log;
    void *log_arg;
    /* lease_held_acquire: true acquires without the client's session and
     * renews this lease on its own (the behaviour before sessions) */
    bool per_lease_renewal;
} lease_held_config_t;

/* One confirmed grant's local window (monotonic nanoseconds). */
typedef struct lease_held_window {
    int64_t sent_ns;   /* S */
    int64_t grant_ms;  /* G */
    int64_t expiry_ns; /* E */
    int64_t cancel_ns; /* C */
    int64_t renew_ns;  /* R */
} lease_held_window_t;

/* --- pure schedule arithmetic (no clock, no I/O) --- */

/* Authority a confirmed answer grants: min(ttl_ms, expires_at - renewed_at),
 * never negative. Server timestamps are only subtracted from each other. */
int64_t lease_held_grant_ms(const lease_record_t *lease);
/* Whether the maximum lifetime cut this grant short of the TTL (renewing
 * further cannot extend it). For a lease in a session (session_id set),
 * whether expires_at is its own lifetime's end rather than its session's. */
bool lease_held_grant_capped(const lease_record_t *lease);
/* The anchor of a grant: min(first_sent_ns + waited_ms, answered_ns);
 * waited_ms < 0 counts as 0, and answered_ns 0 (unknown) as no bound. */
int64_t lease_held_anchor_ns(int64_t first_sent_ns, int64_t waited_ms, int64_t answered_ns);
/* Safety margin: configured_ms when > 0, else grant/10 clamped to
 * [LEASE_HELD_MARGIN_MIN_MS, LEASE_HELD_MARGIN_MAX_MS]; never more than
 * grant/4 so the window stays open. */
int64_t lease_held_margin_ms(int64_t grant_ms, int64_t configured_ms);
/* The window of a grant confirmed by a request first sent at sent_ns.
 * jitter_draw is any uniformly random number (the caller's generator). */
lease_held_window_t lease_held_plan(int64_t sent_ns, int64_t grant_ms,
                                    const lease_held_config_t *cfg, uint64_t jitter_draw);
/* Answer deadline of a renewal attempt sent at sent_ns: halfway to C. */
int64_t lease_held_answer_deadline(int64_t sent_ns, int64_t cancel_ns);
/* Whether an answer received at answered_ns may extend authority at all. */
bool lease_held_answer_counts(int64_t answered_ns, int64_t answer_deadline_ns);
/* When to retry after `failures` failed attempts in a row (1, 2, ...):
 * 100 ms doubling up to 1.6 s, but at most a quarter of what is left before
 * C (at least 10 ms), so several attempts fit before cancelling. */
int64_t lease_held_retry_at(int64_t now_ns, int64_t cancel_ns, int failures);

/* --- the held lease --- */

typedef struct lease_held lease_held_t;

/*
 * Starts holding `lease` (an acquire's answer, borrowed) anchored at
 * sent_mono_ns: the acquire call's lease_client_call_t.anchor_mono_ns
 * (first_sent_mono_ns would start a late-granted wait already expired). The
 * client is borrowed and must outlive the held lease. When the renewal point has
 * already passed (e.g. after a long bounded wait), one renewal is made
 * before returning. A lease acquired in the client's session
 * (lease_held_session) is kept alive by the session's keep-alive instead
 * of renewed; any other lease is renewed, one by one or in batches. Returns NULL with *code set
 * when the lease cannot be held (LEASE_LOST, ..., or LEASE_BACKEND_UNAVAILABLE when no thread or
 * eventfd could be created).
 */
LEASE_MUST_USE lease_held_t *lease_held_start(lease_client_t *client, const lease_record_t *lease,
                                              int64_t sent_mono_ns, const lease_held_config_t *cfg,
                                              lease_code_t *code);

/*
 * Sessions (issue 37; docs/clients.md, "Sessions in the C client"). Every
 * client has at most one session of its own, opened on the first hold that
 * asks for it (lease_held_acquire, or lease_held_session). A lease acquired
 * in it and held through the same client is not renewed: the client's
 * renewal thread sends ONE keep-alive per session period (a third of the
 * session's TTL, with jitter) for all of them, and each one's local window
 * is the keep-alive's: anchored at the keep-alive's first send, granting
 * the session's TTL, capped by the lease's own maximum lifetime.
 *
 *   keep-alive answered lease_lost (the session closed, expired, unknown)
 *       or refused for good: every held lease of the session is cancelled,
 *       LEASE_HELD_LOST with that code, as a lost renewal cancels today;
 *   no answer, a 5xx, a timeout, a cut connection: repeated (the call
 *       repeats the same keep-alive until its deadline, then the thread
 *       retries with backoff) until the cancel point of the window of the
 *       last confirmed keep-alive; past it every held lease of the session
 *       is cancelled LEASE_HELD_UNCONFIRMED. Nothing the service did not
 *       confirm is taken as alive.
 *
 * The session stays open while the client lives (kept alive even between
 * holds, so a hold that waits to acquire finds it open); lease_client_free
 * closes it. The watch stays on for each lease in it: it is what sees one
 * lease ended while its session lives on (a force-release, a revoke). So a
 * hold without the watch (no_watch) is never put in the session: it is
 * renewed on its own, as before.
 *
 * A service without sessions (Valkey: 400 invalid_lease_request naming
 * session_id) is remembered per client: from then on holds are acquired
 * without a session and renewed one by one (lease/client.h's renew-batch),
 * as lease_held_config_t.per_lease_renewal asks for one hold.
 */

/*
 * The client's session for holds: copies its id into session_id (size at
 * least LEASE_ID_MAX + 1) and returns LEASE_ACQUIRED, opening it first when
 * the client has none or its last confirmed window has passed its cancel
 * point. service_instance_id and ttl_ms (0: the policy's default) are the
 * open's; request_id (NULL: generated) makes the open repeatable by a
 * process that repeats its own request (leasectl run --request-id): a
 * replayed open is kept alive once before it counts. Returns
 * LEASE_INVALID_LEASE_REQUEST with session_id "" when the service has no
 * sessions (remembered), or the open's failure. Put the id in
 * lease_client_acquire_t.session_id and pass the answer to lease_held_start.
 */
LEASE_MUST_USE lease_code_t lease_held_session(lease_client_t *client,
                                               const char *service_instance_id, int64_t ttl_ms,
                                               const char *request_id, char *session_id,
                                               size_t session_id_size);

/*
 * Acquires req (borrowed) and holds it: the C counterpart of the Python and
 * Go clients' hold. The lease is acquired in the client's session
 * (lease_held_session, opened with req's service instance and TTL) unless
 * cfg->per_lease_renewal, req->session_id names one already, or the service
 * has no sessions; an acquisition refused lease_lost because that session
 * ended meanwhile is repeated once in a new session. call and res (may be
 * NULL) receive the acquire's. Returns the held lease, or NULL with *code
 * the acquire's code (LEASE_CONFLICT, ...) or lease_held_start's; a lease
 * acquired but not holdable is released before returning.
 */
LEASE_MUST_USE lease_held_t *lease_held_acquire(lease_client_t *client,
                                                const lease_client_acquire_t *req,
                                                lease_client_call_t *call, lease_result_t *res,
                                                const lease_held_config_t *cfg, lease_code_t *code);

/* An eventfd that becomes readable (POLLIN) once the lease is lost,
 * released or stopped, and stays readable: poll it, never read it. */
int lease_held_cancel_fd(const lease_held_t *h);
/* Current state and the code that caused it (LEASE_RENEWED while active). */
lease_held_state_t lease_held_state(lease_held_t *h, lease_code_t *code);
/* The lease as last confirmed, and its local window. */
void lease_held_snapshot(lease_held_t *h, lease_record_t *lease, lease_held_window_t *window);

/*
 * Stops renewing, signals cancellation (LEASE_HELD_RELEASED, unless the
 * lease was already lost) and releases the lease within deadline_ms.
 * Returns the release's code (LEASE_RELEASED on success); res may be NULL.
 */
LEASE_MUST_USE lease_code_t lease_held_release(lease_held_t *h, int64_t deadline_ms,
                                               lease_result_t *res);
/* Stops renewing without releasing (signals LEASE_HELD_STOPPED when still
 * active). Idempotent. */
void lease_held_stop(lease_held_t *h);
/* Stops the held lease and frees it; does not release. NULL is accepted. */
void lease_held_free(lease_held_t *h);

#endif
