/*
 * relay.c - the delivery loop (see relay.h).
 *
 * Guarantees and where they come from:
 * - at least once: a row is marked in the claiming transaction only after
 *   its destination confirmed it; any failure before COMMIT leaves it
 *   unpublished for the next claim (possibly delivered twice);
 * - nothing from a rejected commit: the relay reads only lease.outbox, which
 *   only an accepted fenced commit writes;
 * - order per identity: the claim hands an identity to one relay at a time
 *   and in outbox_id order (migrations/0012); here rows are published in
 *   that order on one channel, and marking stops at an identity's first row
 *   that was not confirmed.
 */
#include "relay.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lease/clock.h"
#include "lease/log.h"
#include "relay_amqp.h"
#include "relay_couchdb.h"
#include "relay_db.h"
#include "relay_routes.h"

#define RELAY_PURGE_INTERVAL_MS 60000
#define RELAY_PURGE_BATCH 5000
#define RELAY_MAX_RETRY_DELAY_MS (INT64_C(3600) * 1000)
#define RELAY_SLEEP_SLICE_MS 50

struct relay {
    const relay_config_t *cfg;
    relay_metrics_t *metrics;
    relay_routes_t *routes;
    relay_db_t *db;
    relay_amqp_t *amqp;
    relay_couch_t *couch; /* NULL without couchdb: routes */
    int64_t backoff_ms;   /* current pause after a failure; 0 after a success */
    int64_t next_lag_ns;
    int64_t next_purge_ns;
    bool db_was_up, broker_was_up;
    int64_t broker_max_bytes; /* the broker's max message size, once it refused one; 0 unknown */
};

/* What became of one claimed row in this batch. */
typedef enum row_state {
    ROW_SKIPPED = 0, /* not attempted: an earlier row of its identity was not delivered */
    ROW_SENT,        /* published, waiting for the broker's confirm */
    ROW_OK,          /* the destination has it */
    ROW_REFUSED,     /* the destination's fence refused it for good */
    ROW_DEFER,       /* the destination refused it for now: retry later */
    ROW_QUARANTINE,  /* no destination will ever take it: set aside, the identity goes on */
    ROW_UNKNOWN,     /* no confirm (broker failed, timeout): deliver again */
} row_state_t;

typedef struct row_track {
    row_state_t state;
    relay_dest_kind_t kind;
    uint64_t tag;
    bool returned;
    size_t group; /* index of the identity's first row in the batch */
    char reason[256];
} row_track_t;

relay_t *relay_new(const relay_config_t *cfg, relay_metrics_t *metrics, char *err, size_t errsz)
{
    relay_t *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errsz, "out of memory");
        return NULL;
    }
    r->cfg = cfg;
    r->metrics = metrics;
    r->routes = relay_routes_parse(cfg->routes, cfg->exchange, err, errsz);
    if (!r->routes)
        goto fail;
    r->amqp = relay_amqp_new(cfg->amqp_url,
                             &(relay_amqp_tls_t){cfg->amqp_cacert, cfg->amqp_cert, cfg->amqp_key},
                             err, errsz);
    if (!r->amqp)
        goto fail;
    if (relay_routes_use_couchdb(r->routes)) {
        if (!cfg->couchdb_url || !*cfg->couchdb_url) {
            snprintf(err, errsz, "a couchdb: route needs LEASE_RELAY_COUCHDB_URL");
            goto fail;
        }
        if (strncmp(cfg->couchdb_url, "http://", 7) != 0 &&
            strncmp(cfg->couchdb_url, "https://", 8) != 0) {
            snprintf(err, errsz, "CouchDB url: not http:// or https://");
            goto fail;
        }
        r->couch = relay_couch_new(cfg->couchdb_url, cfg->confirm_timeout_ms);
        if (!r->couch) {
            snprintf(err, errsz, "out of memory");
            goto fail;
        }
    }
    /* a claiming transaction lasts at most: the publishing (CouchDB rows
     * stop after one confirm timeout), the confirms (one more), margin */
    r->db = relay_db_new(cfg->database_url, cfg->instance_id, 3 * cfg->confirm_timeout_ms + 5000);
    if (!r->db) {
        snprintf(err, errsz, "out of memory");
        goto fail;
    }
    return r;
