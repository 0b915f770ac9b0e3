/*
 * audit_queue.c - ring buffer of audit events and its batch writer thread.
 *
 * Producers (request workers) copy an event in under the mutex and signal;
 * the writer takes up to `batch` events, releases the mutex, and calls the
 * store with a short deadline. A producer never blocks on the database.
 *
 * No event of an admitted request is dropped: the queue is shared fairly
 * per tenant, and admission asks it first (leased_audit_queue_admit). A
 * tenant may start new work while it has fewer events waiting than its
 * share, `capacity` divided by the tenants that have events waiting (the
 * asking one included); beyond, its requests are refused (429) until the
 * writer has caught up, and the other tenants' requests go on. Events of
 * requests already admitted are always kept: the ring grows past the
 * capacity for them. Its bound, RING_MAX_FACTOR times the capacity plus
 * RING_GROWTH_ROOM, is above what the shares allow (each tenant stops at
 * its share when it is admitted; tenants joining one by one while none
 * drains add up to capacity x (1 + 1/2 + ... + 1/257) < 6.2 x capacity)
 * plus the events of the requests in flight; only past it, or without
 * memory, is an event dropped and counted. Events pushed while the queue
 * stops are written to the log instead (counted as fallback).
 *
 * Refusals before authentication (bad credentials, a source over its rate)
 * are counted instead (leased_audit_queue_count): per source address, kind
 * and window, one slot holds the window's first event and a count; the
 * writer queues it as one event (event_count = the count) when the window
 * has ended. The table of slots is bounded; when it is full, further
 * refusals are folded into one slot per kind whose source is "*".
 *
 * Log lines about dropped events, batches sent to the log and refused
 * admissions are rate-limited: at most one line per kind per second, with
 * how many it stands for.
 */
#include "audit_queue.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lease/clock.h"
#include "lease/json_fields.h"
#include "lease/log.h"

#define WRITE_DEADLINE_MS 2000
#define IDLE_WAKE_MS 500
#define AGGREGATES_MAX 1024 /* sources x kinds counted per window */
#define DEFAULT_WINDOW_MS 10000
/* Tenants with events waiting tracked one by one; further tenants share
 * one more slot (OVERFLOW_SLOT, named "*") and so one share. */
#define TENANTS_MAX 256
#define OVERFLOW_SLOT TENANTS_MAX
/* The flow of events that belong to no authenticated tenant (aggregated
 * refusals before authentication). */
#define NO_TENANT ""
/* How far the ring may grow past the capacity for events of admitted
 * requests: the shares' sum (< 6.2 x capacity, see above) and the events
 * of the requests in flight (LEASE_MAX_INFLIGHT, 256 by default, of at
 * most 128 events each: a batch of 100 replayed items and its aggregates).
 * Growth is on demand (an event is 2.6 KB); it does not shrink. */
#define RING_MAX_FACTOR 8
#define RING_GROWTH_ROOM 32768
/* The retry hint of a refused admission: the time the writer needs for
 * the tenant's excess at its measured rate, within these bounds. */
#define RETRY_MIN_MS 50
#define RETRY_MAX_MS 5000
#define RETRY_UNKNOWN_MS 1000
#define LOG_EVERY_NS INT64_C(1000000000)

/* One tenant's events in the ring; a slot with none waiting is free. */
typedef struct tenant_share {
    uint64_t hash;
    char id[LEASE_NAME_MAX + 1];
    size_t queued;
} tenant_share_t;

/* At most one log line per LOG_EVERY_NS for one kind of trouble. */
typedef struct log_limit {
    int64_t next_ns;
    uint64_t pending; /* occurrences since the last line */
} log_limit_t;

/* One source's refusals of one kind in the current window. */
typedef struct aggregate {
    bool used;
    lease_audit_event_t first; /* ids of the window's first refusal */
    int64_t count;
    int64_t window_end_ns;
} aggregate_t;

