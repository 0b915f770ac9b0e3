/*
 * valkey_codec.c - see valkey_codec.h. The argument is JSON because the
 * functions read it with cjson (numbers below 2^53 stay exact); answers come
 * back as RESP so that tokens are integers, never text formatted by Lua.
 */
#include "valkey_codec.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "lease/types.h"

static void put_str(json_t *o, const char *key, const char *v)
{
    json_object_set_new(o, key, json_string(v));
}

/* "" is absent for optional members. */
static void put_opt(json_t *o, const char *key, const char *v)
{
    if (v[0] != '\0')
        put_str(o, key, v);
}

static json_t *identity_json(const lease_identity_t *i)
{
    json_t *o = json_object();
    put_str(o, "tenant_id", i->tenant_id);
    put_str(o, "program_id", i->program_id);
    put_str(o, "target_namespace", i->target_namespace);
    put_str(o, "target_id", i->target_id);
    put_str(o, "actor_name", i->actor_name);
    put_str(o, "workflow_name", i->workflow_name);
    put_opt(o, "operation_class", i->operation_class);
    return o;
}

static json_t *call_json(const lease_call_t *call)
{
    json_t *o = json_object();
    json_object_set_new(o, "deadline_at_ms", json_integer(call->deadline.wall_ms));
    json_t *p = json_object();
    put_str(p, "principal_id", call->principal.principal_id);
    put_str(p, "client_id", call->principal.client_id);
    put_str(p, "credential_id", call->principal.credential_id);
    put_str(p, "principal_class", call->principal.principal_class);
    json_object_set_new(o, "principal", p);
    put_opt(o, "request_id", call->request_id);
    put_opt(o, "request_digest", call->request_digest);
    put_opt(o, "correlation_id", call->correlation_id);
    put_opt(o, "deadline_class", call->deadline_class);
    return o;
}

