/*
 * audit_queue.c - ring buffer of audit events and its batch writer thread.
 *
 * Producers (request workers) copy an event in under the mutex and signal;
 * the writer takes up to `batch` events, releases the mutex, and calls the
 * store with a short deadline. The ring never blocks a producer: a full
 * ring drops the new event and counts it, because an audit backlog must not
 * turn into request latency or unbounded memory.
 */
#include "server/audit_queue.h"

#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lease/clock.h"
#include "lease/log.h"

#define WRITE_DEADLINE_MS 2000
#define IDLE_WAKE_MS 500

struct leased_audit_queue {
    lease_store_t *store;
    size_t capacity, batch;
    lease_audit_event_t *ring;
    size_t head, count; /* oldest at head */
    bool stopping, started;
    int64_t flush_deadline_ns; /* stop: writer gives up on the store after this */
    uint64_t written, dropped, fallback;
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
    if (!q->ring) {
        free(q);
        return NULL;
    }
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
        json_object_set_new(
            o, "scope",
            json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "tenant_id", ev->identity.tenant_id,
                      "program_id", ev->identity.program_id, "target_namespace",
                      ev->identity.target_namespace, "target_id", ev->identity.target_id,
                      "actor_name", ev->identity.actor_name, "workflow_name",
                      ev->identity.workflow_name, "operation_class", ev->identity.operation_class));
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (text) {
        lease_log_fields_t f = {ev->call.correlation_id, ev->call.trace_id, NULL,
                                 lease_code_name(ev->code), ev->latency_ms};
        lease_log_write_json(LEASE_LOG_WARN, &f, "audit_fallback", "event", text);
        free(text);
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
        while (q->count == 0 && !q->stopping) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_nsec += (long)IDLE_WAKE_MS * 1000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&q->wake, &q->mutex, &ts);
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
    pthread_mutex_unlock(&q->mutex);
}

void leased_audit_queue_free(leased_audit_queue_t *q)
{
    if (!q)
        return;
    pthread_cond_destroy(&q->wake);
    pthread_mutex_destroy(&q->mutex);
    free(q->ring);
    free(q);
}
