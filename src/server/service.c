/*
 * service.c - the lease operations: deadline, authorisation, digest, store
 * call, bounded waiting and audit of everything the store does not audit.
 *
 * Authorisation rules (docs/api.md, "Authentication and scope"):
 * - mutations (acquire, renew, release, commit) need the identity inside
 *   the caller's tenant/program/actor scope, else access_denied; whether
 *   the caller owns the lease is the store's decision and answers
 *   lease_lost, never "not found";
 * - force-release and revoke additionally need an administrator credential;
 * - reads: a request that names a scope itself (inspect by lock_identity,
 *   list by target or program, list by owner with tenant_id/program_id)
 *   outside the caller's tenant/program/actor scope answers access_denied:
 *   the caller named it, so the answer discloses nothing it did not know.
 *   An opaque lease_id names no scope: its read passes the caller's scope
 *   to the store, which answers lease_not_found for a lease outside it,
 *   the same as for one that does not exist. Lists pass the scope too, so
 *   an actor-restricted credential sees only its actors' leases;
 * - list by target or program needs targets:read, list by owner also
 *   allows targets:lease; by owner, tenant_id and program_id default to
 *   the credential's own (an administrator credential of every program,
 *   "*", must name program_id).
 */
#include "service.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lease/clock.h"
#include "lease/digest.h"
#include "lease/log.h"
#include "copy_text.h"

/* Acquire waiting: exponential backoff from BACKOFF_MIN_MS to
 * BACKOFF_MAX_MS with full jitter, and at least ATTEMPT_MARGIN_MS left
 * before the deadline for an attempt to be worth sending. */
#define BACKOFF_MIN_MS 25
#define BACKOFF_MAX_MS 500
#define ATTEMPT_MARGIN_MS 20
/* Retry hint for 503s when the store gives none. */
#define UNAVAILABLE_RETRY_MS 1000

struct leased_service {
    lease_store_t *store;
    lease_auth_t *auth;
    leased_audit_queue_t *audit;
    leased_service_config_t cfg;
    int stop_waiting; /* atomic */
    /* The highest fencing token any answer carried since start (atomic;
     * leased_service_fencing_token_max, docs/operators.md "Recovery"). */
    int64_t fencing_token_max;
};

/* An operation's description (lease/operations.h). */
static const lease_operation_t *op_of(leased_op_t op)
{
    return lease_operation(op);
}

static lease_shape_t shape_of(const leased_request_t *req)
{
    return op_of(req->op)->shape;
}

/* The field of req's operation named name, or NULL. */
static const lease_field_t *field_named(const leased_request_t *req, const char *name)
{
    for (const lease_field_t *f = op_of(req->op)->fields; f->name; f++)
        if (strcmp(f->name, name) == 0)
            return f;
    return NULL;
}

/* The store request inside req: every shape's begins at the union. */
static void *store_req(leased_request_t *req)
{
    return &req->u;
}

static const void *store_req_const(const leased_request_t *req)
{
    return &req->u;
}

/* The identity the body named (its lock_identity field), or NULL when the
 * operation takes none. */
static const lease_identity_t *identity_of(const leased_request_t *req)
{
    const lease_field_t *f = field_named(req, "lock_identity");
    return f ? (const lease_identity_t *)(const void *)((const char *)store_req_const(req) +
                                                        f->offset)
             : NULL;
}

void leased_outcome_clear(leased_outcome_t *out)
{
    if (!out)
        return;
    lease_list_result_free(&out->list);
    free(out->items);
    out->items = NULL;
    out->n_items = 0;
}

leased_service_t *leased_service_new(lease_store_t *store, lease_auth_t *auth,
                                     leased_audit_queue_t *audit,
                                     const leased_service_config_t *cfg)
{
    leased_service_t *svc = calloc(1, sizeof *svc);
    if (!svc)
        return NULL;
    svc->store = store;
    svc->auth = auth;
    svc->audit = audit;
    svc->cfg = *cfg;
    return svc;
}

void leased_service_free(leased_service_t *svc)
{
    free(svc);
}

int64_t leased_service_fencing_token_max(const leased_service_t *svc)
{
    return __atomic_load_n(&svc->fencing_token_max, __ATOMIC_RELAXED);
}

/* Raises the remembered maximum to token: one relaxed load when it is not
 * higher (the usual case), a compare-and-swap loop when it is. */
