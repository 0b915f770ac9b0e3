/*
 * pg_codec_request.c - encodes store.h requests as the arguments of the SQL
 * functions (docs/sql-api.md, "Common request fields" and "Functions"): the
 * administrative, read and commit calls as one jsonb argument, the
 * acquisition, renewal, release and their batches as typed arguments.
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

/* An acquisition and a renewal name their last argument, brief (DEFAULT
 * true), rather than leave it to its default: a call that needs a default is
 * given it at parse analysis, which reads and parses the default's
 * expression again for every statement that is not prepared (through a
 * pooler: every call), 13,500 instructions a renewal
 * (tests/bench/callgrind/pair --renew). Every typed call's arguments are
 * composites, each one text literal (pack_composites): lease.identity and
 * the operation's request (lease.acquire_request, migration 0029;
 * lease.renew_request and release_request, 0030), a batch an array of
 * each; a new optional field is one more attribute of the request's type,
 * not a new signature. */
const store_pg_typed_call_t store_pg_typed_calls[STORE_PG_TYPED_COUNT] = {
    [STORE_PG_TYPED_ACQUIRE] = {"lease_acquire_brief_typed",
                                "SELECT lease.acquire_brief_typed($1::lease.identity, "
                                "$2::lease.acquire_request, true)::text"},
    [STORE_PG_TYPED_RENEW] = {"lease_renew_brief_typed",
                              "SELECT lease.renew_brief_typed($1::lease.identity, "
                              "$2::lease.renew_request, true)::text"},
    [STORE_PG_TYPED_RELEASE] = {"lease_release_brief_typed",
                                "SELECT lease.release_brief_typed($1::lease.identity, "
                                "$2::lease.release_request)::text"},
    [STORE_PG_TYPED_RENEW_MANY] = {"lease_renew_many_brief_typed",
                                   "SELECT lease.renew_many_brief_typed($1::lease.identity[], "
                                   "$2::lease.renew_request[])::text"},
    [STORE_PG_TYPED_RELEASE_MANY] = {"lease_release_many_brief_typed",
                                     "SELECT lease.release_many_brief_typed($1::lease.identity[], "
                                     "$2::lease.release_request[])::text"},
};

static const char *indexed_field(const char *list, size_t i, const char *leaf)
{
    snprintf(field_buf, sizeof field_buf, "%s[%zu].%s", list, i, leaf);
    return field_buf;
}

/*
 * Each request is written as text directly (json_text.h): the shapes are
 * fixed, and building a jansson tree only to dump it cost an allocation and
 * a hash insert per member (docs/benchmarks.md, "Where leased's
 * instructions go"). Members go out in the order written; no key is
 * written twice. A string that is not UTF-8 fails the request as jansson's
 * json_string did (NULL, no field named): the decoders upstream only pass
 * UTF-8, so this is the out-of-memory path in practice.
 */
typedef lease_json_buf_t out_t;

static void open_member(out_t *b, const char *k, const char *bracket)
{
    lease_json_key(b, k);
    lease_json_raw(b, bracket, 1);
}

static void close_with(out_t *b, const char *bracket)
{
    lease_json_raw(b, bracket, 1);
}

static void put_lock_identity(out_t *b, const lease_identity_t *id)
{
    open_member(b, "lock_identity", "{");
    lease_json_put_identity(b, id);
    close_with(b, "}");
}

/* The lease a holder or an administrator names. */
static void put_lease_ref(out_t *b, const lease_identity_t *id, const char *lease_id,
                          int64_t fencing_token)
{
    put_lock_identity(b, id);
    lease_json_put_str(b, "lease_id", lease_id);
    lease_json_put_int(b, "fencing_token", fencing_token);
}