fail:
    relay_free(r);
    return NULL;
}

void relay_free(relay_t *r)
{
    if (!r)
        return;
    relay_db_free(r->db);
    relay_amqp_free(r->amqp);
    relay_couch_free(r->couch);
    relay_routes_free(r->routes);
    free(r);
}

/* Sleeps ms in short slices; returns early when *stop is set. */
static void pause_ms(int64_t ms, volatile sig_atomic_t *stop)
{
    int64_t end = lease_mono_now_ns() + ms * 1000000;
    while (!*stop) {
        int64_t left = (end - lease_mono_now_ns()) / 1000000;
        if (left <= 0)
            return;
        lease_sleep_ms(left < RELAY_SLEEP_SLICE_MS ? left : RELAY_SLEEP_SLICE_MS);
    }
}

/* The next pause after a failure: doubling from the minimum to the maximum,
 * with up to a fifth of jitter so relays do not retry in step. */
static void back_off(relay_t *r, volatile sig_atomic_t *stop)
{
    const relay_config_t *cfg = r->cfg;
    r->backoff_ms = r->backoff_ms ? r->backoff_ms * 2 : cfg->backoff_min_ms;
    if (r->backoff_ms > cfg->backoff_max_ms)
        r->backoff_ms = cfg->backoff_max_ms;
    int64_t jitter = (int64_t)lease_jitter((uint64_t)(r->backoff_ms / 5 + 1));
    pause_ms(r->backoff_ms - jitter, stop);
}

static bool ensure_db(relay_t *r)
{
    if (relay_db_connected(r->db))
        return true;
    char err[512];
    if (relay_db_connect(r->db, err, sizeof err) != RELAY_DB_OK) {
        if (r->db_was_up || !RELAY_METRIC_GET(r->metrics, db_connects))
            LOG_WARN("database unavailable: %s", err);
        r->db_was_up = false;
        RELAY_METRIC_SET(r->metrics, database_up, 0);
        return false;
    }
    LOG_INFO("connected to the database");
    r->db_was_up = true;
    RELAY_METRIC_ADD(r->metrics, db_connects, 1);
    RELAY_METRIC_SET(r->metrics, database_up, 1);
    return true;
}

static bool ensure_broker(relay_t *r)
{
    char err[512];
    if (relay_amqp_connected(r->amqp)) {
        if (relay_amqp_service(r->amqp, err, sizeof err))
            return true;
        LOG_WARN("broker connection lost: %s", err);
        RELAY_METRIC_SET(r->metrics, broker_up, 0);
    }
    size_t n;
    const char *const *exchanges = relay_routes_exchanges(r->routes, &n);
    if (!relay_amqp_connect(r->amqp, exchanges, n, r->cfg->declare_exchanges,
                            r->cfg->confirm_timeout_ms, err, sizeof err)) {
        if (r->broker_was_up || !RELAY_METRIC_GET(r->metrics, broker_connects))
            LOG_WARN("broker %s unavailable: %s", relay_amqp_endpoint(r->amqp), err);
        r->broker_was_up = false;
        RELAY_METRIC_SET(r->metrics, broker_up, 0);
        return false;
    }
    LOG_INFO("connected to the broker %s (confirm mode)", relay_amqp_endpoint(r->amqp));
    r->broker_was_up = true;
    RELAY_METRIC_ADD(r->metrics, broker_connects, 1);
    RELAY_METRIC_SET(r->metrics, broker_up, 1);
    return true;
}

static void db_lost(relay_t *r, const char *what, const char *err)
{
    LOG_WARN("%s: %s", what, err);
    if (!relay_db_connected(r->db)) {
        r->db_was_up = true; /* log the next failure to reconnect */
        RELAY_METRIC_SET(r->metrics, database_up, 0);
    }
}