static void remember_token(leased_service_t *svc, int64_t token)
{
    int64_t seen = __atomic_load_n(&svc->fencing_token_max, __ATOMIC_RELAXED);
    while (token > seen && !__atomic_compare_exchange_n(&svc->fencing_token_max, &seen, token,
                                                        true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

/* The highest fencing token an answer carries (its lease, the leases of a
 * list page, the items of a batch), 0 when none: what a recovery's floor
 * must stay above (leasectl recover --floor-from). */
static int64_t answer_token_max(const leased_outcome_t *out)
{
    int64_t max = out->lease.has_lease ? out->lease.lease.fencing_token : 0;
    for (size_t i = 0; i < out->list.count; i++)
        if (out->list.leases[i].fencing_token > max)
            max = out->list.leases[i].fencing_token;
    for (size_t i = 0; i < out->n_items; i++)
        if (out->items[i].has_lease && out->items[i].lease.fencing_token > max)
            max = out->items[i].lease.fencing_token;
    return max;
}

void leased_service_stop_waiting(leased_service_t *svc)
{
    __atomic_store_n(&svc->stop_waiting, 1, __ATOMIC_RELEASE);
}

void leased_service_begin(leased_op_ctx_t *ctx, leased_op_t op, const char *correlation_id,
                          const char *traceparent_trace_id, const char *source,
                          int64_t received_mono_ns)
{
    memset(ctx, 0, sizeof *ctx);
    ctx->op = op;
    leased_copy_text(ctx->source, sizeof ctx->source, source ? source : "");
    leased_copy_text(ctx->correlation_id, sizeof ctx->correlation_id, correlation_id);
    leased_copy_text(ctx->trace_id, sizeof ctx->trace_id,
                     traceparent_trace_id ? traceparent_trace_id : "");
    ctx->received_mono_ns = received_mono_ns;
    /* the wall clock at receipt, derived from the monotonic age of the request */
    ctx->received_wall_ms =
        lease_wall_now_ms() - (lease_mono_now_ns() - received_mono_ns) / 1000000;
}

/* The deadline of a request that has not named one yet (authentication). */
static lease_deadline_t default_deadline(const leased_service_t *svc, const leased_op_ctx_t *ctx)
{
    return lease_deadline_after(ctx->received_wall_ms, ctx->received_mono_ns,
                                svc->cfg.default_deadline_ms);
}

/* Resolves the request's deadline relative to its receipt: the client's
 * (deadline_ms or deadline_at), else the default; never beyond the cap.
 * Client times may lie anywhere in years 0000..9999: the offset saturates
 * instead of overflowing, and one in the past leaves a deadline that has
 * passed (deadline_exceeded, the database untouched). */
static void resolve_deadline(const leased_service_t *svc, const leased_op_ctx_t *ctx,
                             const leased_deadline_input_t *in, lease_call_t *call)
{
    int64_t rel = svc->cfg.default_deadline_ms;
    const char *cls = "default";
    if (in->kind == LEASED_DEADLINE_RELATIVE) {
        rel = in->ms;
        cls = "client";
    } else if (in->kind == LEASED_DEADLINE_ABSOLUTE) {
        rel = lease_time_sub_sat(in->ms, ctx->received_wall_ms);
        cls = "client";
    }
    if (rel > svc->cfg.max_deadline_ms) {
        rel = svc->cfg.max_deadline_ms;
        cls = "capped";
    }
    call->deadline = lease_deadline_after(ctx->received_wall_ms, ctx->received_mono_ns, rel);
    leased_copy_text(call->deadline_class, sizeof call->deadline_class, cls);
}

static const char *decision_of(lease_code_t code)
{
    if (lease_code_is_success(code))
        return "allow";
    switch (code) {
    case LEASE_DEADLINE_EXCEEDED:
    case LEASE_BACKEND_UNAVAILABLE:
    case LEASE_OUTCOME_UNKNOWN:
        return "error";
    default:
        return "deny";
    }
}

static const char *health_of(lease_code_t code)
{
    if (code == LEASE_BACKEND_UNAVAILABLE)
        return "unavailable";
    if (code == LEASE_OUTCOME_UNKNOWN || code == LEASE_DEADLINE_EXCEEDED)
        return "degraded";
    return "ok";
}

/* The audit event's columns a body field of the same name fills (its
 * other fields, the trace_id and maximum_lifetime_ms, are not audited). */
typedef struct event_column {
    const char *field;
    size_t offset;
    size_t size;
    bool is_int;
} event_column_t;

#define EVENT_TEXT(name, member)                                                                   \
    {                                                                                              \
        name, offsetof(lease_audit_event_t, member), sizeof(((lease_audit_event_t *)0)->member),   \
            false                                                                                  \
    }
#define EVENT_INT(name, member)                                                                    \
    {                                                                                              \
        name, offsetof(lease_audit_event_t, member), sizeof(int64_t), true                         \
    }

static const event_column_t event_columns[] = {
    EVENT_TEXT("lease_id", lease_id),
    EVENT_INT("fencing_token", fencing_token),
    EVENT_TEXT("service_instance_id", service_instance_id),
    EVENT_TEXT("execution_id", execution_id),
    EVENT_TEXT("job_id", job_id),
    EVENT_INT("ttl_ms", requested_ttl_ms),
    EVENT_TEXT("reason", reason),
    EVENT_TEXT("incident_id", incident_id),
};

/* Copies what the request says about the lease into the event: each body
 * field with an event column of its name, and the identity it names. */
static void event_from_request(lease_audit_event_t *ev, const leased_request_t *req)
{
    const lease_identity_t *id = NULL;
    const char *base = store_req_const(req);
    for (const lease_field_t *f = op_of(req->op)->fields; f->name; f++) {
        for (size_t i = 0; i < sizeof event_columns / sizeof event_columns[0]; i++) {
            const event_column_t *col = &event_columns[i];
            if (strcmp(col->field, f->name) != 0)
                continue;
            char *dst = (char *)ev + col->offset;
            if (col->is_int && f->size == sizeof(int64_t))
                memcpy(dst, base + f->offset, sizeof(int64_t));
            else if (!col->is_int)
                snprintf(dst, col->size, "%.*s", (int)strnlen(base + f->offset, f->size),
                         base + f->offset);
        }
    }
    if (shape_of(req) == LEASE_SHAPE_INSPECT || shape_of(req) == LEASE_SHAPE_GET) {
        if (req->u.inspect.by_identity)
            id = &req->u.inspect.identity;
        else
            leased_copy_text(ev->lease_id, sizeof ev->lease_id, req->u.inspect.lease_id);
    } else {
        id = identity_of(req);
    }
    /* The codec zeroes an identity it could not normalise, and a refused
     * body may not have reached it: only a complete one is recorded. */
    if (id && id->tenant_id[0] && id->operation_class[0]) {
        ev->has_identity = true;
        ev->identity = *id;
    }
}

/* Queues the audit event of one request outcome, or with count > 1 the
 * aggregated event of that many refused items of one batch (ids of the
 * first). Results of a lease that belongs to someone else are recorded
 * without its lease id and token unless the caller may see them. */
static void audit_n(leased_service_t *svc, const leased_op_ctx_t *ctx, const leased_request_t *req,
                    const lease_call_t *call, lease_code_t code, const lease_result_t *res,
                    int64_t count)
{
    if (!svc->audit || !op_of(ctx->op)->event_type)
        return; /* the probes are not audited */
    lease_audit_event_t ev;
    memset(&ev, 0, sizeof ev);
    ev.event_type = op_of(ctx->op)->event_type;
    if (!ctx->authenticated)
        ev.event_type = "target_lease_authenticate";
    else if (op_of(ctx->op)->shape == LEASE_SHAPE_COMMIT && lease_code_is_success(code))
        ev.event_type = "target_lease_commit"; /* a replayed commit */
    ev.occurred_at_ms = lease_wall_now_ms();
    ev.latency_ms = (lease_mono_now_ns() - ctx->received_mono_ns) / 1000000;
    ev.code = code;
    ev.decision = decision_of(code);
    ev.backend_health = health_of(code);
    if (call)
        ev.call = *call;
    leased_copy_text(ev.call.correlation_id, sizeof ev.call.correlation_id, ctx->correlation_id);
    if (!ev.call.trace_id[0])
        leased_copy_text(ev.call.trace_id, sizeof ev.call.trace_id, ctx->trace_id);
    if (ctx->authenticated)
        ev.call.principal = ctx->caller.principal;
    if (req)
        event_from_request(&ev, req);
    leased_copy_text(ev.source_address, sizeof ev.source_address, ctx->source);
    if (res && res->has_lease) {
        bool visible = ctx->authenticated && (strcmp(res->lease.owner_principal_id,
                                                     ctx->caller.principal.principal_id) == 0 ||
                                              lease_auth_has(&ctx->caller, LEASE_CAP_AUDIT_READ));
        ev.previous_state = res->lease.state;
        ev.resulting_state = res->lease.state;
        if (visible) {
            leased_copy_text(ev.lease_id, sizeof ev.lease_id, res->lease.lease_id);
            ev.fencing_token = res->lease.fencing_token;
        }
    }
    if (count > 1)
        ev.event_count = count;
    /* Refusals a caller can repeat at no cost to itself (no credential, or
     * over its rate) are counted per source and window, so a flood of them
     * costs the database one row per window, not one per request. */
    if (!ctx->authenticated || code == LEASE_RATE_LIMITED)
        leased_audit_queue_count(svc->audit, &ev);
    else
        leased_audit_queue_push(svc->audit, ctx->caller.scope.tenant_id, &ev);
}

static void audit(leased_service_t *svc, const leased_op_ctx_t *ctx, const leased_request_t *req,
                  const lease_call_t *call, lease_code_t code, const lease_result_t *res)
{
    audit_n(svc, ctx, req, call, code, res, 1);
}

void leased_service_audit_refusal(leased_service_t *svc, const leased_op_ctx_t *ctx,
                                  lease_code_t code, const leased_request_t *req)
{
    audit(svc, ctx, req, req ? leased_request_call_const(req) : NULL, code, NULL);
}

bool leased_service_authenticate(leased_service_t *svc, leased_op_ctx_t *ctx,
                                 const char *authorization, lease_auth_gate_t *gate,
                                 lease_code_t *code)
{
    lease_deadline_t dl = default_deadline(svc, ctx);
    if (lease_deadline_passed(&dl)) {
        *code = LEASE_DEADLINE_EXCEEDED;
    } else if (lease_auth_authenticate_gated(svc->auth, authorization, &dl, gate, &ctx->caller,
                                             code)) {
        ctx->authenticated = true;
        return true;
    }
    if (*code != LEASE_BACKEND_UNAVAILABLE && *code != LEASE_DEADLINE_EXCEEDED &&
        *code != LEASE_RATE_LIMITED)
        *code = LEASE_INVALID_CREDENTIAL; /* one answer for every way a credential fails */
    audit(svc, ctx, NULL, NULL, *code, NULL);
    return false;
}

bool leased_service_authorize(leased_service_t *svc, leased_op_ctx_t *ctx, unsigned caps_any,
                              lease_code_t *code)
{
    for (unsigned bit = 1; bit && bit <= caps_any; bit <<= 1)
        if ((caps_any & bit) && lease_auth_has(&ctx->caller, bit))
            return true;
    *code = LEASE_ACCESS_DENIED;
    audit(svc, ctx, NULL, NULL, *code, NULL);
    return false;
}

/* Fills the scope of a list by owner the request left out from the
 * credential; false (field set) when it cannot be: an administrator
 * credential of every program names the program itself. */
static bool default_owner_scope(const lease_caller_t *c, lease_list_req_t *l, char *field,
                                size_t fieldsz)
{
    if (!l->tenant_id[0])
        leased_copy_text(l->tenant_id, sizeof l->tenant_id, c->scope.tenant_id);
    if (!l->program_id[0]) {
        if (strcmp(c->scope.program_id, "*") == 0) {
            leased_copy_text(field, fieldsz, "program_id");
            return false;
        }
        leased_copy_text(l->program_id, sizeof l->program_id, c->scope.program_id);
    }
    return true;
}

/* Scope and administrator rules of one decoded request; LEASE_CODE_COUNT
 * when allowed. An LEASE_INVALID_LEASE_REQUEST names its field in field. */
static lease_code_t authorize_request(const leased_op_ctx_t *ctx, leased_request_t *req,
                                      char *field, size_t fieldsz)
{
    const lease_caller_t *c = &ctx->caller;
    switch (shape_of(req)) {
    case LEASE_SHAPE_OWNER_BATCH:
        /* one item outside scope refuses the batch: the caller named it */
        for (size_t i = 0; i < req->n_items; i++)
            if (!lease_auth_in_scope(c, &req->items[i].identity))
                return LEASE_ACCESS_DENIED;
        return LEASE_CODE_COUNT;
    case LEASE_SHAPE_GET:
    case LEASE_SHAPE_INSPECT:
        req->u.inspect.scope = c->scope;
        /* A named identity outside scope is forbidden (the caller named
         * it); a lease id outside scope is the store's lease_not_found. */
        if (req->u.inspect.by_identity && !lease_auth_in_scope(c, &req->u.inspect.identity))
            return LEASE_ACCESS_DENIED;
        return LEASE_CODE_COUNT;
    case LEASE_SHAPE_LIST: {
        lease_list_req_t *l = &req->u.list;
        if (l->by != LEASE_LIST_BY_OWNER && !lease_auth_has(c, LEASE_CAP_READ))
            return LEASE_ACCESS_DENIED;
        if (l->by == LEASE_LIST_BY_OWNER && !default_owner_scope(c, l, field, fieldsz))
            return LEASE_INVALID_LEASE_REQUEST;
        if (!lease_auth_program_in_scope(c, l->tenant_id, l->program_id))
            return LEASE_ACCESS_DENIED;
        l->scope = c->scope;
        leased_copy_text(l->owner_principal_id, sizeof l->owner_principal_id,
                         c->principal.principal_id);
        return LEASE_CODE_COUNT;
    }
    case LEASE_SHAPE_SESSION:
        /* a session lives in the credential's tenant; the database checks
         * that the session is the caller's (principal and credential) */
        leased_copy_text(req->u.session.tenant_id, sizeof req->u.session.tenant_id,
                         c->scope.tenant_id);
        return LEASE_CODE_COUNT;
    case LEASE_SHAPE_ADMIN:
        if (!c->admin)
            return LEASE_ACCESS_DENIED;
        break;
    case LEASE_SHAPE_NONE:
        return LEASE_ACCESS_DENIED;
    default:
        break;
    }
    /* the rest name one identity: it must be inside the caller's scope */
    const lease_identity_t *id = identity_of(req);
    return id && lease_auth_in_scope(c, id) ? LEASE_CODE_COUNT : LEASE_ACCESS_DENIED;
}

/* The digest of a batch's items: each that of the renewal or release it is. */
static bool digest_items(leased_request_t *req)
{
    const lease_operation_t *d = op_of(lease_operation_item(req->op));
    for (size_t i = 0; i < req->n_items; i++) {
        lease_owner_req_t *r = &req->items[i];
        if (!lease_digest_fields(d->name, &r->call, &r->identity, r, d->fields,
                                 r->call.request_digest))
            return false;
    }
    return true;
}

bool leased_service_digest(leased_request_t *req)
{
    lease_call_t *call = leased_request_call(req);
    const lease_operation_t *d = op_of(req->op);
    call->request_digest[0] = '\0';
    if (d->shape == LEASE_SHAPE_OWNER_BATCH)
        return digest_items(req);
    if (!d->mutates)
        return true;                    /* reads carry no digest */
    if (d->shape == LEASE_SHAPE_COMMIT) /* its writes have a form of their own */
        return lease_digest_commit(&req->u.commit, call->request_digest);
    if (d->shape == LEASE_SHAPE_SESSION) {
        /* no lock identity: the tenant and the session stand in for it */
        lease_identity_t where;
        memset(&where, 0, sizeof where);
        leased_copy_text(where.tenant_id, sizeof where.tenant_id, req->u.session.tenant_id);
        leased_copy_text(where.target_id, sizeof where.target_id, req->u.session.session_id);
        return lease_digest_fields(d->name, call, &where, store_req(req), d->fields,
                                   call->request_digest);
    }
    const lease_identity_t *id = identity_of(req);
    return id &&
           lease_digest_fields(d->name, call, id, store_req(req), d->fields, call->request_digest);
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/*
 * One attempt of acquire-if-free. When it conflicts and the request may
 * still wait, out->again_after_ms says when to try again: the caller
 * re-queues the request (no thread sleeps) and calls
 * leased_service_run_again, which uses the same request id and digest (a
 * conflict stores no idempotency record). The pause is jittered over
 * [backoff/2, backoff], backoff doubling from BACKOFF_MIN_MS to
 * BACKOFF_MAX_MS, never longer than the holder's own expiry hint, and only
 * taken when another attempt still fits ATTEMPT_MARGIN_MS before the
 * deadline: waiting never outlives the wait window or the deadline.
 */
static lease_code_t acquire_attempt(leased_service_t *svc, const leased_op_ctx_t *ctx,
                                    leased_request_t *req, leased_outcome_t *out)
{
    memset(&out->lease, 0, sizeof out->lease);
    out->again_after_ms = 0;
    int64_t started = lease_mono_now_ns();
    lease_code_t code = lease_store_acquire(svc->store, &req->u.acquire, &out->lease);
    /* waited_ms: receipt to the start of the granting attempt, on this
     * clock only; the client adds it to its send time (docs/executor.md) */
    if (code == LEASE_ACQUIRED && out->attempts > 0 && !out->lease.replayed)
        out->lease.waited_ms = lease_time_sub_sat(started, ctx->received_mono_ns) / 1000000;
    out->attempts++;
    if (code != LEASE_CONFLICT || req->wait_ms == 0 ||
        __atomic_load_n(&svc->stop_waiting, __ATOMIC_ACQUIRE))
        return code;
    int64_t now = lease_mono_now_ns();
    int64_t wait_end = lease_time_add_sat(ctx->received_mono_ns, lease_ms_to_ns_sat(req->wait_ms));
    int64_t wait_left = lease_time_sub_sat(wait_end, now) / 1000000;
    int64_t deadline_left =
        lease_time_sub_sat(req->u.acquire.call.deadline.mono_ns, now) / 1000000 - ATTEMPT_MARGIN_MS;
    int64_t room = min64(wait_left, deadline_left);
    if (room <= 0)
        return code;
    int64_t backoff = out->backoff_ms > 0 ? out->backoff_ms : BACKOFF_MIN_MS;
    int64_t pause = backoff / 2 + (int64_t)lease_jitter((uint64_t)(backoff / 2 + 1));
    if (out->lease.retry_after_ms > 0 && out->lease.retry_after_ms < pause)
        pause = out->lease.retry_after_ms;
    out->again_after_ms = pause < room ? pause : room;
    if (out->again_after_ms < 1)
        out->again_after_ms = 1;
    out->backoff_ms = min64(backoff * 2, BACKOFF_MAX_MS);
    LEASE_LOG(LEASE_LOG_DEBUG, NULL, "acquire conflict, attempt %d, again in %lld ms",
              out->attempts, (long long)out->again_after_ms);
    return code;
}

/*
 * The inspect of a watch. A caller with targets:read sees what inspect
 * shows; a caller with only targets:lease watches its own leases: another
 * principal's lease answers lease_not_found, as one out of scope does.
 */
static lease_code_t watch_inspect(leased_service_t *svc, const leased_op_ctx_t *ctx,
                                  leased_request_t *req, leased_outcome_t *out)
{
    lease_code_t code = lease_store_inspect(svc->store, &req->u.inspect, &out->lease);
    if (code == LEASE_INSPECTED && !lease_auth_has(&ctx->caller, LEASE_CAP_READ) &&
        strcmp(out->lease.lease.owner_principal_id, ctx->caller.principal.principal_id) != 0) {
        memset(&out->lease, 0, sizeof out->lease);
        out->lease.code = LEASE_NOT_FOUND;
        code = LEASE_NOT_FOUND;
    }
    return code;
}

static bool replayed(const leased_request_t *req, const leased_outcome_t *out)
{
    return shape_of(req) == LEASE_SHAPE_COMMIT ? out->commit.replayed : out->lease.replayed;
}

/* The store calls (lease/operations.h, STORE): one per operation, named
 * there; batches call the store in owner_batch. */
typedef lease_code_t (*store_fn)(leased_service_t *svc, const leased_op_ctx_t *ctx,
                                 leased_request_t *req, leased_outcome_t *out);

static lease_code_t store_acquire(leased_service_t *svc, const leased_op_ctx_t *ctx,
                                  leased_request_t *req, leased_outcome_t *out)
{
    return acquire_attempt(svc, ctx, req, out);
}

static lease_code_t store_renew(leased_service_t *svc, const leased_op_ctx_t *ctx,
                                leased_request_t *req, leased_outcome_t *out)
{
    (void)ctx;
    return lease_store_renew(svc->store, &req->u.owner, &out->lease);
}

static lease_code_t store_release(leased_service_t *svc, const leased_op_ctx_t *ctx,
                                  leased_request_t *req, leased_outcome_t *out)
{
    (void)ctx;
    return lease_store_release(svc->store, &req->u.owner, &out->lease);
}

static lease_code_t store_force_release(leased_service_t *svc, const leased_op_ctx_t *ctx,
                                        leased_request_t *req, leased_outcome_t *out)
{
    (void)ctx;
    return lease_store_force_release(svc->store, &req->u.admin, &out->lease);
}

static lease_code_t store_revoke(leased_service_t *svc, const leased_op_ctx_t *ctx,
                                 leased_request_t *req, leased_outcome_t *out)
{
    (void)ctx;
    return lease_store_revoke(svc->store, &req->u.admin, &out->lease);
}

static lease_code_t store_inspect(leased_service_t *svc, const leased_op_ctx_t *ctx,
                                  leased_request_t *req, leased_outcome_t *out)
{
    (void)ctx;
    return lease_store_inspect(svc->store, &req->u.inspect, &out->lease);
}

static lease_code_t store_watch(leased_service_t *svc, const leased_op_ctx_t *ctx,
                                leased_request_t *req, leased_outcome_t *out)
{
    return watch_inspect(svc, ctx, req, out);
}

static lease_code_t store_list(leased_service_t *svc, const leased_op_ctx_t *ctx,
                               leased_request_t *req, leased_outcome_t *out)
{
    (void)ctx;
    return lease_store_list(svc->store, &req->u.list, &out->list);
}

static lease_code_t store_commit(leased_service_t *svc, const leased_op_ctx_t *ctx,
                                 leased_request_t *req, leased_outcome_t *out)
{
    (void)ctx;
    return lease_store_fenced_commit(svc->store, &req->u.commit, &out->commit);
}

static lease_code_t store_session_open(leased_service_t *svc, const leased_op_ctx_t *ctx,
                                       leased_request_t *req, leased_outcome_t *out)
{
    (void)ctx;
    return lease_store_session_open(svc->store, &req->u.session, &out->lease);
}

static lease_code_t store_session_keepalive(leased_service_t *svc, const leased_op_ctx_t *ctx,
                                            leased_request_t *req, leased_outcome_t *out)
{
    (void)ctx;
    return lease_store_session_keepalive(svc->store, &req->u.session, &out->lease);
}

static lease_code_t store_session_close(leased_service_t *svc, const leased_op_ctx_t *ctx,
                                        leased_request_t *req, leased_outcome_t *out)
{
    (void)ctx;
    return lease_store_session_close(svc->store, &req->u.session, &out->lease);
}

/* Batches: the store is called in owner_batch; the probes call none. */
#define store_renew_many NULL
#define store_release_many NULL
#define store_none NULL

static const store_fn store_calls[LEASED_OP_COUNT] = {
#define STORE_CALL(ID, METHOD, PATH, NAME, CAPS, MUTATES, SHAPE, HANDLER, EVENT, STORE, FIELDS)    \
    [LEASED_OP_##ID] = store_##STORE,
    LEASE_OPERATIONS(STORE_CALL)
#undef STORE_CALL
};

static lease_code_t call_store(leased_service_t *svc, const leased_op_ctx_t *ctx,
                               leased_request_t *req, leased_outcome_t *out)
{
    store_fn fn = (unsigned)req->op < LEASED_OP_COUNT ? store_calls[req->op] : NULL;
    return fn ? fn(svc, ctx, req, out) : LEASE_BACKEND_UNAVAILABLE;
}

/* Copies the typed details of the store's answer into the outcome. */
static void take_details(leased_request_t *req, leased_outcome_t *out)
{
    const char *field = "";
    switch (shape_of(req)) {
    case LEASE_SHAPE_LIST:
        field = out->list.field;
        break;
    case LEASE_SHAPE_COMMIT:
        field = out->commit.field;
        out->retry_after_ms = out->commit.retry_after_ms;
        if (out->code == LEASE_WRITE_CONFLICT)
            out->current_revision = out->commit.current_revision;
        break;
    default:
        field = out->lease.field;
        out->retry_after_ms = out->lease.retry_after_ms;
        out->reason = out->lease.reason[0] ? out->lease.reason : NULL;
        /* a human detail only where it is the database's answer about the
         * request itself (bounds), never about the backend */
        if (out->code == LEASE_INVALID_LEASE_REQUEST && out->lease.detail[0])
            out->detail = out->lease.detail;
        break;
    }
    if (out->code == LEASE_INVALID_LEASE_REQUEST || out->code == LEASE_WRITE_CONFLICT)
        leased_copy_text(out->field, sizeof out->field, field);
    if ((out->code == LEASE_BACKEND_UNAVAILABLE || out->code == LEASE_OUTCOME_UNKNOWN) &&
        out->retry_after_ms <= 0)
        out->retry_after_ms = UNAVAILABLE_RETRY_MS;
    if (!lease_code_retryable(out->code))
        out->retry_after_ms = 0;
}

/* Each item of a batch takes the batch's call (deadline, correlation,
 * caller, trace) and keeps its own request id (and, later, digest). */
static void complete_items(leased_request_t *req)
{
    const lease_call_t *batch = &req->u.owner.call;
    for (size_t i = 0; i < req->n_items; i++) {
        lease_call_t *c = &req->items[i].call;
        c->deadline = batch->deadline;
        leased_copy_text(c->deadline_class, sizeof c->deadline_class, batch->deadline_class);
        leased_copy_text(c->correlation_id, sizeof c->correlation_id, batch->correlation_id);
        leased_copy_text(c->trace_id, sizeof c->trace_id, batch->trace_id);
        c->received_mono_ns = batch->received_mono_ns;
        c->principal = batch->principal;
    }
}

/*
 * Many renewals or releases in one store call (complete_items has run):
 * each keeps its own request id and digest. The store audits the items
 * that changed state; here a replayed item is audited as its own renewal
 * or release would be, and the refused items are one aggregated event per
 * code (the first such item's ids, event_count = how many), as other
 * refusals are: a batch of 100 refused items costs the audit one event,
 * not 100 (docs/contract.md leased-2). Returns LEASE_RENEWED /
 * LEASE_RELEASED when the batch was decided.
 */
static lease_code_t owner_batch(leased_service_t *svc, const leased_op_ctx_t *ctx,
                                leased_request_t *req, leased_outcome_t *out)
{
    leased_op_t item_op = lease_operation_item(req->op);
    bool renew = item_op == LEASED_OP_RENEW;
    const lease_call_t *batch = &req->u.owner.call;
    size_t n = req->n_items;
    out->items = calloc(n, sizeof *out->items);
    leased_request_t *one = leased_request_new(item_op);
    if (!out->items || !one) {
        leased_request_free(one);
        free(out->items);
        out->items = NULL;
        out->code = LEASE_BACKEND_UNAVAILABLE;
        return out->code;
    }
    out->code =
        renew ? lease_store_renew_many(svc->store, req->items, n, &batch->deadline, out->items)
              : lease_store_release_many(svc->store, req->items, n, &batch->deadline, out->items);
    if (out->code != (renew ? LEASE_RENEWED : LEASE_RELEASED)) {
        free(out->items);
        out->items = NULL;
        leased_request_free(one);
        return out->code;
    }
    out->n_items = n;
    leased_op_ctx_t item_ctx = *ctx;
    item_ctx.op = item_op;
    /* refused items per code: the first one's index and how many */
    size_t first[LEASE_CODE_COUNT];
    int64_t refused[LEASE_CODE_COUNT] = {0};
    for (size_t i = 0; i < n; i++) {
        const lease_result_t *r = &out->items[i];
        if (lease_code_is_success(r->code)) {
            if (!r->replayed)
                continue; /* audited by the store */
            one->u.owner = req->items[i];
            audit(svc, &item_ctx, one, &one->u.owner.call, r->code, r);
        } else if ((size_t)r->code < LEASE_CODE_COUNT && refused[r->code]++ == 0) {
            first[r->code] = i;
        }
    }
    for (size_t c = 0; c < LEASE_CODE_COUNT; c++) {
        if (refused[c] == 0)
            continue;
        one->u.owner = req->items[first[c]];
        audit_n(svc, &item_ctx, one, &one->u.owner.call, (lease_code_t)c, &out->items[first[c]],
                refused[c]);
    }
    leased_request_free(one);
    return out->code;
}

/* The end of a request that was refused before reaching the store. */
static lease_code_t finish_refused(leased_service_t *svc, const leased_op_ctx_t *ctx,
                                   leased_request_t *req, leased_outcome_t *out)
{
    if ((out->code == LEASE_BACKEND_UNAVAILABLE || out->code == LEASE_OUTCOME_UNKNOWN) &&
        out->retry_after_ms <= 0)
        out->retry_after_ms = UNAVAILABLE_RETRY_MS;
    audit(svc, ctx, req, leased_request_call(req), out->code, NULL);
    return out->code;
}

/* The end of a request the store answered: typed details, then audit of
 * everything the store did not audit itself (it audits mutations that
 * changed state, inside their transaction; replays are audited here). */
static lease_code_t finish(leased_service_t *svc, const leased_op_ctx_t *ctx, leased_request_t *req,
                           leased_outcome_t *out)
{
    take_details(req, out);
    remember_token(svc, answer_token_max(out));
    if (op_of(req->op)->mutates && lease_code_is_success(out->code) && !replayed(req, out))
        return out->code;
    bool lease_answer = shape_of(req) != LEASE_SHAPE_LIST && shape_of(req) != LEASE_SHAPE_COMMIT;
    audit(svc, ctx, req, leased_request_call(req), out->code, lease_answer ? &out->lease : NULL);
    return out->code;
}

/* Whether the store handed a serialization retry back (store.h): then the
 * request is not answered yet, and comes back after the store's pause. */
static bool store_yielded(leased_outcome_t *out)
{
    if (out->store_retry.again_after_ms <= 0)
        return false;
    out->again_after_ms = out->store_retry.again_after_ms;
    return true;
}

/* The store call of a request that passed the checks (again after a
 * pause, the same call): its answer made final, or handed back. */
static lease_code_t store_step(leased_service_t *svc, leased_op_ctx_t *ctx, leased_request_t *req,
                               leased_outcome_t *out)
{
    if (shape_of(req) == LEASE_SHAPE_OWNER_BATCH) {
        lease_code_t decided = lease_operation_decided(req->op);
        if (owner_batch(svc, ctx, req, out) == decided) {
            remember_token(svc, answer_token_max(out));
            return out->code;
        }
        if (store_yielded(out))
            return out->code;
        take_details(req, out);
        return finish_refused(svc, ctx, req, out);
    }
    out->code = call_store(svc, ctx, req, out);
    if (out->again_after_ms > 0 || store_yielded(out))
        return out->code; /* not final: the caller comes back */
    return finish(svc, ctx, req, out);
}

lease_code_t leased_service_run(leased_service_t *svc, leased_op_ctx_t *ctx, leased_request_t *req,
                                leased_outcome_t *out)
{
    lease_call_t *call = leased_request_call(req);
    memset(out, 0, sizeof *out);
    out->current_revision = -1;

    resolve_deadline(svc, ctx, &req->deadline, call);
    leased_copy_text(call->correlation_id, sizeof call->correlation_id, ctx->correlation_id);
    call->received_mono_ns = ctx->received_mono_ns;
    call->principal = ctx->caller.principal;
    /* trace: a body trace_id wins over traceparent */
    if (shape_of(req) == LEASE_SHAPE_ACQUIRE) {
        if (!req->u.acquire.trace_id[0])
            leased_copy_text(req->u.acquire.trace_id, sizeof req->u.acquire.trace_id,
                             ctx->trace_id);
        leased_copy_text(call->trace_id, sizeof call->trace_id, req->u.acquire.trace_id);
    } else if (shape_of(req) == LEASE_SHAPE_COMMIT) {
        leased_copy_text(call->trace_id, sizeof call->trace_id, req->u.commit.trace_id);
    } else if (!call->trace_id[0]) {
        /* a body field may name the call's trace (lease/operations.h: a
         * row whose member is call.trace_id); none does today */
        leased_copy_text(call->trace_id, sizeof call->trace_id, ctx->trace_id);
    }

    bool batch = shape_of(req) == LEASE_SHAPE_OWNER_BATCH;
    if (batch)
        complete_items(req);

    /* refusals that need no database; LEASE_CODE_COUNT means none */
    lease_code_t refusal = authorize_request(ctx, req, out->field, sizeof out->field);
    if (refusal == LEASE_CODE_COUNT && lease_deadline_passed(&call->deadline))
        refusal = LEASE_DEADLINE_EXCEEDED;
    if (refusal == LEASE_CODE_COUNT && !leased_service_digest(req)) {
        LOG_ERROR("request digest could not be computed");
        refusal = LEASE_BACKEND_UNAVAILABLE;
    }
    if (refusal != LEASE_CODE_COUNT) {
        out->code = refusal;
        return finish_refused(svc, ctx, req, out);
    }
    /* serialization retries pause with no thread held: the store hands
     * them back (store.h, lease_retry_t) and the caller re-queues the
     * request (a watch's inspect keeps its own pace: it sleeps) */
    if (req->op != LEASED_OP_WATCH) {
        out->store_retry.yield = true;
        if (batch && req->n_items > 0)
            req->items[0].call.retry = &out->store_retry; /* the batch's one call */
        else
            call->retry = &out->store_retry;
    }
    return store_step(svc, ctx, req, out);
}

bool leased_service_recheck(leased_service_t *svc, const leased_op_ctx_t *ctx,
                            const lease_deadline_t *deadline, lease_code_t *code)
{
    if (!svc->auth || !ctx->authenticated)
        return true;
    lease_deadline_t fallback;
    if (!deadline) {
        fallback = lease_deadline_in(svc->cfg.default_deadline_ms);
        deadline = &fallback;
    }
    return lease_auth_recheck(svc->auth, &ctx->caller, deadline, code);
}

bool leased_service_retrying(const leased_outcome_t *out)
{
    return out->store_retry.again_after_ms > 0;
}

lease_code_t leased_service_run_again(leased_service_t *svc, leased_op_ctx_t *ctx,
                                      leased_request_t *req, leased_outcome_t *out)
{
    /* the store's own retry after its pause: the same call again */
    if (leased_service_retrying(out)) {
        out->again_after_ms = 0;
        return store_step(svc, ctx, req, out);
    }
    /* The pause was planned to end before the deadline; a busy machine may
     * run it late. Then the answer is the conflict this request already
     * saw (true when it was seen), not deadline_exceeded for an attempt
     * that never began. */
    if (lease_deadline_passed(&req->u.acquire.call.deadline)) {
        out->again_after_ms = 0;
        return finish(svc, ctx, req, out);
    }
    /* Every attempt after the first decides only with a credential still
     * valid now: one revoked or expired while the request waited ends it
     * with 401, never with a grant. */
    lease_code_t code;
    if (!leased_service_recheck(svc, ctx, &req->u.acquire.call.deadline, &code)) {
        out->again_after_ms = 0;
        memset(&out->lease, 0, sizeof out->lease);
        out->code = code;
        out->retry_after_ms = 0;
        return finish_refused(svc, ctx, req, out);
    }
    out->code = acquire_attempt(svc, ctx, req, out);
    if (out->again_after_ms > 0 || store_yielded(out))
        return out->code;
    return finish(svc, ctx, req, out);
}

bool leased_service_cached_tenant(leased_service_t *svc, const char *authorization, char *tenant)
{
    return svc->auth && lease_auth_cached_tenant(svc->auth, authorization, tenant);
}
