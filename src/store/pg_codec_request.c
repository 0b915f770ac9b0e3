/*
 * pg_codec_request.c - encodes store.h requests as the jsonb argument of the
 * SQL functions (docs/sql-api.md, "Common request fields" and "Functions").
 *
 * Empty optional strings are omitted rather than sent as "", so the SQL side
 * sees "absent" exactly where the caller had nothing. Embedded JSON
 * (metadata, write bodies) is parsed here so a malformed value is reported
 * as that request field instead of as a backend failure.
 */
#include "pg_codec.h"

#include "lease/json_text.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Offending field names with an index ("writes[3].body") live here. */
static __thread char field_buf[LEASE_FIELD_MAX + 1];

static const char *indexed_field(const char *list, size_t i, const char *leaf)
{
    snprintf(field_buf, sizeof field_buf, "%s[%zu].%s", list, i, leaf);
    return field_buf;
}

/* json_object_set_new that remembers failure (out of memory) in *ok. */
static void put(json_t *o, const char *k, json_t *v, bool *ok)
{
    if (!v || json_object_set_new(o, k, v) != 0)
        *ok = false;
}

static void put_str_opt(json_t *o, const char *k, const char *v, bool *ok)
{
    if (v && *v)
        put(o, k, json_string(v), ok);
}

static void put_str(json_t *o, const char *k, const char *v, bool *ok)
{
    put(o, k, json_string(v ? v : ""), ok);
}