static void put_scope(out_t *b, const lease_scope_t *scope)
{
    open_member(b, "scope", "{");
    lease_json_put_str(b, "tenant_id", scope->tenant_id);
    lease_json_put_str(b, "program_id", scope->program_id);
    open_member(b, "actor_names", "[");
    if (scope->all_actors || scope->n_actors == 0) {
        /* n_actors 0 with all_actors false would match nothing; the
         * service never builds that, but "*" must be asked for */
        if (scope->all_actors)
            lease_json_text(b, "*");
    } else {
        size_t n =
            scope->n_actors < LEASE_SCOPE_ACTORS_MAX ? scope->n_actors : LEASE_SCOPE_ACTORS_MAX;
        for (size_t i = 0; i < n; i++) {
            lease_json_separate(b);
            lease_json_text(b, scope->actor_names[i]);
        }
    }
    close_with(b, "]");
    close_with(b, "}");
}

/* Opens the request with the fields every request carries. trace_id is the
 * call's unless the operation has its own (acquire and commit store theirs). */
static void open_common(out_t *b, const lease_call_t *call, int64_t now_mono_ns,
                        const char *trace_id)
{
    lease_json_raw(b, "{", 1);
    char deadline[LEASE_TIME_LEN + 1];
    lease_time_format(call->deadline.wall_ms, deadline);
    lease_json_put_str(b, "deadline_at", deadline);
    lease_json_put_str_opt(b, "request_id", call->request_id);
    lease_json_put_str_opt(b, "request_digest", call->request_digest);
    lease_json_put_str_opt(b, "correlation_id", call->correlation_id);
    lease_json_put_str_opt(b, "trace_id", trace_id ? trace_id : call->trace_id);
    lease_json_put_str_opt(b, "deadline_class", call->deadline_class);
    int64_t latency_ms = 0;
    if (call->received_mono_ns > 0 && now_mono_ns > call->received_mono_ns)
        latency_ms = (now_mono_ns - call->received_mono_ns) / 1000000;
    lease_json_put_int(b, "latency_ms", latency_ms);
    if (call->principal.principal_id[0]) {
        open_member(b, "principal", "{");
        lease_json_put_str(b, "principal_id", call->principal.principal_id);
        lease_json_put_str_opt(b, "client_id", call->principal.client_id);
        lease_json_put_str_opt(b, "credential_id", call->principal.credential_id);
        lease_json_put_str_opt(b, "principal_class", call->principal.principal_class);
        close_with(b, "}");
    }
}

/* Closes the request and hands its text over; NULL when a write failed
 * (out of memory, or a string that is not UTF-8). */
static char *finish(out_t *b)
{
    close_with(b, "}");
    return lease_json_take(b);
}

/* Abandons a request whose caller input was refused. */
static char *refuse(out_t *b)
{
    b->failed = true;
    return lease_json_take(b);
}

/* An embedded JSON document (metadata, a write's body) under k: parsed so
 * that a malformed one is the request's field, not a backend failure, and
 * written with shortest reals (lease_json_value: jsonb keeps the decimal
 * text, and 0.1 must not be stored as 0.10000000000000001). */
static bool put_document(out_t *b, const char *k, const char *json)
{
    json_t *doc = store_pg_parse_object(json);
    if (!doc)
        return false;
    lease_json_key(b, k);
    lease_json_value(b, doc, 0);
    json_decref(doc);
    return true;
}

/* An optional text argument: NULL (SQL NULL) when empty, as the jsonb
 * request leaves the member out. */
static const char *opt_arg(const char *s)
{
    return s[0] ? s : NULL;
}

/* What every typed call ends with: the principal (all NULL without one,
 * as the jsonb request then has no principal member), the request id and
 * digest, the deadline, the correlation, the trace id, the deadline class
 * and the latency. The principal's members come in `order`. */
typedef enum principal_order { CLIENT_FIRST, CLASS_FIRST } principal_order_t;

