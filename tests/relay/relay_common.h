/*
 * relay_common.h - helpers shared by the relay_*.c tests (header only):
 * the fixture (a database, leased, a worker credential, an exchange and a
 * consumer queue of the test's own), fenced commits of publications, and a
 * collector that runs every message through the consumer helper
 * (lease/consumer.h) and keeps what it saw.
 */
#ifndef LEASE_TEST_RELAY_COMMON_H
#define LEASE_TEST_RELAY_COMMON_H

#include "../http/http_common.h"

#include <inttypes.h>
#include <signal.h>

#include "child_proc.h"
#include "lease/consumer.h"
#include "relay_proc.h"
#include "testbroker.h"

typedef struct relay_fx {
    http_fx_t http;
    const char *worker; /* token, owned by http */
    char exchange[96];
    char queue[96];
    testbroker_consumer_t *consumer;
    char exchange_env[160]; /* LEASE_RELAY_EXCHANGE=... */
} relay_fx_t;

/* A database, leased, a worker, the exchange "leased.test.<prefix>.<pid>"
 * and a durable queue bound to it with "#". */
static inline void relay_fx_open(relay_fx_t *fx, const char *prefix)
{
    memset(fx, 0, sizeof *fx);
    http_fx_open(&fx->http, NULL, prefix);
    fx->worker = http_fx_worker(&fx->http, "prn_relay");
    /* the tests commit in bulk, faster than the default per-credential rate */
    http_fx_serve(&fx->http, (const char *[]){"LEASE_RATE_LIMIT=1000000/s", NULL});
    snprintf(fx->exchange, sizeof fx->exchange, "leased.test.%s.%d", prefix, (int)getpid());
    snprintf(fx->queue, sizeof fx->queue, "q.%s.%d", prefix, (int)getpid());
    snprintf(fx->exchange_env, sizeof fx->exchange_env, "LEASE_RELAY_EXCHANGE=%s", fx->exchange);
    fx->consumer = testbroker_consumer_new(fx->exchange, "#", fx->queue);
}

static inline void relay_fx_close(relay_fx_t *fx)
{
    testbroker_consumer_free(fx->consumer);
    http_fx_close(&fx->http);
}

/* ------------------------------------------------------------------ */
/* Leases and commits                                                   */

static inline json_t *relay_acquire(relay_fx_t *fx, const char *target)
{
    char rid[96];
    static int n;
    snprintf(rid, sizeof rid, "acq-%s-%d", target, ++n);
    return acquire_lease(fx->http.base, fx->worker, rid, target);
}

static inline void relay_release(relay_fx_t *fx, const char *target, json_t *lease)
{
    char rid[96];
    static int n;
    snprintf(rid, sizeof rid, "rel-%s-%d", target, ++n);
    http_resp_t *r = call_owned(fx->http.base, "POST", "/v1/leases/release", fx->worker,
                                owner_body(rid, target, lease));
    check_reply(r, 200, "lease_released", NULL);
    http_resp_free(r);
}

/* The payload of publication seq of a commit: it names what it comes from
 * so a test can tell it anywhere ("tag": "accepted" or "rejected"). */
static inline json_t *relay_payload(const char *target, json_int_t token, int seq, const char *tag)
{
    return json_pack("{s:s, s:I, s:i, s:s}", "target", target, "token", token, "seq", seq, "tag",
                     tag);
}

/*
 * POST /v1/commits of n publications of topic by lease (plus extra_writes,
 * a JSON array stolen, may be NULL); returns the reply (caller frees).
 */
