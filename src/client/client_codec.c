/*
 * client_codec.c - JSON of the wire as the client sees it: answer envelopes
 * and lease objects decoded into the typed structs of lease/types.h, and the
 * lock_identity object of requests.
 *
 * The client is lenient where the service is strict: unknown answer fields
 * are ignored (a newer service may add some), but every field the typed
 * structs need must be present and well-formed, else the answer is treated
 * as untyped (and a mutation's outcome as not yet known).
 */
#include <string.h>

#include "client_internal.h"
#include "lease/json_fields.h"

bool client_lease_decode(const json_t *obj, lease_record_t *out)
{
    memset(out, 0, sizeof *out);
    if (!json_is_object(obj))
        return false;
    if (!lease_json_get_identity(json_object_get(obj, "lock_identity"), &out->identity) ||
        !lease_json_get_str(obj, "lease_id", out->lease_id, sizeof out->lease_id, true) ||
        !lease_json_get_int(obj, "fencing_token", &out->fencing_token, true, INT64_MIN) ||
        !lease_json_get_time(obj, "acquired_at", &out->acquired_at_ms, true) ||
        !lease_json_get_time(obj, "renewed_at", &out->renewed_at_ms, true) ||
        !lease_json_get_time(obj, "expires_at", &out->expires_at_ms, true) ||
        !lease_json_get_int(obj, "ttl_ms", &out->ttl_ms, true, INT64_MIN) ||
        !lease_json_get_time(obj, "ended_at", &out->ended_at_ms, false) ||
        !lease_json_get_int(obj, "maximum_lifetime_ms", &out->maximum_lifetime_ms, false,
                            INT64_MIN))
        return false;
    const json_t *state = json_object_get(obj, "state");
    if (!json_is_string(state) || !lease_state_parse(json_string_value(state), &out->state))
        return false;
    /* owner-private and audit fields appear only when the caller may see them */
    if (!lease_json_get_str(obj, "service_instance_id", out->service_instance_id,
                            sizeof out->service_instance_id, false) ||
        !lease_json_get_str(obj, "execution_id", out->execution_id, sizeof out->execution_id,
                            false) ||
        !lease_json_get_str(obj, "job_id", out->job_id, sizeof out->job_id, false) ||
        !lease_json_get_str(obj, "trace_id", out->trace_id, sizeof out->trace_id, false) ||
        !lease_json_get_str(obj, "request_id", out->request_id, sizeof out->request_id, false) ||
        !lease_json_get_str(obj, "owner_principal_id", out->owner_principal_id,
                            sizeof out->owner_principal_id, false) ||
        !lease_json_get_str(obj, "owner_client_id", out->owner_client_id,
                            sizeof out->owner_client_id, false) ||
        !lease_json_get_str(obj, "owner_credential_id", out->owner_credential_id,
                            sizeof out->owner_credential_id, false) ||
        !lease_json_get_str(obj, "end_reason", out->end_reason, sizeof out->end_reason, false) ||
        !lease_json_get_str(obj, "incident_id", out->incident_id, sizeof out->incident_id, false) ||
        !lease_json_get_str(obj, "session_id", out->session_id, sizeof out->session_id, false))
        return false;
    const json_t *meta = json_object_get(obj, "metadata");
    strcpy(out->metadata_json, "{}");
    if (json_is_object(meta)) {
        char *text = json_dumps(meta, JSON_COMPACT | JSON_SORT_KEYS);
        if (!text)
            return false;
        bool fits = strlen(text) < sizeof out->metadata_json;
        if (fits)
            strcpy(out->metadata_json, text);
        free(text);
        if (!fits)
            return false;
    }
    return true;
}

bool client_session_decode(const json_t *o, lease_session_t *s)
{
    memset(s, 0, sizeof *s);
    return json_is_object(o) &&
           lease_json_get_str(o, "session_id", s->session_id, sizeof s->session_id, true) &&
           lease_json_get_str(o, "tenant_id", s->tenant_id, sizeof s->tenant_id, false) &&
           lease_json_get_str(o, "owner_principal_id", s->owner_principal_id,
                              sizeof s->owner_principal_id, false) &&
           lease_json_get_str(o, "owner_credential_id", s->owner_credential_id,
                              sizeof s->owner_credential_id, false) &&
           lease_json_get_str(o, "service_instance_id", s->service_instance_id,
                              sizeof s->service_instance_id, false) &&
           lease_json_get_int(o, "ttl_ms", &s->ttl_ms, true, 1) &&
           lease_json_get_time(o, "created_at", &s->created_at_ms, false) &&
           lease_json_get_time(o, "renewed_at", &s->renewed_at_ms, true) &&
           lease_json_get_time(o, "expires_at", &s->expires_at_ms, true) &&
           lease_json_get_str(o, "state", s->state, sizeof s->state, true);
}

bool client_envelope_decode(const char *body, size_t len, client_envelope_t *env)
{
    memset(env, 0, sizeof *env);
    if (!body || len == 0)
        return false;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(root)) {
        json_decref(root);
        return false;
    }
    const json_t *status = json_object_get(root, "status");
    const json_t *code = json_object_get(root, "code");
    lease_code_t c;
    if (!json_is_string(status) || !json_is_string(code) ||
        !lease_code_parse(json_string_value(code), &c)) {
        json_decref(root);
        return false;
    }
    /* "status" and "code" must agree, else neither can be trusted */
    bool success = strcmp(json_string_value(status), "success") == 0;
    bool error = strcmp(json_string_value(status), "error") == 0;
    if (!(success && lease_code_is_success(c)) && !(error && !lease_code_is_success(c))) {
        json_decref(root);
        return false;
    }
    env->typed = true;
    env->code = c;
    env->root = root;
    /* a malformed correlation id or field stays "": the code is what counts */
    if (!lease_json_get_str(root, "correlation_id", env->correlation_id, sizeof env->correlation_id,
                            false))
        env->correlation_id[0] = '\0';
    if (!lease_json_get_str(root, "field", env->field, sizeof env->field, false))
        env->field[0] = '\0';
    int64_t v;
    if (lease_json_get_int(root, "retry_after_ms", &v, false, INT64_MIN) && v > 0)
        env->retry_after_ms = v;
    if (lease_json_get_int(root, "current_revision", &v, false, INT64_MIN))
        env->current_revision = v;
    env->replayed = json_is_true(json_object_get(root, "replayed"));
    /* a wait the service reports; anything else counts as none, which only
     * anchors authority earlier (docs/executor.md) */
    const json_t *waited = json_object_get(root, "waited_ms");
    if (json_is_integer(waited) && json_integer_value(waited) > 0)
        env->waited_ms = (int64_t)json_integer_value(waited);
    const json_t *cs = json_object_get(root, "current_state");
    if (json_is_string(cs) && !lease_state_parse(json_string_value(cs), &env->current_state))
        env->current_state = LEASE_STATE_NONE;
    return true;
}

void client_envelope_clear(client_envelope_t *env)
{
    if (!env)
        return;
    json_decref(env->root);
    memset(env, 0, sizeof *env);
}

json_t *client_identity_json(const lease_identity_input_t *id)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    struct {
        const char *name;
        const char *value;
    } parts[] = {
        {"tenant_id", id->tenant_id},
        {"program_id", id->program_id},
        {"target_namespace", id->target_namespace},
        {"target_id", id->target_id},
        {"actor_name", id->actor_name},
        {"workflow_name", id->workflow_name},
        {"operation_class", id->operation_class},
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        /* an absent component is omitted: the service names it in "field" */
        if (parts[i].value &&
            json_object_set_new(o, parts[i].name, json_string(parts[i].value)) != 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}
