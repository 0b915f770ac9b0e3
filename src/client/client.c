/*
 * client.c - the routes of leased as C calls, and the one exchange loop
 * every call goes through: a bounded deadline, and for mutations the
 * resolution of an unknown outcome by repeating the same request id.
 *
 * Why the body is built once and resent byte for byte: the service's
 * idempotency record compares a digest of the request; a repeat that
 * differed in any behaviour-affecting input would be an idempotency
 * conflict, not a resolution. deadline_ms is therefore the call's full
 * budget on every repeat, and the local curl timeout enforces what is left.
 */
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "lease/client.h"
#include "lease/json_fields.h"

#define NS_PER_MS 1000000LL
#define PAUSE_FIRST_MS 20
#define PAUSE_MAX_MS 500
#define LIST_DEFAULT_PAGE 100

struct lease_client {
    char *base_url;
    char *authorization; /* "Authorization: Bearer <token>", wiped on free */
    client_http_pool_t *pool;
    /* what a layer above keeps per client (the held leases' renewal
     * group, renewals.c, made on the first lease_held_start), freed with
     * the client through drop_attachment: the client never knows what */
    pthread_mutex_t attachment_lock;
    void *attachment;
    void (*drop_attachment)(void *);
};

void *client_attachment(lease_client_t *c, void *(*make)(lease_client_t *), void (*drop)(void *))
{
    pthread_mutex_lock(&c->attachment_lock);
    if (!c->attachment && (c->attachment = make(c)) != NULL)
        c->drop_attachment = drop;
    void *a = c->attachment;
    pthread_mutex_unlock(&c->attachment_lock);
    return a;
}

lease_client_t *lease_client_new(const char *base_url, const char *token)
{
    if (!base_url || !*base_url)
        base_url = LEASE_CLIENT_DEFAULT_URL;
    if (strncmp(base_url, "http://", 7) != 0 && strncmp(base_url, "https://", 8) != 0)
        return NULL;
    lease_client_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    pthread_mutex_init(&c->attachment_lock, NULL);
    c->base_url = strdup(base_url);
    c->pool = client_http_pool_new();
    if (!c->base_url || !c->pool)
        goto fail;
    size_t n = strlen(c->base_url);
    while (n > 0 && c->base_url[n - 1] == '/')
        c->base_url[--n] = '\0';
    if (token && *token) {
        static const char prefix[] = "Authorization: Bearer ";
        size_t len = sizeof prefix + strlen(token);
        c->authorization = malloc(len);
        if (!c->authorization)
            goto fail;
        snprintf(c->authorization, len, "%s%s", prefix, token);
    }
    return c;
fail:
    lease_client_free(c);
    return NULL;
}

void lease_client_free(lease_client_t *c)
{
    if (!c)
        return;
    if (c->attachment) /* its held leases are gone: they borrow the client */
        c->drop_attachment(c->attachment);
    pthread_mutex_destroy(&c->attachment_lock);
    if (c->authorization) {
        OPENSSL_cleanse(c->authorization, strlen(c->authorization));
        free(c->authorization);
    }
    client_http_pool_free(c->pool);
    free(c->base_url);
    free(c);
}

const char *lease_client_url(const lease_client_t *c)
{
    return c->base_url;
}

bool lease_client_set_ca_file(lease_client_t *c, const char *path)
{
    return client_http_pool_set_ca_file(c->pool, path && *path ? path : NULL);
}

void lease_client_call_clear(lease_client_call_t *call)
{
    if (!call)
        return;
    free(call->body);
    call->body = NULL;
}

lease_identity_input_t lease_client_identity_of(const lease_identity_t *id)
{
    lease_identity_input_t in = {id->tenant_id,
                                 id->program_id,
                                 id->target_namespace,
                                 id->target_id,
                                 id->actor_name,
                                 id->workflow_name,
                                 id->operation_class[0] ? id->operation_class : NULL};
    return in;
}

bool lease_client_new_id(const char *prefix, char *out, size_t outsz)
{
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz234567";
    size_t plen = strlen(prefix);
    if (outsz < plen + 26 + 1)
        return false;
    unsigned char raw[17]; /* 136 bits; 26 characters use 130 of them */
    if (RAND_bytes(raw, sizeof raw) != 1)
        return false;
    memcpy(out, prefix, plen);
    for (size_t i = 0; i < 26; i++) {
        size_t bit = i * 5;
        unsigned v = ((unsigned)raw[bit / 8] << 8 | raw[bit / 8 + 1]) >> (11 - bit % 8);
        out[plen + i] = alphabet[v & 31u];
    }
    out[plen + 26] = '\0';
    OPENSSL_cleanse(raw, sizeof raw);
    return true;
}

/* The code of an answer that carries no typed envelope, by HTTP status. */
static lease_code_t code_of_status(int status)
{
    switch (status) {
    case 400:
    case 413:
    case 415:
        return LEASE_INVALID_LEASE_REQUEST;
    case 401:
        return LEASE_INVALID_CREDENTIAL;
    case 403:
        return LEASE_ACCESS_DENIED;
    case 404:
        return LEASE_NOT_FOUND;
    case 408:
        return LEASE_DEADLINE_EXCEEDED;
    case 429:
        return LEASE_RATE_LIMITED;
    default:
        return LEASE_BACKEND_UNAVAILABLE;
    }
}