static inline http_resp_t *relay_commit(relay_fx_t *fx, const char *target, json_t *lease, int n,
                                        const char *topic, const char *tag, json_t *extra_writes)
{
    static int calls;
    json_int_t token = json_integer_value(json_object_get(lease, "fencing_token"));
    json_t *writes = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(writes,
                              json_pack("{s:s, s:s, s:o}", "kind", "publication", "topic", topic,
                                        "payload", relay_payload(target, token, i, tag)));
    if (extra_writes) {
        json_array_extend(writes, extra_writes);
        json_decref(extra_writes);
    }
    char rid[96], trace[96];
    int call = __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED); /* threads commit at once */
    snprintf(rid, sizeof rid, "commit-%s-%d", target, call);
    snprintf(trace, sizeof trace, "trace-%s-%d", target, call);
    json_t *body =
        json_pack("{s:s, s:o, s:O, s:O, s:s, s:s, s:o}", "request_id", rid, "lock_identity",
                  identity_json(target), "lease_id", json_object_get(lease, "lease_id"),
                  "fencing_token", json_object_get(lease, "fencing_token"), "execution_id",
                  "exec_1", "trace_id", trace, "writes", writes);
    /* a reply lost in transport is resolved the way the contract says: the
     * same request id and body again (a replay answers what was decided) */
    char *text = dump(body);
    http_resp_t *r = NULL;
    for (int attempt = 0; attempt < 3 && !r; attempt++) {
        r = http_call(fx->http.base, "POST", "/v1/commits", fx->worker, text);
        if (!r)
            fprintf(stderr, "relay_commit: no reply to %s (attempt %d); repeating it\n", rid,
                    attempt + 1);
    }
    free(text);
    assert_non_null(r);
    return r;
}

/* A commit that must be accepted; returns how many publications it made. */
static inline int relay_commit_ok(relay_fx_t *fx, const char *target, json_t *lease, int n,
                                  const char *topic)
{
    http_resp_t *r = relay_commit(fx, target, lease, n, topic, "accepted", NULL);
    check_reply(r, 200, "commit_accepted", NULL);
    http_resp_free(r);
    return n;
}

/*
 * Accepted publications in bulk, identities interleaved in outbox order:
 * for each of `leases` rounds every target acquires (a new, higher token),
 * then `commits` times every target commits `per_commit` publications,
 * then every target releases. Targets are "<prefix>-0", "<prefix>-1"...
 * Returns the number of outbox rows written.
 */
static inline int relay_fill(relay_fx_t *fx, const char *prefix, int targets, int leases,
                             int commits, int per_commit)
{
    int rows = 0;
    json_t **held = calloc((size_t)targets, sizeof *held);
    char name[64];
    for (int l = 0; l < leases; l++) {
        for (int t = 0; t < targets; t++) {
            snprintf(name, sizeof name, "%s-%d", prefix, t);
            held[t] = relay_acquire(fx, name);
        }
        for (int c = 0; c < commits; c++)
            for (int t = 0; t < targets; t++) {
                snprintf(name, sizeof name, "%s-%d", prefix, t);
                rows += relay_commit_ok(fx, name, held[t], per_commit, "results.bulk");
            }
        for (int t = 0; t < targets; t++) {
            snprintf(name, sizeof name, "%s-%d", prefix, t);
            relay_release(fx, name, held[t]);
            json_decref(held[t]);
        }
    }
    free(held);
    return rows;
}

/* The database session of a relay instance that sits in its delivery
 * transaction holding identities (mid-batch): its backend pid, or 0. */
static inline long long relay_mid_batch_pid(relay_fx_t *fx, const char *instance)
{
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT coalesce(min(a.pid), 0) FROM pg_stat_activity a WHERE a.datname = "
             "current_database() AND a.application_name = 'leased-relay/%s' AND a.state LIKE "
             "'idle in transaction%%' AND EXISTS (SELECT 1 FROM pg_locks k WHERE k.pid = a.pid "
             "AND k.locktype = 'advisory' AND k.classid = 1819042146 AND k.granted)",
             instance);
    return testpg_query_int(fx->http.db, sql);
}

/* Unpublished outbox rows of the fixture's database. */
static inline long long relay_unpublished(relay_fx_t *fx)
{
    return testpg_query_int(fx->http.db,
                            "SELECT count(*) FROM lease.outbox WHERE published_at IS NULL");
}

static inline long long relay_outbox_rows(relay_fx_t *fx)
{
    return testpg_query_int(fx->http.db, "SELECT count(*) FROM lease.outbox");
}

/* Polls (every 20 ms, at most timeout_ms) until sql answers want. */
static inline bool relay_wait_sql(const char *db, const char *sql, long long want, int timeout_ms)
{
    long end = child_proc_now_ms() + timeout_ms;
    for (;;) {
        if (testpg_query_int(db, sql) == want)
            return true;
        if (child_proc_now_ms() > end)
            return false;
        usleep(20000);
    }
}