struct leased_audit_queue {
    lease_store_t *store;
    size_t capacity, batch;
    lease_audit_event_t *ring;
    unsigned short *owner; /* ring[i]'s tenant slot */
    size_t ring_size, ring_max;
    size_t head, count;                      /* oldest at head */
    tenant_share_t tenants[TENANTS_MAX + 1]; /* + OVERFLOW_SLOT */
    size_t tenants_waiting;                  /* slots with events queued */
    uint64_t refused;                        /* admissions refused */
    double rate_per_s;                       /* the writer's measured rate, 0 before */
    log_limit_t drop_log, fallback_log, refuse_log;
    bool stopping, started;
    int64_t flush_deadline_ns; /* stop: writer gives up on the store after this */
    uint64_t written, dropped, fallback;
    int64_t window_ns;
    aggregate_t *aggregates; /* AGGREGATES_MAX */
    size_t n_aggregates;
    uint64_t aggregated; /* refusals counted into aggregates */
    pthread_mutex_t mutex;
    pthread_cond_t wake;
    pthread_t thread;
};

leased_audit_queue_t *leased_audit_queue_new(lease_store_t *store, size_t capacity, size_t batch)
{
    leased_audit_queue_t *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    q->ring = calloc(capacity, sizeof *q->ring);
    q->owner = calloc(capacity, sizeof *q->owner);
    q->aggregates = calloc(AGGREGATES_MAX, sizeof *q->aggregates);
    if (!q->ring || !q->owner || !q->aggregates) {
        free(q->ring);
        free(q->owner);
        free(q->aggregates);
        free(q);
        return NULL;
    }
    q->ring_size = capacity;
    q->ring_max = capacity * RING_MAX_FACTOR + RING_GROWTH_ROOM;
    snprintf(q->tenants[OVERFLOW_SLOT].id, sizeof q->tenants[OVERFLOW_SLOT].id, "*");
    q->window_ns = (int64_t)DEFAULT_WINDOW_MS * 1000000;
    q->store = store;
    q->capacity = capacity;
    q->batch = batch;
    pthread_mutex_init(&q->mutex, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&q->wake, &attr);
    pthread_condattr_destroy(&attr);
    return q;
}

/* One event as a log line member: the same non-secret fields the store
 * receives. */
static void log_fallback(const lease_audit_event_t *ev)
{
    json_t *o = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:s}", "event_type", ev->event_type,
        "code", lease_code_name(ev->code), "decision", ev->decision, "backend_health",
        ev->backend_health, "request_id", ev->call.request_id, "correlation_id",
        ev->call.correlation_id, "trace_id", ev->call.trace_id, "principal_id",
        ev->call.principal.principal_id, "credential_id", ev->call.principal.credential_id,
        "latency_ms", (json_int_t)ev->latency_ms, "lease_id", ev->lease_id);
    if (!o)
        return;
    char when[LEASE_TIME_LEN + 1];
    lease_time_format(ev->occurred_at_ms, when);
    json_object_set_new(o, "occurred_at", json_string(when));
    if (ev->has_identity)
        json_object_set_new(o, "scope", lease_json_identity(&ev->identity));
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (text) {
        lease_log_fields_t f = {ev->call.correlation_id, ev->call.trace_id, NULL,
                                lease_code_name(ev->code), ev->latency_ms};
        lease_log_write_json(LEASE_LOG_WARN, &f, "audit_fallback", "event", text);
        free(text);
    }
}

/* Counts one occurrence; true when a line may be written now, with
 * *count the occurrences it stands for (under the mutex). */
static bool log_limit_take(log_limit_t *l, uint64_t *count)
{
    l->pending++;
    int64_t now = lease_mono_now_ns();
    if (now < l->next_ns)
        return false;
    *count = l->pending;
    l->pending = 0;
    l->next_ns = now + LOG_EVERY_NS;
    return true;
}

