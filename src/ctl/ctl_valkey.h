/*
 * ctl_valkey.h - leasectl's administrative commands on the Valkey/Redis
 * backend (docs/backends.md): `migrate` and `credential create|revoke|list`
 * against LEASE_STORE_URL=redis://... . Each goes through the Valkey adapter
 * (include/lease/store_valkey.h), whose function library decides; nothing
 * here repeats its rules. The statuses are lease_admin_status_t's, so the
 * commands map them onto exit statuses as on PostgreSQL.
 */
#ifndef LEASE_CTL_VALKEY_H
#define LEASE_CTL_VALKEY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "lease/store_admin.h"

/* Whether url names a Valkey/Redis store (redis://, valkey://, rediss://). */
bool ctl_valkey_url(const char *url);

/* `leasectl migrate` on Valkey: loads (or, with status_only, only checks)
 * the function library and binds the namespace to the server's incarnation
 * (repeatable); prints one JSON object. Returns the exit status. */
int ctl_valkey_migrate(const char *url, bool status_only);

/* As lease_admin_credential_create / _revoke / _list, on Valkey. request
 * has lease.credential_create's members; its "expires_at" (RFC 3339) is
 * sent as "expires_at_ms". */
lease_admin_status_t ctl_valkey_credential_create(const char *url, const json_t *request,
                                                  json_t **row, char *err, size_t errsz);
lease_admin_status_t ctl_valkey_credential_revoke(const char *url, const char *credential_id,
                                                  bool *revoked, char *err, size_t errsz);
lease_admin_status_t ctl_valkey_credential_list(const char *url, json_t **rows, char *err,
                                                size_t errsz);

#endif
