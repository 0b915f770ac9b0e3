/*
 * ctl_valkey.h - leasectl's administrative commands on the Valkey/Redis
 * backend (docs/backends.md): `migrate`, `recover` and `credential create|revoke|list`
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
#include <stdint.h>

#include "lease/store_admin.h"

/* Whether url names a Valkey/Redis store (redis://, valkey://, rediss://). */
bool ctl_valkey_url(const char *url);

/* `leasectl migrate` on Valkey: loads (or, with status_only, only checks)
 * the function library and binds the namespace to the server's incarnation
 * (repeatable); prints one JSON object. Returns the exit status. */
int ctl_valkey_migrate(const char *url, bool status_only);

/* `leasectl recover` on Valkey: rebinds the namespace to the server it
 * runs on now (leased_v1_rebind: a higher epoch, above floor_token when
 * > 0; every live lease revoked; unsealed; audited in the same call) and
 * prints {"backend","namespace","epoch","token_floor","first_token",
 * "leases_revoked"}. Loads nothing: the library must be this build's.
 * Returns the exit status (65 when the function refuses). */
int ctl_valkey_recover(const char *url, const char *reason, int64_t floor_token);

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