static uint64_t tenant_hash(const char *tenant)
{
    uint64_t h = 1469598103934665603ULL;
    for (const char *p = tenant; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    return h;
}

/* The slot of tenant's waiting events (under the mutex): its own when it
 * has events waiting; else, with `claim`, a free one made its own; else
 * OVERFLOW_SLOT when every slot is taken, or -1 (nothing waiting). */
static int tenant_slot(leased_audit_queue_t *q, const char *tenant, bool claim)
{
    uint64_t h = tenant_hash(tenant);
    int free_slot = -1;
    for (int i = 0; i < TENANTS_MAX; i++) {
        tenant_share_t *t = &q->tenants[i];
        if (t->queued == 0) {
            if (free_slot < 0)
                free_slot = i;
        } else if (t->hash == h && strcmp(t->id, tenant) == 0) {
            return i;
        }
    }
    if (free_slot < 0)
        return OVERFLOW_SLOT;
    if (!claim)
        return -1;
    q->tenants[free_slot].hash = h;
    snprintf(q->tenants[free_slot].id, sizeof q->tenants[free_slot].id, "%s", tenant);
    return free_slot;
}

/* Doubles the ring (under the mutex), at most to ring_max; false when it
 * cannot grow. The events keep their order, oldest at 0. */
static bool grow_ring(leased_audit_queue_t *q)
{
    if (q->ring_size >= q->ring_max)
        return false;
    size_t size = q->ring_size * 2 < q->ring_max ? q->ring_size * 2 : q->ring_max;
    lease_audit_event_t *ring = calloc(size, sizeof *ring);
    unsigned short *owner = calloc(size, sizeof *owner);
    if (!ring || !owner) {
        free(ring);
        free(owner);
        return false;
    }
    for (size_t i = 0; i < q->count; i++) {
        ring[i] = q->ring[(q->head + i) % q->ring_size];
        owner[i] = q->owner[(q->head + i) % q->ring_size];
    }
    free(q->ring);
    free(q->owner);
    q->ring = ring;
    q->owner = owner;
    q->ring_size = size;
    q->head = 0;
    return true;
}

/* Appends ev as tenant's (under the mutex); false when the ring is full
 * and cannot grow (the event is then counted dropped). */
static bool enqueue(leased_audit_queue_t *q, const char *tenant, const lease_audit_event_t *ev)
{
    if (q->count == q->ring_size && !grow_ring(q)) {
        q->dropped++;
        return false;
    }
    int slot = tenant_slot(q, tenant, true);
    size_t at = (q->head + q->count) % q->ring_size;
    q->ring[at] = *ev;
    q->owner[at] = (unsigned short)slot;
    if (q->tenants[slot].queued++ == 0)
        q->tenants_waiting++;
    q->count++;
    return true;
}

/* Takes the oldest event out of the ring (under the mutex). */
static void dequeue(leased_audit_queue_t *q, lease_audit_event_t *out)
{
    *out = q->ring[q->head];
    tenant_share_t *t = &q->tenants[q->owner[q->head]];
    if (--t->queued == 0)
        q->tenants_waiting--;
    q->head = (q->head + 1) % q->ring_size;
    q->count--;
}

/* Queues the aggregates whose window has ended (all of them with `all`),
 * under the mutex, as events of no tenant. An aggregate that finds the
 * ring full and unable to grow is dropped and counted like any event. */
static void flush_aggregates(leased_audit_queue_t *q, bool all)
{
    if (q->n_aggregates == 0)
        return;
    int64_t now = lease_mono_now_ns();
    for (size_t i = 0; i < AGGREGATES_MAX; i++) {
        aggregate_t *a = &q->aggregates[i];
        if (!a->used || (!all && now < a->window_end_ns))
            continue;
        a->first.event_count = a->count;
        (void)enqueue(q, NO_TENANT, &a->first);
        a->used = false;
        q->n_aggregates--;
    }
}

static void *writer_main(void *arg)
{
    leased_audit_queue_t *q = arg;
    lease_audit_event_t *batch = calloc(q->batch, sizeof *batch);
    if (!batch)
        return NULL;
    pthread_mutex_lock(&q->mutex);
    for (;;) {
        flush_aggregates(q, q->stopping);
        while (q->count == 0 && !q->stopping) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_nsec += (long)IDLE_WAKE_MS * 1000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&q->wake, &q->mutex, &ts);
            flush_aggregates(q, q->stopping);
        }
        if (q->count == 0 && q->stopping)
            break;
        size_t n = q->count < q->batch ? q->count : q->batch;
        for (size_t i = 0; i < n; i++)
            dequeue(q, &batch[i]);
        bool give_up = q->stopping && lease_mono_now_ns() >= q->flush_deadline_ns;
        pthread_mutex_unlock(&q->mutex);

        lease_code_t code = LEASE_BACKEND_UNAVAILABLE;
        int64_t began = lease_mono_now_ns();
        if (!give_up) {
            lease_deadline_t dl = lease_deadline_in(WRITE_DEADLINE_MS);
            code = lease_store_record_audit(q->store, batch, n, &dl);
        }
        int64_t took_ns = lease_mono_now_ns() - began;
        bool ok = lease_code_is_success(code);
        if (!ok) /* the events themselves: one line each, never rate-limited */
            for (size_t i = 0; i < n; i++)
                log_fallback(&batch[i]);
        pthread_mutex_lock(&q->mutex);
        uint64_t lines_for = 0;
        if (ok) {
            q->written += n;
            /* the rate the writer keeps up (events per second of store
             * time), smoothed: what a refused tenant's retry hint uses */
            double rate = (double)n * 1e9 / (double)(took_ns > 0 ? took_ns : 1);
            q->rate_per_s = q->rate_per_s > 0 ? 0.75 * q->rate_per_s + 0.25 * rate : rate;
        } else {
            q->fallback += n;
            if (!log_limit_take(&q->fallback_log, &lines_for))
                lines_for = 0;
        }
        if (lines_for) {
            pthread_mutex_unlock(&q->mutex);
            LEASE_LOG(LEASE_LOG_WARN, NULL,
                      "audit batches went to the log (%s): %llu in the last second or more",
                      lease_code_name(code), (unsigned long long)lines_for);
            pthread_mutex_lock(&q->mutex);
        }
    }
    pthread_mutex_unlock(&q->mutex);
    free(batch);
    return NULL;
}