/* Pauses before the next attempt; false when the deadline leaves no room
 * for one (the caller then reports what it knows). */
static bool pause_before_retry(const lease_deadline_t *deadline, int64_t *pause_ms,
                               int64_t retry_after_ms)
{
    int64_t wait = retry_after_ms > 0 ? retry_after_ms : *pause_ms;
    wait += (int64_t)lease_jitter((uint64_t)wait / 2 + 1);
    if (wait >= lease_deadline_remaining_ms(deadline))
        return false;
    lease_sleep_ms(wait);
    *pause_ms = *pause_ms * 2 > PAUSE_MAX_MS ? PAUSE_MAX_MS : *pause_ms * 2;
    return true;
}

/* client_internal.h; lease_held_anchor_ns is its public name */
int64_t client_anchor_ns(int64_t first_sent_ns, int64_t waited_ms, int64_t answered_ns)
{
    /* saturating: an absurd wait must not wrap around to an early anchor */
    int64_t room_ms = (INT64_MAX - (first_sent_ns > 0 ? first_sent_ns : 0)) / NS_PER_MS;
    if (waited_ms < 0)
        waited_ms = 0;
    if (waited_ms > room_ms)
        waited_ms = room_ms;
    int64_t anchor = first_sent_ns + waited_ms * NS_PER_MS;
    if (answered_ns > 0 && anchor > answered_ns)
        anchor = answered_ns;
    return anchor;
}

/* Keeps the final answer's facts (and body) in the call. */
static void settle(lease_client_call_t *call, client_http_answer_t *ans,
                   const client_envelope_t *env)
{
    call->answered_mono_ns = lease_mono_now_ns();
    call->anchor_mono_ns =
        client_anchor_ns(call->first_sent_mono_ns, env->waited_ms, call->answered_mono_ns);
    call->http_status = ans->status;
    snprintf(call->correlation_id, sizeof call->correlation_id, "%s",
             env->typed && env->correlation_id[0] ? env->correlation_id : ans->correlation_id);
    if (call->keep_body) {
        free(call->body);
        call->body = ans->body;
        ans->body = NULL;
    }
}

/*
 * Sends one request and returns its typed outcome; env receives the final
 * typed envelope (when there is one). For mutations an answer that may hide
 * an effect is resolved by resending the same body until a typed answer
 * comes or the deadline passes.
 */
static lease_code_t exchange_abortable(lease_client_t *c, const char *method, const char *path,
                                       const char *body, bool mutation,
                                       const lease_deadline_t *deadline, int abort_fd,
                                       lease_client_call_t *call, client_envelope_t *env)
{
    char url[1024];
    if ((size_t)snprintf(url, sizeof url, "%s%s", c->base_url, path) >= sizeof url)
        return LEASE_INVALID_LEASE_REQUEST;
    bool maybe_done = false; /* an earlier attempt may have taken effect */
    lease_code_t transient = LEASE_BACKEND_UNAVAILABLE;
    int64_t pause_ms = PAUSE_FIRST_MS;
    memset(env, 0, sizeof *env);

    while (!lease_deadline_passed(deadline)) {
        client_http_answer_t ans;
        if (call->attempts++ == 0)
            call->first_sent_mono_ns = lease_mono_now_ns();
        client_http_perform(c->pool, method, url, c->authorization, body, deadline, abort_fd, &ans);
        int64_t retry_after = ans.retry_after_ms;
        if (ans.transport != CLIENT_ANSWERED)
            snprintf(call->transport_error, sizeof call->transport_error, "%s", ans.error);
        if (ans.aborted) {
            client_http_answer_clear(&ans);
            return maybe_done ? LEASE_OUTCOME_UNKNOWN : LEASE_BACKEND_UNAVAILABLE;
        }

        if (ans.transport == CLIENT_NOT_SENT && !maybe_done) {
            client_http_answer_clear(&ans);
            return LEASE_BACKEND_UNAVAILABLE; /* nothing can have happened */
        }
        if (ans.transport != CLIENT_ANSWERED) {
            maybe_done = maybe_done || mutation;
            client_http_answer_clear(&ans);
            if (!pause_before_retry(deadline, &pause_ms, 0))
                break;
            continue;
        }
        if (client_envelope_decode(ans.body, ans.len, env)) {
            lease_code_t code = env->code;
            bool transient_code = code == LEASE_BACKEND_UNAVAILABLE || code == LEASE_RATE_LIMITED ||
                                  code == LEASE_DEADLINE_EXCEEDED;
            if (code == LEASE_OUTCOME_UNKNOWN || (maybe_done && transient_code)) {
                /* not an answer to "did it happen?": ask again */
                maybe_done = maybe_done || mutation;
                transient = code == LEASE_OUTCOME_UNKNOWN ? LEASE_BACKEND_UNAVAILABLE : code;
                if (env->retry_after_ms > 0)
                    retry_after = env->retry_after_ms;
                client_envelope_clear(env);
                client_http_answer_clear(&ans);
                if (!pause_before_retry(deadline, &pause_ms, retry_after))
                    break;
                continue;
            }
            settle(call, &ans, env);
            client_http_answer_clear(&ans);
            return code;
        }
        if (ans.status >= 500 || (ans.status >= 200 && ans.status < 300)) {
            /* a proxy's error page or a garbled answer: proves nothing */
            maybe_done = maybe_done || mutation;
            client_http_answer_clear(&ans);
            if (!pause_before_retry(deadline, &pause_ms, retry_after))
                break;
            continue;
        }
        lease_code_t code = code_of_status(ans.status);
        settle(call, &ans, env);
        client_http_answer_clear(&ans);
        return code;
    }
    if (call->attempts == 0)
        return LEASE_DEADLINE_EXCEEDED;
    return maybe_done ? LEASE_OUTCOME_UNKNOWN : transient;
}

