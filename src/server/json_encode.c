/*
 * json_encode.c - response envelopes and lease objects (docs/api.md).
 *
 * The only place a lease record becomes JSON for a client. It decides,
 * from the viewer, which owner-private fields appear; lock keys, backend
 * text and request bodies have no field here to leak through.
 */
#include "json_codec.h"

#include <jansson.h>
#include <string.h>

#include "lease/clock.h"
#include "lease/json_fields.h"
#include "lease/json_text.h"

static json_t *time_json(int64_t wall_ms)
{
    char buf[LEASE_TIME_LEN + 1];
    lease_time_format(wall_ms, buf);
    return json_string(buf);
}

static void set_id(json_t *obj, const char *key, const char *value)
{
    if (value && *value)
        json_object_set_new(obj, key, json_string(value));
}

static bool viewer_owns(const lease_record_t *rec, const leased_view_t *view)
{
    return view && view->principal_id && *view->principal_id &&
           strcmp(view->principal_id, rec->owner_principal_id) == 0;
}

static json_t *lease_json(const lease_record_t *rec, const leased_view_t *view)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "lock_identity", lease_json_identity(&rec->identity));
    json_object_set_new(o, "lease_id", json_string(rec->lease_id));
    json_object_set_new(o, "fencing_token", json_integer(rec->fencing_token));
    json_object_set_new(o, "acquired_at", time_json(rec->acquired_at_ms));
    json_object_set_new(o, "renewed_at", time_json(rec->renewed_at_ms));
    json_object_set_new(o, "expires_at", time_json(rec->expires_at_ms));
    if (rec->ended_at_ms > 0)
        json_object_set_new(o, "ended_at", time_json(rec->ended_at_ms));
    json_object_set_new(o, "ttl_ms", json_integer(rec->ttl_ms));
    json_object_set_new(o, "maximum_lifetime_ms", json_integer(rec->maximum_lifetime_ms));
    bool audit = view && view->audit_read;
    if (audit || viewer_owns(rec, view)) {
        set_id(o, "service_instance_id", rec->service_instance_id);
        set_id(o, "execution_id", rec->execution_id);
        set_id(o, "job_id", rec->job_id);
        set_id(o, "trace_id", rec->trace_id);
        /* "null" marks stored metadata the result decoder could not read
         * (docs/api.md "Numbers"): shown as null, never as an empty object */
        json_error_t jerr;
        json_t *md =
            rec->metadata_json[0] ? json_loads(rec->metadata_json, JSON_DECODE_ANY, &jerr) : NULL;
        if (json_is_null(md))
            json_object_set_new(o, "metadata", md);
        else
            json_object_set_new(o, "metadata", json_is_object(md) ? md : json_object());
        if (md && !json_is_object(md) && !json_is_null(md))
            json_decref(md);
    }
    if (audit) {
        set_id(o, "owner_principal_id", rec->owner_principal_id);
        set_id(o, "owner_client_id", rec->owner_client_id);
    }
    json_object_set_new(o, "state", json_string(lease_state_name(rec->state)));
    return o;
}

static json_t *envelope(lease_code_t code, const char *correlation_id)
{
    return json_pack("{s:s, s:s, s:s}", "status", lease_code_is_success(code) ? "success" : "error",
                     "code", lease_code_name(code), "correlation_id", correlation_id);
}

/* Serialises and frees root. */
static char *finish(json_t *root)
{
    if (!root)
        return NULL;
    /* shortest reals: metadata 0.1 is answered as 0.1 */
    char *text = lease_json_dumps(root, 0);
    json_decref(root);
    return text;
}

static json_t *lease_object(const lease_result_t *res, const char *correlation_id,
                            const leased_view_t *view)
{
    json_t *root = envelope(res->code, correlation_id);
    if (!root)
        return NULL;
    if (res->has_lease)
        json_object_set_new(root, "lease", lease_json(&res->lease, view));
    if (res->code == LEASE_ACQUIRED) /* every grant says how long it waited */
        json_object_set_new(root, "waited_ms",
                            json_integer(res->waited_ms > 0 ? (json_int_t)res->waited_ms : 0));
    if (res->replayed) {
        json_object_set_new(root, "replayed", json_true());
        if (res->current_state != LEASE_STATE_NONE)
            json_object_set_new(root, "current_state",
                                json_string(lease_state_name(res->current_state)));
    }
    return root;
}

char *leased_codec_lease_envelope(const lease_result_t *res, const char *correlation_id,
                                  const leased_view_t *view)
{
    return finish(lease_object(res, correlation_id, view));
}

