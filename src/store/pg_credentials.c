/*
 * pg_credentials.c - credential administration (lease/store_admin.h):
 * lease.credential_create(jsonb), lease.credential_revoke(text),
 * lease.credential_list() (docs/sql-api.md), each one call through the
 * one-shot path (pg_oneshot.c).
 *
 * Rows are returned without any secret_digest member, whatever the function
 * sent, and the request's digest is blanked from any message.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lease/store_admin.h"
#include "pg_oneshot.h"

/* Removes secret_digest from an object, or from each object of an array. */
static void strip_digests(json_t *v)
{
    if (json_is_object(v)) {
        json_object_del(v, "secret_digest");
        json_t *inner = json_object_get(v, "credentials");
        if (json_is_array(inner))
            strip_digests(inner);
    } else if (json_is_array(v)) {
        size_t i;
        json_t *item;
        json_array_foreach(v, i, item)
        {
            if (json_is_object(item))
                json_object_del(item, "secret_digest");
        }
    }
}

static lease_admin_status_t parse_json(char *text, json_t **out, char *err, size_t errsz)
{
    json_error_t jerr;
    json_t *v = text ? json_loads(text, JSON_REJECT_DUPLICATES, &jerr) : NULL;
    if (!v) {
        store_pg_set_err(err, errsz, "the database answered with no or malformed JSON");
        return LEASE_ADMIN_FAILED;
    }
    strip_digests(v);
    *out = v;
    return LEASE_ADMIN_OK;
}

lease_admin_status_t lease_admin_credential_create(const char *database_url, const json_t *request,
                                                   json_t **row, char *err, size_t errsz)
{
    *row = NULL;
    json_t *digest = json_object_get(request, "secret_digest");
    const char *redact = json_is_string(digest) ? json_string_value(digest) : NULL;
    char *body = json_dumps(request, JSON_COMPACT);
    if (!body) {
        store_pg_set_err(err, errsz, "cannot encode the request");
        return LEASE_ADMIN_FAILED;
    }
    char *value = NULL;
    const char *params[1] = {body};
    store_pg_oneshot_t q = {"SELECT lease.credential_create($1::jsonb)::text", 1, params, redact};
    lease_admin_status_t st = store_pg_oneshot_call(database_url, &q, &value, err, errsz);
    free(body);
    if (st == LEASE_ADMIN_OK) {
        st = parse_json(value, row, err, errsz);
        if (st == LEASE_ADMIN_OK && !json_is_object(*row)) {
            json_decref(*row);
            *row = NULL;
            store_pg_set_err(err, errsz, "the database answered with something other than a row");
            st = LEASE_ADMIN_FAILED;
        }
    }
    free(value);
    return st;
}

lease_admin_status_t lease_admin_credential_revoke(const char *database_url,
                                                   const char *credential_id, bool *revoked,
                                                   char *err, size_t errsz)
{
    *revoked = false;
    char *value = NULL;
    const char *params[1] = {credential_id};
    store_pg_oneshot_t q = {"SELECT lease.credential_revoke($1::text)::text", 1, params, NULL};
    lease_admin_status_t st = store_pg_oneshot_call(database_url, &q, &value, err, errsz);
    if (st == LEASE_ADMIN_OK) {
        if (value && strcmp(value, "true") == 0) {
            *revoked = true;
        } else if (!value || strcmp(value, "false") != 0) {
            store_pg_set_err(err, errsz,
                             "the database answered with something other than a boolean");
            st = LEASE_ADMIN_FAILED;
        }
    }
    free(value);
    return st;
}

lease_admin_status_t lease_admin_credential_list(const char *database_url, json_t **rows, char *err,
                                                 size_t errsz)
{
    *rows = NULL;
    char *value = NULL;
    store_pg_oneshot_t q = {"SELECT lease.credential_list()::text", 0, NULL, NULL};
    lease_admin_status_t st = store_pg_oneshot_call(database_url, &q, &value, err, errsz);
    if (st == LEASE_ADMIN_OK)
        st = parse_json(value, rows, err, errsz);
    free(value);
    return st;
}