static int put_call_args(store_pg_typed_args_t *out, int n, const lease_call_t *call,
                         int64_t now_mono_ns, principal_order_t order, const char *trace_id,
                         bool trace_last)
{
    const lease_principal_t *who = &call->principal;
    bool has = who->principal_id[0] != '\0';
    lease_time_format(call->deadline.wall_ms, out->deadline_at);
    int64_t latency_ms = 0;
    if (call->received_mono_ns > 0 && now_mono_ns > call->received_mono_ns)
        latency_ms = (now_mono_ns - call->received_mono_ns) / 1000000;
    snprintf(out->latency_ms, sizeof out->latency_ms, "%lld", (long long)latency_ms);
    out->values[n++] = has ? who->principal_id : NULL;
    if (order == CLIENT_FIRST) {
        out->values[n++] = has ? opt_arg(who->client_id) : NULL;
        out->values[n++] = has ? opt_arg(who->credential_id) : NULL;
        out->values[n++] = has ? opt_arg(who->principal_class) : NULL;
    } else {
        out->values[n++] = has ? opt_arg(who->principal_class) : NULL;
        out->values[n++] = has ? opt_arg(who->credential_id) : NULL;
    }
    out->values[n++] = opt_arg(call->request_id);
    out->values[n++] = opt_arg(call->request_digest);
    out->values[n++] = out->deadline_at;
    out->values[n++] = opt_arg(call->correlation_id);
    if (trace_last)
        out->values[n++] = opt_arg(trace_id);
    out->values[n++] = opt_arg(call->deadline_class);
    out->values[n++] = out->latency_ms;
    return n;
}

/* The first n values must be UTF-8, as every string of a jsonb request. */
static bool finish_typed(store_pg_typed_args_t *out, int n)
{
    out->nargs = n;
    for (int i = 0; i < n; i++)
        if (out->values[i] && !lease_json_utf8_valid(out->values[i], strlen(out->values[i])))
            return false;
    return true;
}

static int put_identity_args(store_pg_typed_args_t *out, const lease_identity_t *id)
{
    int n = 0;
    out->values[n++] = id->tenant_id;
    out->values[n++] = id->program_id;
    out->values[n++] = id->target_namespace;
    out->values[n++] = id->target_id;
    out->values[n++] = id->actor_name;
    out->values[n++] = id->workflow_name;
    out->values[n++] = opt_arg(id->operation_class);
    return n;
}

/* v double-quoted with '"' and '\\' escaped: an element of an array
 * literal or a field of a composite's (array_in's and record_in's rules:
 * a quoted value is taken verbatim, so "NULL", "", braces, parentheses,
 * commas and blanks stay text). At most 2 * strlen(v) + 2 bytes. Returns
 * the end. */
static char *put_quoted(char *w, const char *v)
{
    *w++ = '"';
    for (; *v; v++) {
        if (*v == '"' || *v == '\\')
            *w++ = '\\';
        *w++ = *v;
    }
    *w++ = '"';
    return w;
}

/* One element of an array literal: NULL, or the text quoted. */
static char *put_element(char *w, const char *v)
{
    if (!v) {
        memcpy(w, "NULL", 4);
        return w + 4;
    }
    return put_quoted(w, v);
}

/* A composite's text literal: "(" the fields, comma-separated ")", a
 * field quoted, or nothing for SQL NULL; then the NUL. At most
 * 3 + the sum of each field's 2 * strlen + 3 bytes. Returns the end. */
static char *put_record(char *w, const char *const *fields, int n)
{
    *w++ = '(';
    for (int i = 0; i < n; i++) {
        if (i > 0)
            *w++ = ',';
        if (fields[i])
            w = put_quoted(w, fields[i]);
    }
    *w++ = ')';
    *w++ = '\0';
    return w;
}

/* The n values written, in the positional order the call had (the
 * identity's seven first), as the call's two composites: lease.identity
 * (its eighth field, bad_field, NULL) and the operation's request type
 * (the values after the identity's). out->values become the two literals,
 * in out->literals (store_pg_typed_args_free). False when a string is not
 * UTF-8 or out of memory. */
