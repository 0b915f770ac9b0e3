/*
 * clock.h - wall and monotonic time, deadlines, RFC 3339 timestamps.
 *
 * A deadline carries both clocks: wall time (sent to Postgres, whose backend
 * clock decides) and monotonic time (for every local wait, immune to clock
 * steps). Both are fixed when the deadline is created.
 */
#ifndef LEASE_CLOCK_H
#define LEASE_CLOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "lease/result.h"

typedef struct lease_deadline {
    int64_t wall_ms; /* Unix epoch milliseconds */
    int64_t mono_ns; /* CLOCK_MONOTONIC nanoseconds */
} lease_deadline_t;

int64_t lease_wall_now_ms(void);
int64_t lease_mono_now_ns(void);

/* Saturating arithmetic for times: the result is clamped to
 * [INT64_MIN, INT64_MAX] instead of overflowing (client-supplied times and
 * offsets reach these). */
int64_t lease_time_add_sat(int64_t a, int64_t b);
int64_t lease_time_sub_sat(int64_t a, int64_t b);
/* Milliseconds as nanoseconds, clamped. */
int64_t lease_ms_to_ns_sat(int64_t ms);

/* The deadline `rel_ms` after a moment known on both clocks (a request's
 * receipt). rel_ms is clamped to +-100 years, so any input is safe. */
lease_deadline_t lease_deadline_after(int64_t wall_ms, int64_t mono_ns, int64_t rel_ms);

/* A deadline `ms` from now (ms may be <= 0: already passed). */
lease_deadline_t lease_deadline_in(int64_t ms);
/* A deadline at an absolute wall time; its monotonic twin is derived now. */
lease_deadline_t lease_deadline_at_wall(int64_t wall_ms);
/* The earlier of two deadlines. */
lease_deadline_t lease_deadline_min(lease_deadline_t a, lease_deadline_t b);
/* Milliseconds left on the monotonic clock (negative once passed). */
int64_t lease_deadline_remaining_ms(const lease_deadline_t *d);
bool lease_deadline_passed(const lease_deadline_t *d);

#define LEASE_TIME_LEN 24 /* "2026-08-05T12:00:00.000Z" */
/* Formats epoch ms as RFC 3339 UTC with exactly three fractional digits. */
void lease_time_format(int64_t wall_ms, char out[LEASE_TIME_LEN + 1]);
/* Parses RFC 3339 (any offset, 0-9 fractional digits, truncated to ms). */
LEASE_MUST_USE bool lease_time_parse(const char *s, int64_t *wall_ms);

/* Sleeps up to ms milliseconds on the monotonic clock. */
void lease_sleep_ms(int64_t ms);
/* A uniformly random integer in [0, bound) from a thread-local generator
 * seeded from the OS; for jitter only, never for secrets. */
uint64_t lease_jitter(uint64_t bound);

#endif
