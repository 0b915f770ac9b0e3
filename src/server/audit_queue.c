/*
 * audit_queue.c - ring buffer of audit events and its batch writer thread.
 *
 * Producers (request workers) copy an event in under the mutex and signal;
 * the writer takes up to `batch` events, releases the mutex, and calls the
 * store with a short deadline. The ring never blocks a producer: a full
 * ring drops the new event and counts it, because an audit backlog must not
 * turn into request latency or unbounded memory.
 *
 * Refusals before authentication (bad credentials, a source over its rate)
 * are counted instead (leased_audit_queue_count): per source address, kind
 * and window, one slot holds the window's first event and a count; the
 * writer queues it as one event (event_count = the count) when the window
 * has ended. The table of slots is bounded; when it is full, further
 * refusals are folded into one slot per kind whose source is "*".
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
    size_t head, count; /* oldest at head */
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
    q->aggregates = calloc(AGGREGATES_MAX, sizeof *q->aggregates);
    if (!q->ring || !q->aggregates) {
        free(q->ring);
        free(q->aggregates);
        free(q);
        return NULL;
    }
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

/* Queues the aggregates whose window has ended (all of them with `all`),
 * under the mutex. An aggregate that finds the ring full is dropped and
 * counted like any event. */
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
        if (q->count == q->capacity) {
            q->dropped++;
        } else {
            q->ring[(q->head + q->count) % q->capacity] = a->first;
            q->count++;
        }
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
            batch[i] = q->ring[(q->head + i) % q->capacity];
        q->head = (q->head + n) % q->capacity;
        q->count -= n;
        bool give_up = q->stopping && lease_mono_now_ns() >= q->flush_deadline_ns;
        pthread_mutex_unlock(&q->mutex);

        lease_code_t code = LEASE_BACKEND_UNAVAILABLE;
        if (!give_up) {
            lease_deadline_t dl = lease_deadline_in(WRITE_DEADLINE_MS);
            code = lease_store_record_audit(q->store, batch, n, &dl);
        }
        bool ok = lease_code_is_success(code);
        if (!ok) {
            for (size_t i = 0; i < n; i++)
                log_fallback(&batch[i]);
            LEASE_LOG(LEASE_LOG_WARN, NULL, "audit batch of %zu events went to the log (%s)", n,
                      lease_code_name(code));
        }
        pthread_mutex_lock(&q->mutex);
        if (ok)
            q->written += n;
        else
            q->fallback += n;
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

void leased_audit_queue_push(leased_audit_queue_t *q, const lease_audit_event_t *ev)
{
    bool dropped = false;
    pthread_mutex_lock(&q->mutex);
    if (q->count == q->capacity || q->stopping) {
        q->dropped++;
        dropped = true;
    } else {
        q->ring[(q->head + q->count) % q->capacity] = *ev;
        q->count++;
        pthread_cond_signal(&q->wake);
    }
    pthread_mutex_unlock(&q->mutex);
    if (dropped)
        LEASE_LOG(LEASE_LOG_WARN, NULL, "audit event dropped: queue full (%s %s)", ev->event_type,
                  lease_code_name(ev->code));
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
        q->dropped++;
        pthread_mutex_unlock(&q->mutex);
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
}

void leased_audit_queue_stats(leased_audit_queue_t *q, leased_audit_stats_t *out)
{
    pthread_mutex_lock(&q->mutex);
    out->depth = q->count;
    out->written = q->written;
    out->dropped = q->dropped;
    out->fallback = q->fallback;
    out->aggregated = q->aggregated;
    pthread_mutex_unlock(&q->mutex);
}

void leased_audit_queue_free(leased_audit_queue_t *q)
{
    if (!q)
        return;
    pthread_cond_destroy(&q->wake);
    pthread_mutex_destroy(&q->mutex);
    free(q->ring);
    free(q->aggregates);
    free(q);
}