static bool pack_composites(store_pg_typed_args_t *out, int n)
{
    if (!finish_typed(out, n))
        return false;
    size_t size = 2 * 3 + 1;
    for (int i = 0; i < n; i++)
        size += (out->values[i] ? 2 * strlen(out->values[i]) + 2 : 0) + 1;
    out->literals = malloc(size);
    if (!out->literals)
        return false;
    const char *identity[STORE_PG_IDENTITY_FIELDS + 1] = {NULL};
    memcpy(identity, out->values, STORE_PG_IDENTITY_FIELDS * sizeof *identity);
    char *request = put_record(out->literals, identity, STORE_PG_IDENTITY_FIELDS + 1);
    put_record(request, out->values + STORE_PG_IDENTITY_FIELDS, n - STORE_PG_IDENTITY_FIELDS);
    out->values[0] = out->literals;
    out->values[1] = request;
    out->nargs = 2;
    return true;
}

bool store_pg_encode_owner_typed(store_pg_op_t op, const lease_owner_req_t *req,
                                 int64_t now_mono_ns, store_pg_typed_args_t *out)
{
    bool renew = op == STORE_PG_OP_RENEW;
    memset(out, 0, sizeof *out);
    const store_pg_typed_call_t *callee =
        &store_pg_typed_calls[renew ? STORE_PG_TYPED_RENEW : STORE_PG_TYPED_RELEASE];
    out->sql = callee->sql;
    out->prepared = callee->name;
    int n = put_identity_args(out, &req->identity);
    out->values[n++] = req->lease_id;
    snprintf(out->fencing_token, sizeof out->fencing_token, "%lld", (long long)req->fencing_token);
    out->values[n++] = out->fencing_token;
    if (renew) {
        if (req->ttl_ms > 0)
            snprintf(out->ttl_ms, sizeof out->ttl_ms, "%lld", (long long)req->ttl_ms);
        out->values[n++] = opt_arg(out->ttl_ms);
    }
    out->values[n++] = req->service_instance_id;
    n = put_call_args(out, n, &req->call, now_mono_ns, CLASS_FIRST, req->call.trace_id, true);
    return pack_composites(out, n);
}

bool store_pg_encode_owner_many_typed(store_pg_op_t op, const lease_owner_req_t *reqs, size_t n,
                                      int64_t now_mono_ns, store_pg_typed_many_t *out)
{
    bool renew = op == STORE_PG_OP_RENEW_MANY;
    memset(out, 0, sizeof *out);
    if (n == 0)
        return false;
    store_pg_typed_args_t *items = calloc(n, sizeof *items);
    if (!items)
        return false;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (!store_pg_encode_owner_typed(renew ? STORE_PG_OP_RENEW : STORE_PG_OP_RELEASE, &reqs[i],
                                         now_mono_ns, &items[i]))
            goto fail;
        /* each item's two composites' literals, elements of the two arrays;
         * worst case: every byte escaped */
        for (int j = 0; j < items[i].nargs; j++)
            total += (items[i].values[j] ? 2 * strlen(items[i].values[j]) + 2 : 4) + 1;
    }
    int nargs = items[0].nargs;
    out->arrays = malloc(total + (size_t)nargs * 3);
    if (!out->arrays)
        goto fail;
    char *w = out->arrays;
    for (int j = 0; j < nargs; j++) {
        out->values[j] = w;
        *w++ = '{';
        for (size_t i = 0; i < n; i++) {
            if (i > 0)
                *w++ = ',';
            w = put_element(w, items[i].values[j]);
        }
        *w++ = '}';
        *w++ = '\0';
    }
    out->nargs = nargs;
    const store_pg_typed_call_t *callee =
        &store_pg_typed_calls[renew ? STORE_PG_TYPED_RENEW_MANY : STORE_PG_TYPED_RELEASE_MANY];
    out->sql = callee->sql;
    out->prepared = callee->name;
    for (size_t i = 0; i < n; i++)
        store_pg_typed_args_free(&items[i]);
    free(items);
    return true;
fail:
    for (size_t i = 0; i < n; i++)
        store_pg_typed_args_free(&items[i]);
    free(items);
    free(out->arrays);
    memset(out, 0, sizeof *out);
    return false;
}

void store_pg_typed_many_free(store_pg_typed_many_t *m)
{
    if (!m)
        return;
    free(m->arrays);
    memset(m, 0, sizeof *m);
}

