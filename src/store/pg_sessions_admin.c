/*
 * pg_sessions_admin.c - `leasectl session list` (lease/store_admin.h): the
 * operator view lease.active_sessions, read through the one-shot path
 * (pg_oneshot.c) as one JSON array, so leasectl needs no libpq of its own.
 */
#include <stdlib.h>

#include "lease/store_admin.h"
#include "pg_oneshot.h"

/* The view's columns by name, remaining as whole milliseconds (an interval
 * has no JSON form a script can compare), oldest session first. */
static const char list_sql[] =
    "SELECT coalesce(json_agg(json_build_object("
    "'session_id', session_id, 'tenant_id', tenant_id, 'principal_id', principal_id,"
    " 'credential_id', credential_id, 'service_instance_id', service_instance_id,"
    " 'ttl_ms', ttl_ms, 'created_at', created_at, 'renewed_at', renewed_at,"
    " 'expires_at', expires_at,"
    " 'remaining_ms', floor(extract(epoch FROM remaining) * 1000)::bigint,"
    " 'leases', leases) ORDER BY created_at, session_id), '[]')::text"
    " FROM lease.active_sessions WHERE $1::text IS NULL OR tenant_id = $1::text";

lease_admin_status_t lease_admin_session_list(const char *database_url, const char *tenant_id,
                                              json_t **rows, char *err, size_t errsz)
{
    *rows = NULL;
    char *value = NULL;
    const char *params[1] = {tenant_id};
    store_pg_oneshot_t q = {list_sql, 1, params, NULL};
    lease_admin_status_t st = store_pg_oneshot_call(database_url, &q, &value, err, errsz);
    if (st == LEASE_ADMIN_OK) {
        json_error_t jerr;
        *rows = value ? json_loads(value, 0, &jerr) : NULL;
        if (!json_is_array(*rows)) {
            json_decref(*rows);
            *rows = NULL;
            store_pg_set_err(err, errsz, "the database answered with something other than a list");
            st = LEASE_ADMIN_FAILED;
        }
    }
    free(value);
    return st;
}