bool leased_audit_queue_start(leased_audit_queue_t *q)
{
    if (pthread_create(&q->thread, NULL, writer_main, q) != 0)
        return false;
    q->started = true;
    return true;
}

/* Writes the warning a log limit allows for `what` (outside the mutex). */
static void log_limited(uint64_t count, const char *what)
{
    if (count)
        LEASE_LOG(LEASE_LOG_WARN, NULL, "%s: %llu in the last second or more", what,
                  (unsigned long long)count);
}

bool leased_audit_queue_admit(leased_audit_queue_t *q, const char *tenant_id,
                              int64_t *retry_after_ms)
{
    const char *tenant = tenant_id ? tenant_id : NO_TENANT;
    pthread_mutex_lock(&q->mutex);
    int slot = tenant_slot(q, tenant, false);
    size_t queued = slot >= 0 ? q->tenants[slot].queued : 0;
    size_t flows = q->tenants_waiting + (queued == 0 ? 1 : 0);
    size_t share = q->capacity / flows > 0 ? q->capacity / flows : 1;
    bool ok = q->stopping || queued < share;
    uint64_t lines_for = 0;
    if (!ok) {
        size_t excess = queued - share + 1;
        int64_t ms = RETRY_UNKNOWN_MS;
        if (q->rate_per_s > 0)
            ms = (int64_t)((double)excess * 1000.0 / q->rate_per_s);
        *retry_after_ms = ms < RETRY_MIN_MS ? RETRY_MIN_MS : ms > RETRY_MAX_MS ? RETRY_MAX_MS : ms;
        q->refused++;
        if (!log_limit_take(&q->refuse_log, &lines_for))
            lines_for = 0;
    }
    pthread_mutex_unlock(&q->mutex);
    log_limited(lines_for, "requests refused: their tenant's audit events wait beyond its share");
    return ok;
}

void leased_audit_queue_push(leased_audit_queue_t *q, const char *tenant_id,
                             const lease_audit_event_t *ev)
{
    uint64_t lines_for = 0;
    pthread_mutex_lock(&q->mutex);
    if (q->stopping) {
        /* the writer is gone or going: the log keeps the event */
        q->fallback++;
        pthread_mutex_unlock(&q->mutex);
        log_fallback(ev);
        return;
    }
    if (enqueue(q, tenant_id ? tenant_id : NO_TENANT, ev))
        pthread_cond_signal(&q->wake);
    else if (!log_limit_take(&q->drop_log, &lines_for))
        lines_for = 0;
    pthread_mutex_unlock(&q->mutex);
    log_limited(lines_for, "audit events dropped (queue full)");
}

void leased_audit_queue_set_window(leased_audit_queue_t *q, int64_t window_ms)
{
    q->window_ns = (window_ms > 0 ? window_ms : DEFAULT_WINDOW_MS) * 1000000;
}