char *leased_codec_list_envelope(const lease_list_result_t *res, const char *correlation_id,
                                 const leased_view_t *view)
{
    json_t *root = envelope(LEASE_LISTED, correlation_id);
    json_t *arr = json_array();
    if (!root || !arr) {
        json_decref(root);
        json_decref(arr);
        return NULL;
    }
    for (size_t i = 0; i < res->count; i++)
        json_array_append_new(arr, lease_json(&res->leases[i], view));
    json_object_set_new(root, "leases", arr);
    if (res->next_page_token[0])
        json_object_set_new(root, "next_page_token", json_string(res->next_page_token));
    return finish(root);
}

char *leased_codec_commit_envelope(const lease_commit_req_t *req, const lease_commit_result_t *res,
                                   const char *correlation_id)
{
    json_t *root = envelope(LEASE_COMMIT_ACCEPTED, correlation_id);
    json_t *results = json_array();
    if (!root || !results) {
        json_decref(root);
        json_decref(results);
        return NULL;
    }
    for (size_t i = 0; i < req->n_writes && i < res->n_writes; i++) {
        const lease_write_t *w = &req->writes[i];
        if (w->kind == LEASE_WRITE_DOCUMENT)
            json_array_append_new(results,
                                  json_pack("{s:s, s:s, s:I}", "kind", "document", "key", w->key,
                                            "revision", (json_int_t)res->revisions[i]));
        else
            json_array_append_new(results,
                                  json_pack("{s:s, s:s, s:I}", "kind", "publication", "topic",
                                            w->key, "outbox_id", (json_int_t)res->revisions[i]));
    }
    json_object_set_new(root, "commit",
                        json_pack("{s:s, s:I, s:o}", "lease_id", req->lease_id, "fencing_token",
                                  (json_int_t)req->fencing_token, "results", results));
    if (res->replayed)
        json_object_set_new(root, "replayed", json_true());
    return finish(root);
}

static json_t *error_object(lease_code_t code, const char *correlation_id, const char *field,
                            int64_t retry_after_ms, int64_t current_revision, const char *reason,
                            const char *detail)
{
    json_t *root = envelope(code, correlation_id);
    if (!root)
        return NULL;
    /* detail comes from the database's own words for this request (the TTL
     * bounds), never from a backend error: safe to show */
    json_t *msg = detail && *detail ? json_string(detail) : NULL;
    json_object_set_new(root, "msg", msg ? msg : json_string(lease_code_message(code)));
    if (reason && *reason)
        json_object_set_new(root, "reason", json_string(reason));
    json_object_set_new(root, "retryable", json_boolean(lease_code_retryable(code)));
    if (retry_after_ms > 0)
        json_object_set_new(root, "retry_after_ms", json_integer(retry_after_ms));
    if (field && *field) {
        /* Field names echo the client's own keys; invalid UTF-8 cannot
         * occur (jansson validated the body), but a cut multibyte
         * sequence could, so fall back to "body" then. */
        json_t *f = json_string(field);
        json_object_set_new(root, "field", f ? f : json_string("body"));
    }
    if (current_revision >= 0)
        json_object_set_new(root, "current_revision", json_integer(current_revision));
    return root;
}

char *leased_codec_error_envelope(lease_code_t code, const char *correlation_id, const char *field,
                                  int64_t retry_after_ms, int64_t current_revision,
                                  const char *reason, const char *detail)
{
    return finish(error_object(code, correlation_id, field, retry_after_ms, current_revision,
                               reason, detail));
}

/* One item's answer inside a batch: what its own call would answer. */
static json_t *item_object(const lease_result_t *r, const leased_view_t *view)
{
    json_t *o;
    if (lease_code_is_success(r->code))
        o = lease_object(r, "", view);
    else
        o = error_object(r->code, "", r->code == LEASE_INVALID_LEASE_REQUEST ? r->field : NULL,
                         lease_code_retryable(r->code) ? r->retry_after_ms : 0, -1,
                         r->reason[0] ? r->reason : NULL,
                         r->code == LEASE_INVALID_LEASE_REQUEST ? r->detail : NULL);
    if (o)
        json_object_del(o, "correlation_id");
    return o;
}

char *leased_codec_batch_envelope(lease_code_t code, const lease_result_t *results, size_t n,
                                  const char *correlation_id, const leased_view_t *view)
{
    /* lease_renewed or lease_released: the batch was decided (each result
     * says how) */
    json_t *root = envelope(code, correlation_id);
    json_t *arr = json_array();
    if (!root || !arr) {
        json_decref(root);
        json_decref(arr);
        return NULL;
    }
    json_object_set_new(root, "results", arr);
    for (size_t i = 0; i < n; i++) {
        json_t *item = item_object(&results[i], view);
        if (!item || json_array_append_new(arr, item) != 0) {
            json_decref(root);
            return NULL;
        }
    }
    return finish(root);
}
