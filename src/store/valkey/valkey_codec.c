/*
 * valkey_codec.c - see valkey_codec.h. The argument is JSON because the
 * functions read it with cjson (numbers below 2^53 stay exact); answers come
 * back as RESP so that tokens are integers, never text formatted by Lua.
 */
#include "valkey_codec.h"

#include <stdlib.h>
#include <string.h>

#include "lease/hex.h"
#include "lease/json_text.h"
#include "lease/types.h"

/*
 * The arguments are written straight into a lease_json_buf (json_text.h)
 * rather than built as a jansson tree and dumped: the tree cost a malloc and
 * a hash insert per member, and json_dumps a loop-check hash insert (with an
 * snprintf of the node's address) per object, about 45 k instructions of
 * the ~450 k leased spent per request on Valkey (docs/benchmarks.md,
 * "leased on Valkey"). The text is byte for byte what json_dumps
 * (JSON_COMPACT) wrote: members in the same order, the same escapes
 * (tests/valkey/valkey_codec.c pins it).
 */
typedef lease_json_buf_t buf_t;

static void open_object(buf_t *b)
{
    lease_json_separate(b);
    lease_json_raw(b, "{", 1);
}

static void close_object(buf_t *b)
{
    lease_json_raw(b, "}", 1);
}

/* A string member. Text that is not UTF-8 is left out, member and all, as
 * it was when jansson's json_string refused it (json_object_set_new then
 * set nothing); the decoders upstream only pass UTF-8, so this is a rule
 * kept, not one relied on. */
static void put_str(buf_t *b, const char *key, const char *v)
{
    size_t n = strlen(v);
    if (!lease_json_utf8_valid(v, n))
        return;
    lease_json_key(b, key);
    lease_json_string(b, v, n);
}

/* "" is absent for optional members. */
static void put_opt(buf_t *b, const char *key, const char *v)
{
    if (v[0] != '\0')
        put_str(b, key, v);
}

/* An integer member, always written. */
static void put_num(buf_t *b, const char *key, int64_t v)
{
    lease_json_put_int(b, key, (long long)v);
}

/* An integer member left out when 0. */
static void put_int(buf_t *b, const char *key, int64_t v)
{
    if (v != 0)
        put_num(b, key, v);
}

/* A member whose value is NULL or "" is left out. */
static void put_c(buf_t *b, const char *key, const char *v)
{
    if (v != NULL && v[0] != '\0')
        put_str(b, key, v);
}

/* "key":{ ... the caller writes the members and close_object. */
static void open_member(buf_t *b, const char *key)
{
    lease_json_key(b, key);
    lease_json_raw(b, "{", 1);
}

static void identity_members(buf_t *b, const lease_identity_t *i)
{
    open_member(b, "lock_identity");
    put_str(b, "tenant_id", i->tenant_id);
    put_str(b, "program_id", i->program_id);
    put_str(b, "target_namespace", i->target_namespace);
    put_str(b, "target_id", i->target_id);
    put_str(b, "actor_name", i->actor_name);
    put_str(b, "workflow_name", i->workflow_name);
    put_opt(b, "operation_class", i->operation_class);
    close_object(b);
}

/* Opens the argument's object with the call's members. */
static void call_members(buf_t *b, const lease_call_t *call)
{
    open_object(b);
    put_num(b, "deadline_at_ms", call->deadline.wall_ms);
    open_member(b, "principal");
    put_str(b, "principal_id", call->principal.principal_id);
    put_str(b, "client_id", call->principal.client_id);
    put_str(b, "credential_id", call->principal.credential_id);
    put_str(b, "principal_class", call->principal.principal_class);
    close_object(b);
    put_opt(b, "request_id", call->request_id);
    put_opt(b, "request_digest", call->request_digest);
    put_opt(b, "correlation_id", call->correlation_id);
    put_opt(b, "deadline_class", call->deadline_class);
}

