/*
 * routes.c - the route table, path matching, and the handlers it names.
 *
 * Dispatch order for a route with capabilities: credential (a valid one
 * fresh in the cache goes on; any other request takes a token of the
 * client address's bucket (429) and answers 401 when it fails, or 429
 * alike while the address's failed authentications used up its lookups),
 * the credential's token bucket
 * (429), capability (403), the credential's and tenant's share of requests
 * in flight (429), the global in-flight bound (429), then the handler: body decoding (400), an
 * acquire that may wait takes a waiting share (429), then the service operation. A watch that parks
 * takes a waiting share too (429), held until its final reply: waiting work is bounded per
 * credential and per tenant (LEASE_MAX_WAITING_PER_*), LEASE_MAX_WATCHES being the last line. A
 * waiting exchange whose client went away (client_gone) answers at once
 * and acquires nothing.
 * Health, readiness and metrics need no credential and answer from memory
 * on the event thread.
 */
#include "routes.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lease/clock.h"
#include "app.h"
#include "http.h"
#include "copy_text.h"

static void handle_operation(leased_app_t *app, leased_exchange_t *ex, leased_op_ctx_t *ctx);
static void handle_watch(leased_app_t *app, leased_exchange_t *ex, leased_op_ctx_t *ctx);
static void handle_healthz(leased_app_t *app, leased_exchange_t *ex, leased_op_ctx_t *ctx);
static void handle_readyz(leased_app_t *app, leased_exchange_t *ex, leased_op_ctx_t *ctx);
static void handle_metrics(leased_app_t *app, leased_exchange_t *ex, leased_op_ctx_t *ctx);

/* One route per operation of lease/operations.h, in its order. A route
 * without capabilities needs no credential and is served on the event
 * thread. */
