/*
 * worker.h - DEPRECATED: the earlier names of lease/held.h, kept so that
 * programs written against them still compile and programs linked against
 * them still run (libleaseclient.so keeps exporting every lease_worker_*
 * symbol, src/client/worker_compat.c). "Worker" named a held lease here;
 * in leased's vocabulary a worker is a server thread, so the client says
 * "held lease" (docs/clients.md, "Names"). New code includes lease/held.h.
 *
 *   lease_worker_t            -> lease_held_t
 *   lease_worker_config_t     -> lease_held_config_t
 *   lease_worker_window_t     -> lease_held_window_t
 *   lease_worker_state_t      -> lease_held_state_t
 *   LEASE_WORKER_<X>          -> LEASE_HELD_<X>
 *   lease_worker_<f>()        -> lease_held_<f>()
 *
 * The typedef names are the aliases; the struct and enum tags
 * (struct lease_worker_config, ...) are not kept.
 */
#ifndef LEASE_WORKER_H
#define LEASE_WORKER_H

#include <stdbool.h>
#include <stdint.h>

#include "lease/held.h"

typedef lease_held_t lease_worker_t;
typedef lease_held_config_t lease_worker_config_t;
typedef lease_held_window_t lease_worker_window_t;
typedef lease_held_state_t lease_worker_state_t;
typedef lease_held_cancel_fn lease_worker_cancel_fn;
typedef lease_held_log_fn lease_worker_log_fn;

#define LEASE_WORKER_ACTIVE LEASE_HELD_ACTIVE
#define LEASE_WORKER_LOST LEASE_HELD_LOST
#define LEASE_WORKER_UNCONFIRMED LEASE_HELD_UNCONFIRMED
#define LEASE_WORKER_EXPIRED LEASE_HELD_EXPIRED
#define LEASE_WORKER_RELEASED LEASE_HELD_RELEASED
#define LEASE_WORKER_STOPPED LEASE_HELD_STOPPED

#define LEASE_WORKER_RENEW_PERMILLE LEASE_HELD_RENEW_PERMILLE
#define LEASE_WORKER_JITTER_PERMILLE LEASE_HELD_JITTER_PERMILLE
#define LEASE_WORKER_MARGIN_MIN_MS LEASE_HELD_MARGIN_MIN_MS
#define LEASE_WORKER_MARGIN_MAX_MS LEASE_HELD_MARGIN_MAX_MS
#define LEASE_WORKER_WATCH_WAIT_MS LEASE_HELD_WATCH_WAIT_MS

/* Each does exactly what its lease_held_ namesake does. */
const char *lease_worker_state_name(lease_worker_state_t state);
int64_t lease_worker_grant_ms(const lease_record_t *lease);
bool lease_worker_grant_capped(const lease_record_t *lease);
int64_t lease_worker_anchor_ns(int64_t first_sent_ns, int64_t waited_ms, int64_t answered_ns);
int64_t lease_worker_margin_ms(int64_t grant_ms, int64_t configured_ms);
lease_worker_window_t lease_worker_plan(int64_t sent_ns, int64_t grant_ms,
                                        const lease_worker_config_t *cfg, uint64_t jitter_draw);
int64_t lease_worker_answer_deadline(int64_t sent_ns, int64_t cancel_ns);
bool lease_worker_answer_counts(int64_t answered_ns, int64_t answer_deadline_ns);
int64_t lease_worker_retry_at(int64_t now_ns, int64_t cancel_ns, int failures);
LEASE_MUST_USE lease_worker_t *lease_worker_start(lease_client_t *client,
                                                  const lease_record_t *lease, int64_t sent_mono_ns,
                                                  const lease_worker_config_t *cfg,
                                                  lease_code_t *code);
int lease_worker_cancel_fd(const lease_worker_t *w);
lease_worker_state_t lease_worker_state(lease_worker_t *w, lease_code_t *code);
void lease_worker_snapshot(lease_worker_t *w, lease_record_t *lease, lease_worker_window_t *window);
LEASE_MUST_USE lease_code_t lease_worker_release(lease_worker_t *w, int64_t deadline_ms,
                                                 lease_result_t *res);
void lease_worker_stop(lease_worker_t *w);
void lease_worker_free(lease_worker_t *w);

#endif