bool store_pg_encode_acquire_typed(const lease_acquire_req_t *req, int64_t now_mono_ns,
                                   store_pg_typed_args_t *out, const char **bad_field)
{
    memset(out, 0, sizeof *out);
    *bad_field = NULL;
    bool has_metadata = req->metadata_json[0] && strcmp(req->metadata_json, "{}") != 0;
    if (has_metadata) {
        /* refused here, before any connection: the caller's input */
        json_t *doc = store_pg_parse_object(req->metadata_json);
        if (!doc) {
            *bad_field = "metadata";
            return false;
        }
        json_decref(doc);
    }
    out->sql = store_pg_typed_calls[STORE_PG_TYPED_ACQUIRE].sql;
    out->prepared = store_pg_typed_calls[STORE_PG_TYPED_ACQUIRE].name;
    int n = put_identity_args(out, &req->identity);
    out->values[n++] = req->service_instance_id;
    out->values[n++] = req->execution_id;
    out->values[n++] = req->job_id;
    /* the lease stores the acquire's own trace id, else the call's */
    out->values[n++] = opt_arg(req->trace_id[0] ? req->trace_id : req->call.trace_id);
    if (req->ttl_ms > 0)
        snprintf(out->ttl_ms, sizeof out->ttl_ms, "%lld", (long long)req->ttl_ms);
    out->values[n++] = opt_arg(out->ttl_ms);
    if (req->maximum_lifetime_ms > 0)
        snprintf(out->maximum_lifetime_ms, sizeof out->maximum_lifetime_ms, "%lld",
                 (long long)req->maximum_lifetime_ms);
    out->values[n++] = opt_arg(out->maximum_lifetime_ms);
    /* absent means {} in SQL too: the empty object is not sent */
    out->values[n++] = has_metadata ? req->metadata_json : NULL;
    n = put_call_args(out, n, &req->call, now_mono_ns, CLIENT_FIRST, NULL, false);
    /* the last argument, after brief (written in the statement) */
    out->values[n++] = opt_arg(req->session_id);
    /* the 25 values above as the two composites: the identity's seven and
     * lease.acquire_request's eighteen */
    return pack_composites(out, n);
}

void store_pg_typed_args_free(store_pg_typed_args_t *a)
{
    free(a->literals);
    a->literals = NULL;
}

bool store_pg_encode_session_typed(store_pg_op_t op, const lease_session_req_t *req,
                                   int64_t now_mono_ns, store_pg_typed_args_t *out)
{
    memset(out, 0, sizeof *out);
    const lease_call_t *call = &req->call;
    const lease_principal_t *who = &call->principal;
    lease_time_format(call->deadline.wall_ms, out->deadline_at);
    int64_t latency_ms = 0;
    if (call->received_mono_ns > 0 && now_mono_ns > call->received_mono_ns)
        latency_ms = (now_mono_ns - call->received_mono_ns) / 1000000;
    snprintf(out->latency_ms, sizeof out->latency_ms, "%lld", (long long)latency_ms);
    int n = 0;
    if (op == STORE_PG_OP_SESSION_OPEN) {
        out->sql = "SELECT lease.session_open($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, "
                   "$12)::text";
        out->values[n++] = req->tenant_id;
        out->values[n++] = req->service_instance_id;
        if (req->ttl_ms > 0)
            snprintf(out->ttl_ms, sizeof out->ttl_ms, "%lld", (long long)req->ttl_ms);
        out->values[n++] = opt_arg(out->ttl_ms);
    } else {
        out->sql = op == STORE_PG_OP_SESSION_KEEPALIVE
                       ? "SELECT lease.session_keepalive($1, $2, $3, $4, $5)::text"
                       : "SELECT lease.session_close($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, "
                         "$11)::text";
        out->values[n++] = req->session_id;
        out->values[n++] = req->tenant_id;
    }
    out->values[n++] = opt_arg(who->principal_id);
    out->values[n++] = opt_arg(who->credential_id);
    if (op == STORE_PG_OP_SESSION_KEEPALIVE) {
        /* idempotent by value: no request id, digest or audit columns */
        out->values[n++] = out->deadline_at;
        return finish_typed(out, n);
    }
    out->values[n++] = opt_arg(who->principal_class);
    out->values[n++] = opt_arg(call->request_id);
    out->values[n++] = opt_arg(call->request_digest);
    out->values[n++] = out->deadline_at;
    out->values[n++] = opt_arg(call->correlation_id);
    out->values[n++] = opt_arg(call->deadline_class);
    out->values[n++] = out->latency_ms;
    return finish_typed(out, n);
}

