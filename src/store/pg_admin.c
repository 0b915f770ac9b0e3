/*
 * pg_admin.c - epoch recovery and verification for leasectl
 * (lease/store_admin.h): lease.recover_epoch and lease.verify, each one
 * call through the one-shot path (pg_oneshot.c). The SQL lives here so that
 * leasectl holds none.
 */
#include <jansson.h>
#include <stdlib.h>

#include "lease/store_admin.h"
#include "pg_oneshot.h"

lease_admin_status_t lease_admin_recover(const char *database_url, const char *reason,
                                         const char *floor, char **answer, char *err, size_t errsz)
{
    const char *params[2] = {reason, floor};
    store_pg_oneshot_t q = {"SELECT lease.recover_epoch($1, $2::bigint)::text", 2, params, NULL};
    return store_pg_oneshot_call(database_url, &q, answer, err, errsz);
}

lease_admin_status_t lease_admin_verify(const char *database_url, char **report, bool *consistent,
                                        char *err, size_t errsz)
{
    *consistent = false;
    store_pg_oneshot_t q = {"SELECT jsonb_build_object('consistent', count(*) = 0, 'problems', "
                            "coalesce(jsonb_agg(to_jsonb(v)), '[]'))::text FROM lease.verify() v",
                            0, NULL, NULL};
    lease_admin_status_t st = store_pg_oneshot_call(database_url, &q, report, err, errsz);
    if (st != LEASE_ADMIN_OK)
        return st;
    json_t *parsed = *report ? json_loads(*report, 0, NULL) : NULL;
    json_t *flag = json_object_get(parsed, "consistent");
    if (!json_is_boolean(flag)) {
        store_pg_set_err(err, errsz, "the database answered with something other than a report");
        st = LEASE_ADMIN_FAILED;
        free(*report);
        *report = NULL;
    } else {
        *consistent = json_is_true(flag);
    }
    json_decref(parsed);
    return st;
}
