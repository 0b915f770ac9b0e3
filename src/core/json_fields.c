/*
 * json_fields.c - reading answers' members, writing identities (see
 * include/lease/json_fields.h).
 */
#include "lease/json_fields.h"

#include <string.h>

#include "lease/clock.h"

bool lease_json_get_str(const json_t *o, const char *key, char *buf, size_t size, bool required)
{
    const json_t *v = json_object_get(o, key);
    buf[0] = '\0';
    if (!v || json_is_null(v))
        return !required;
    if (!json_is_string(v))
        return false;
    size_t len = json_string_length(v);
    const char *s = json_string_value(v);
    if (len >= size || strlen(s) != len) /* no embedded NUL */
        return false;
    if (required && len == 0)
        return false;
    memcpy(buf, s, len + 1);
    return true;
}

bool lease_json_get_int(const json_t *o, const char *key, int64_t *out, bool required, int64_t min)
{
    const json_t *v = json_object_get(o, key);
    *out = 0;
    if (!v || json_is_null(v))
        return !required;
    if (!json_is_integer(v))
        return false;
    json_int_t n = json_integer_value(v);
    if (n < min)
        return false;
    *out = (int64_t)n;
    return true;
}

bool lease_json_get_time(const json_t *o, const char *key, int64_t *out_ms, bool required)
{
    char ts[48];
    *out_ms = 0;
    if (!lease_json_get_str(o, key, ts, sizeof ts, required))
        return false;
    if (!ts[0])
        return true;
    return lease_time_parse(ts, out_ms);
}

bool lease_json_get_bool(const json_t *o, const char *key, bool *out)
{
    const json_t *v = json_object_get(o, key);
    *out = false;
    if (!v || json_is_null(v))
        return true;
    if (!json_is_boolean(v))
        return false;
    *out = json_is_true(v);
    return true;
}

bool lease_json_get_identity(const json_t *o, lease_identity_t *id)
{
    if (!json_is_object(o))
        return false;
    if (!lease_json_get_str(o, "tenant_id", id->tenant_id, sizeof id->tenant_id, true) ||
        !lease_json_get_str(o, "program_id", id->program_id, sizeof id->program_id, true) ||
        !lease_json_get_str(o, "target_namespace", id->target_namespace,
                            sizeof id->target_namespace, true) ||
        !lease_json_get_str(o, "target_id", id->target_id, sizeof id->target_id, true) ||
        !lease_json_get_str(o, "actor_name", id->actor_name, sizeof id->actor_name, true) ||
        !lease_json_get_str(o, "workflow_name", id->workflow_name, sizeof id->workflow_name,
                            true) ||
        !lease_json_get_str(o, "operation_class", id->operation_class, sizeof id->operation_class,
                            false))
        return false;
    if (!id->operation_class[0])
        strcpy(id->operation_class, "default");
    return true;
}

json_t *lease_json_identity(const lease_identity_t *id)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "tenant_id", id->tenant_id,
                     "program_id", id->program_id, "target_namespace", id->target_namespace,
                     "target_id", id->target_id, "actor_name", id->actor_name, "workflow_name",
                     id->workflow_name, "operation_class", id->operation_class);
}
