/*
 * json_encode.c - response envelopes and lease objects (docs/api.md).
 *
 * The only place a lease record becomes JSON for a client. It decides,
 * from the viewer, which owner-private fields appear; lock keys, backend
 * text and request bodies have no field here to leak through.
 *
 * Every envelope is written as text directly (json_text.h), in the member
 * order the jansson trees it replaced had: building a tree only to dump it
 * cost an allocation and a hash insert per member, and answering was the
 * largest share of leased's own instructions per request
 * (docs/benchmarks.md, "Where leased's instructions go"). A string that is
 * not UTF-8 (none gets here: every field came through jansson's decoder or
 * the database) fails the envelope (NULL), which callers answer as they
 * answer running out of memory.
 */
#include "json_codec.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "lease/clock.h"
#include "lease/json_fields.h"
#include "lease/json_text.h"

typedef lease_json_buf_t out_t;

static void put_time(out_t *b, const char *k, int64_t wall_ms)
{
    char buf[LEASE_TIME_LEN + 1];
    lease_time_format(wall_ms, buf);
    lease_json_put_str(b, k, buf);
}

static void put_bool(out_t *b, const char *k, bool v)
{
    lease_json_key(b, k);
    lease_json_raw(b, v ? "true" : "false", v ? 4 : 5);
}

static bool viewer_owns(const lease_record_t *rec, const leased_view_t *view)
{
    return view && view->principal_id && *view->principal_id &&
           strcmp(view->principal_id, rec->owner_principal_id) == 0;
}

/* Metadata has at most 16 keys (docs/api.md "Metadata"): at most one
 * re-read of the stored text per key. */
#define METADATA_REREADS 16

/* text with the number that ends at offset end written as null (heap), or
 * NULL when no number ends there. */
static char *null_the_number(const char *text, size_t end)
{
    size_t start = end;
    while (start > 0 && strchr("0123456789+-.eE", text[start - 1]))
        start--;
    if (start == end)
        return NULL;
    size_t len = strlen(text);
    char *out = malloc(len - (end - start) + sizeof "null");
    if (!out)
        return NULL;
    memcpy(out, text, start);
    memcpy(out + start, "null", 4);
    memcpy(out + start + 4, text + end, len - end + 1);
    return out;
}

/*
 * The stored metadata text as docs/api.md "Numbers" says it reads: a
 * number outside the bound as null (lease_json_null_unsafe_numbers, the
 * rule the PostgreSQL result decoder applies too), and anything but an
 * object (or no JSON at all) as null as a whole (json null). The
 * PostgreSQL adapter's result decoder has done this already (its text is
 * an object within the bound, "{}" or "null"); the Valkey library hands
 * over the text it stored, which only a record written by hand can hold
 * such a value in. jansson refuses a number it cannot hold (1e400, 2^64)
 * and stops right after it, so the text is read again with that number
 * written as null.
 */
static json_t *read_metadata(const char *text)
{
    char *fixed = NULL;
    json_t *md = NULL;
    for (int i = 0; i <= METADATA_REREADS && !md; i++) {
        const char *now = fixed ? fixed : text;
        json_error_t err;
        md = json_loads(now, JSON_DECODE_ANY, &err);
        if (md || json_error_code(&err) != json_error_numeric_overflow || err.position < 0 ||
            (size_t)err.position > strlen(now))
            break;
        char *next = null_the_number(now, (size_t)err.position);
        free(fixed);
        fixed = next;
        if (!fixed)
            break;
    }
    free(fixed);
    if (!json_is_object(md)) {
        json_decref(md);
        return json_null();
    }
    /* replacing a member the object holds does not allocate; were it to
     * fail, that member would be answered as stored */
    (void)lease_json_null_unsafe_numbers(md);
    return md;
}

/* The stored metadata as the owner sees it (read_metadata): null for
 * metadata that cannot be shown, never an empty object in its place. */
static void put_metadata(out_t *b, const char *metadata_json)
{
    lease_json_key(b, "metadata");
    if (!metadata_json[0] || strcmp(metadata_json, "{}") == 0) {
        lease_json_raw(b, "{}", 2);
        return;
    }
    json_t *md = read_metadata(metadata_json);
    if (json_is_null(md))
        lease_json_raw(b, "null", 4);
    else
        lease_json_value(b, md, 0); /* shortest reals: metadata 0.1 is answered as 0.1 */
    json_decref(md);
}