/* Polls a relay metric until it reaches at least want. */
static inline bool relay_wait_metric(const relay_proc_t *p, const char *series, double want,
                                     int timeout_ms)
{
    long end = child_proc_now_ms() + timeout_ms;
    for (;;) {
        if (relay_proc_metric(p, series) >= want)
            return true;
        if (child_proc_now_ms() > end)
            return false;
        usleep(20000);
    }
}

/*
 * Freezes the broker (SIGSTOP) and waits until relay `instance` sits in its
 * delivery transaction holding identities: it publishes into the frozen
 * broker and waits for confirms that cannot come. A commit of a few more
 * rows (on a target of its own) makes sure it has something to claim even
 * if it had delivered everything. Returns the relay's backend pid and adds
 * the new rows to *rows. The caller thaws the broker (testbroker_thaw).
 */
static inline long long relay_freeze_mid_batch(relay_fx_t *fx, relay_proc_t *p,
                                               const char *instance, int *rows)
{
    static int n;
    /* connected first: a relay meeting a frozen broker while connecting
     * waits in the handshake, not in a batch */
    assert_true(relay_wait_metric(p, "leased_relay_broker_up", 1, 30000));
    assert_true(testbroker_freeze());
    char target[64];
    snprintf(target, sizeof target, "freeze-%d", ++n);
    json_t *lease = relay_acquire(fx, target);
    *rows += relay_commit_ok(fx, target, lease, 10, "results.extra");
    json_decref(lease);
    long long pid = 0;
    long end = child_proc_now_ms() + 30000;
    while ((pid = relay_mid_batch_pid(fx, instance)) == 0 && child_proc_now_ms() < end)
        usleep(10000);
    if (!pid) {
        (void)testbroker_thaw();
        relay_proc_dump_log(p);
    }
    assert_true(pid > 0);
    return pid;
}

/* ------------------------------------------------------------------ */
/* What the consumer saw                                                */

typedef struct delivery {
    int64_t outbox_id;
    char target[LEASE_TARGET_ID_MAX + 1];
    int64_t token;
    lease_delivery_verdict_t verdict;
    bool accepted_tag; /* the payload says "accepted" */
} delivery_t;

typedef struct collector {
    lease_consumer_t *consumer;
    delivery_t *items;
    size_t n, cap;
    size_t n_new, n_duplicate, n_stale;
} collector_t;

static inline void collector_init(collector_t *c)
{
    memset(c, 0, sizeof *c);
    c->consumer = lease_consumer_new(0);
    assert_non_null(c->consumer);
}

static inline void collector_free(collector_t *c)
{
    lease_consumer_free(c->consumer);
    free(c->items);
}

/*
 * Checks one message the way a consumer must (every relay header present
 * and well-formed, the body the JSON payload) and classifies it with the
 * consumer helper; NEW ones are recorded as applied.
 */
static inline void collector_take(collector_t *c, const testbroker_msg_t *m)
{
    lease_delivery_t d;
    const char *bad = NULL;
    if (!lease_delivery_parse(m->message_id, m->n_headers, (const char *const *)m->header_names,
                              (const char *const *)m->header_values, &d, &bad))
        fail_msg("message %s: bad relay header %s", m->message_id ? m->message_id : "?",
                 bad ? bad : "?");
    assert_string_equal(m->content_type, "application/json");
    assert_int_equal(m->delivery_mode, 2);
    assert_string_equal(m->app_id, "leased-relay");
    json_error_t jerr;
    json_t *body = json_loads(m->body, 0, &jerr);
    assert_non_null(body);
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 1024;
        c->items = realloc(c->items, c->cap * sizeof *c->items);
    }
    delivery_t *it = &c->items[c->n++];
    memset(it, 0, sizeof *it);
    it->outbox_id = d.outbox_id;
    snprintf(it->target, sizeof it->target, "%s", d.identity.target_id);
    it->token = d.fencing_token;
    const char *tag = json_string_value(json_object_get(body, "tag"));
    it->accepted_tag = tag && strcmp(tag, "accepted") == 0;
    it->verdict = lease_consumer_classify(c->consumer, &d);
    switch (it->verdict) {
    case LEASE_DELIVERY_NEW:
        assert_true(lease_consumer_record(c->consumer, &d));
        c->n_new++;
        break;
    case LEASE_DELIVERY_DUPLICATE:
        c->n_duplicate++;
        break;
    case LEASE_DELIVERY_STALE:
        c->n_stale++;
        break;
    }
    json_decref(body);
}