static void measure_lag(relay_t *r, bool force)
{
    int64_t now = lease_mono_now_ns();
    if (!force && now < r->next_lag_ns)
        return;
    r->next_lag_ns = now + r->cfg->lag_interval_ms * 1000000;
    relay_lag_t lag;
    char err[512];
    if (relay_db_lag(r->db, &lag, err, sizeof err) != RELAY_DB_OK) {
        db_lost(r, "lag query failed", err);
        return;
    }
    RELAY_METRIC_SET(r->metrics, lag_rows, lag.unpublished);
    RELAY_METRIC_SET(r->metrics, deferred_rows, lag.deferred);
    RELAY_METRIC_SET(r->metrics, lag_millis, (int64_t)(lag.lag_seconds * 1000.0));
    RELAY_METRIC_SET(r->metrics, lag_known, 1);
}

static void purge(relay_t *r)
{
    int64_t now = lease_mono_now_ns();
    if (r->cfg->purge_after_ms <= 0 || now < r->next_purge_ns)
        return;
    r->next_purge_ns = now + (int64_t)RELAY_PURGE_INTERVAL_MS * 1000000;
    int n = 0;
    char err[512];
    if (relay_db_purge(r->db, r->cfg->purge_after_ms, RELAY_PURGE_BATCH, &n, err, sizeof err) !=
        RELAY_DB_OK) {
        db_lost(r, "purge of published rows failed", err);
        return;
    }
    if (n > 0)
        LOG_INFO("purged %d published outbox rows older than %lld ms", n,
                 (long long)r->cfg->purge_after_ms);
}

/* ------------------------------------------------------------------ */
/* One batch                                                            */

typedef struct batch_ctx {
    relay_batch_t *batch;
    row_track_t *track;
} batch_ctx_t;

static void on_return(void *ctx, const char *message_id, int reply_code, const char *reply_text)
{
    batch_ctx_t *b = ctx;
    for (size_t i = 0; i < b->batch->count; i++)
        if (strcmp(b->batch->rows[i].message_id, message_id) == 0) {
            b->track[i].returned = true;
            snprintf(b->track[i].reason, sizeof b->track[i].reason,
                     "returned by the broker: %d %s (no queue is bound for it)", reply_code,
                     reply_text);
            return;
        }
}

/* Why a row can never be published as an AMQP message, or NULL. Checked
 * before publishing, so a poison row costs the batch nothing: short strings
 * hold 255 bytes (routing key, type = the topic), and the broker closes the
 * channel on a message over its max_message_size (losing the confirms of
 * the rows published before it). */
static const char *amqp_poison(const relay_t *r, const relay_row_t *row, relay_destination_t dest,
                               char *why, size_t whysz)
{
    const char *key = dest.routing_key ? dest.routing_key : row->topic;
    if (strlen(key) > RELAY_ROUTING_KEY_MAX || strlen(row->topic) > RELAY_ROUTING_KEY_MAX) {
        snprintf(why, whysz, "invalid AMQP data: the routing key or topic is longer than %d bytes",
                 RELAY_ROUTING_KEY_MAX);
        return why;
    }
    size_t len = strlen(row->payload);
    int64_t max = r->cfg->max_message_bytes;
    if (r->broker_max_bytes > 0 && r->broker_max_bytes < max)
        max = r->broker_max_bytes;
    if ((int64_t)len > max) {
        snprintf(why, whysz,
                 "message size %zu is larger than the broker's max message size %lld "
                 "(LEASE_RELAY_MAX_MESSAGE_BYTES or what the broker said)",
                 len, (long long)max);
        return why;
    }
    return NULL;
}