static void audit_members(buf_t *b, const lease_audit_event_t *e)
{
    open_object(b);
    put_c(b, "event_type", e->event_type);
    put_num(b, "occurred_at_ms", e->occurred_at_ms);
    put_num(b, "latency_ms", e->latency_ms);
    put_c(b, "code", lease_code_name(e->code));
    /* derived when unset, as the PostgreSQL adapter derives it
     * (pg_codec_request.c): an event without one was appended to the
     * Stream without a decision (race_store_ops on Valkey) */
    const char *decision = e->decision;
    if (decision == NULL || decision[0] == '\0')
        decision = lease_code_is_success(e->code) ? "allow"
                   : e->code == LEASE_BACKEND_UNAVAILABLE || e->code == LEASE_OUTCOME_UNKNOWN ||
                           e->code == LEASE_DEADLINE_EXCEEDED
                       ? "error"
                       : "deny";
    put_c(b, "decision", decision);
    put_c(b, "backend_health", e->backend_health);
    put_str(b, "source", "service");
    put_c(b, "principal_id", e->call.principal.principal_id);
    put_c(b, "client_id", e->call.principal.client_id);
    put_c(b, "credential_id", e->call.principal.credential_id);
    put_c(b, "request_id", e->call.request_id);
    put_c(b, "correlation_id", e->call.correlation_id);
    put_c(b, "trace_id", e->call.trace_id);
    put_c(b, "deadline_class", e->call.deadline_class);
    if (e->has_identity) {
        put_c(b, "tenant_id", e->identity.tenant_id);
        put_c(b, "program_id", e->identity.program_id);
        put_c(b, "target_namespace", e->identity.target_namespace);
        put_c(b, "target_id", e->identity.target_id);
        put_c(b, "actor_name", e->identity.actor_name);
        put_c(b, "workflow_name", e->identity.workflow_name);
        put_c(b, "operation_class", e->identity.operation_class);
    }
    put_c(b, "lease_id", e->lease_id);
    put_int(b, "fencing_token", e->fencing_token);
    put_c(b, "service_instance_id", e->service_instance_id);
    put_c(b, "execution_id", e->execution_id);
    put_c(b, "job_id", e->job_id);
    put_int(b, "requested_ttl_ms", e->requested_ttl_ms);
    put_c(b, "previous_state", lease_state_name(e->previous_state));
    put_c(b, "resulting_state", lease_state_name(e->resulting_state));
    put_c(b, "reason", e->reason);
    put_c(b, "incident_id", e->incident_id);
    if (e->event_count > 1)
        put_num(b, "event_count", e->event_count);
    put_c(b, "source_address", e->source_address);
    close_object(b);
}

/* Closes the argument's object; the text (heap) or NULL when out of memory. */
static char *finish(buf_t *b)
{
    close_object(b);
    return lease_json_take(b);
}

/* Asks a lease mutation for its packed answer (one string, not a nested
 * array; docs/backends.md "Packed answers"), which valkey_decode_result
 * reads as it reads the table form. */
static char *finish_packed(buf_t *b)
{
    lease_json_key(b, "packed_answer");
    lease_json_raw(b, "true", 4);
    return finish(b);
}

char *valkey_encode_acquire(const lease_acquire_req_t *req)
{
    buf_t b = {0};
    call_members(&b, &req->call);
    identity_members(&b, &req->identity);
    put_str(&b, "service_instance_id", req->service_instance_id);
    put_str(&b, "execution_id", req->execution_id);
    put_str(&b, "job_id", req->job_id);
    put_opt(&b, "trace_id", req->trace_id);
    put_int(&b, "ttl_ms", req->ttl_ms);
    put_int(&b, "maximum_lifetime_ms", req->maximum_lifetime_ms);
    /* the metadata object as text: stored and answered byte for byte */
    put_opt(&b, "metadata_json", req->metadata_json);
    return finish_packed(&b);
}

/* The members of every request that names a lease: the call, the
 * identity, the lease id and its token (the object left open). */
static void lease_ref_members(buf_t *b, const lease_call_t *call, const lease_identity_t *identity,
                              const char *lease_id, int64_t fencing_token)
{
    call_members(b, call);
    identity_members(b, identity);
    put_str(b, "lease_id", lease_id);
    put_num(b, "fencing_token", fencing_token);
}

static void owner_members(buf_t *b, const lease_owner_req_t *req, bool renew)
{
    lease_ref_members(b, &req->call, &req->identity, req->lease_id, req->fencing_token);
    put_str(b, "service_instance_id", req->service_instance_id);
    if (renew)
        put_int(b, "ttl_ms", req->ttl_ms);
}

char *valkey_encode_owner(const lease_owner_req_t *req, bool renew)
{
    buf_t b = {0};
    owner_members(&b, req, renew);
    return finish_packed(&b);
}