static uint64_t aggregate_hash(const char *source, const char *event_type, lease_code_t code)
{
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)code;
    for (const char *p = source; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    for (const char *p = event_type; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    return h;
}

static bool same_kind(const aggregate_t *a, const char *source, const lease_audit_event_t *ev)
{
    return a->used && a->first.code == ev->code &&
           strcmp(a->first.event_type, ev->event_type) == 0 &&
           strcmp(a->first.source_address, source) == 0 &&
           strcmp(a->first.call.principal.credential_id, ev->call.principal.credential_id) == 0;
}

/* Counts ev into its slot (under the mutex); false when the table has no
 * room for a new slot (limit: slots in use). */
static bool count_into(leased_audit_queue_t *q, const lease_audit_event_t *ev, size_t limit)
{
    const char *source = ev->source_address;
    size_t start = aggregate_hash(source, ev->event_type, ev->code) & (AGGREGATES_MAX - 1);
    for (size_t k = 0; k < AGGREGATES_MAX; k++) {
        aggregate_t *a = &q->aggregates[(start + k) & (AGGREGATES_MAX - 1)];
        if (same_kind(a, source, ev)) {
            a->count++;
            return true;
        }
        if (!a->used) {
            if (q->n_aggregates >= limit)
                return false;
            a->used = true;
            a->first = *ev;
            a->count = 1;
            a->window_end_ns = lease_mono_now_ns() + q->window_ns;
            q->n_aggregates++;
            return true;
        }
    }
    return false;
}

void leased_audit_queue_count(leased_audit_queue_t *q, const lease_audit_event_t *ev)
{
    pthread_mutex_lock(&q->mutex);
    if (q->stopping) {
        q->fallback++;
        pthread_mutex_unlock(&q->mutex);
        log_fallback(ev);
        return;
    }
    q->aggregated++;
    /* Three quarters of the table for (source, credential) slots; the rest
     * keeps room for one "*" slot per kind, which stands for every source
     * and credential once the table is that full. */
    if (!count_into(q, ev, AGGREGATES_MAX * 3 / 4)) {
        lease_audit_event_t folded = *ev;
        snprintf(folded.source_address, sizeof folded.source_address, "*");
        memset(&folded.call.principal, 0, sizeof folded.call.principal);
        folded.has_identity = false;
        if (!count_into(q, &folded, AGGREGATES_MAX))
            q->dropped++; /* only if every kind's "*" slot filled the rest */
    }
    pthread_mutex_unlock(&q->mutex);
}

void leased_audit_queue_stop(leased_audit_queue_t *q, int64_t flush_ms)
{
    if (!q || !q->started)
        return;
    pthread_mutex_lock(&q->mutex);
    q->stopping = true;
    q->flush_deadline_ns = lease_mono_now_ns() + flush_ms * 1000000;
    pthread_cond_signal(&q->wake);
    pthread_mutex_unlock(&q->mutex);
    pthread_join(q->thread, NULL);
    q->started = false;
    /* what the rate limit kept back since the last lines */
    pthread_mutex_lock(&q->mutex);
    uint64_t dropped = q->drop_log.pending, refused = q->refuse_log.pending;
    q->drop_log.pending = q->refuse_log.pending = 0;
    pthread_mutex_unlock(&q->mutex);
    log_limited(dropped, "audit events dropped (queue full)");
    log_limited(refused, "requests refused: their tenant's audit events wait beyond its share");
}

void leased_audit_queue_stats(leased_audit_queue_t *q, leased_audit_stats_t *out)
{
    pthread_mutex_lock(&q->mutex);
    out->depth = q->count;
    out->written = q->written;
    out->dropped = q->dropped;
    out->fallback = q->fallback;
    out->aggregated = q->aggregated;
    out->refused = q->refused;
    pthread_mutex_unlock(&q->mutex);
}

void leased_audit_queue_free(leased_audit_queue_t *q)
{
    if (!q)
        return;
    pthread_cond_destroy(&q->wake);
    pthread_mutex_destroy(&q->mutex);
    free(q->ring);
    free(q->owner);
    free(q->aggregates);
    free(q);
}