static uint64_t publish_row(relay_t *r, const relay_row_t *row, relay_destination_t dest, char *err,
                            size_t errsz, bool *invalid)
{
    const lease_identity_t *id = &row->identity;
    relay_amqp_header_t h[16];
    size_t n = 0;
    h[n++] = (relay_amqp_header_t){"outbox_id", NULL, row->outbox_id, true};
    h[n++] = (relay_amqp_header_t){"lease_id", row->lease_id, 0, false};
    h[n++] = (relay_amqp_header_t){"fencing_token", NULL, row->fencing_token, true};
    h[n++] = (relay_amqp_header_t){"tenant_id", id->tenant_id, 0, false};
    h[n++] = (relay_amqp_header_t){"program_id", id->program_id, 0, false};
    h[n++] = (relay_amqp_header_t){"target_namespace", id->target_namespace, 0, false};
    h[n++] = (relay_amqp_header_t){"target_id", id->target_id, 0, false};
    h[n++] = (relay_amqp_header_t){"actor_name", id->actor_name, 0, false};
    h[n++] = (relay_amqp_header_t){"workflow_name", id->workflow_name, 0, false};
    h[n++] = (relay_amqp_header_t){"operation_class", id->operation_class, 0, false};
    h[n++] = (relay_amqp_header_t){"execution_id", row->execution_id, 0, false};
    if (row->trace_id)
        h[n++] = (relay_amqp_header_t){"trace_id", row->trace_id, 0, false};
    h[n++] = (relay_amqp_header_t){"topic", row->topic, 0, false};
    h[n++] = (relay_amqp_header_t){"created_at", row->created_at, 0, false};
    relay_amqp_message_t m = {
        .exchange = dest.target,
        .routing_key = dest.routing_key ? dest.routing_key : row->topic,
        .message_id = row->message_id,
        .type = row->topic,
        .correlation_id = row->trace_id,
        .timestamp_s = row->created_at_ms / 1000,
        .body = row->payload,
        .body_len = strlen(row->payload),
        .headers = h,
        .n_headers = n,
    };
    return relay_amqp_publish(r->amqp, &m, err, errsz, invalid);
}

/* Retry delay of a row deferred for the (attempts+1)-th time. */
static int64_t retry_delay(const relay_config_t *cfg, int attempts)
{
    int64_t d = cfg->retry_delay_ms;
    for (int i = 0; i < attempts && d < RELAY_MAX_RETRY_DELAY_MS; i++)
        d *= 2;
    return d < RELAY_MAX_RETRY_DELAY_MS ? d : RELAY_MAX_RETRY_DELAY_MS;
}

/* Publishes or writes the rows in order. Returns false when the broker
 * failed (the rows not yet sent stay ROW_SKIPPED). */
static bool send_rows(relay_t *r, relay_batch_t *b, row_track_t *t, bool *blocked)
{
    bool broker_ok = true;
    int64_t couch_budget_end = lease_mono_now_ns() + r->cfg->confirm_timeout_ms * 1000000;
    for (size_t i = 0; i < b->count; i++) {
        const relay_row_t *row = &b->rows[i];
        if (blocked[t[i].group])
            continue;
        relay_destination_t dest = relay_routes_lookup(r->routes, row->topic);
        t[i].kind = dest.kind;
        if (dest.kind == RELAY_DEST_COUCHDB) {
            if (lease_mono_now_ns() > couch_budget_end) {
                blocked[t[i].group] = true; /* the next batch takes it */
                continue;
            }
            if (row->attempts > 0)
                blocked[t[i].group] = true; /* as for AMQP rows below */
            char detail[256];
            relay_couch_outcome_t o =
                relay_couch_apply(r->couch, dest.target, row, detail, sizeof detail);
            LEASE_LOG(LEASE_LOG_DEBUG, NULL, "outbox %s to couchdb %s: %s %s", row->message_id,
                      dest.target, relay_couch_outcome_name(o), detail);
            snprintf(t[i].reason, sizeof t[i].reason, "%s", detail);
            if (o == RELAY_COUCH_APPLIED || o == RELAY_COUCH_ALREADY) {
                t[i].state = ROW_OK;
            } else if (o == RELAY_COUCH_REFUSED) {
                t[i].state = ROW_REFUSED;
                LOG_WARN("outbox %s (token %" PRId64 ") refused by couchdb %s: %s", row->message_id,
                         row->fencing_token, dest.target, detail);
            } else if (o == RELAY_COUCH_INVALID) {
                t[i].state = ROW_QUARANTINE; /* its identity's later rows go on */
            } else {
                t[i].state = ROW_DEFER;
                blocked[t[i].group] = true;
                LOG_WARN("outbox %s to couchdb %s deferred: %s", row->message_id, dest.target,
                         detail);
            }
            continue;
        }
        if (!broker_ok) {
            blocked[t[i].group] = true;
            continue;
        }
        if (amqp_poison(r, row, dest, t[i].reason, sizeof t[i].reason)) {
            t[i].state = ROW_QUARANTINE; /* nothing was sent; the rest goes on */
            continue;
        }
        char err[256];
        bool invalid = false;
        uint64_t tag = publish_row(r, row, dest, err, sizeof err, &invalid);
        if (tag == 0 && invalid) {
            /* the client library could not encode it (the connection is
             * closed: the rows before it are delivered again) */
            t[i].state = ROW_QUARANTINE;
            snprintf(t[i].reason, sizeof t[i].reason, "invalid AMQP data: %.200s", err);
            broker_ok = false;
            continue;
        }
        if (tag == 0) {
            LOG_WARN("publishing to the broker failed: %s", err);
            broker_ok = false;
            blocked[t[i].group] = true;
            continue;
        }
        t[i].state = ROW_SENT;
        t[i].tag = tag;
        /* a row tried before goes alone: its identity's later rows follow
         * once it is through, instead of being published again each try */
        if (row->attempts > 0)
            blocked[t[i].group] = true;
    }
    return broker_ok;
}