/* o when everything went into it; otherwise NULL, and o is freed. */
static json_t *built(json_t *o, bool ok)
{
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* The identity fields, into a lock_identity object or an audit event. */
static void put_identity(json_t *o, const lease_identity_t *id, bool *ok)
{
    put_str(o, "tenant_id", id->tenant_id, ok);
    put_str(o, "program_id", id->program_id, ok);
    put_str(o, "target_namespace", id->target_namespace, ok);
    put_str(o, "target_id", id->target_id, ok);
    put_str(o, "actor_name", id->actor_name, ok);
    put_str(o, "workflow_name", id->workflow_name, ok);
    put_str(o, "operation_class", id->operation_class[0] ? id->operation_class : "default", ok);
}

static json_t *identity_json(const lease_identity_t *id)
{
    json_t *o = json_object();
    bool ok = o != NULL;
    if (!ok)
        return NULL;
    put_identity(o, id, &ok);
    return built(o, ok);
}

/* The lease a holder or an administrator names. */
static void put_lease_ref(json_t *o, const lease_identity_t *id, const char *lease_id,
                          int64_t fencing_token, bool *ok)
{
    put(o, "lock_identity", identity_json(id), ok);
    put_str(o, "lease_id", lease_id, ok);
    put(o, "fencing_token", json_integer(fencing_token), ok);
}

static json_t *scope_json(const lease_scope_t *scope)
{
    json_t *o = json_object();
    json_t *actors = json_array();
    bool ok = o && actors;
    if (ok) {
        if (scope->all_actors || scope->n_actors == 0) {
            /* n_actors 0 with all_actors false would match nothing; the
             * service never builds that, but "*" must be asked for */
            if (scope->all_actors)
                ok = json_array_append_new(actors, json_string("*")) == 0;
        } else {
            size_t n =
                scope->n_actors < LEASE_SCOPE_ACTORS_MAX ? scope->n_actors : LEASE_SCOPE_ACTORS_MAX;
            for (size_t i = 0; ok && i < n; i++)
                ok = json_array_append_new(actors, json_string(scope->actor_names[i])) == 0;
        }
    }
    if (ok) {
        put_str(o, "tenant_id", scope->tenant_id, &ok);
        put_str(o, "program_id", scope->program_id, &ok);
        put(o, "actor_names", actors, &ok);
        actors = NULL;
    }
    json_decref(actors);
    return built(o, ok);
}

/* The fields every request carries. */
static json_t *common_json(const lease_call_t *call, int64_t now_mono_ns)
{
    json_t *o = json_object();
    bool ok = o != NULL;
    if (!ok)
        return NULL;
    char deadline[LEASE_TIME_LEN + 1];
    lease_time_format(call->deadline.wall_ms, deadline);
    put_str(o, "deadline_at", deadline, &ok);
    put_str_opt(o, "request_id", call->request_id, &ok);
    put_str_opt(o, "request_digest", call->request_digest, &ok);
    put_str_opt(o, "correlation_id", call->correlation_id, &ok);
    put_str_opt(o, "trace_id", call->trace_id, &ok);
    put_str_opt(o, "deadline_class", call->deadline_class, &ok);
    int64_t latency_ms = 0;
    if (call->received_mono_ns > 0 && now_mono_ns > call->received_mono_ns)
        latency_ms = (now_mono_ns - call->received_mono_ns) / 1000000;
    put(o, "latency_ms", json_integer(latency_ms), &ok);
    if (call->principal.principal_id[0]) {
        json_t *p = json_object();
        bool pok = p != NULL;
        if (pok) {
            put_str(p, "principal_id", call->principal.principal_id, &pok);
            put_str_opt(p, "client_id", call->principal.client_id, &pok);
            put_str_opt(p, "credential_id", call->principal.credential_id, &pok);
            put_str_opt(p, "principal_class", call->principal.principal_class, &pok);
        }
        if (!pok) {
            json_decref(p);
            ok = false;
        } else {
            put(o, "principal", p, &ok);
        }
    }
    return built(o, ok);
}

/* Serializes and frees `o`; NULL when o is NULL or out of memory. Reals
 * (metadata, write bodies) go out in their shortest form: jsonb keeps the
 * decimal text, and 0.1 must not be stored as 0.10000000000000001. */
static char *finish(json_t *o, bool ok)
{
    char *text = NULL;
    if (o && ok)
        text = lease_json_dumps(o, 0);
    json_decref(o);
    return text;
}

char *store_pg_encode_acquire(const lease_acquire_req_t *req, int64_t now_mono_ns,
                              const char **bad_field)
{
    *bad_field = NULL;
    json_t *o = common_json(&req->call, now_mono_ns);
    bool ok = o != NULL;
    if (!ok)
        return NULL;
    put(o, "lock_identity", identity_json(&req->identity), &ok);
    put_str(o, "service_instance_id", req->service_instance_id, &ok);
    put_str(o, "execution_id", req->execution_id, &ok);
    put_str(o, "job_id", req->job_id, &ok);
    /* the lease stores the acquire's own trace id, else the call's */
    put_str_opt(o, "trace_id", req->trace_id[0] ? req->trace_id : req->call.trace_id, &ok);
    if (req->ttl_ms > 0)
        put(o, "ttl_ms", json_integer(req->ttl_ms), &ok);
    if (req->maximum_lifetime_ms > 0)
        put(o, "maximum_lifetime_ms", json_integer(req->maximum_lifetime_ms), &ok);
    /* absent means {} in SQL too (lease._metadata): the empty object every
     * request without metadata carries is not sent to be validated again */
    if (ok && req->metadata_json[0] && strcmp(req->metadata_json, "{}") != 0) {
        json_t *meta = store_pg_parse_object(req->metadata_json);
        if (!meta) {
            *bad_field = "metadata";
            ok = false;
        } else {
            put(o, "metadata", meta, &ok);
        }
    }
    return finish(o, ok);
}

/* The opening of a renewal, release, revoke or forced release: a call on a
 * lease the caller names. NULL when out of memory; else *ok is true. */
static json_t *held_lease_json(const lease_call_t *call, int64_t now_mono_ns,
                               const lease_identity_t *id, const char *lease_id,
                               int64_t fencing_token, bool *ok)
{
    json_t *o = common_json(call, now_mono_ns);
    *ok = o != NULL;
    if (!o)
        return NULL;
    put_lease_ref(o, id, lease_id, fencing_token, ok);
    return o;
}

char *store_pg_encode_owner(store_pg_op_t op, const lease_owner_req_t *req, int64_t now_mono_ns,
                            const char **bad_field)
{
    *bad_field = NULL;
    bool ok;
    json_t *o = held_lease_json(&req->call, now_mono_ns, &req->identity, req->lease_id,
                                req->fencing_token, &ok);
    if (!o)
        return NULL;
    put_str(o, "service_instance_id", req->service_instance_id, &ok);
    if (op == STORE_PG_OP_RENEW && req->ttl_ms > 0)
        put(o, "ttl_ms", json_integer(req->ttl_ms), &ok);
    return finish(o, ok);
}

/* op: STORE_PG_OP_RENEW or STORE_PG_OP_RELEASE, the items' operation. */
static char *encode_many(store_pg_op_t op, const lease_owner_req_t *reqs, size_t n,
                         int64_t now_mono_ns, const char **bad_field)
{
    /* each item's text is exactly a renewal's (release's): the batch only
     * wraps them */
    *bad_field = NULL;
    const char *list = op == STORE_PG_OP_RENEW ? "renewals" : "releases";
    size_t len, cap = 4096;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    len = (size_t)snprintf(out, cap, "{\"%s\":[", list);
    for (size_t i = 0; i < n; i++) {
        const char *item_bad = NULL;
        char *item = store_pg_encode_owner(op, &reqs[i], now_mono_ns, &item_bad);
        if (!item) {
            if (item_bad)
                *bad_field = indexed_field(list, i, item_bad);
            free(out);
            return NULL;
        }
        size_t ilen = strlen(item);
        if (len + ilen + 4 > cap) {
            while (len + ilen + 4 > cap)
                cap *= 2;
            char *grown = realloc(out, cap);
            if (!grown) {
                free(item);
                free(out);
                return NULL;
            }
            out = grown;
        }
        if (i > 0)
            out[len++] = ',';
        memcpy(out + len, item, ilen);
        len += ilen;
        free(item);
    }
    memcpy(out + len, "]}", 3);
    return out;
}

char *store_pg_encode_renew_many(const lease_owner_req_t *reqs, size_t n, int64_t now_mono_ns,
                                 const char **bad_field)
{
    return encode_many(STORE_PG_OP_RENEW, reqs, n, now_mono_ns, bad_field);
}

char *store_pg_encode_release_many(const lease_owner_req_t *reqs, size_t n, int64_t now_mono_ns,
                                   const char **bad_field)
{
    return encode_many(STORE_PG_OP_RELEASE, reqs, n, now_mono_ns, bad_field);
}

char *store_pg_encode_admin(store_pg_op_t op, const lease_admin_req_t *req, int64_t now_mono_ns,
                            const char **bad_field)
{
    *bad_field = NULL;
    bool ok;
    json_t *o = held_lease_json(&req->call, now_mono_ns, &req->identity, req->lease_id,
                                req->fencing_token, &ok);
    if (!o)
        return NULL;
    put_str(o, "reason", req->reason, &ok);
    if (op == STORE_PG_OP_REVOKE)
        put_str_opt(o, "incident_id", req->incident_id, &ok);
    return finish(o, ok);
}

char *store_pg_encode_inspect(const lease_inspect_req_t *req, int64_t now_mono_ns,
                              const char **bad_field)
{
    *bad_field = NULL;
    json_t *o = common_json(&req->call, now_mono_ns);
    bool ok = o != NULL;
    if (!ok)
        return NULL;
    put(o, "scope", scope_json(&req->scope), &ok);
    if (req->by_identity)
        put(o, "lock_identity", identity_json(&req->identity), &ok);
    else
        put_str(o, "lease_id", req->lease_id, &ok);
    return finish(o, ok);
}

store_pg_op_t store_pg_list_op(lease_list_by_t by)
{
    switch (by) {
    case LEASE_LIST_BY_OWNER:
        return STORE_PG_OP_LIST_BY_OWNER;
    case LEASE_LIST_BY_TARGET:
        return STORE_PG_OP_LIST_BY_TARGET;
    case LEASE_LIST_BY_PROGRAM:
        return STORE_PG_OP_LIST_BY_PROGRAM;
    }
    return STORE_PG_OP_COUNT;
}

char *store_pg_encode_list(const lease_list_req_t *req, int64_t now_mono_ns, const char **bad_field)
{
    *bad_field = NULL;
    if (store_pg_list_op(req->by) == STORE_PG_OP_COUNT) {
        *bad_field = "by";
        return NULL;
    }
    if (req->page_size < 0) {
        *bad_field = "page_size";
        return NULL;
    }
    json_t *o = common_json(&req->call, now_mono_ns);
    bool ok = o != NULL;
    if (!ok)
        return NULL;
    put(o, "scope", scope_json(&req->scope), &ok);
    put_str(o, "tenant_id", req->tenant_id, &ok);
    put_str(o, "program_id", req->program_id, &ok);
    if (req->by == LEASE_LIST_BY_TARGET) {
        put_str(o, "target_namespace", req->target_namespace, &ok);
        put_str(o, "target_id", req->target_id, &ok);
    }
    if (req->by == LEASE_LIST_BY_OWNER)
        put_str(o, "owner_principal_id", req->owner_principal_id, &ok);
    if (req->page_size > 0)
        put(o, "page_size", json_integer(req->page_size), &ok);
    put(o, "page_token", req->page_token[0] ? json_string(req->page_token) : json_null(), &ok);
    return finish(o, ok);
}

char *store_pg_encode_commit(const lease_commit_req_t *req, int64_t now_mono_ns,
                             const char **bad_field)
{
    *bad_field = NULL;
    if (req->n_writes == 0 || req->n_writes > LEASE_COMMIT_WRITES_MAX) {
        *bad_field = "writes";
        return NULL;
    }
    json_t *o = common_json(&req->call, now_mono_ns);
    json_t *writes = json_array();
    bool ok = o && writes;
    if (ok) {
        put_lease_ref(o, &req->identity, req->lease_id, req->fencing_token, &ok);
        put_str(o, "execution_id", req->execution_id, &ok);
        put_str_opt(o, "trace_id", req->trace_id[0] ? req->trace_id : req->call.trace_id, &ok);
    }
    for (size_t i = 0; ok && i < req->n_writes; i++) {
        const lease_write_t *w = &req->writes[i];
        bool doc = w->kind == LEASE_WRITE_DOCUMENT;
        if (!doc && w->kind != LEASE_WRITE_PUBLICATION) {
            *bad_field = indexed_field("writes", i, "kind");
            ok = false;
            break;
        }
        json_t *payload = store_pg_parse_object(w->json);
        if (!payload) {
            *bad_field = indexed_field("writes", i, doc ? "body" : "payload");
            ok = false;
            break;
        }
        json_t *item = json_object();
        bool iok = item != NULL;
        if (iok) {
            put_str(item, "kind", doc ? "document" : "publication", &iok);
            put_str(item, doc ? "key" : "topic", w->key, &iok);
            if (doc)
                put(item, "expected_revision", json_integer(w->expected_revision), &iok);
            put(item, doc ? "body" : "payload", payload, &iok);
            payload = NULL;
        }
        json_decref(payload);
        if (!iok || json_array_append_new(writes, item) != 0) {
            if (!iok)
                json_decref(item);
            ok = false;
        }
    }
    if (ok) {
        put(o, "writes", writes, &ok);
        writes = NULL;
    }
    json_decref(writes);
    return finish(o, ok);
}

static json_t *time_or_null(int64_t ms)
{
    if (ms <= 0)
        return json_null();
    char ts[LEASE_TIME_LEN + 1];
    lease_time_format(ms, ts);
    return json_string(ts);
}

static json_t *audit_event_json(const lease_audit_event_t *e)
{
    json_t *o = json_object();
    bool ok = o != NULL;
    if (!ok)
        return NULL;
    put_str(o, "event_type", e->event_type, &ok);
    put(o, "occurred_at", time_or_null(e->occurred_at_ms), &ok);
    put(o, "latency_ms", json_integer(e->latency_ms), &ok);
    put_str(o, "result_code", lease_code_name(e->code), &ok);
    put(o, "retryable", json_boolean(lease_code_retryable(e->code)), &ok);
    /* lease.audit_events.decision is NOT NULL: derive it when unset */
    const char *decision = e->decision;
    if (!decision || !*decision)
        decision = lease_code_is_success(e->code) ? "allow"
                   : e->code == LEASE_BACKEND_UNAVAILABLE || e->code == LEASE_OUTCOME_UNKNOWN ||
                           e->code == LEASE_DEADLINE_EXCEEDED
                       ? "error"
                       : "deny";
    put_str(o, "decision", decision, &ok);
    put_str_opt(o, "backend_health", e->backend_health, &ok);
    put_str_opt(o, "request_id", e->call.request_id, &ok);
    put_str_opt(o, "correlation_id", e->call.correlation_id, &ok);
    put_str_opt(o, "trace_id", e->call.trace_id, &ok);
    put_str_opt(o, "deadline_class", e->call.deadline_class, &ok);
    put_str_opt(o, "principal_id", e->call.principal.principal_id, &ok);
    put_str_opt(o, "principal_class", e->call.principal.principal_class, &ok);
    put_str_opt(o, "client_id", e->call.principal.client_id, &ok);
    put_str_opt(o, "credential_id", e->call.principal.credential_id, &ok);
    if (e->has_identity)
        put_identity(o, &e->identity, &ok);
    put_str_opt(o, "lease_id", e->lease_id, &ok);
    if (e->fencing_token > 0)
        put(o, "fencing_token", json_integer(e->fencing_token), &ok);
    put_str_opt(o, "service_instance_id", e->service_instance_id, &ok);
    put_str_opt(o, "execution_id", e->execution_id, &ok);
    put_str_opt(o, "job_id", e->job_id, &ok);
    if (e->requested_ttl_ms > 0)
        put(o, "requested_ttl_ms", json_integer(e->requested_ttl_ms), &ok);
    put_str_opt(o, "previous_state", lease_state_name(e->previous_state), &ok);
    put_str_opt(o, "resulting_state", lease_state_name(e->resulting_state), &ok);
    put_str_opt(o, "reason", e->reason, &ok);
    put_str_opt(o, "incident_id", e->incident_id, &ok);
    /* aggregated refusals (schema 14): one event standing for many */
    if (e->event_count > 1)
        put(o, "event_count", json_integer(e->event_count), &ok);
    put_str_opt(o, "source_address", e->source_address, &ok);
    return built(o, ok);
}

char *store_pg_encode_audit(const lease_audit_event_t *events, size_t n, const char **bad_field)
{
    *bad_field = NULL;
    json_t *arr = json_array();
    bool ok = arr != NULL;
    for (size_t i = 0; ok && i < n; i++) {
        if (!events[i].event_type || !*events[i].event_type) {
            *bad_field = indexed_field("events", i, "event_type");
            ok = false;
            break;
        }
        json_t *e = audit_event_json(&events[i]);
        if (!e || json_array_append_new(arr, e) != 0)
            ok = false;
    }
    return finish(arr, ok);
}
