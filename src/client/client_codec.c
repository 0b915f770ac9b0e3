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

/* Copies a JSON string member into out; false when absent, not a string or
 * too long. */
static bool get_str(const json_t *obj, const char *key, char *out, size_t outsz)
{
    const json_t *v = json_object_get(obj, key);
    if (!json_is_string(v))
        return false;
    size_t n = json_string_length(v);
    if (n >= outsz)
        return false;
    memcpy(out, json_string_value(v), n + 1);
    return true;
}

/* An optional string member: absent or null leaves out "" and succeeds. */
static bool get_opt_str(const json_t *obj, const char *key, char *out, size_t outsz)
{
    out[0] = '\0';
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return true;
    return get_str(obj, key, out, outsz);
}

static bool get_int(const json_t *obj, const char *key, int64_t *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!json_is_integer(v))
        return false;
    *out = (int64_t)json_integer_value(v);
    return true;
}

static bool get_time(const json_t *obj, const char *key, int64_t *out)
{
    const json_t *v = json_object_get(obj, key);
    return json_is_string(v) && lease_time_parse(json_string_value(v), out);
}

static bool decode_identity(const json_t *obj, lease_identity_t *id)
{
    if (!json_is_object(obj))
        return false;
    if (!get_str(obj, "tenant_id", id->tenant_id, sizeof id->tenant_id) ||
        !get_str(obj, "program_id", id->program_id, sizeof id->program_id) ||
        !get_str(obj, "target_namespace", id->target_namespace, sizeof id->target_namespace) ||
        !get_str(obj, "target_id", id->target_id, sizeof id->target_id) ||
        !get_str(obj, "actor_name", id->actor_name, sizeof id->actor_name) ||
        !get_str(obj, "workflow_name", id->workflow_name, sizeof id->workflow_name) ||
        !get_opt_str(obj, "operation_class", id->operation_class, sizeof id->operation_class))
        return false;
    if (!id->operation_class[0])
        strcpy(id->operation_class, "default");
    return true;
}

bool client_lease_decode(const json_t *obj, lease_record_t *out)
{
    memset(out, 0, sizeof *out);
    if (!json_is_object(obj))
        return false;
    if (!decode_identity(json_object_get(obj, "lock_identity"), &out->identity) ||
        !get_str(obj, "lease_id", out->lease_id, sizeof out->lease_id) ||
        !get_int(obj, "fencing_token", &out->fencing_token) ||
        !get_time(obj, "acquired_at", &out->acquired_at_ms) ||
        !get_time(obj, "renewed_at", &out->renewed_at_ms) ||
        !get_time(obj, "expires_at", &out->expires_at_ms) || !get_int(obj, "ttl_ms", &out->ttl_ms))
        return false;
    const json_t *state = json_object_get(obj, "state");
    if (!json_is_string(state) || !lease_state_parse(json_string_value(state), &out->state))
        return false;
    const json_t *ended = json_object_get(obj, "ended_at");
    if (ended && !json_is_null(ended) && !get_time(obj, "ended_at", &out->ended_at_ms))
        return false;
    if (json_object_get(obj, "maximum_lifetime_ms") &&
        !get_int(obj, "maximum_lifetime_ms", &out->maximum_lifetime_ms))
        return false;
    /* owner-private and audit fields appear only when the caller may see them */
    if (!get_opt_str(obj, "service_instance_id", out->service_instance_id,
                     sizeof out->service_instance_id) ||
        !get_opt_str(obj, "execution_id", out->execution_id, sizeof out->execution_id) ||
        !get_opt_str(obj, "job_id", out->job_id, sizeof out->job_id) ||
        !get_opt_str(obj, "trace_id", out->trace_id, sizeof out->trace_id) ||
        !get_opt_str(obj, "request_id", out->request_id, sizeof out->request_id) ||
        !get_opt_str(obj, "owner_principal_id", out->owner_principal_id,
                     sizeof out->owner_principal_id) ||
        !get_opt_str(obj, "owner_client_id", out->owner_client_id, sizeof out->owner_client_id) ||
        !get_opt_str(obj, "owner_credential_id", out->owner_credential_id,
                     sizeof out->owner_credential_id) ||
        !get_opt_str(obj, "end_reason", out->end_reason, sizeof out->end_reason) ||
        !get_opt_str(obj, "incident_id", out->incident_id, sizeof out->incident_id))
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
    (void)get_opt_str(root, "correlation_id", env->correlation_id, sizeof env->correlation_id);
    (void)get_opt_str(root, "field", env->field, sizeof env->field);
    int64_t v;
    if (get_int(root, "retry_after_ms", &v) && v > 0)
        env->retry_after_ms = v;
    if (get_int(root, "current_revision", &v))
        env->current_revision = v;
    env->replayed = json_is_true(json_object_get(root, "replayed"));
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
