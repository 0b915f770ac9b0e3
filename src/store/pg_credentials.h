/*
 * pg_credentials.h - credential administration in PostgreSQL
 * (`leasectl credential create|revoke|list`).
 *
 * Each call opens one connection, runs one of lease.credential_create(jsonb),
 * lease.credential_revoke(text), lease.credential_list() (docs/sql-api.md)
 * inside an explicit `BEGIN ISOLATION LEVEL SERIALIZABLE` transaction (an
 * administrator's login role need not default to it), retries serialization
 * failures a few times, and closes. The request and rows are JSON (jansson);
 * rows never carry a secret or its digest.
 */
#ifndef LEASE_PG_CREDENTIALS_H
#define LEASE_PG_CREDENTIALS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "lease/result.h"

/* How an administrative call ended; leasectl maps each to an exit status. */
typedef enum lease_cred_status {
    LEASE_CRED_OK = 0,      /* done; outputs are set */
    LEASE_CRED_INVALID,     /* the database rejected the input (SQLSTATE class 22/23) */
    LEASE_CRED_DENIED,      /* the login role may not do this (42501) */
    LEASE_CRED_UNAVAILABLE, /* no connection, or no answer after retries */
    LEASE_CRED_FAILED,      /* any other error (schema missing, bad reply) */
} lease_cred_status_t;

/*
 * Creates a credential from `request` (the jsonb of docs/sql-api.md, with
 * secret_digest already computed; borrowed). On LEASE_CRED_OK, *row is the
 * stored row as the function returned it (caller decrefs). Otherwise err
 * holds one line for an operator (may quote the database's message; it never
 * contains the request's digest).
 */
LEASE_MUST_USE lease_cred_status_t lease_pg_credential_create(const char *database_url,
                                                              const json_t *request, json_t **row,
                                                              char *err, size_t errsz);

/* Revokes by id. *revoked is what the function answered: true when this call
 * revoked an active credential. */
LEASE_MUST_USE lease_cred_status_t lease_pg_credential_revoke(const char *database_url,
                                                              const char *credential_id,
                                                              bool *revoked, char *err,
                                                              size_t errsz);

/* Lists credentials: *rows is a JSON array (caller decrefs). */
LEASE_MUST_USE lease_cred_status_t lease_pg_credential_list(const char *database_url, json_t **rows,
                                                            char *err, size_t errsz);

#endif