/*
 * A broker whose max_message_size is below LEASE_RELAY_MAX_MESSAGE_BYTES
 * closes the channel on a bigger message ("406 PRECONDITION_FAILED - message
 * size 20000 is larger than configured max size 8192"). The relay learns the
 * limit (later rows are checked against it before publishing) and
 * quarantines the sent rows over it; the broker dropped everything after the
 * refused message, so the others are simply delivered again.
 */
static void learn_broker_limit(relay_t *r, relay_batch_t *b, row_track_t *t, const char *err)
{
    static const char marker[] = "larger than configured max size ";
    const char *at = strstr(err, marker);
    long long max = at ? strtoll(at + sizeof marker - 1, NULL, 10) : 0;
    if (max <= 0)
        return;
    r->broker_max_bytes = max;
    LOG_WARN("the broker refuses messages over %lld bytes: larger rows are quarantined", max);
    for (size_t i = 0; i < b->count; i++)
        if (t[i].state == ROW_SENT && (long long)strlen(b->rows[i].payload) > max) {
            t[i].state = ROW_QUARANTINE;
            snprintf(t[i].reason, sizeof t[i].reason, "refused by the broker: %.200s", err);
        }
}

/* Waits for the confirms of the ROW_SENT rows and settles them. */
static bool await_confirms(relay_t *r, relay_batch_t *b, row_track_t *t)
{
    uint64_t first = 0, last = 0;
    for (size_t i = 0; i < b->count; i++)
        if (t[i].state == ROW_SENT) {
            if (!first)
                first = t[i].tag;
            last = t[i].tag;
        }
    if (!first)
        return true;
    relay_settle_t *settles = calloc((size_t)(last - first + 1), sizeof *settles);
    if (!settles) {
        for (size_t i = 0; i < b->count; i++)
            if (t[i].state == ROW_SENT)
                t[i].state = ROW_UNKNOWN;
        return false;
    }
    batch_ctx_t ctx = {b, t};
    char err[256];
    int64_t deadline = lease_mono_now_ns() + r->cfg->confirm_timeout_ms * 1000000;
    bool ok =
        relay_amqp_wait(r->amqp, first, last, settles, deadline, on_return, &ctx, err, sizeof err);
    if (!ok) {
        LOG_WARN("broker confirms: %s", err);
        learn_broker_limit(r, b, t, err);
    }
    for (size_t i = 0; i < b->count; i++) {
        if (t[i].state != ROW_SENT)
            continue;
        relay_settle_t s = settles[t[i].tag - first];
        if (s == RELAY_SETTLE_ACKED && !t[i].returned) {
            t[i].state = ROW_OK;
        } else if (s == RELAY_SETTLE_ACKED || s == RELAY_SETTLE_NACKED) {
            t[i].state = ROW_DEFER;
            if (!t[i].returned)
                snprintf(t[i].reason, sizeof t[i].reason, "nacked by the broker");
        } else {
            t[i].state = ROW_UNKNOWN;
        }
    }
    free(settles);
    return ok;
}