static const leased_route_t route_table[] = {
#define ROUTE(ID, METHOD, PATH, NAME, CAPS, MUTATES, SHAPE, HANDLER, EVENT, STORE, FIELDS)         \
    {METHOD, PATH, LEASED_OP_##ID, NAME, CAPS, (CAPS) == 0, handle_##HANDLER},
    LEASE_OPERATIONS(ROUTE)
#undef ROUTE
};

#define N_ROUTES (sizeof route_table / sizeof route_table[0])

const leased_route_t *leased_routes_table(size_t *n)
{
    *n = N_ROUTES;
    return route_table;
}

/* Matches one pattern; a "{name}" segment takes one non-empty segment. */
static bool path_matches(const char *pattern, const char *path, char *param, size_t paramsz)
{
    const char *brace = strchr(pattern, '{');
    if (!brace)
        return strcmp(pattern, path) == 0;
    size_t head = (size_t)(brace - pattern);
    if (strncmp(pattern, path, head) != 0)
        return false;
    const char *seg = path + head;
    size_t seglen = strcspn(seg, "/");
    const char *rest_pattern = strchr(brace, '}') + 1;
    if (seglen == 0 || strcmp(seg + seglen, rest_pattern) != 0)
        return false;
    /* longer than the buffer: keep one extra character so validation fails */
    size_t n = seglen < paramsz - 1 ? seglen : paramsz - 1;
    memcpy(param, seg, n);
    param[n] = '\0';
    return true;
}

const leased_route_t *leased_routes_match(const char *method, const char *path, char *param,
                                          size_t paramsz, leased_route_miss_t *miss)
{
    *miss = LEASED_ROUTE_NO_PATH;
    param[0] = '\0';
    for (size_t i = 0; i < N_ROUTES; i++) {
        char scratch[LEASE_ID_MAX + 2] = ""; /* a literal route names no id */
        if (!path_matches(route_table[i].path, path, scratch, sizeof scratch))
            continue;
        /* A literal route beats the {lease_id} pattern for the same path
         * ("/v1/leases/acquire" with GET is a method miss, not an id). */
        if (strchr(route_table[i].path, '{')) {
            bool literal_exists = false;
            for (size_t j = 0; j < N_ROUTES; j++)
                if (strcmp(route_table[j].path, path) == 0)
                    literal_exists = true;
            if (literal_exists)
                continue;
        }
        if (strcmp(route_table[i].method, method) != 0) {
            *miss = LEASED_ROUTE_NO_METHOD;
            continue;
        }
        leased_copy_text(param, paramsz, scratch);
        *miss = LEASED_ROUTE_FOUND;
        return &route_table[i];
    }
    return NULL;
}

static void reply(leased_exchange_t *ex, int status, const char *label, char *body,
                  const char *content_type)
{
    free(ex->reply_body);
    ex->status = status;
    leased_copy_text(ex->code_label, sizeof ex->code_label, label);
    ex->reply_body = body;
    ex->content_type = content_type;
}

void leased_routes_reply_error(leased_exchange_t *ex, lease_code_t code, const char *field,
                               int64_t retry_after_ms)
{
    char *body = leased_codec_error_envelope(code, ex->correlation_id, field, retry_after_ms, -1,
                                             NULL, NULL);
    reply(ex, lease_code_http_status(code), lease_code_name(code), body, "application/json");
    ex->retry_after_ms = lease_code_retryable(code) ? retry_after_ms : 0;
}

static void reply_outcome(leased_exchange_t *ex, const leased_op_ctx_t *ctx, leased_request_t *req,
                          const leased_outcome_t *out)
{
    lease_code_t code = out->code;
    if (!lease_code_is_success(code)) {
        char *body =
            leased_codec_error_envelope(code, ex->correlation_id, out->field, out->retry_after_ms,
                                        out->current_revision, out->reason, out->detail);
        reply(ex, lease_code_http_status(code), lease_code_name(code), body, "application/json");
        ex->retry_after_ms = out->retry_after_ms;
        return;
    }
    leased_view_t view = {ctx->caller.principal.principal_id,
                          lease_auth_has(&ctx->caller, LEASE_CAP_AUDIT_READ)};
    char *body;
    switch (lease_operation(req->op)->shape) { /* the envelope of the answer's shape */
    case LEASE_SHAPE_LIST:
        body = leased_codec_list_envelope(&out->list, ex->correlation_id, &view);
        break;
    case LEASE_SHAPE_COMMIT:
        body = leased_codec_commit_envelope(&req->u.commit, &out->commit, ex->correlation_id);
        break;
    case LEASE_SHAPE_OWNER_BATCH:
        body =
            leased_codec_batch_envelope(code, out->items, out->n_items, ex->correlation_id, &view);
        break;
    case LEASE_SHAPE_SESSION:
        body = leased_codec_session_envelope(&out->lease, ex->correlation_id);
        break;
    default:
        body = leased_codec_lease_envelope(&out->lease, ex->correlation_id, &view);
        break;
    }
    if (!body) {
        /* out of memory after a success: the client must resolve by request id */
        leased_routes_reply_error(ex, LEASE_OUTCOME_UNKNOWN, NULL, 1000);
        return;
    }
    reply(ex, 200, lease_code_name(code), body, "application/json");
}

/* An operation between attempts: everything the next attempt needs. */
typedef struct pending_op {
    leased_op_ctx_t ctx;
    leased_request_t *req;
    leased_outcome_t *out;
} pending_op_t;

/* After an attempt: either keep the operation for the next one, or reply
 * and free it. Takes ownership of req and out. */
static void settle(leased_exchange_t *ex, const leased_op_ctx_t *ctx, leased_request_t *req,
                   leased_outcome_t *out)
{
    pending_op_t *p = ex->pending;
    if (out->again_after_ms > 0) {
        if (!p && (p = calloc(1, sizeof *p)) != NULL) {
            p->ctx = *ctx;
            p->req = req;
            p->out = out;
            ex->pending = p;
        }
        if (p) {
            ex->again_after_ms = out->again_after_ms;
            return;
        }
        /* out of memory: the conflict seen so far is the answer */
    }
    reply_outcome(ex, ctx, req, out);
    ex->again_after_ms = 0;
    ex->pending = NULL;
    free(p);
    leased_outcome_clear(out);
    free(out);
    leased_request_free(req);
}

static void handle_operation(leased_app_t *app, leased_exchange_t *ex, leased_op_ctx_t *ctx)
{
    leased_request_t *req = leased_request_new(ex->route->op);
    leased_outcome_t *out = calloc(1, sizeof *out);
    if (!req || !out) {
        leased_routes_reply_error(ex, LEASE_BACKEND_UNAVAILABLE, NULL, 1000);
        goto cleanup;
    }
    leased_codec_error_t err;
    int64_t retry_ms = 0;
    if (!leased_codec_decode(ex->route->op, ex->body, ex->body_len, ex->path_param, &app->limits,
                             req, &err)) {
        LEASE_LOG(LEASE_LOG_DEBUG,
                  (&(lease_log_fields_t){ex->correlation_id, ctx->trace_id, ex->route->name,
                                         "invalid_lease_request", -1}),
                  "invalid request: %s: %s", err.field, err.reason ? err.reason : "invalid");
        leased_service_audit_refusal(app->service, ctx, LEASE_INVALID_LEASE_REQUEST, req);
        char *body = leased_codec_error_envelope(LEASE_INVALID_LEASE_REQUEST, ex->correlation_id,
                                                 err.field, 0, -1, NULL, err.bound);
        reply(ex, lease_code_http_status(LEASE_INVALID_LEASE_REQUEST),
              lease_code_name(LEASE_INVALID_LEASE_REQUEST), body, "application/json");
        goto cleanup;
    }
    /* an acquire that may wait holds a waiting share for all its attempts */
    if (req->wait_ms > 0 && ex->claim.inflight) { /* only a body with wait_ms sets it */
        if (!leased_admission_claim(app->admission, ex->claim.credential_id, ex->claim.tenant_id,
                                    true, &retry_ms)) {
            leased_service_audit_refusal(app->service, ctx, LEASE_RATE_LIMITED, req);
            leased_routes_reply_error(ex, LEASE_RATE_LIMITED, NULL, retry_ms);
            goto cleanup;
        }
        ex->claim.waiting = true;
    }
    leased_service_run(app->service, ctx, req, out);
    settle(ex, ctx, req, out); /* owns req and out from here */
    return;
cleanup:
    leased_outcome_clear(out);
    free(out);
    leased_request_free(req);
}

/* The exchange stops running (it parks, or its final reply is made): its
 * in-flight shares go back. */
static void release_running_claims(leased_app_t *app, leased_exchange_t *ex)
{
    leased_claim_t *c = &ex->claim;
    if (c->inflight)
        leased_admission_unclaim(app->admission, c->credential_id, c->tenant_id, false);
    if (c->global)
        leased_admission_leave(app->admission);
    c->inflight = c->global = false;
}

/* The final reply is made: the exchange's shares go back. */
static void release_claims(leased_app_t *app, leased_exchange_t *ex)
{
    leased_claim_t *c = &ex->claim;
    if (c->waiting)
        leased_admission_unclaim(app->admission, c->credential_id, c->tenant_id, true);
    c->waiting = false;
    release_running_claims(app, ex);
}

static bool client_gone(const leased_exchange_t *ex)
{
    return __atomic_load_n(&ex->client_gone, __ATOMIC_ACQUIRE);
}

/* ---- watch ---------------------------------------------------------------
 *
 * GET /v1/leases/{lease_id}/watch?wait_ms=N: inspect; while the lease is
 * active and the wait lasts, park in the watch hub (no worker, no in-flight
 * slot held) and inspect again when it wakes. The answer is the inspect's:
 * the terminal lease as soon as it ended, or the active lease when the wait
 * is over. Every inspect is its own call with its own default deadline.
 */

#define WATCH_DEFAULT_WAIT_MS 30000

typedef struct watch_op {
    leased_op_ctx_t ctx;
    leased_request_t *req;
    leased_outcome_t out; /* of the last inspect */
    int64_t until_ns;
    uint64_t seen;         /* leased_watch_seq before the last inspect */
    int64_t recheck_at_ns; /* the parked request's next credential check */
} watch_op_t;

static void watch_op_free(watch_op_t *w)
{
    if (!w)
        return;
    leased_outcome_clear(&w->out);
    leased_request_free(w->req);
    free(w);
}

/* A parked watch wakes at least this often to recheck its credential, so
 * a revoked or expired one ends it (401) within the credential cache's TTL
 * and a quarter. Only the cache is asked: at most one lookup per
 * credential and TTL, however many watches it holds. */
#define WATCH_RECHECK_MIN_MS 50

static int64_t watch_recheck_ns(const leased_app_t *app)
{
    int64_t ms = app->config->credential_cache_ms / 4;
    return (ms < WATCH_RECHECK_MIN_MS ? WATCH_RECHECK_MIN_MS : ms) * 1000000;
}

/* The credential of a woken watch: false (the 401 replied, w freed) when
 * it is no longer valid. A recheck the store cannot answer keeps the
 * watch; its next inspect meets the same outage. */
static bool watch_credential_valid(leased_app_t *app, leased_exchange_t *ex, watch_op_t *w)
{
    lease_code_t code;
    if (leased_service_recheck(app->service, &w->ctx, NULL, &code) ||
        code != LEASE_INVALID_CREDENTIAL)
        return true;
    leased_service_audit_refusal(app->service, &w->ctx, LEASE_INVALID_CREDENTIAL, w->req);
    leased_routes_reply_error(ex, LEASE_INVALID_CREDENTIAL, NULL, 0);
    ex->pending = NULL;
    watch_op_free(w);
    return false;
}

static void watch_park(leased_app_t *app, leased_exchange_t *ex, watch_op_t *w)
{
    w->recheck_at_ns = lease_mono_now_ns() + watch_recheck_ns(app);
    ex->park_requested = true;
    leased_copy_text(ex->park_lease_id, sizeof ex->park_lease_id, w->out.lease.lease.lease_id);
    ex->park_seq = w->seen;
    ex->park_until_ns = w->until_ns < w->recheck_at_ns ? w->until_ns : w->recheck_at_ns;
}

/* The wait of the request: wait_ms (0..LEASE_WATCH_MAX_WAIT_MS), else the
 * smaller of 30 s and that cap. False when the query is not acceptable. */
static bool watch_wait_ms(const leased_app_t *app, const leased_exchange_t *ex, int64_t *out)
{
    int64_t cap = app->config->watch_max_wait_ms;
    if (ex->query_invalid)
        return false;
    if (!ex->query_wait_ms) {
        *out = cap < WATCH_DEFAULT_WAIT_MS ? cap : WATCH_DEFAULT_WAIT_MS;
        return true;
    }
    const char *v = ex->query_wait_ms;
    int64_t n = 0;
    if (!*v || strlen(v) > 10)
        return false;
    for (; *v; v++) {
        if (*v < '0' || *v > '9')
            return false;
        n = n * 10 + (*v - '0');
    }
    if (n > cap)
        return false;
    *out = n;
    return true;
}

/* Inspects once more; then answers, or asks to be parked again. A watch
 * that parks holds a waiting share of its credential and tenant (like an
 * acquire that may wait) until its final reply: waiting work is bounded per
 * credential and per tenant, LEASE_MAX_WATCHES is the last line. */
static void watch_step(leased_app_t *app, leased_exchange_t *ex)
{
    watch_op_t *w = ex->pending;
    if (client_gone(ex)) {
        /* nobody reads the answer: the lease as last seen, no inspect */
        reply_outcome(ex, &w->ctx, w->req, &w->out);
        ex->pending = NULL;
        watch_op_free(w);
        return;
    }
    if (!watch_credential_valid(app, ex, w))
        return;
    int64_t now = lease_mono_now_ns();
    bool going_on = now < w->until_ns && !__atomic_load_n(&app->draining, __ATOMIC_ACQUIRE) &&
                    !leased_watch_stopping(app->watch);
    if (w->recheck_at_ns && now >= w->recheck_at_ns && going_on) {
        /* woken to recheck the credential only: back to waiting, with the
         * number seen before the last inspect, so an end heard meanwhile
         * still wakes it */
        watch_park(app, ex, w);
        return;
    }
    uint64_t seen = leased_watch_seq(app->watch);
    /* each inspect is a call of its own: deadline and latency from now */
    w->ctx.received_mono_ns = lease_mono_now_ns();
    w->ctx.received_wall_ms = lease_wall_now_ms();
    leased_outcome_clear(&w->out);
    leased_service_run(app->service, &w->ctx, w->req, &w->out);
    const lease_result_t *res = &w->out.lease;
    bool active =
        w->out.code == LEASE_INSPECTED && res->has_lease && res->lease.state == LEASE_STATE_ACTIVE;
    if (active && lease_mono_now_ns() < w->until_ns &&
        !__atomic_load_n(&app->draining, __ATOMIC_ACQUIRE) && !leased_watch_stopping(app->watch)) {
        int64_t retry_ms = 0;
        if (!ex->claim.waiting) {
            /* a parked watch holds a waiting share of its credential and
             * tenant until its final reply */
            if (!leased_admission_claim(app->admission, ex->claim.credential_id,
                                        ex->claim.tenant_id, true, &retry_ms)) {
                leased_service_audit_refusal(app->service, &w->ctx, LEASE_RATE_LIMITED, w->req);
                leased_routes_reply_error(ex, LEASE_RATE_LIMITED, NULL, retry_ms);
                ex->pending = NULL;
                watch_op_free(w);
                return;
            }
            ex->claim.waiting = true;
        }
        w->seen = seen;
        watch_park(app, ex, w);
        return;
    }
    reply_outcome(ex, &w->ctx, w->req, &w->out);
    ex->pending = NULL;
    watch_op_free(w);
}

static void handle_watch(leased_app_t *app, leased_exchange_t *ex, leased_op_ctx_t *ctx)
{
    int64_t wait_ms = 0;
    watch_op_t *w = NULL;
    leased_request_t *req = leased_request_new(LEASED_OP_WATCH);
    if (!req) {
        leased_routes_reply_error(ex, LEASE_BACKEND_UNAVAILABLE, NULL, 1000);
        return;
    }
    leased_codec_error_t err;
    const char *bad = NULL;
    if (!watch_wait_ms(app, ex, &wait_ms))
        bad = ex->query_invalid ? "query" : "wait_ms";
    else if (!leased_codec_decode(LEASED_OP_WATCH, ex->body, ex->body_len, ex->path_param,
                                  &app->limits, req, &err))
        bad = err.field;
    if (bad) {
        leased_service_audit_refusal(app->service, ctx, LEASE_INVALID_LEASE_REQUEST, req);
        leased_routes_reply_error(ex, LEASE_INVALID_LEASE_REQUEST, bad, 0);
        leased_request_free(req);
        return;
    }
    if (!(w = calloc(1, sizeof *w))) {
        leased_routes_reply_error(ex, LEASE_BACKEND_UNAVAILABLE, NULL, 1000);
        leased_request_free(req);
        return;
    }
    w->ctx = *ctx;
    w->req = req;
    w->until_ns = ex->received_mono_ns + wait_ms * 1000000;
    ex->pending = w;
    watch_step(app, ex);
}

void leased_routes_park_refused(leased_app_t *app, leased_exchange_t *ex, bool full)
{
    watch_op_t *w = ex->pending;
    ex->park_requested = false;
    if (full) {
        leased_service_audit_refusal(app->service, &w->ctx, LEASE_RATE_LIMITED, w->req);
        leased_routes_reply_error(ex, LEASE_RATE_LIMITED, NULL, 1000);
    } else /* shutting down: the lease as last seen (active) */
        reply_outcome(ex, &w->ctx, w->req, &w->out);
    ex->pending = NULL;
    watch_op_free(w);
    release_claims(app, ex);
}

void leased_routes_continue(leased_app_t *app, leased_exchange_t *ex)
{
    if (ex->route->op == LEASED_OP_WATCH) {
        watch_step(app, ex); /* a parked watch holds only its waiting share */
        if (!ex->park_requested)
            release_claims(app, ex);
        return;
    }
    pending_op_t *p = ex->pending;
    if (client_gone(ex) && !leased_service_retrying(p->out))
        p->out->again_after_ms =
            0; /* acquire nothing for nobody: the conflict seen is the answer */
    else
        leased_service_run_again(app->service, &p->ctx, p->req, p->out);
    settle(ex, &p->ctx, p->req, p->out);
    if (ex->again_after_ms == 0)
        release_claims(app, ex);
}

static void reply_json(leased_exchange_t *ex, int status, const char *label, json_t *obj)
{
    json_object_set_new(obj, "correlation_id", json_string(ex->correlation_id));
    char *body = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    reply(ex, status, label, body, "application/json");
}

static void handle_healthz(leased_app_t *app, leased_exchange_t *ex, leased_op_ctx_t *ctx)
{
    (void)app;
    (void)ctx;
    reply_json(ex, 200, "ok", json_pack("{s:s}", "status", "ok"));
}

/* Readiness from the sweeper's last probe: a probe older than three
 * intervals counts as unreachable (the probe itself is stuck). */
static const char *not_ready_reason(leased_app_t *app, lease_health_t *h)
{
    if (__atomic_load_n(&app->draining, __ATOMIC_ACQUIRE))
        return "draining";
    int64_t age_ms = 0;
    if (!leased_sweeper_health(app->sweeper, h, &age_ms) || !h->reachable ||
        age_ms > 3 * app->config->health_interval_ms + 1000)
        return "database_unreachable";
    if (!h->schema_current)
        return "schema_outdated";
    if (h->sealed)
        return "sealed";
    return NULL;
}

static void handle_readyz(leased_app_t *app, leased_exchange_t *ex, leased_op_ctx_t *ctx)
{
    (void)ctx;
    lease_health_t h;
    memset(&h, 0, sizeof h);
    const char *reason = not_ready_reason(app, &h);
    if (reason) {
        reply_json(ex, 503, "not_ready",
                   json_pack("{s:s, s:s}", "status", "not_ready", "reason", reason));
        ex->retry_after_ms = 1000;
        return;
    }
    reply_json(ex, 200, "ok",
               json_pack("{s:s, s:i}", "status", "ready", "schema_version", h.schema_version));
}

static void handle_metrics(leased_app_t *app, leased_exchange_t *ex, leased_op_ctx_t *ctx)
{
    (void)ctx;
    leased_metrics_gauges_t g;
    memset(&g, 0, sizeof g);
    lease_store_stats(app->store, &g.store);
    int64_t age_ms;
    g.health_known = leased_sweeper_health(app->sweeper, &g.health, &age_ms);
    lease_health_t scratch;
    g.ready = not_ready_reason(app, &scratch) == NULL;
    g.draining = __atomic_load_n(&app->draining, __ATOMIC_ACQUIRE);
    g.inflight = leased_admission_inflight(app->admission);
    leased_admission_stats_t ads;
    leased_admission_stats(app->admission, &ads);
    g.rejected_rate = ads.rejected_rate;
    g.rejected_inflight = ads.rejected_inflight;
    g.rejected_source = ads.rejected_source;
    g.rejected_lookups = ads.rejected_lookups;
    g.rejected_share = ads.rejected_share;
    leased_conn_stats_t gs;
    leased_http_conn_stats(app->http, &gs);
    g.connections_open = gs.open;
    g.connections_refused_capacity = gs.refused_capacity;
    g.connections_refused_source = gs.refused_source;
    g.receive_timeouts = gs.receive_timeouts;
    g.framing_refused = gs.framing_refused;
    g.connections_evicted = gs.evicted;
    leased_queue_stats_t qs;
    leased_http_queue_stats(app->http, &qs);
    g.queued = qs.queued;
    g.queue_flows = qs.flows;
    g.queue_refused_full = qs.refused_full;
    g.queue_refused_waited = qs.refused_waited;
    leased_audit_stats_t as;
    leased_audit_queue_stats(app->audit, &as);
    g.audit_depth = as.depth;
    g.audit_written = as.written;
    g.audit_dropped = as.dropped;
    g.audit_fallback = as.fallback;
    g.audit_aggregated = as.aggregated;
    g.audit_refused = as.refused;
    leased_sweeper_stats_t ss;
    leased_sweeper_stats(app->sweeper, &ss);
    g.sweep_runs = ss.runs;
    g.sweep_expired = ss.expired;
    g.sweep_failures = ss.failures;
    g.housekeeping = ss;
    leased_watch_stats_t ws = {0};
    if (app->watch)
        leased_watch_stats(app->watch, &ws);
    g.watches_parked = ws.parked;
    g.watch_mode = (int)ws.mode;
    g.watch_heard = ws.heard;
    g.watch_polls = ws.polls;
    g.watch_poll_failures = ws.poll_failures;
    g.watch_woken_by_end = ws.woken_by_end;
    g.watch_refused = ws.refused_full;
    g.fencing_token_max = leased_service_fencing_token_max(app->service);
    char *text = leased_metrics_render(app->metrics, &g);
    if (!text) {
        leased_routes_reply_error(ex, LEASE_BACKEND_UNAVAILABLE, NULL, 1000);
        return;
    }
    reply(ex, 200, "ok", text, "text/plain; version=0.0.4; charset=utf-8");
}

/* The budgets of one request's client address (lease_auth_gate_t): asked
 * only for requests the credential cache cannot vouch for, so a client
 * with a valid cached credential is bound by its credential's and tenant's
 * limits alone, whoever else shares its address. */
typedef struct source_budget {
    leased_admission_t *admission;
    const char *source;
} source_budget_t;

static bool admit_uncached(void *cls, int64_t *retry_after_ms)
{
    const source_budget_t *b = cls;
    return leased_admission_source_take(b->admission, b->source, lease_mono_now_ns(),
                                        retry_after_ms);
}

static bool allow_lookup(void *cls, int64_t *retry_after_ms)
{
    const source_budget_t *b = cls;
    return leased_admission_lookup_allowed(b->admission, b->source, lease_mono_now_ns(),
                                           retry_after_ms);
}

/* Credential, rates, capability and shares of a route that needs a
 * credential; false with the reply filled when the request stops here. */
static bool admit(leased_app_t *app, leased_exchange_t *ex, leased_op_ctx_t *ctx)
{
    const leased_route_t *route = ex->route;
    lease_code_t code;
    int64_t retry_ms = 0;
    source_budget_t budget = {app->admission, ex->source};
    lease_auth_gate_t gate = {admit_uncached, allow_lookup, &budget, 0};
    if (!leased_service_authenticate(app->service, ctx, ex->authorization, &gate, &code)) {
        if (code == LEASE_INVALID_CREDENTIAL)
            leased_admission_auth_failed(app->admission, ex->source, lease_mono_now_ns());
        retry_ms = code == LEASE_INVALID_CREDENTIAL ? 0
                   : code == LEASE_RATE_LIMITED     ? gate.retry_after_ms
                                                    : 1000;
        leased_routes_reply_error(ex, code, NULL, retry_ms);
        return false;
    }
    if (!leased_admission_take(app->admission, ctx->caller.principal.credential_id,
                               lease_mono_now_ns(), &retry_ms)) {
        leased_service_audit_refusal(app->service, ctx, LEASE_RATE_LIMITED, NULL);
        leased_routes_reply_error(ex, LEASE_RATE_LIMITED, NULL, retry_ms);
        return false;
    }
    /* the audit queue's fair share (issue 34): a tenant whose events wait
     * beyond its share starts nothing new, so no other tenant's event is
     * ever dropped; the refusal itself is counted (aggregated) */
    if (!leased_audit_queue_admit(app->audit, ctx->caller.scope.tenant_id, &retry_ms)) {
        leased_service_audit_refusal(app->service, ctx, LEASE_RATE_LIMITED, NULL);
        leased_routes_reply_error(ex, LEASE_RATE_LIMITED, NULL, retry_ms);
        return false;
    }
    if (!leased_service_authorize(app->service, ctx, route->caps_any, &code)) {
        leased_routes_reply_error(ex, code, NULL, 0);
        return false;
    }
    leased_claim_t *c = &ex->claim;
    leased_copy_text(c->credential_id, sizeof c->credential_id,
                     ctx->caller.principal.credential_id);
    leased_copy_text(c->tenant_id, sizeof c->tenant_id, ctx->caller.scope.tenant_id);
    if (!leased_admission_claim(app->admission, c->credential_id, c->tenant_id, false, &retry_ms)) {
        leased_service_audit_refusal(app->service, ctx, LEASE_RATE_LIMITED, NULL);
        leased_routes_reply_error(ex, LEASE_RATE_LIMITED, NULL, retry_ms);
        return false;
    }
    c->inflight = true;
    /* the global bound last: a credential over its share never holds a
     * global slot, so it cannot crowd out anyone else */
    if (!leased_admission_enter(app->admission, &retry_ms)) {
        leased_admission_unclaim(app->admission, c->credential_id, c->tenant_id, false);
        c->inflight = false;
        leased_service_audit_refusal(app->service, ctx, LEASE_RATE_LIMITED, NULL);
        leased_routes_reply_error(ex, LEASE_RATE_LIMITED, NULL, retry_ms);
        return false;
    }
    c->global = true;
    return true;
}

void leased_routes_dispatch(leased_app_t *app, leased_exchange_t *ex)
{
    const leased_route_t *route = ex->route;
    leased_op_ctx_t ctx;
    leased_service_begin(&ctx, route->op, ex->correlation_id, ex->trace_id, ex->source,
                         ex->received_mono_ns);
    if (route->caps_any && !admit(app, ex, &ctx))
        return;
    route->handler(app, ex, &ctx);
    if (ex->park_requested)
        release_running_claims(app, ex); /* parked: only the waiting share stays */
    else if (ex->again_after_ms == 0)
        release_claims(app, ex);
}

/* The transport's match (http.h): the route and what the transport needs
 * of it, without the route table's type. */
static bool match_for_http(const char *method, const char *path, leased_exchange_t *ex, char *param,
                           size_t paramsz, bool *wrong_method)
{
    leased_route_miss_t miss;
    const leased_route_t *r = leased_routes_match(method, path, param, paramsz, &miss);
    ex->route = r;
    ex->route_slot = r ? (size_t)(r - route_table) : N_ROUTES;
    ex->route_name = r ? r->name : "unmatched";
    ex->on_event_thread = r && r->on_event_thread;
    ex->quiet_log = r && r->on_event_thread; /* the probes: health, readiness, metrics */
    *wrong_method = miss == LEASED_ROUTE_NO_METHOD;
    return r != NULL;
}

/* The flow of a complete request (http.h): its tenant when the
 * credential cache vouches for its bearer token, else its client address,
 * so a caller cannot queue in a tenant's flow without that tenant's
 * secret, and requests without a credential share their address's. */
/* About one batch item per this many bytes of body (an item with its lock
 * identity is 200 to 400 bytes): a batch's cost is known before it is
 * parsed, and a padded body only makes its sender's share smaller. */
#define BATCH_ITEM_BYTES 256

static void classify_for_http(leased_app_t *app, const leased_exchange_t *ex, char *key,
                              size_t keysz)
{
    char tenant[LEASE_NAME_MAX + 1];
    if (ex->route && ex->route->caps_any &&
        leased_service_cached_tenant(app->service, ex->authorization, tenant))
        snprintf(key, keysz, "t:%s", tenant);
    else
        snprintf(key, keysz, "s:%s", ex->source);
}

static size_t cost_for_http(const leased_exchange_t *ex)
{
    if (!ex->route || lease_operation(ex->route->op)->shape != LEASE_SHAPE_OWNER_BATCH)
        return 1;
    size_t items = ex->body_len / BATCH_ITEM_BYTES + 1;
    return items < LEASE_RENEW_BATCH_MAX ? items : LEASE_RENEW_BATCH_MAX;
}

/* A request refused before it ran (its flow's queue is full, or it waited
 * too long for a worker): audited like the other refusals before
 * authentication, aggregated per source and window. */
static void refuse_for_http(leased_app_t *app, leased_exchange_t *ex, lease_code_t code,
                            int64_t retry_after_ms)
{
    leased_op_ctx_t ctx;
    leased_service_begin(&ctx, ex->route->op, ex->correlation_id, ex->trace_id, ex->source,
                         ex->received_mono_ns);
    leased_service_audit_refusal(app->service, &ctx, code, NULL);
    leased_routes_reply_error(ex, code, NULL, retry_after_ms);
}

const leased_http_routes_t *leased_routes_for_http(void)
{
    static const leased_http_routes_t routes = {
        .match = match_for_http,
        .dispatch = leased_routes_dispatch,
        .next = leased_routes_continue,
        .park_refused = leased_routes_park_refused,
        .reply_error = leased_routes_reply_error,
        .classify = classify_for_http,
        .cost = cost_for_http,
        .refuse = refuse_for_http,
    };
    return &routes;
}
