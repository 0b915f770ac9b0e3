/*
 * relay_db.h - the relay's session with Postgres: claim, mark, defer, lag,
 * purge (the functions of migrations/0012_outbox_relay.sql). The only file
 * of the relay that includes libpq-fe.h.
 *
 * One delivery is one transaction at READ COMMITTED: relay_db_claim begins
 * it and locks the rows; marks and deferrals happen inside it;
 * relay_db_commit ends it. The transaction also bounds itself: if the
 * relay stops talking in the middle (frozen, partitioned), Postgres ends
 * it after idle_in_transaction_session_timeout and the rows are free again.
 */
#ifndef LEASE_RELAY_DB_H
#define LEASE_RELAY_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lease/clock.h"
#include "lease/identity.h"
#include "lease/result.h"

typedef enum relay_db_status {
    RELAY_DB_OK = 0, /* done */
    RELAY_DB_FAILED, /* the statement failed; the transaction (if any) rolled back */
    RELAY_DB_LOST,   /* the session is gone; reconnect */
} relay_db_status_t;

/* One claimed outbox row. Strings are heap, freed with the batch. */
typedef struct relay_row {
    int64_t outbox_id;
    char message_id[24]; /* outbox_id in decimal */
    char *identity_json; /* the claim's lock_identity, as text: the per-identity group key */
    lease_identity_t identity;
    char *topic;
    char *payload; /* JSON object text */
    int64_t fencing_token;
    char *lease_id;
    char *execution_id;
    char *trace_id; /* NULL when the commit named none */
    char created_at[LEASE_TIME_LEN + 1];
    int64_t created_at_ms;
    int attempts; /* deferrals so far */
} relay_row_t;

typedef struct relay_batch {
    relay_row_t *rows;
    size_t count;
} relay_batch_t;

void relay_batch_clear(relay_batch_t *b);

typedef struct relay_lag {
    int64_t unpublished; /* rows not yet published */
    int64_t deferred;    /* of which waiting for a retry */
    double lag_seconds;  /* age of the oldest unpublished row (0 when none) */
} relay_lag_t;

typedef struct relay_db relay_db_t;

/* conninfo is copied (and wiped on free); instance names the session
 * (application_name "leased-relay/<instance>"). hold_timeout_ms bounds how
 * long a claiming transaction may sit idle in Postgres. */
relay_db_t *relay_db_new(const char *conninfo, const char *instance, int64_t hold_timeout_ms);
void relay_db_free(relay_db_t *db);

/* Opens the session with the store's one session setup (lease/pg_session.h:
 * keepalives, tcp_user_timeout, connect timeout 10 s unless the conninfo
 * says otherwise, application_name "leased-relay/<instance>"). */
LEASE_MUST_USE relay_db_status_t relay_db_connect(relay_db_t *db, char *err, size_t errsz);
/* The value of one of the connected session's options (libpq's
 * PQconninfo, e.g. "keepalives_idle") into out; false when not connected,
 * unset, or a password. For tests and diagnostics. */
bool relay_db_option(const relay_db_t *db, const char *keyword, char *out, size_t outsz);
bool relay_db_connected(const relay_db_t *db);
void relay_db_disconnect(relay_db_t *db);

/* Begins the delivery transaction and claims up to batch_size rows into
 * out (out->count may be 0; the transaction is open either way when OK). */
LEASE_MUST_USE relay_db_status_t relay_db_claim(relay_db_t *db, int batch_size, relay_batch_t *out,
                                                char *err, size_t errsz);
/* In the delivery transaction. *marked (may be NULL) receives the count. */
LEASE_MUST_USE relay_db_status_t relay_db_mark_published(relay_db_t *db, const int64_t *ids,
                                                         size_t n, const char *instance,
                                                         int *marked, char *err, size_t errsz);
LEASE_MUST_USE relay_db_status_t relay_db_mark_refused(relay_db_t *db, int64_t id,
                                                       const char *instance, const char *reason,
                                                       char *err, size_t errsz);
/* Sets a claimed row aside (lease.outbox_quarantine): never claimed again
 * until an operator requeues it; its identity's later rows go on. */
LEASE_MUST_USE relay_db_status_t relay_db_quarantine(relay_db_t *db, int64_t id,
                                                     const char *instance, const char *reason,
                                                     char *err, size_t errsz);
LEASE_MUST_USE relay_db_status_t relay_db_defer(relay_db_t *db, int64_t id, int64_t delay_ms,
                                                const char *error, char *err, size_t errsz);
LEASE_MUST_USE relay_db_status_t relay_db_commit(relay_db_t *db, char *err, size_t errsz);
void relay_db_rollback(relay_db_t *db);

/* Outside a delivery transaction. */
LEASE_MUST_USE relay_db_status_t relay_db_lag(relay_db_t *db, relay_lag_t *out, char *err,
                                              size_t errsz);
LEASE_MUST_USE relay_db_status_t relay_db_purge(relay_db_t *db, int64_t retention_ms, int batch,
                                                int *purged, char *err, size_t errsz);

#endif