char *valkey_encode_owner_many(const lease_owner_req_t *reqs, size_t n, bool renew)
{
    buf_t b = {0};
    open_object(&b);
    lease_json_key(&b, renew ? "renewals" : "releases");
    lease_json_raw(&b, "[", 1);
    for (size_t i = 0; i < n; i++) {
        owner_members(&b, &reqs[i], renew);
        close_object(&b);
    }
    lease_json_raw(&b, "]", 1);
    return finish(&b);
}

char *valkey_encode_admin(const lease_admin_req_t *req)
{
    buf_t b = {0};
    lease_ref_members(&b, &req->call, &req->identity, req->lease_id, req->fencing_token);
    put_str(&b, "reason", req->reason);
    put_opt(&b, "incident_id", req->incident_id);
    return finish_packed(&b);
}

char *valkey_encode_commit(const lease_commit_req_t *req)
{
    buf_t b = {0};
    lease_ref_members(&b, &req->call, &req->identity, req->lease_id, req->fencing_token);
    put_str(&b, "execution_id", req->execution_id);
    put_opt(&b, "trace_id", req->trace_id);
    lease_json_key(&b, "writes");
    lease_json_raw(&b, "[", 1);
    for (size_t i = 0; i < req->n_writes && i < LEASE_COMMIT_WRITES_MAX; i++) {
        const lease_write_t *w = &req->writes[i];
        bool doc = w->kind == LEASE_WRITE_DOCUMENT;
        if ((!doc && w->kind != LEASE_WRITE_PUBLICATION) || w->json == NULL) {
            free(lease_json_take(&b));
            return NULL;
        }
        open_object(&b);
        put_str(&b, "kind", doc ? "document" : "publication");
        put_str(&b, doc ? "key" : "topic", w->key);
        if (doc)
            put_num(&b, "expected_revision", w->expected_revision);
        put_str(&b, doc ? "body_json" : "payload_json", w->json);
        close_object(&b);
    }
    lease_json_raw(&b, "]", 1);
    return finish(&b);
}

/* An element of actor_names; one that is not UTF-8 is left out, as
 * json_array_append_new left out json_string's refusal. */
static void put_actor(buf_t *b, const char *name)
{
    size_t n = strlen(name);
    if (!lease_json_utf8_valid(name, n))
        return;
    lease_json_separate(b);
    lease_json_string(b, name, n);
}

static void scope_members(buf_t *b, const lease_scope_t *s)
{
    open_member(b, "scope");
    put_str(b, "tenant_id", s->tenant_id);
    put_str(b, "program_id", s->program_id);
    lease_json_key(b, "actor_names");
    lease_json_raw(b, "[", 1);
    if (s->all_actors)
        put_actor(b, "*");
    for (size_t i = 0; i < s->n_actors && i < LEASE_SCOPE_ACTORS_MAX; i++)
        put_actor(b, s->actor_names[i]);
    lease_json_raw(b, "]", 1);
    close_object(b);
}

char *valkey_encode_inspect(const lease_inspect_req_t *req)
{
    buf_t b = {0};
    call_members(&b, &req->call);
    scope_members(&b, &req->scope);
    if (req->by_identity)
        identity_members(&b, &req->identity);
    else
        put_str(&b, "lease_id", req->lease_id);
    return finish(&b);
}