/* Reads messages until the collector holds want_new first deliveries or
 * timeout_ms passed; returns whether it got there. */
static inline bool collector_until(collector_t *c, testbroker_consumer_t *q, size_t want_new,
                                   int timeout_ms)
{
    long end = child_proc_now_ms() + timeout_ms;
    while (c->n_new < want_new) {
        long left = end - child_proc_now_ms();
        if (left <= 0)
            return false;
        testbroker_msg_t *m = testbroker_next(q, (int)left);
        if (!m)
            return false;
        collector_take(c, m);
        testbroker_msg_free(m);
    }
    return true;
}

/* Reads whatever arrives within quiet_ms of silence (stragglers). */
static inline void collector_drain(collector_t *c, testbroker_consumer_t *q, int quiet_ms)
{
    testbroker_msg_t *m;
    while ((m = testbroker_next(q, quiet_ms)) != NULL) {
        collector_take(c, m);
        testbroker_msg_free(m);
    }
}

/*
 * Order per identity, in first-delivery order: a target's tokens never
 * decrease, and (with strict_ids) its outbox ids increase. strict_ids holds
 * where each lease's commits were made one after another; concurrent
 * commits of one lease become visible in commit order, which may differ
 * from their outbox id order (docs/relay.md).
 */
static inline void collector_check_order_ids(const collector_t *c, bool strict_ids)
{
    for (size_t i = 0; i < c->n; i++) {
        if (c->items[i].verdict != LEASE_DELIVERY_NEW)
            continue;
        for (size_t j = i + 1; j < c->n; j++) {
            const delivery_t *a = &c->items[i], *b = &c->items[j];
            if (b->verdict != LEASE_DELIVERY_NEW || strcmp(a->target, b->target) != 0)
                continue;
            if (b->token < a->token || (strict_ids && b->outbox_id <= a->outbox_id))
                fail_msg("order of %s broken: outbox %" PRId64 " (token %" PRId64
                         ") delivered before %" PRId64 " (token %" PRId64 ")",
                         a->target, a->outbox_id, a->token, b->outbox_id, b->token);
            break; /* the next one of the target is enough: the relation is transitive */
        }
    }
}

static inline void collector_check_order(const collector_t *c)
{
    collector_check_order_ids(c, true);
}

static inline int by_outbox_id(const void *a, const void *b)
{
    const delivery_t *x = a, *y = b;
    return (x->outbox_id > y->outbox_id) - (x->outbox_id < y->outbox_id);
}

/*
 * Every outbox row of the database was delivered, as a first delivery,
 * exactly once, with its own token; nothing else was (no rejected payload,
 * no id the outbox does not hold).
 */
static inline void collector_check_exact(const collector_t *c, relay_fx_t *fx)
{
    delivery_t *firsts = calloc(c->n + 1, sizeof *firsts);
    size_t n = 0;
    for (size_t i = 0; i < c->n; i++) {
        assert_true(c->items[i].accepted_tag);
        if (c->items[i].verdict == LEASE_DELIVERY_NEW)
            firsts[n++] = c->items[i];
    }
    qsort(firsts, n, sizeof *firsts, by_outbox_id);
    size_t cap = n * 44 + 1;
    char *seen = malloc(cap);
    size_t len = 0;
    seen[0] = '\0';
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(seen + len, cap - len, "%s%" PRId64 ":%" PRId64, i ? "," : "",
                                firsts[i].outbox_id, firsts[i].token);
    char *want = testpg_query_value(fx->http.db,
                                    "SELECT coalesce(string_agg(outbox_id || ':' || fencing_token, "
                                    "',' ORDER BY outbox_id), '') FROM lease.outbox");
    assert_non_null(want);
    if (strcmp(want, seen) != 0)
        fail_msg("delivered (first deliveries) differ from the outbox:\n  outbox:    %.600s\n"
                 "  delivered: %.600s",
                 want, seen);
    free(want);
    free(seen);
    free(firsts);
}

#endif