char *store_pg_encode_admin(store_pg_op_t op, const lease_admin_req_t *req, int64_t now_mono_ns,
                            const char **bad_field)
{
    *bad_field = NULL;
    out_t b = {0};
    open_common(&b, &req->call, now_mono_ns, NULL);
    put_lease_ref(&b, &req->identity, req->lease_id, req->fencing_token);
    lease_json_put_str(&b, "reason", req->reason);
    if (op == STORE_PG_OP_REVOKE)
        lease_json_put_str_opt(&b, "incident_id", req->incident_id);
    return finish(&b);
}

char *store_pg_encode_inspect(const lease_inspect_req_t *req, int64_t now_mono_ns,
                              const char **bad_field)
{
    *bad_field = NULL;
    out_t b = {0};
    open_common(&b, &req->call, now_mono_ns, NULL);
    put_scope(&b, &req->scope);
    if (req->by_identity)
        put_lock_identity(&b, &req->identity);
    else
        lease_json_put_str(&b, "lease_id", req->lease_id);
    return finish(&b);
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
    out_t b = {0};
    open_common(&b, &req->call, now_mono_ns, NULL);
    put_scope(&b, &req->scope);
    lease_json_put_str(&b, "tenant_id", req->tenant_id);
    lease_json_put_str(&b, "program_id", req->program_id);
    if (req->by == LEASE_LIST_BY_TARGET) {
        lease_json_put_str(&b, "target_namespace", req->target_namespace);
        lease_json_put_str(&b, "target_id", req->target_id);
    }
    if (req->by == LEASE_LIST_BY_OWNER)
        lease_json_put_str(&b, "owner_principal_id", req->owner_principal_id);
    if (req->page_size > 0)
        lease_json_put_int(&b, "page_size", req->page_size);
    if (req->page_token[0]) {
        lease_json_put_str(&b, "page_token", req->page_token);
    } else {
        lease_json_key(&b, "page_token");
        lease_json_raw(&b, "null", 4);
    }
    return finish(&b);
}

char *store_pg_encode_commit(const lease_commit_req_t *req, int64_t now_mono_ns,
                             const char **bad_field)
{
    *bad_field = NULL;
    if (req->n_writes == 0 || req->n_writes > LEASE_COMMIT_WRITES_MAX) {
        *bad_field = "writes";
        return NULL;
    }
    out_t b = {0};
    open_common(&b, &req->call, now_mono_ns, req->trace_id[0] ? req->trace_id : NULL);
    put_lease_ref(&b, &req->identity, req->lease_id, req->fencing_token);
    lease_json_put_str(&b, "execution_id", req->execution_id);
    open_member(&b, "writes", "[");
    for (size_t i = 0; i < req->n_writes; i++) {
        const lease_write_t *w = &req->writes[i];
        bool doc = w->kind == LEASE_WRITE_DOCUMENT;
        if (!doc && w->kind != LEASE_WRITE_PUBLICATION) {
            *bad_field = indexed_field("writes", i, "kind");
            return refuse(&b);
        }
        lease_json_separate(&b);
        lease_json_raw(&b, "{", 1);
        lease_json_put_str(&b, "kind", doc ? "document" : "publication");
        lease_json_put_str(&b, doc ? "key" : "topic", w->key);
        if (doc)
            lease_json_put_int(&b, "expected_revision", w->expected_revision);
        if (!put_document(&b, doc ? "body" : "payload", w->json)) {
            *bad_field = indexed_field("writes", i, doc ? "body" : "payload");
            return refuse(&b);
        }
        close_with(&b, "}");
    }
    close_with(&b, "]");
    return finish(&b);
}