char *valkey_encode_list(const lease_list_req_t *req)
{
    buf_t b = {0};
    call_members(&b, &req->call);
    scope_members(&b, &req->scope);
    put_str(&b, "by",
            req->by == LEASE_LIST_BY_OWNER    ? "owner"
            : req->by == LEASE_LIST_BY_TARGET ? "target"
                                              : "program");
    put_str(&b, "tenant_id", req->tenant_id);
    put_str(&b, "program_id", req->program_id);
    if (req->by == LEASE_LIST_BY_TARGET) {
        put_str(&b, "target_namespace", req->target_namespace);
        put_str(&b, "target_id", req->target_id);
    }
    if (req->by == LEASE_LIST_BY_OWNER)
        put_str(&b, "owner_principal_id", req->owner_principal_id);
    if (req->page_size > 0)
        put_num(&b, "page_size", req->page_size);
    put_opt(&b, "page_token", req->page_token);
    return finish(&b);
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

/* A string value (absent or null: "") into dst; false when it is another
 * type or does not fit. */
static bool str_value(const redisReply *v, char *dst, size_t cap)
{
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
static bool int_value(const redisReply *v, int64_t *dst)
{
    *dst = 0;
    if (v == NULL || v->type == REDIS_REPLY_NIL)
        return true;
    if (v->type != REDIS_REPLY_INTEGER)
        return false;
    *dst = v->integer;
    return true;
}

/* The value named name, as str_value and int_value take it. */
static bool copy_str(const redisReply *pairs, const char *name, char *dst, size_t cap)
{
    return str_value(valkey_field(pairs, name), dst, cap);
}

static bool copy_int(const redisReply *pairs, const char *name, int64_t *dst)
{
    return int_value(valkey_field(pairs, name), dst);
}

#define STR(pairs, name, field) copy_str(pairs, name, field, sizeof(field))

/*
 * An answer's members looked up in one pass: valkey_field scans the pairs
 * from the start for each name, and decoding a lease asked it for 26 names
 * among ~26 pairs (some 400 strcmp calls per request, ~12 k instructions).
 * Here each key is matched once against the wanted names, with what
 * valkey_field answers: the first pair whose key is a string equal to the
 * name as strcmp compares it (up to the key's first NUL).
 */
typedef struct wanted {
    const char *name;
    size_t len; /* strlen(name) */
} wanted_t;

#define WANTED(s)                                                                                  \
    {                                                                                              \
        s, sizeof(s) - 1                                                                           \
    }

/* out[j]: the value of names[j] (NULL when absent or pairs is no array). */
static void find_fields(const redisReply *pairs, const wanted_t *names, size_t n,
                        const redisReply **out)
{
    for (size_t j = 0; j < n; j++)
        out[j] = NULL;
    if (pairs == NULL || pairs->type != REDIS_REPLY_ARRAY)
        return;
    for (size_t i = 0; i + 1 < pairs->elements; i += 2) {
        const redisReply *k = pairs->element[i];
        if (k->type != REDIS_REPLY_STRING)
            continue;
        for (size_t j = 0; j < n; j++) {
            /* k->str is NUL-terminated at k->len: with k->len >= len the
             * len + 1 bytes compared are all its own, and equal them iff
             * strcmp(k->str, name) == 0 */
            if (out[j] == NULL && k->len >= names[j].len &&
                memcmp(k->str, names[j].name, names[j].len + 1) == 0) {
                out[j] = pairs->element[i + 1];
                break;
            }
        }
    }
}

enum {
    L_TENANT_ID,
    L_PROGRAM_ID,
    L_TARGET_NAMESPACE,
    L_TARGET_ID,
    L_ACTOR_NAME,
    L_WORKFLOW_NAME,
    L_OPERATION_CLASS,
    L_LEASE_ID,
    L_FENCING_TOKEN,
    L_STATE,
    L_ACQUIRED_AT,
    L_RENEWED_AT,
    L_EXPIRES_AT,
    L_ENDED_AT,
    L_TTL_MS,
    L_MAXIMUM_LIFETIME_MS,
    L_OWNER_PRINCIPAL_ID,
    L_OWNER_CLIENT_ID,
    L_OWNER_CREDENTIAL_ID,
    L_SERVICE_INSTANCE_ID,
    L_EXECUTION_ID,
    L_JOB_ID,
    L_TRACE_ID,
    L_REQUEST_ID,
    L_METADATA,
    L_END_REASON,
    L_INCIDENT_ID,
    L_COUNT
};

static const wanted_t lease_fields[L_COUNT] = {
    WANTED("tenant_id"),
    WANTED("program_id"),
    WANTED("target_namespace"),
    WANTED("target_id"),
    WANTED("actor_name"),
    WANTED("workflow_name"),
    WANTED("operation_class"),
    WANTED("lease_id"),
    WANTED("fencing_token"),
    WANTED("state"),
    WANTED("acquired_at"),
    WANTED("renewed_at"),
    WANTED("expires_at"),
    WANTED("ended_at"),
    WANTED("ttl_ms"),
    WANTED("maximum_lifetime_ms"),
    WANTED("owner_principal_id"),
    WANTED("owner_client_id"),
    WANTED("owner_credential_id"),
    WANTED("service_instance_id"),
    WANTED("execution_id"),
    WANTED("job_id"),
    WANTED("trace_id"),
    WANTED("request_id"),
    WANTED("metadata"),
    WANTED("end_reason"),
    WANTED("incident_id"),
};

#define LSTR(id, field) str_value(f[id], field, sizeof(field))

static bool decode_lease(const redisReply *l, lease_record_t *r)
{
    const redisReply *f[L_COUNT];
    find_fields(l, lease_fields, L_COUNT, f);
    char state[16];
    lease_identity_t *i = &r->identity;
    bool ok = LSTR(L_TENANT_ID, i->tenant_id) && LSTR(L_PROGRAM_ID, i->program_id) &&
              LSTR(L_TARGET_NAMESPACE, i->target_namespace) && LSTR(L_TARGET_ID, i->target_id) &&
              LSTR(L_ACTOR_NAME, i->actor_name) && LSTR(L_WORKFLOW_NAME, i->workflow_name) &&
              LSTR(L_OPERATION_CLASS, i->operation_class) && LSTR(L_LEASE_ID, r->lease_id) &&
              int_value(f[L_FENCING_TOKEN], &r->fencing_token) && LSTR(L_STATE, state) &&
              int_value(f[L_ACQUIRED_AT], &r->acquired_at_ms) &&
              int_value(f[L_RENEWED_AT], &r->renewed_at_ms) &&
              int_value(f[L_EXPIRES_AT], &r->expires_at_ms) &&
              int_value(f[L_ENDED_AT], &r->ended_at_ms) && int_value(f[L_TTL_MS], &r->ttl_ms) &&
              int_value(f[L_MAXIMUM_LIFETIME_MS], &r->maximum_lifetime_ms) &&
              LSTR(L_OWNER_PRINCIPAL_ID, r->owner_principal_id) &&
              LSTR(L_OWNER_CLIENT_ID, r->owner_client_id) &&
              LSTR(L_OWNER_CREDENTIAL_ID, r->owner_credential_id) &&
              LSTR(L_SERVICE_INSTANCE_ID, r->service_instance_id) &&
              LSTR(L_EXECUTION_ID, r->execution_id) && LSTR(L_JOB_ID, r->job_id) &&
              LSTR(L_TRACE_ID, r->trace_id) && LSTR(L_REQUEST_ID, r->request_id) &&
              LSTR(L_METADATA, r->metadata_json) && LSTR(L_END_REASON, r->end_reason) &&
              LSTR(L_INCIDENT_ID, r->incident_id);
    /* identity, lease id and token fail closed: a record without them is corrupt */
    return ok && r->lease_id[0] != '\0' && r->fencing_token > 0 && i->tenant_id[0] != '\0' &&
           lease_state_parse(state, &r->state);
}

enum {
    R_CODE,
    R_FIELD,
    R_REASON,
    R_DETAIL,
    R_RETRY_AFTER_MS,
    R_REPLAYED,
    R_CURRENT_STATE,
    R_LEASE,
    R_COUNT
};

static const wanted_t result_fields[R_COUNT] = {
    WANTED("code"),           WANTED("field"),    WANTED("reason"),        WANTED("detail"),
    WANTED("retry_after_ms"), WANTED("replayed"), WANTED("current_state"), WANTED("lease"),
};

/* ---- packed answers ---------------------------------------------------
 * A lease mutation's answer as one string (leased.lua, packed_answer):
 * the byte 1, then NUL-separated: the code, the lease's state, the 26
 * members of STORED_FIELDS (the record's names, in this order), then name,
 * value pairs (previous_state, replayed, current_state). Read into what
 * decode_lease and valkey_decode_result make of the table form: the same
 * members, the same rules (an empty text is an absent member, lease_pairs'
 * "metadata or '{}'"), the same checks that fail closed. */
enum {
    P_TENANT_ID,
    P_PROGRAM_ID,
    P_TARGET_NAMESPACE,
    P_TARGET_ID,
    P_ACTOR_NAME,
    P_WORKFLOW_NAME,
    P_OPERATION_CLASS,
    P_LEASE_ID,
    P_TOKEN,
    P_ACQUIRED_AT,
    P_RENEWED_AT,
    P_EXPIRES_AT,
    P_ENDED_AT,
    P_TTL_MS,
    P_MAXLIFE_MS,
    P_OWNER,
    P_OWNER_CLIENT,
    P_OWNER_CRED,
    P_SID,
    P_EXECUTION_ID,
    P_JOB_ID,
    P_TRACE_ID,
    P_REQUEST_ID,
    P_METADATA,
    P_END_REASON,
    P_INCIDENT_ID,
    P_COUNT
};
#define PACKED_PAIRS_MAX 8 /* after the members: previous_state, replayed, current_state */

typedef struct span {
    const char *p;
    size_t n;
} span_t;

static bool span_is(span_t s, const char *text)
{
    size_t n = strlen(text);
    return s.n == n && memcmp(s.p, text, n) == 0;
}

static bool span_str(span_t s, char *dst, size_t cap)
{
    if (s.n >= cap)
        return false;
    memcpy(dst, s.p, s.n);
    dst[s.n] = '\0';
    return true;
}

/* Decimal digits (empty: 0, as an absent member), nothing else. */
static bool span_int(span_t s, int64_t *dst)
{
    *dst = 0;
    if (s.n > 18)
        return false;
    for (size_t i = 0; i < s.n; i++) {
        if (s.p[i] < '0' || s.p[i] > '9')
            return false;
        *dst = *dst * 10 + (s.p[i] - '0');
    }
    return true;
}

static bool decode_packed(const char *text, size_t len, lease_result_t *res)
{
    enum { PARTS_MAX = 2 + P_COUNT + 2 * PACKED_PAIRS_MAX };
    span_t v[PARTS_MAX];
    size_t n = 0;
    const char *p = text + 1, *end = text + len; /* past the byte 1 */
    for (;;) {
        const char *nul = memchr(p, '\0', (size_t)(end - p));
        if (n == PARTS_MAX)
            return false;
        v[n++] = (span_t){p, (size_t)((nul ? nul : end) - p)};
        if (nul == NULL)
            break;
        p = nul + 1;
    }
    if (n < 2 + P_COUNT || (n - 2 - P_COUNT) % 2 != 0)
        return false;
    char word[64];
    lease_state_t state;
    if (!span_str(v[0], word, sizeof word) || !lease_code_parse(word, &res->code) ||
        !span_str(v[1], word, sizeof word) || !lease_state_parse(word, &state))
        return false;
    const span_t *m = v + 2;
    lease_record_t *r = &res->lease;
    lease_identity_t *i = &r->identity;
    bool ok = span_str(m[P_TENANT_ID], i->tenant_id, sizeof i->tenant_id) &&
              span_str(m[P_PROGRAM_ID], i->program_id, sizeof i->program_id) &&
              span_str(m[P_TARGET_NAMESPACE], i->target_namespace, sizeof i->target_namespace) &&
              span_str(m[P_TARGET_ID], i->target_id, sizeof i->target_id) &&
              span_str(m[P_ACTOR_NAME], i->actor_name, sizeof i->actor_name) &&
              span_str(m[P_WORKFLOW_NAME], i->workflow_name, sizeof i->workflow_name) &&
              span_str(m[P_OPERATION_CLASS], i->operation_class, sizeof i->operation_class) &&
              span_str(m[P_LEASE_ID], r->lease_id, sizeof r->lease_id) &&
              span_int(m[P_TOKEN], &r->fencing_token) &&
              span_int(m[P_ACQUIRED_AT], &r->acquired_at_ms) &&
              span_int(m[P_RENEWED_AT], &r->renewed_at_ms) &&
              span_int(m[P_EXPIRES_AT], &r->expires_at_ms) &&
              span_int(m[P_ENDED_AT], &r->ended_at_ms) && span_int(m[P_TTL_MS], &r->ttl_ms) &&
              span_int(m[P_MAXLIFE_MS], &r->maximum_lifetime_ms) &&
              span_str(m[P_OWNER], r->owner_principal_id, sizeof r->owner_principal_id) &&
              span_str(m[P_OWNER_CLIENT], r->owner_client_id, sizeof r->owner_client_id) &&
              span_str(m[P_OWNER_CRED], r->owner_credential_id, sizeof r->owner_credential_id) &&
              span_str(m[P_SID], r->service_instance_id, sizeof r->service_instance_id) &&
              span_str(m[P_EXECUTION_ID], r->execution_id, sizeof r->execution_id) &&
              span_str(m[P_JOB_ID], r->job_id, sizeof r->job_id) &&
              span_str(m[P_TRACE_ID], r->trace_id, sizeof r->trace_id) &&
              span_str(m[P_REQUEST_ID], r->request_id, sizeof r->request_id) &&
              (m[P_METADATA].n == 0
                   ? span_str((span_t){"{}", 2}, r->metadata_json, sizeof r->metadata_json)
                   : span_str(m[P_METADATA], r->metadata_json, sizeof r->metadata_json)) &&
              span_str(m[P_END_REASON], r->end_reason, sizeof r->end_reason) &&
              span_str(m[P_INCIDENT_ID], r->incident_id, sizeof r->incident_id);
    /* as decode_lease: identity, lease id and token fail closed */
    if (!ok || r->lease_id[0] == '\0' || r->fencing_token <= 0 || i->tenant_id[0] == '\0')
        return false;
    r->state = state;
    res->has_lease = true;
    for (size_t k = 2 + P_COUNT; k + 1 < n; k += 2) {
        if (span_is(v[k], "replayed")) {
            res->replayed = span_is(v[k + 1], "1");
        } else if (span_is(v[k], "current_state")) {
            if (!span_str(v[k + 1], word, sizeof word) ||
                (word[0] != '\0' && !lease_state_parse(word, &res->current_state)))
                return false;
        }
    }
    return true;
}

bool valkey_decode_result(const redisReply *reply, lease_result_t *res)
{
    memset(res, 0, sizeof *res);
    if (reply != NULL && reply->type == REDIS_REPLY_STRING && reply->len > 0 &&
        reply->str[0] == '\1') {
        if (decode_packed(reply->str, reply->len, res))
            return true;
        memset(res, 0, sizeof *res);
        return false;
    }
    const redisReply *f[R_COUNT];
    find_fields(reply, result_fields, R_COUNT, f);
    const redisReply *code = f[R_CODE];
    if (code == NULL || code->type != REDIS_REPLY_STRING ||
        !lease_code_parse(code->str, &res->code))
        return false;
    if (!str_value(f[R_FIELD], res->field, sizeof res->field) ||
        !str_value(f[R_REASON], res->reason, sizeof res->reason) ||
        !str_value(f[R_DETAIL], res->detail, sizeof res->detail) ||
        !int_value(f[R_RETRY_AFTER_MS], &res->retry_after_ms))
        return false;
    const redisReply *replayed = f[R_REPLAYED];
    res->replayed =
        replayed != NULL && replayed->type == REDIS_REPLY_INTEGER && replayed->integer == 1;
    char current[16];
    if (!str_value(f[R_CURRENT_STATE], current, sizeof current))
        return false;
    if (current[0] != '\0' && !lease_state_parse(current, &res->current_state))
        return false;
    const redisReply *l = f[R_LEASE];
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

lease_code_t valkey_decode_list(const redisReply *reply, lease_list_result_t *res)
{
    memset(res, 0, sizeof *res);
    const redisReply *code = valkey_field(reply, "code");
    lease_code_t c;
    if (code == NULL || code->type != REDIS_REPLY_STRING || !lease_code_parse(code->str, &c))
        return LEASE_CODE_COUNT;
    res->code = c;
    if (c != LEASE_LISTED) {
        /* a refusal: only the offending field travels */
        if (!STR(reply, "field", res->field))
            return LEASE_CODE_COUNT;
        return c;
    }
    const redisReply *leases = valkey_field(reply, "leases");
    if (leases == NULL || leases->type != REDIS_REPLY_ARRAY ||
        !STR(reply, "next_page_token", res->next_page_token))
        return LEASE_CODE_COUNT;
    if (leases->elements > 0) {
        res->leases = calloc(leases->elements, sizeof *res->leases);
        if (res->leases == NULL)
            return LEASE_CODE_COUNT;
    }
    for (size_t i = 0; i < leases->elements; i++) {
        const redisReply *l = leases->element[i];
        if (l->type != REDIS_REPLY_ARRAY || !decode_lease(l, &res->leases[i])) {
            lease_list_result_free(res);
            return LEASE_CODE_COUNT;
        }
        res->count++;
    }
    return c;
}

bool valkey_decode_commit(const redisReply *reply, size_t n_writes, lease_commit_result_t *res)
{
    memset(res, 0, sizeof *res);
    const redisReply *code = valkey_field(reply, "code");
    if (code == NULL || code->type != REDIS_REPLY_STRING ||
        !lease_code_parse(code->str, &res->code))
        return false;
    if (!STR(reply, "field", res->field) ||
        !copy_int(reply, "retry_after_ms", &res->retry_after_ms) ||
        !copy_int(reply, "current_revision", &res->current_revision))
        return false;
    long long replayed = 0;
    res->replayed = valkey_int_field(reply, "replayed", &replayed) && replayed == 1;
    if (res->code != LEASE_COMMIT_ACCEPTED)
        return true;
    const redisReply *results = valkey_field(reply, "results");
    if (results == NULL || results->type != REDIS_REPLY_ARRAY || results->elements != n_writes ||
        n_writes > LEASE_COMMIT_WRITES_MAX)
        return false;
    for (size_t i = 0; i < n_writes; i++) {
        long long revision = 0;
        if (!valkey_int_field(results->element[i], "revision", &revision) || revision < 1)
            return false;
        res->revisions[i] = revision;
    }
    res->n_writes = n_writes;
    return true;
}

/* An array of strings: each is handed to each(); false when not strings. */
static bool each_string(const redisReply *a, bool (*each)(lease_credential_t *, const char *),
                        lease_credential_t *c)
{
    if (a == NULL || a->type != REDIS_REPLY_ARRAY)
        return false;
    for (size_t i = 0; i < a->elements; i++)
        if (a->element[i]->type != REDIS_REPLY_STRING || !each(c, a->element[i]->str))
            return false;
    return true;
}

static bool add_actor(lease_credential_t *c, const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > LEASE_NAME_MAX)
        return false;
    if (strcmp(s, "*") == 0) {
        c->scope.all_actors = true;
        return true;
    }
    if (c->scope.n_actors >= LEASE_SCOPE_ACTORS_MAX)
        return false;
    memcpy(c->scope.actor_names[c->scope.n_actors++], s, n + 1);
    return true;
}

static bool add_capability(lease_credential_t *c, const char *s)
{
    static const struct {
        const char *name;
        unsigned bit;
    } caps[] = {
        {"targets:lease", LEASE_CAP_LEASE},
        {"targets:read", LEASE_CAP_READ},
        {"targets:force-release", LEASE_CAP_FORCE_RELEASE},
        {"targets:revoke", LEASE_CAP_REVOKE},
        {"audit:read", LEASE_CAP_AUDIT_READ},
    };
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++)
        if (strcmp(caps[i].name, s) == 0)
            c->capabilities |= caps[i].bit;
    return true; /* unknown capabilities grant nothing */
}

bool valkey_decode_credential(const redisReply *reply, lease_credential_t *c, bool *found)
{
    memset(c, 0, sizeof *c);
    *found = false;
    long long f = -1, admin = -1, revoked = -1;
    if (!valkey_int_field(reply, "found", &f) || (f != 0 && f != 1))
        return false;
    if (f == 0)
        return true;
    char digest_hex[65];
    const redisReply *expires = valkey_field(reply, "expires_in_ms");
    bool ok = STR(reply, "credential_id", c->credential_id) && c->credential_id[0] &&
              STR(reply, "principal_id", c->principal_id) && c->principal_id[0] &&
              STR(reply, "client_id", c->client_id) &&
              STR(reply, "tenant_id", c->scope.tenant_id) && c->scope.tenant_id[0] &&
              STR(reply, "program_id", c->scope.program_id) && c->scope.program_id[0] &&
              STR(reply, "secret_digest", digest_hex) && strlen(digest_hex) == 64 &&
              copy_int(reply, "created_at", &c->created_at_ms) &&
              valkey_int_field(reply, "admin", &admin) &&
              valkey_int_field(reply, "revoked", &revoked) && expires != NULL &&
              (expires->type == REDIS_REPLY_NIL ||
               (expires->type == REDIS_REPLY_INTEGER && expires->integer >= 0)) &&
              each_string(valkey_field(reply, "actor_names"), add_actor, c) &&
              each_string(valkey_field(reply, "capabilities"), add_capability, c) &&
              lease_hex_decode(digest_hex, sizeof c->secret_digest, c->secret_digest);
    memset(digest_hex, 0, sizeof digest_hex);
    if (!ok) {
        memset(c, 0, sizeof *c);
        return false;
    }
    c->admin = admin == 1;
    c->revoked = revoked == 1;
    c->has_expiry = expires->type == REDIS_REPLY_INTEGER;
    c->expires_in_ms = c->has_expiry ? expires->integer : 0;
    *found = true;
    return true;
}

char *valkey_encode_audit(const lease_audit_event_t *events, size_t n)
{
    buf_t b = {0};
    open_object(&b);
    lease_json_key(&b, "events");
    lease_json_raw(&b, "[", 1);
    for (size_t i = 0; i < n; i++)
        audit_members(&b, &events[i]);
    lease_json_raw(&b, "]", 1);
    return finish(&b);
}