static lease_code_t exchange(lease_client_t *c, const char *method, const char *path,
                             const char *body, bool mutation, const lease_deadline_t *deadline,
                             lease_client_call_t *call, client_envelope_t *env)
{
    return exchange_abortable(c, method, path, body, mutation, deadline, -1, call, env);
}

/* Common start of a call: defaults, deadline, request id. */
typedef struct call_ctx {
    lease_client_call_t local;
    lease_client_call_t *call;
    lease_deadline_t deadline;
    int64_t deadline_ms;
} call_ctx_t;

static bool begin(call_ctx_t *ctx, lease_client_call_t *call, bool mutation)
{
    memset(&ctx->local, 0, sizeof ctx->local);
    ctx->call = call ? call : &ctx->local;
    lease_client_call_t *cl = ctx->call;
    free(cl->body);
    cl->body = NULL;
    cl->request_id_used[0] = '\0';
    cl->correlation_id[0] = '\0';
    cl->http_status = 0;
    cl->transport_error[0] = '\0';
    cl->attempts = 0;
    cl->first_sent_mono_ns = 0;
    cl->answered_mono_ns = 0;
    cl->anchor_mono_ns = 0;
    ctx->deadline_ms = cl->deadline_ms > 0 ? cl->deadline_ms : LEASE_CLIENT_DEFAULT_DEADLINE_MS;
    if (cl->deadline_at_ms > 0) {
        int64_t left = cl->deadline_at_ms - lease_wall_now_ms();
        ctx->deadline_ms = left > 0 ? left : LEASE_CLIENT_PAST_DEADLINE_MS;
    }
    ctx->deadline = lease_deadline_in(ctx->deadline_ms);
    if (!mutation)
        return true;
    if (cl->request_id && *cl->request_id) {
        if (strlen(cl->request_id) > LEASE_ID_MAX)
            return false;
        strcpy(cl->request_id_used, cl->request_id);
        return true;
    }
    return lease_client_new_id("req_", cl->request_id_used, sizeof cl->request_id_used);
}

/* A local refusal: the request could not even be expressed. */
static lease_code_t refuse(lease_result_t *res, const char *field)
{
    memset(res, 0, sizeof *res);
    res->code = LEASE_INVALID_LEASE_REQUEST;
    snprintf(res->field, sizeof res->field, "%s", field);
    return res->code;
}

static bool set_str(json_t *o, const char *key, const char *value)
{
    return !value || json_object_set_new(o, key, json_string(value)) == 0;
}

static bool set_int(json_t *o, const char *key, int64_t value)
{
    return json_object_set_new(o, key, json_integer((json_int_t)value)) == 0;
}

/* A request object holding lock_identity, or NULL (out of memory, or a
 * component that is not valid UTF-8). */