/* Records the batch's outcome in its transaction and commits. Returns
 * false when the database failed (nothing recorded). */
static bool record(relay_t *r, relay_batch_t *b, row_track_t *t, uint64_t *n_amqp,
                   uint64_t *n_couch, uint64_t *n_refused, uint64_t *n_deferred,
                   uint64_t *n_quarantined)
{
    int64_t *ids = calloc(b->count, sizeof *ids);
    bool *done = calloc(b->count, sizeof *done);
    size_t n_ids = 0;
    bool ok = ids && done;
    char err[512] = "out of memory";
    for (size_t i = 0; ok && i < b->count; i++) {
        size_t g = t[i].group;
        if (done[g])
            continue; /* an earlier row of this identity was not delivered */
        const relay_row_t *row = &b->rows[i];
        switch (t[i].state) {
        case ROW_OK:
            ids[n_ids++] = row->outbox_id;
            if (t[i].kind == RELAY_DEST_AMQP)
                (*n_amqp)++;
            else
                (*n_couch)++;
            break;
        case ROW_REFUSED:
            ok = relay_db_mark_refused(r->db, row->outbox_id, r->cfg->instance_id, t[i].reason, err,
                                       sizeof err) == RELAY_DB_OK;
            (*n_refused)++;
            break;
        case ROW_QUARANTINE:
            /* set aside for an operator; the identity's later rows go on */
            ok = relay_db_quarantine(r->db, row->outbox_id, r->cfg->instance_id, t[i].reason, err,
                                     sizeof err) == RELAY_DB_OK;
            (*n_quarantined)++;
            if (ok)
                LOG_WARN("outbox %s quarantined (lease.outbox_requeue or outbox_discard): %s",
                         row->message_id, t[i].reason);
            break;
        case ROW_DEFER:
            ok = relay_db_defer(r->db, row->outbox_id, retry_delay(r->cfg, row->attempts),
                                t[i].reason[0] ? t[i].reason : "deferred", err,
                                sizeof err) == RELAY_DB_OK;
            (*n_deferred)++;
            if (ok)
                LOG_WARN("outbox %s deferred (attempt %d): %s", row->message_id, row->attempts + 1,
                         t[i].reason);
            done[g] = true;
            break;
        case ROW_SKIPPED:
        case ROW_SENT:
        case ROW_UNKNOWN:
            done[g] = true;
            break;
        }
    }
    int marked = 0;
    if (ok)
        ok = relay_db_mark_published(r->db, ids, n_ids, r->cfg->instance_id, &marked, err,
                                     sizeof err) == RELAY_DB_OK;
    if (ok)
        ok = relay_db_commit(r->db, err, sizeof err) == RELAY_DB_OK;
    if (!ok) {
        relay_db_rollback(r->db);
        db_lost(r, "recording the batch failed (its rows will be delivered again)", err);
    } else if ((size_t)marked != n_ids) {
        LOG_WARN("marked %d of %zu confirmed rows: the others were already published", marked,
                 n_ids);
    }
    free(ids);
    free(done);
    return ok;
}