static void put_lease(out_t *b, const lease_record_t *rec, const leased_view_t *view)
{
    lease_json_raw(b, "{", 1);
    lease_json_key(b, "lock_identity");
    lease_json_raw(b, "{", 1);
    lease_json_put_identity(b, &rec->identity);
    lease_json_raw(b, "}", 1);
    lease_json_put_str(b, "lease_id", rec->lease_id);
    lease_json_put_int(b, "fencing_token", rec->fencing_token);
    put_time(b, "acquired_at", rec->acquired_at_ms);
    put_time(b, "renewed_at", rec->renewed_at_ms);
    put_time(b, "expires_at", rec->expires_at_ms);
    if (rec->ended_at_ms > 0)
        put_time(b, "ended_at", rec->ended_at_ms);
    lease_json_put_int(b, "ttl_ms", rec->ttl_ms);
    lease_json_put_int(b, "maximum_lifetime_ms", rec->maximum_lifetime_ms);
    lease_json_put_str_opt(b, "session_id", rec->session_id);
    bool audit = view && view->audit_read;
    if (audit || viewer_owns(rec, view)) {
        lease_json_put_str_opt(b, "service_instance_id", rec->service_instance_id);
        lease_json_put_str_opt(b, "execution_id", rec->execution_id);
        lease_json_put_str_opt(b, "job_id", rec->job_id);
        lease_json_put_str_opt(b, "trace_id", rec->trace_id);
        put_metadata(b, rec->metadata_json);
    }
    if (audit) {
        lease_json_put_str_opt(b, "owner_principal_id", rec->owner_principal_id);
        lease_json_put_str_opt(b, "owner_client_id", rec->owner_client_id);
    }
    lease_json_put_str(b, "state", lease_state_name(rec->state));
    lease_json_raw(b, "}", 1);
}

/* Opens an envelope; a batch item has no correlation id of its own (NULL). */
static void open_envelope(out_t *b, lease_code_t code, const char *correlation_id)
{
    lease_json_raw(b, "{", 1);
    lease_json_put_str(b, "status", lease_code_is_success(code) ? "success" : "error");
    lease_json_put_str(b, "code", lease_code_name(code));
    if (correlation_id)
        lease_json_put_str(b, "correlation_id", correlation_id);
}

static char *finish(out_t *b)
{
    lease_json_raw(b, "}", 1);
    return lease_json_take(b);
}

static void put_lease_result(out_t *b, const lease_result_t *res, const char *correlation_id,
                             const leased_view_t *view)
{
    open_envelope(b, res->code, correlation_id);
    if (res->has_lease) {
        lease_json_key(b, "lease");
        put_lease(b, &res->lease, view);
    }
    if (res->code == LEASE_ACQUIRED) /* every grant says how long it waited */
        lease_json_put_int(b, "waited_ms", res->waited_ms > 0 ? res->waited_ms : 0);
    if (res->replayed) {
        put_bool(b, "replayed", true);
        if (res->current_state != LEASE_STATE_NONE)
            lease_json_put_str(b, "current_state", lease_state_name(res->current_state));
    }
}

char *leased_codec_lease_envelope(const lease_result_t *res, const char *correlation_id,
                                  const leased_view_t *view)
{
    out_t b = {0};
    put_lease_result(&b, res, correlation_id, view);
    return finish(&b);
}

char *leased_codec_session_envelope(const lease_result_t *res, const char *correlation_id)
{
    const lease_session_t *s = &res->session;
    out_t b = {0};
    open_envelope(&b, res->code, correlation_id);
    lease_json_key(&b, "session");
    lease_json_raw(&b, "{", 1);
    lease_json_put_str(&b, "session_id", s->session_id);
    lease_json_put_str(&b, "tenant_id", s->tenant_id);
    lease_json_put_str(&b, "owner_principal_id", s->owner_principal_id);
    lease_json_put_str(&b, "owner_credential_id", s->owner_credential_id);
    lease_json_put_str(&b, "service_instance_id", s->service_instance_id);
    lease_json_put_int(&b, "ttl_ms", s->ttl_ms);
    put_time(&b, "created_at", s->created_at_ms);
    put_time(&b, "renewed_at", s->renewed_at_ms);
    put_time(&b, "expires_at", s->expires_at_ms);
    lease_json_put_str(&b, "state", s->state);
    lease_json_raw(&b, "}", 1);
    if (res->code == LEASE_RELEASED) {
        lease_json_put_int(&b, "leases_ended", res->leases_ended);
        put_bool(&b, "more", res->more);
    }
    if (res->replayed)
        put_bool(&b, "replayed", true);
    return finish(&b);
}