static json_t *identity_body(const lease_identity_input_t *in)
{
    json_t *o = json_object();
    json_t *id = client_identity_json(in);
    if (!o || !id) {
        json_decref(o);
        json_decref(id);
        return NULL;
    }
    if (json_object_set_new(o, "lock_identity", id) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Adds request_id (mutations) and deadline_ms, and serialises. */
static char *finish_body(json_t *o, const call_ctx_t *ctx, bool mutation)
{
    char *text = NULL;
    char at[LEASE_TIME_LEN + 1];
    if (ctx->call->deadline_at_ms > 0)
        lease_time_format(ctx->call->deadline_at_ms, at);
    if ((!mutation || set_str(o, "request_id", ctx->call->request_id_used)) &&
        (ctx->call->deadline_at_ms > 0 ? set_str(o, "deadline_at", at)
                                       : set_int(o, "deadline_ms", ctx->deadline_ms)))
        text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return text;
}

/* Turns the final envelope of a single-lease route into *res. */
static lease_code_t single_result(lease_code_t code, bool mutation, client_envelope_t *env,
                                  lease_result_t *res)
{
    memset(res, 0, sizeof *res);
    res->code = code;
    if (env->typed) {
        res->retry_after_ms = env->retry_after_ms;
        snprintf(res->field, sizeof res->field, "%s", env->field);
        res->replayed = env->replayed;
        res->current_state = env->current_state;
        res->waited_ms = env->waited_ms;
        const json_t *lease = json_object_get(env->root, "lease");
        if (lease)
            res->has_lease = client_lease_decode(lease, &res->lease);
    }
    if (lease_code_is_success(code) && !res->has_lease) {
        /* "success" without a readable lease tells us nothing we can use */
        res->code = mutation ? LEASE_OUTCOME_UNKNOWN : LEASE_BACKEND_UNAVAILABLE;
    }
    client_envelope_clear(env);
    return res->code;
}

static lease_code_t single_call(lease_client_t *c, const char *method, const char *path, json_t *o,
                                bool mutation, call_ctx_t *ctx, lease_result_t *res)
{
    char *body = NULL;
    if (o) {
        body = finish_body(o, ctx, mutation);
        if (!body)
            return refuse(res, "body");
    }
    client_envelope_t env;
    lease_code_t code = exchange(c, method, path, body, mutation, &ctx->deadline, ctx->call, &env);
    free(body);
    return single_result(code, mutation, &env, res);
}

lease_code_t lease_client_acquire(lease_client_t *c, const lease_client_acquire_t *req,
                                  lease_client_call_t *call, lease_result_t *res)
{
    call_ctx_t ctx;
    if (!begin(&ctx, call, true))
        return refuse(res, "request_id");
    json_t *o = identity_body(&req->identity);
    if (!o || !set_str(o, "service_instance_id", req->service_instance_id) ||
        !set_str(o, "execution_id", req->execution_id) || !set_str(o, "job_id", req->job_id) ||
        !set_str(o, "trace_id", req->trace_id) ||
        (req->ttl_ms > 0 && !set_int(o, "ttl_ms", req->ttl_ms)) ||
        (req->maximum_lifetime_ms > 0 &&
         !set_int(o, "maximum_lifetime_ms", req->maximum_lifetime_ms)) ||
        (req->wait_ms > 0 && !set_int(o, "wait_ms", req->wait_ms)) ||
        (req->session_id && *req->session_id && !set_str(o, "session_id", req->session_id))) {
        json_decref(o);
        return refuse(res, "lock_identity");
    }
    if (req->metadata_json) {
        json_t *meta = json_loads(req->metadata_json, JSON_REJECT_DUPLICATES, NULL);
        if (!json_is_object(meta) || json_object_set_new(o, "metadata", meta) != 0) {
            json_decref(o);
            return refuse(res, "metadata");
        }
    }
    return single_call(c, "POST", "/v1/leases/acquire", o, true, &ctx, res);
}

/* What renew, release, force-release and revoke send besides the lease
 * they name; NULL strings and a ttl of 0 are left out. */
typedef struct held_fields {
    const char *service_instance_id;
    int64_t ttl_ms;
    const char *reason;
    const char *incident_id;
} held_fields_t;

/* A call about a held lease: identity, lease id, fencing token and f. */
static lease_code_t held_call(lease_client_t *c, const char *path,
                              const lease_identity_input_t *identity, const char *lease_id,
                              int64_t fencing_token, const held_fields_t *f,
                              lease_client_call_t *call, lease_result_t *res)
{
    call_ctx_t ctx;
    if (!begin(&ctx, call, true))
        return refuse(res, "request_id");
    json_t *o = identity_body(identity);
    if (!o || !set_str(o, "lease_id", lease_id) || !set_int(o, "fencing_token", fencing_token) ||
        !set_str(o, "service_instance_id", f->service_instance_id) ||
        (f->ttl_ms > 0 && !set_int(o, "ttl_ms", f->ttl_ms)) || !set_str(o, "reason", f->reason) ||
        !set_str(o, "incident_id", f->incident_id)) {
        json_decref(o);
        return refuse(res, "lock_identity");
    }
    return single_call(c, "POST", path, o, true, &ctx, res);
}

lease_code_t lease_client_renew(lease_client_t *c, const lease_client_owner_t *req,
                                lease_client_call_t *call, lease_result_t *res)
{
    held_fields_t f = {.service_instance_id = req->service_instance_id, .ttl_ms = req->ttl_ms};
    return held_call(c, "/v1/leases/renew", &req->identity, req->lease_id, req->fencing_token, &f,
                     call, res);
}

/* One renewal (release) of a batch: what /renew (/release) would take,
 * with its own request id; a release sends no ttl. */
static json_t *batch_item(const lease_client_owner_t *r, const char *request_id, bool renew)
{
    json_t *o = identity_body(&r->identity);
    if (!o || !set_str(o, "request_id", request_id) || !set_str(o, "lease_id", r->lease_id) ||
        !set_int(o, "fencing_token", r->fencing_token) ||
        !set_str(o, "service_instance_id", r->service_instance_id) ||
        (renew && r->ttl_ms > 0 && !set_int(o, "ttl_ms", r->ttl_ms))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static lease_code_t batch_all(lease_result_t *results, size_t n, lease_code_t code,
                              const char *field)
{
    for (size_t i = 0; i < n; i++) {
        memset(&results[i], 0, sizeof results[i]);
        results[i].code = code;
        snprintf(results[i].field, sizeof results[i].field, "%s", field ? field : "");
    }
    return code;
}

/* renew-batch (renew) or release-batch: one request, one transaction. */
static lease_code_t owner_batch(lease_client_t *c, bool renew, const lease_client_owner_t *owners,
                                size_t n, const char *const *request_ids, lease_client_call_t *call,
                                lease_result_t *results)
{
    const char *list = renew ? "renewals" : "releases";
    lease_code_t decided = renew ? LEASE_RENEWED : LEASE_RELEASED;
    call_ctx_t ctx;
    if (!begin(&ctx, call, false))
        return batch_all(results, n, LEASE_INVALID_LEASE_REQUEST, list);
    json_t *items = json_array();
    json_t *o = json_object();
    bool ok = items && o && json_object_set(o, list, items) == 0;
    for (size_t i = 0; ok && i < n; i++) {
        char id[LEASE_ID_MAX + 1];
        const char *given = request_ids ? request_ids[i] : NULL;
        if (given && *given)
            ok = strlen(given) <= LEASE_ID_MAX && snprintf(id, sizeof id, "%s", given) > 0;
        else
            ok = lease_client_new_id("req_", id, sizeof id);
        json_t *item = ok ? batch_item(&owners[i], id, renew) : NULL;
        ok = item && json_array_append_new(items, item) == 0;
    }
    json_decref(items);
    char *body = ok ? finish_body(o, &ctx, false) : (json_decref(o), NULL);
    if (!body)
        return batch_all(results, n, LEASE_INVALID_LEASE_REQUEST, list);
    client_envelope_t env;
    memset(&env, 0, sizeof env);
    lease_code_t code =
        exchange(c, "POST", renew ? "/v1/leases/renew-batch" : "/v1/leases/release-batch", body,
                 true, &ctx.deadline, ctx.call, &env);
    free(body);
    json_t *answers = env.typed ? json_object_get(env.root, "results") : NULL;
    if (code != decided || json_array_size(answers) != n) {
        /* a decided batch without one answer per item tells nothing */
        if (code == decided)
            code = LEASE_OUTCOME_UNKNOWN;
        batch_all(results, n, code, env.typed ? env.field : NULL);
        client_envelope_clear(&env);
        return code;
    }
    for (size_t i = 0; i < n; i++) {
        char *text = json_dumps(json_array_get(answers, i), JSON_COMPACT);
        client_envelope_t one;
        memset(&one, 0, sizeof one);
        lease_code_t item_code = LEASE_OUTCOME_UNKNOWN;
        if (text && client_envelope_decode(text, strlen(text), &one))
            item_code = one.code;
        single_result(item_code, true, &one, &results[i]);
        free(text);
    }
    client_envelope_clear(&env);
    return code;
}

lease_code_t lease_client_renew_many(lease_client_t *c, const lease_client_owner_t *renewals,
                                     size_t n, const char *const *request_ids,
                                     lease_client_call_t *call, lease_result_t *results)
{
    return owner_batch(c, true, renewals, n, request_ids, call, results);
}

lease_code_t lease_client_release_many(lease_client_t *c, const lease_client_owner_t *releases,
                                       size_t n, const char *const *request_ids,
                                       lease_client_call_t *call, lease_result_t *results)
{
    return owner_batch(c, false, releases, n, request_ids, call, results);
}

lease_code_t lease_client_release(lease_client_t *c, const lease_client_owner_t *req,
                                  lease_client_call_t *call, lease_result_t *res)
{
    held_fields_t f = {.service_instance_id = req->service_instance_id};
    return held_call(c, "/v1/leases/release", &req->identity, req->lease_id, req->fencing_token, &f,
                     call, res);
}

lease_code_t lease_client_force_release(lease_client_t *c, const lease_client_admin_t *req,
                                        lease_client_call_t *call, lease_result_t *res)
{
    held_fields_t f = {.reason = req->reason};
    return held_call(c, "/v1/leases/force-release", &req->identity, req->lease_id,
                     req->fencing_token, &f, call, res);
}

lease_code_t lease_client_revoke(lease_client_t *c, const lease_client_admin_t *req,
                                 lease_client_call_t *call, lease_result_t *res)
{
    held_fields_t f = {.reason = req->reason, .incident_id = req->incident_id};
    return held_call(c, "/v1/leases/revoke", &req->identity, req->lease_id, req->fencing_token, &f,
                     call, res);
}

/* The answer of a session route: the session, and a close's count. */
static lease_code_t session_result(lease_code_t code, bool mutation, client_envelope_t *env,
                                   lease_result_t *res)
{
    memset(res, 0, sizeof *res);
    res->code = code;
    if (env->typed) {
        res->retry_after_ms = env->retry_after_ms;
        snprintf(res->field, sizeof res->field, "%s", env->field);
        res->replayed = env->replayed;
        const json_t *session = json_object_get(env->root, "session");
        if (session)
            res->has_session = client_session_decode(session, &res->session);
        int64_t ended = 0;
        if (lease_json_get_int(env->root, "leases_ended", &ended, false, 0))
            res->leases_ended = ended;
        res->more = json_is_true(json_object_get(env->root, "more"));
    }
    if (lease_code_is_success(code) && !res->has_session)
        res->code = mutation ? LEASE_OUTCOME_UNKNOWN : LEASE_BACKEND_UNAVAILABLE;
    client_envelope_clear(env);
    return res->code;
}

/* "/v1/sessions/" + the id as one path segment + "/" + verb; false when the
 * id is empty, too long or not of the id alphabet (refused locally). */
static bool session_path(const char *session_id, const char *verb, char *path, size_t pathsz)
{
    if (!session_id || !*session_id || strlen(session_id) > LEASE_ID_MAX)
        return false;
    for (const unsigned char *p = (const unsigned char *)session_id; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '_' || *p == ':' || *p == '-'))
            return false;
    return (size_t)snprintf(path, pathsz, "/v1/sessions/%s/%s", session_id, verb) < pathsz;
}

/* One session call: body o (consumed) to path. */
static lease_code_t session_call(lease_client_t *c, const char *path, json_t *o, bool with_id,
                                 call_ctx_t *ctx, lease_result_t *res)
{
    char *body = finish_body(o, ctx, with_id);
    if (!body)
        return refuse(res, "body");
    client_envelope_t env;
    lease_code_t code = exchange(c, "POST", path, body, true, &ctx->deadline, ctx->call, &env);
    free(body);
    return session_result(code, true, &env, res);
}

lease_code_t lease_client_session_open(lease_client_t *c, const char *service_instance_id,
                                       int64_t ttl_ms, lease_client_call_t *call,
                                       lease_result_t *res)
{
    call_ctx_t ctx;
    if (!begin(&ctx, call, true))
        return refuse(res, "request_id");
    json_t *o = json_object();
    if (!o || !set_str(o, "service_instance_id", service_instance_id) ||
        (ttl_ms > 0 && !set_int(o, "ttl_ms", ttl_ms))) {
        json_decref(o);
        return refuse(res, "service_instance_id");
    }
    return session_call(c, "/v1/sessions", o, true, &ctx, res);
}

lease_code_t lease_client_session_keepalive(lease_client_t *c, const char *session_id,
                                            lease_client_call_t *call, lease_result_t *res)
{
    call_ctx_t ctx;
    (void)begin(&ctx, call, false); /* no request id: the route takes none */
    char path[64 + LEASE_ID_MAX];
    if (!session_path(session_id, "keepalive", path, sizeof path))
        return refuse(res, "session_id");
    json_t *o = json_object();
    if (!o)
        return refuse(res, "body");
    return session_call(c, path, o, false, &ctx, res);
}

lease_code_t lease_client_session_close(lease_client_t *c, const char *session_id,
                                        lease_client_call_t *call, lease_result_t *res)
{
    call_ctx_t ctx;
    if (!begin(&ctx, call, true))
        return refuse(res, "request_id");
    char path[64 + LEASE_ID_MAX];
    if (!session_path(session_id, "close", path, sizeof path))
        return refuse(res, "session_id");
    json_t *o = json_object();
    if (!o)
        return refuse(res, "body");
    return session_call(c, path, o, true, &ctx, res);
}

/* "/v1/leases/" + the id as one path segment: ids are [A-Za-z0-9._:-];
 * anything else is escaped so it stays one segment (and the service answers
 * it as invalid). False when the id is empty or too long. */
static bool lease_path(const char *lease_id, char *path, size_t pathsz)
{
    if (!lease_id || !*lease_id || strlen(lease_id) > LEASE_ID_MAX)
        return false;
    size_t n = (size_t)snprintf(path, pathsz, "/v1/leases/");
    for (const unsigned char *p = (const unsigned char *)lease_id; *p; p++) {
        bool plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                     (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == ':' || *p == '-';
        n += (size_t)snprintf(path + n, pathsz - n, plain ? "%c" : "%%%02X", *p);
    }
    return true;
}

lease_code_t lease_client_inspect_id(lease_client_t *c, const char *lease_id,
                                     lease_client_call_t *call, lease_result_t *res)
{
    call_ctx_t ctx;
    (void)begin(&ctx, call, false);
    char path[64 + 3 * LEASE_ID_MAX];
    if (!lease_path(lease_id, path, sizeof path))
        return refuse(res, "lease_id");
    return single_call(c, "GET", path, NULL, false, &ctx, res);
}

lease_code_t lease_client_watch(lease_client_t *c, const char *lease_id, int64_t wait_ms,
                                int abort_fd, lease_client_call_t *call, lease_result_t *res)
{
    call_ctx_t ctx;
    if (wait_ms < 0)
        wait_ms = 0;
    (void)begin(&ctx, call, false);
    /* the whole wait plus the call's own budget, unless the caller names one */
    if (!call || call->deadline_ms <= 0) {
        ctx.deadline_ms = wait_ms + LEASE_CLIENT_DEFAULT_DEADLINE_MS;
        ctx.deadline = lease_deadline_in(ctx.deadline_ms);
    }
    char path[96 + 3 * LEASE_ID_MAX];
    if (!lease_path(lease_id, path, sizeof path))
        return refuse(res, "lease_id");
    size_t n = strlen(path);
    snprintf(path + n, sizeof path - n, "/watch?wait_ms=%lld", (long long)wait_ms);
    client_envelope_t env;
    lease_code_t code =
        exchange_abortable(c, "GET", path, NULL, false, &ctx.deadline, abort_fd, ctx.call, &env);
    return single_result(code, false, &env, res);
}

lease_code_t lease_client_inspect_identity(lease_client_t *c,
                                           const lease_identity_input_t *identity,
                                           lease_client_call_t *call, lease_result_t *res)
{
    call_ctx_t ctx;
    (void)begin(&ctx, call, false);
    json_t *o = identity_body(identity);
    if (!o)
        return refuse(res, "lock_identity");
    return single_call(c, "POST", "/v1/leases/inspect", o, false, &ctx, res);
}

static const char *list_by_name(lease_list_by_t by)
{
    switch (by) {
    case LEASE_LIST_BY_OWNER:
        return "owner";
    case LEASE_LIST_BY_TARGET:
        return "target";
    case LEASE_LIST_BY_PROGRAM:
        return "program";
    }
    return "owner";
}

static lease_code_t list_refuse(lease_list_result_t *res, const char *field)
{
    memset(res, 0, sizeof *res);
    res->code = LEASE_INVALID_LEASE_REQUEST;
    snprintf(res->field, sizeof res->field, "%s", field);
    return res->code;
}

/* Decodes the leases of a list page; false when any is malformed. */
static bool decode_page(const json_t *root, lease_list_result_t *res)
{
    const json_t *leases = json_object_get(root, "leases");
    if (!json_is_array(leases))
        return false;
    size_t n = json_array_size(leases);
    res->leases = n ? calloc(n, sizeof *res->leases) : NULL;
    if (n && !res->leases)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!client_lease_decode(json_array_get(leases, i), &res->leases[i]))
            return false;
    res->count = n;
    const json_t *next = json_object_get(root, "next_page_token");
    if (json_is_string(next)) {
        if (json_string_length(next) >= sizeof res->next_page_token)
            return false;
        strcpy(res->next_page_token, json_string_value(next));
    }
    return true;
}

lease_code_t lease_client_list(lease_client_t *c, const lease_client_list_t *req,
                               lease_client_call_t *call, lease_list_result_t *res)
{
    call_ctx_t ctx;
    (void)begin(&ctx, call, false);
    json_t *o = json_object();
    bool by_target = req->by == LEASE_LIST_BY_TARGET;
    if (!o || !set_str(o, "by", list_by_name(req->by)) ||
        !set_str(o, "tenant_id", req->tenant_id) || !set_str(o, "program_id", req->program_id) ||
        (by_target && (!set_str(o, "target_namespace", req->target_namespace) ||
                       !set_str(o, "target_id", req->target_id))) ||
        !set_int(o, "page_size", req->page_size > 0 ? req->page_size : LIST_DEFAULT_PAGE) ||
        (req->page_token && *req->page_token && !set_str(o, "page_token", req->page_token))) {
        json_decref(o);
        return list_refuse(res, "by");
    }
    char *body = finish_body(o, &ctx, false);
    if (!body)
        return list_refuse(res, "body");
    client_envelope_t env;
    lease_code_t code =
        exchange(c, "POST", "/v1/leases/list", body, false, &ctx.deadline, ctx.call, &env);
    free(body);
    memset(res, 0, sizeof *res);
    res->code = code;
    if (env.typed)
        snprintf(res->field, sizeof res->field, "%s", env.field);
    if (code == LEASE_LISTED && !decode_page(env.root, res)) {
        lease_list_result_free(res);
        res->next_page_token[0] = '\0';
        res->code = LEASE_BACKEND_UNAVAILABLE;
    }
    client_envelope_clear(&env);
    return res->code;
}

static lease_code_t commit_refuse(lease_commit_result_t *res, const char *field)
{
    memset(res, 0, sizeof *res);
    res->code = LEASE_INVALID_LEASE_REQUEST;
    snprintf(res->field, sizeof res->field, "%s", field);
    return res->code;
}

/* The writes array of a commit; on failure names the offending write. */
static json_t *writes_json(const lease_client_commit_t *req, char *field, size_t fieldsz)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < req->n_writes; i++) {
        const lease_write_t *w = &req->writes[i];
        bool doc = w->kind == LEASE_WRITE_DOCUMENT;
        json_t *value = w->json ? json_loads(w->json, JSON_REJECT_DUPLICATES, NULL) : NULL;
        json_t *item = json_object();
        if (!json_is_object(value) || !item ||
            !set_str(item, "kind", doc ? "document" : "publication") ||
            !set_str(item, doc ? "key" : "topic", w->key) ||
            (doc && !set_int(item, "expected_revision", w->expected_revision)) ||
            json_object_set(item, doc ? "body" : "payload", value) != 0 ||
            json_array_append_new(arr, item) != 0) {
            snprintf(field, fieldsz, "writes[%zu].%s", i, doc ? "body" : "payload");
            json_decref(value);
            json_decref(item);
            json_decref(arr);
            return NULL;
        }
        json_decref(value);
    }
    return arr;
}

static bool decode_commit(const json_t *root, lease_commit_result_t *res)
{
    const json_t *results = json_object_get(json_object_get(root, "commit"), "results");
    if (!json_is_array(results) || json_array_size(results) > LEASE_COMMIT_WRITES_MAX)
        return false;
    res->n_writes = json_array_size(results);
    for (size_t i = 0; i < res->n_writes; i++) {
        const json_t *r = json_array_get(results, i);
        const json_t *v = json_object_get(r, "revision");
        if (!v)
            v = json_object_get(r, "outbox_id");
        if (!json_is_integer(v))
            return false;
        res->revisions[i] = (int64_t)json_integer_value(v);
    }
    return true;
}

lease_code_t lease_client_commit(lease_client_t *c, const lease_client_commit_t *req,
                                 lease_client_call_t *call, lease_commit_result_t *res)
{
    call_ctx_t ctx;
    if (!begin(&ctx, call, true))
        return commit_refuse(res, "request_id");
    if (req->n_writes == 0 || req->n_writes > LEASE_COMMIT_WRITES_MAX)
        return commit_refuse(res, "writes");
    char field[LEASE_FIELD_MAX + 1] = "lock_identity";
    json_t *writes = writes_json(req, field, sizeof field);
    json_t *o = writes ? identity_body(&req->identity) : NULL;
    if (!o) {
        json_decref(writes);
        return commit_refuse(res, field);
    }
    /* json_object_set_new consumes writes whether or not it succeeds */
    if (json_object_set_new(o, "writes", writes) != 0 || !set_str(o, "lease_id", req->lease_id) ||
        !set_int(o, "fencing_token", req->fencing_token) ||
        !set_str(o, "execution_id", req->execution_id) || !set_str(o, "trace_id", req->trace_id)) {
        json_decref(o);
        return commit_refuse(res, field);
    }
    char *body = finish_body(o, &ctx, true);
    if (!body)
        return commit_refuse(res, "body");
    client_envelope_t env;
    lease_code_t code =
        exchange(c, "POST", "/v1/commits", body, true, &ctx.deadline, ctx.call, &env);
    free(body);
    memset(res, 0, sizeof *res);
    res->code = code;
    if (env.typed) {
        res->replayed = env.replayed;
        res->retry_after_ms = env.retry_after_ms;
        res->current_revision = env.current_revision;
        snprintf(res->field, sizeof res->field, "%s", env.field);
    }
    if (code == LEASE_COMMIT_ACCEPTED && !decode_commit(env.root, res))
        res->code = LEASE_OUTCOME_UNKNOWN;
    client_envelope_clear(&env);
    return res->code;
}

/* One GET of path on the service, sent once (no retry: a probe or a
 * scrape answers what is, now), into *ans; the call's transport error set
 * when there was no answer. */
static void get_once(lease_client_t *c, const char *path, call_ctx_t *ctx,
                     lease_client_call_t *call, client_http_answer_t *ans)
{
    (void)begin(ctx, call, false);
    char url[1024];
    snprintf(url, sizeof url, "%s%s", c->base_url, path);
    ctx->call->attempts = 1;
    ctx->call->first_sent_mono_ns = lease_mono_now_ns();
    client_http_perform(c->pool, "GET", url, NULL, NULL, &ctx->deadline, -1, ans);
    if (ans->transport != CLIENT_ANSWERED)
        snprintf(ctx->call->transport_error, sizeof ctx->call->transport_error, "%s", ans->error);
}

lease_code_t lease_client_health(lease_client_t *c, bool ready, lease_client_call_t *call,
                                 lease_client_health_t *out)
{
    call_ctx_t ctx;
    client_http_answer_t ans;
    memset(out, 0, sizeof *out);
    get_once(c, ready ? "/readyz" : "/healthz", &ctx, call, &ans);
    lease_code_t code = LEASE_BACKEND_UNAVAILABLE;
    json_t *root = ans.body ? json_loadb(ans.body, ans.len, 0, NULL) : NULL;
    if (ans.transport == CLIENT_ANSWERED && json_is_object(root)) {
        const json_t *status = json_object_get(root, "status");
        const json_t *reason = json_object_get(root, "reason");
        const json_t *version = json_object_get(root, "schema_version");
        if (json_is_string(status))
            snprintf(out->status, sizeof out->status, "%s", json_string_value(status));
        if (json_is_string(reason))
            snprintf(out->reason, sizeof out->reason, "%s", json_string_value(reason));
        if (json_is_integer(version))
            out->schema_version = (int)json_integer_value(version);
        if (ans.status == 200)
            code = LEASE_INSPECTED;
    }
    json_decref(root);
    client_envelope_t none = {0};
    settle(ctx.call, &ans, &none);
    client_http_answer_clear(&ans);
    return code;
}

/* The value of the unlabelled sample name in a Prometheus text body: a
 * line "name <integer>" (only digits, an optional sign, then the end of the
 * line). False when there is none or it is not an integer. */
static bool metric_sample(const char *body, const char *name, int64_t *value)
{
    size_t n = strlen(name);
    for (const char *line = body; *line;) {
        if (strncmp(line, name, n) != 0 || line[n] != ' ') {
            const char *nl = strchr(line, '\n');
            if (!nl)
                return false;
            line = nl + 1;
            continue;
        }
        char *end;
        errno = 0;
        long long v = strtoll(line + n + 1, &end, 10);
        if (errno || end == line + n + 1 || (*end != '\n' && *end != '\0'))
            return false;
        *value = v;
        return true;
    }
    return false;
}

lease_code_t lease_client_metric(lease_client_t *c, const char *name, lease_client_call_t *call,
                                 int64_t *value)
{
    call_ctx_t ctx;
    client_http_answer_t ans;
    *value = 0;
    get_once(c, "/metrics", &ctx, call, &ans);
    lease_code_t code = LEASE_BACKEND_UNAVAILABLE;
    if (ans.transport == CLIENT_ANSWERED && ans.status == 200 && ans.body)
        code = metric_sample(ans.body, name, value) ? LEASE_INSPECTED : LEASE_NOT_FOUND;
    client_envelope_t none = {0};
    settle(ctx.call, &ans, &none);
    client_http_answer_clear(&ans);
    return code;
}