/* Returns the number of rows claimed, or -1 after a failure (back off). */
static int deliver_batch(relay_t *r)
{
    relay_batch_t b = {0};
    char err[512];
    relay_db_status_t st = relay_db_claim(r->db, (int)r->cfg->batch_size, &b, err, sizeof err);
    if (st != RELAY_DB_OK) {
        db_lost(r, "claim failed", err);
        RELAY_METRIC_ADD(r->metrics, batch_failures, 1);
        return -1;
    }
    if (b.count == 0) {
        relay_db_rollback(r->db);
        return 0;
    }
    row_track_t *t = calloc(b.count, sizeof *t);
    bool *blocked = calloc(b.count, sizeof *blocked);
    if (!t || !blocked) {
        free(t);
        free(blocked);
        relay_db_rollback(r->db);
        relay_batch_clear(&b);
        LOG_ERROR("out of memory");
        return -1;
    }
    for (size_t i = 0; i < b.count; i++) {
        t[i].group = i;
        for (size_t j = 0; j < i; j++)
            if (strcmp(b.rows[j].identity_json, b.rows[i].identity_json) == 0) {
                t[i].group = t[j].group;
                break;
            }
    }
    int64_t start = lease_mono_now_ns();
    bool broker_ok = send_rows(r, &b, t, blocked);
    broker_ok = await_confirms(r, &b, t) && broker_ok;
    uint64_t n_amqp = 0, n_couch = 0, n_refused = 0, n_deferred = 0, n_quarantined = 0;
    bool db_ok = record(r, &b, t, &n_amqp, &n_couch, &n_refused, &n_deferred, &n_quarantined);
    if (db_ok) {
        RELAY_METRIC_ADD(r->metrics, published_amqp, n_amqp);
        RELAY_METRIC_ADD(r->metrics, published_couchdb, n_couch);
        RELAY_METRIC_ADD(r->metrics, refused, n_refused);
        RELAY_METRIC_ADD(r->metrics, deferred, n_deferred);
        RELAY_METRIC_ADD(r->metrics, quarantined, n_quarantined);
        RELAY_METRIC_ADD(r->metrics, batches, 1);
        LEASE_LOG(LEASE_LOG_DEBUG, NULL,
                  "batch of %zu: %" PRIu64 " published, %" PRIu64 " to couchdb, %" PRIu64
                  " refused, %" PRIu64 " deferred in %lld ms",
                  b.count, n_amqp, n_couch, n_refused, n_deferred,
                  (long long)((lease_mono_now_ns() - start) / 1000000));
    }
    if (!broker_ok) {
        RELAY_METRIC_SET(r->metrics, broker_up, 0);
        r->broker_was_up = true;
    }
    if (!db_ok || !broker_ok)
        RELAY_METRIC_ADD(r->metrics, batch_failures, 1);
    int claimed = (int)b.count;
    free(t);
    free(blocked);
    relay_batch_clear(&b);
    return db_ok && broker_ok ? claimed : -1;
}

int relay_run(relay_t *r, volatile sig_atomic_t *stop)
{
    const relay_config_t *cfg = r->cfg;
    LOG_INFO("relay %s delivering (batch %lld, confirm timeout %lld ms)", cfg->instance_id,
             (long long)cfg->batch_size, (long long)cfg->confirm_timeout_ms);
    int status = 0;
    while (!*stop) {
        if (!ensure_db(r)) {
            if (cfg->once) {
                status = 1;
                break;
            }
            back_off(r, stop);
            continue;
        }
        measure_lag(r, false);
        if (!ensure_broker(r)) {
            if (cfg->once) {
                status = 1;
                break;
            }
            back_off(r, stop);
            continue;
        }
        purge(r);
        int n = deliver_batch(r);
        if (n < 0) {
            if (cfg->once) {
                status = 1;
                break;
            }
            back_off(r, stop);
            continue;
        }
        r->backoff_ms = 0;
        if (n == 0) {
            if (cfg->once)
                break;
            pause_ms(cfg->poll_interval_ms, stop);
        } else if (n < cfg->batch_size) {
            measure_lag(r, true); /* caught up: let the gauges say so now */
        }
    }
    if (*stop)
        RELAY_METRIC_SET(r->metrics, draining, 1);
    if (relay_db_connected(r->db))
        measure_lag(r, true);
    relay_amqp_disconnect(r->amqp, true);
    relay_db_disconnect(r->db);
    RELAY_METRIC_SET(r->metrics, broker_up, 0);
    RELAY_METRIC_SET(r->metrics, database_up, 0);
    LOG_INFO("relay %s stopped", cfg->instance_id);
    return status;
}