char *leased_codec_list_envelope(const lease_list_result_t *res, const char *correlation_id,
                                 const leased_view_t *view)
{
    out_t b = {0};
    open_envelope(&b, LEASE_LISTED, correlation_id);
    lease_json_key(&b, "leases");
    lease_json_raw(&b, "[", 1);
    for (size_t i = 0; i < res->count; i++) {
        lease_json_separate(&b);
        put_lease(&b, &res->leases[i], view);
    }
    lease_json_raw(&b, "]", 1);
    lease_json_put_str_opt(&b, "next_page_token", res->next_page_token);
    return finish(&b);
}

char *leased_codec_commit_envelope(const lease_commit_req_t *req, const lease_commit_result_t *res,
                                   const char *correlation_id)
{
    out_t b = {0};
    open_envelope(&b, LEASE_COMMIT_ACCEPTED, correlation_id);
    lease_json_key(&b, "commit");
    lease_json_raw(&b, "{", 1);
    lease_json_put_str(&b, "lease_id", req->lease_id);
    lease_json_put_int(&b, "fencing_token", req->fencing_token);
    lease_json_key(&b, "results");
    lease_json_raw(&b, "[", 1);
    for (size_t i = 0; i < req->n_writes && i < res->n_writes; i++) {
        const lease_write_t *w = &req->writes[i];
        bool doc = w->kind == LEASE_WRITE_DOCUMENT;
        lease_json_separate(&b);
        lease_json_raw(&b, "{", 1);
        lease_json_put_str(&b, "kind", doc ? "document" : "publication");
        lease_json_put_str(&b, doc ? "key" : "topic", w->key);
        lease_json_put_int(&b, doc ? "revision" : "outbox_id", res->revisions[i]);
        lease_json_raw(&b, "}", 1);
    }
    lease_json_raw(&b, "]}", 2);
    if (res->replayed)
        put_bool(&b, "replayed", true);
    return finish(&b);
}

static void put_error(out_t *b, lease_code_t code, const char *correlation_id, const char *field,
                      int64_t retry_after_ms, int64_t current_revision, const char *reason,
                      const char *detail)
{
    open_envelope(b, code, correlation_id);
    /* detail comes from the database's own words for this request (the TTL
     * bounds), never from a backend error: safe to show */
    const char *msg = detail && *detail ? detail : lease_code_message(code);
    if (!lease_json_utf8_valid(msg, strlen(msg)))
        msg = lease_code_message(code);
    lease_json_put_str(b, "msg", msg);
    lease_json_put_str_opt(b, "reason", reason);
    put_bool(b, "retryable", lease_code_retryable(code));
    if (retry_after_ms > 0)
        lease_json_put_int(b, "retry_after_ms", retry_after_ms);
    if (field && *field) {
        /* Field names echo the client's own keys; invalid UTF-8 cannot
         * occur (jansson validated the body), but a cut multibyte
         * sequence could, so fall back to "body" then. */
        lease_json_put_str(b, "field",
                           lease_json_utf8_valid(field, strlen(field)) ? field : "body");
    }
    if (current_revision >= 0)
        lease_json_put_int(b, "current_revision", current_revision);
}

char *leased_codec_error_envelope(lease_code_t code, const char *correlation_id, const char *field,
                                  int64_t retry_after_ms, int64_t current_revision,
                                  const char *reason, const char *detail)
{
    out_t b = {0};
    put_error(&b, code, correlation_id, field, retry_after_ms, current_revision, reason, detail);
    return finish(&b);
}

char *leased_codec_batch_envelope(lease_code_t code, const lease_result_t *results, size_t n,
                                  const char *correlation_id, const leased_view_t *view)
{
    /* lease_renewed or lease_released: the batch was decided (each result
     * says how); each item answers what its own call would, without a
     * correlation id of its own */
    out_t b = {0};
    open_envelope(&b, code, correlation_id);
    lease_json_key(&b, "results");
    lease_json_raw(&b, "[", 1);
    for (size_t i = 0; i < n; i++) {
        const lease_result_t *r = &results[i];
        lease_json_separate(&b);
        if (lease_code_is_success(r->code))
            put_lease_result(&b, r, NULL, view);
        else
            put_error(&b, r->code, NULL, r->code == LEASE_INVALID_LEASE_REQUEST ? r->field : NULL,
                      lease_code_retryable(r->code) ? r->retry_after_ms : 0, -1,
                      r->reason[0] ? r->reason : NULL,
                      r->code == LEASE_INVALID_LEASE_REQUEST ? r->detail : NULL);
        lease_json_raw(&b, "}", 1);
    }
    lease_json_raw(&b, "]", 1);
    return finish(&b);
}