static char *finish(json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

char *valkey_encode_acquire(const lease_acquire_req_t *req)
{
    json_t *o = call_json(&req->call);
    json_object_set_new(o, "lock_identity", identity_json(&req->identity));
    put_str(o, "service_instance_id", req->service_instance_id);
    put_str(o, "execution_id", req->execution_id);
    put_str(o, "job_id", req->job_id);
    put_opt(o, "trace_id", req->trace_id);
    if (req->ttl_ms != 0)
        json_object_set_new(o, "ttl_ms", json_integer(req->ttl_ms));
    if (req->maximum_lifetime_ms != 0)
        json_object_set_new(o, "maximum_lifetime_ms", json_integer(req->maximum_lifetime_ms));
    /* the metadata object as text: stored and answered byte for byte */
    if (req->metadata_json[0] != '\0')
        put_str(o, "metadata_json", req->metadata_json);
    return finish(o);
}

static json_t *owner_json(const lease_owner_req_t *req, bool renew)
{
    json_t *o = call_json(&req->call);
    json_object_set_new(o, "lock_identity", identity_json(&req->identity));
    put_str(o, "lease_id", req->lease_id);
    json_object_set_new(o, "fencing_token", json_integer(req->fencing_token));
    put_str(o, "service_instance_id", req->service_instance_id);
    if (renew && req->ttl_ms != 0)
        json_object_set_new(o, "ttl_ms", json_integer(req->ttl_ms));
    return o;
}

char *valkey_encode_owner(const lease_owner_req_t *req, bool renew)
{
    return finish(owner_json(req, renew));
}

char *valkey_encode_owner_many(const lease_owner_req_t *reqs, size_t n, bool renew)
{
    json_t *items = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(items, owner_json(&reqs[i], renew));
    json_t *o = json_object();
    json_object_set_new(o, renew ? "renewals" : "releases", items);
    return finish(o);
}

char *valkey_encode_admin(const lease_admin_req_t *req)
{
    json_t *o = call_json(&req->call);
    json_object_set_new(o, "lock_identity", identity_json(&req->identity));
    put_str(o, "lease_id", req->lease_id);
    json_object_set_new(o, "fencing_token", json_integer(req->fencing_token));
    put_str(o, "reason", req->reason);
    put_opt(o, "incident_id", req->incident_id);
    return finish(o);
}

char *valkey_encode_inspect(const lease_inspect_req_t *req)
{
    json_t *o = call_json(&req->call);
    json_t *scope = json_object();
    put_str(scope, "tenant_id", req->scope.tenant_id);
    put_str(scope, "program_id", req->scope.program_id);
    json_t *actors = json_array();
    if (req->scope.all_actors)
        json_array_append_new(actors, json_string("*"));
    for (size_t i = 0; i < req->scope.n_actors && i < LEASE_SCOPE_ACTORS_MAX; i++)
        json_array_append_new(actors, json_string(req->scope.actor_names[i]));
    json_object_set_new(scope, "actor_names", actors);
    json_object_set_new(o, "scope", scope);
    if (req->by_identity)
        json_object_set_new(o, "lock_identity", identity_json(&req->identity));
    else
        put_str(o, "lease_id", req->lease_id);
    return finish(o);
}

const redisReply *valkey_field(const redisReply *pairs, const char *name)
{
    if (pairs == NULL || pairs->type != REDIS_REPLY_ARRAY)
        return NULL;
    for (size_t i = 0; i + 1 < pairs->elements; i += 2) {
        const redisReply *k = pairs->element[i];
        if (k->type == REDIS_REPLY_STRING && strcmp(k->str, name) == 0)
            return pairs->element[i + 1];
    }
    return NULL;
}

bool valkey_int_field(const redisReply *pairs, const char *name, long long *out)
{
    const redisReply *v = valkey_field(pairs, name);
    if (v == NULL || v->type != REDIS_REPLY_INTEGER)
        return false;
    *out = v->integer;
    return true;
}

/* Copies a string value (absent or null: "") into dst; false when it is
 * another type or does not fit. */
static bool copy_str(const redisReply *pairs, const char *name, char *dst, size_t cap)
{
    const redisReply *v = valkey_field(pairs, name);
    dst[0] = '\0';
    if (v == NULL || v->type == REDIS_REPLY_NIL)
        return true;
    if (v->type != REDIS_REPLY_STRING || v->len >= cap)
        return false;
    memcpy(dst, v->str, v->len);
    dst[v->len] = '\0';
    return true;
}

/* An integer value (absent or null: 0). */
static bool copy_int(const redisReply *pairs, const char *name, int64_t *dst)
{
    const redisReply *v = valkey_field(pairs, name);
    *dst = 0;
    if (v == NULL || v->type == REDIS_REPLY_NIL)
        return true;
    if (v->type != REDIS_REPLY_INTEGER)
        return false;
    *dst = v->integer;
    return true;
}

#define STR(pairs, name, field) copy_str(pairs, name, field, sizeof(field))

static bool decode_lease(const redisReply *l, lease_record_t *r)
{
    char state[16];
    lease_identity_t *i = &r->identity;
    bool ok = STR(l, "tenant_id", i->tenant_id) && STR(l, "program_id", i->program_id) &&
              STR(l, "target_namespace", i->target_namespace) &&
              STR(l, "target_id", i->target_id) && STR(l, "actor_name", i->actor_name) &&
              STR(l, "workflow_name", i->workflow_name) &&
              STR(l, "operation_class", i->operation_class) && STR(l, "lease_id", r->lease_id) &&
              copy_int(l, "fencing_token", &r->fencing_token) && STR(l, "state", state) &&
              copy_int(l, "acquired_at", &r->acquired_at_ms) &&
              copy_int(l, "renewed_at", &r->renewed_at_ms) &&
              copy_int(l, "expires_at", &r->expires_at_ms) &&
              copy_int(l, "ended_at", &r->ended_at_ms) && copy_int(l, "ttl_ms", &r->ttl_ms) &&
              copy_int(l, "maximum_lifetime_ms", &r->maximum_lifetime_ms) &&
              STR(l, "owner_principal_id", r->owner_principal_id) &&
              STR(l, "owner_client_id", r->owner_client_id) &&
              STR(l, "owner_credential_id", r->owner_credential_id) &&
              STR(l, "service_instance_id", r->service_instance_id) &&
              STR(l, "execution_id", r->execution_id) && STR(l, "job_id", r->job_id) &&
              STR(l, "trace_id", r->trace_id) && STR(l, "request_id", r->request_id) &&
              STR(l, "metadata", r->metadata_json) && STR(l, "end_reason", r->end_reason) &&
              STR(l, "incident_id", r->incident_id);
    /* identity, lease id and token fail closed: a record without them is corrupt */
    return ok && r->lease_id[0] != '\0' && r->fencing_token > 0 && i->tenant_id[0] != '\0' &&
           lease_state_parse(state, &r->state);
}

bool valkey_decode_result(const redisReply *reply, lease_result_t *res)
{
    memset(res, 0, sizeof *res);
    const redisReply *code = valkey_field(reply, "code");
    if (code == NULL || code->type != REDIS_REPLY_STRING ||
        !lease_code_parse(code->str, &res->code))
        return false;
    if (!STR(reply, "field", res->field) || !STR(reply, "reason", res->reason) ||
        !STR(reply, "detail", res->detail) ||
        !copy_int(reply, "retry_after_ms", &res->retry_after_ms))
        return false;
    long long replayed = 0;
    res->replayed = valkey_int_field(reply, "replayed", &replayed) && replayed == 1;
    char current[16];
    if (!STR(reply, "current_state", current))
        return false;
    if (current[0] != '\0' && !lease_state_parse(current, &res->current_state))
        return false;
    const redisReply *l = valkey_field(reply, "lease");
    if (l != NULL && l->type == REDIS_REPLY_ARRAY) {
        if (!decode_lease(l, &res->lease))
            return false;
        res->has_lease = true;
    } else if (l != NULL) {
        return false;
    }
    return true;
}

bool valkey_decode_many(const redisReply *reply, size_t n, lease_result_t *results,
                        lease_code_t *refusal)
{
    const redisReply *list = valkey_field(reply, "results");
    *refusal = LEASE_CODE_COUNT;
    if (list == NULL) {
        /* the batch refused as a whole (its shape) */
        lease_result_t whole;
        if (!valkey_decode_result(reply, &whole))
            return false;
        *refusal = whole.code;
        return true;
    }
    if (list->type != REDIS_REPLY_ARRAY || list->elements != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!valkey_decode_result(list->element[i], &results[i]))
            return false;
    return true;
}