static void put_time_or_null(out_t *b, const char *k, int64_t ms)
{
    if (ms <= 0) {
        lease_json_key(b, k);
        lease_json_raw(b, "null", 4);
        return;
    }
    char ts[LEASE_TIME_LEN + 1];
    lease_time_format(ms, ts);
    lease_json_put_str(b, k, ts);
}

static void write_audit_event(out_t *b, const lease_audit_event_t *e)
{
    lease_json_raw(b, "{", 1);
    lease_json_put_str(b, "event_type", e->event_type);
    put_time_or_null(b, "occurred_at", e->occurred_at_ms);
    lease_json_put_int(b, "latency_ms", e->latency_ms);
    lease_json_put_str(b, "result_code", lease_code_name(e->code));
    lease_json_key(b, "retryable");
    lease_json_raw(b, lease_code_retryable(e->code) ? "true" : "false",
                   lease_code_retryable(e->code) ? 4 : 5);
    /* lease.audit_events.decision is NOT NULL: derive it when unset */
    const char *decision = e->decision;
    if (!decision || !*decision)
        decision = lease_code_is_success(e->code) ? "allow"
                   : e->code == LEASE_BACKEND_UNAVAILABLE || e->code == LEASE_OUTCOME_UNKNOWN ||
                           e->code == LEASE_DEADLINE_EXCEEDED
                       ? "error"
                       : "deny";
    lease_json_put_str(b, "decision", decision);
    lease_json_put_str_opt(b, "backend_health", e->backend_health);
    lease_json_put_str_opt(b, "request_id", e->call.request_id);
    lease_json_put_str_opt(b, "correlation_id", e->call.correlation_id);
    lease_json_put_str_opt(b, "trace_id", e->call.trace_id);
    lease_json_put_str_opt(b, "deadline_class", e->call.deadline_class);
    lease_json_put_str_opt(b, "principal_id", e->call.principal.principal_id);
    lease_json_put_str_opt(b, "principal_class", e->call.principal.principal_class);
    lease_json_put_str_opt(b, "client_id", e->call.principal.client_id);
    lease_json_put_str_opt(b, "credential_id", e->call.principal.credential_id);
    if (e->has_identity)
        lease_json_put_identity(b, &e->identity);
    lease_json_put_str_opt(b, "lease_id", e->lease_id);
    if (e->fencing_token > 0)
        lease_json_put_int(b, "fencing_token", e->fencing_token);
    lease_json_put_str_opt(b, "service_instance_id", e->service_instance_id);
    lease_json_put_str_opt(b, "execution_id", e->execution_id);
    lease_json_put_str_opt(b, "job_id", e->job_id);
    if (e->requested_ttl_ms > 0)
        lease_json_put_int(b, "requested_ttl_ms", e->requested_ttl_ms);
    lease_json_put_str_opt(b, "previous_state", lease_state_name(e->previous_state));
    lease_json_put_str_opt(b, "resulting_state", lease_state_name(e->resulting_state));
    lease_json_put_str_opt(b, "reason", e->reason);
    lease_json_put_str_opt(b, "incident_id", e->incident_id);
    /* aggregated refusals (schema 14): one event standing for many */
    if (e->event_count > 1)
        lease_json_put_int(b, "event_count", e->event_count);
    lease_json_put_str_opt(b, "source_address", e->source_address);
    close_with(b, "}");
}

char *store_pg_encode_audit(const lease_audit_event_t *events, size_t n, const char **bad_field)
{
    *bad_field = NULL;
    out_t b = {0};
    lease_json_raw(&b, "[", 1);
    for (size_t i = 0; i < n; i++) {
        if (!events[i].event_type || !*events[i].event_type) {
            *bad_field = indexed_field("events", i, "event_type");
            return refuse(&b);
        }
        lease_json_separate(&b);
        write_audit_event(&b, &events[i]);
    }
    close_with(&b, "]");
    return lease_json_take(&b);
}
