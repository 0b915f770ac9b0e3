/*
 * relay_db.c - libpq calls of the relay.
 *
 * Every call reports RELAY_DB_LOST when the session is gone (the server
 * rolled the transaction back and released its locks: nothing was marked)
 * and RELAY_DB_FAILED when a statement failed on a live session (the
 * transaction is rolled back here). Server messages go to err for the
 * relay's log; they never carry the connection string.
 */
#include "relay_db.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <libpq-fe.h>
#include <openssl/crypto.h>

#include "lease/pg_session.h"

/* libpq counts whole seconds; the conninfo's connect_timeout wins */
#define RELAY_DB_CONNECT_TIMEOUT_MS 10000

struct relay_db {
    char *conninfo;
    char application_name[64];
    int64_t hold_timeout_ms;
    PGconn *conn;
    bool in_transaction;
};

static const char claim_sql[] =
    "SELECT c.outbox_id, c.lock_identity::text, c.topic, c.payload::text, c.fencing_token, "
    "c.lease_id, c.execution_id, c.trace_id, "
    "to_char(c.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), "
    "(extract(epoch FROM c.created_at) * 1000)::bigint, c.attempts "
    "FROM lease.outbox_claim($1::integer) c ORDER BY c.outbox_id";

void relay_batch_clear(relay_batch_t *b)
{
    for (size_t i = 0; i < b->count; i++) {
        relay_row_t *r = &b->rows[i];
        free(r->identity_json);
        free(r->topic);
        free(r->payload);
        free(r->lease_id);
        free(r->execution_id);
        free(r->trace_id);
    }
    free(b->rows);
    b->rows = NULL;
    b->count = 0;
}

relay_db_t *relay_db_new(const char *conninfo, const char *instance, int64_t hold_timeout_ms)
{
    relay_db_t *db = calloc(1, sizeof *db);
    if (!db)
        return NULL;
    db->conninfo = strdup(conninfo);
    if (!db->conninfo) {
        free(db);
        return NULL;
    }
    snprintf(db->application_name, sizeof db->application_name, "leased-relay/%s", instance);
    db->hold_timeout_ms = hold_timeout_ms;
    return db;
}

void relay_db_disconnect(relay_db_t *db)
{
    if (db->conn)
        PQfinish(db->conn);
    db->conn = NULL;
    db->in_transaction = false;
}

void relay_db_free(relay_db_t *db)
{
    if (!db)
        return;
    relay_db_disconnect(db);
    OPENSSL_cleanse(db->conninfo, strlen(db->conninfo));
    free(db->conninfo);
    free(db);
}

bool relay_db_connected(const relay_db_t *db)
{
    return db->conn && PQstatus(db->conn) == CONNECTION_OK;
}

/* The server's primary message, one line, bounded. */
static void server_message(const PGresult *res, const PGconn *conn, char *err, size_t errsz)
{
    const char *msg = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    if (!msg)
        msg = conn ? PQerrorMessage(conn) : "no connection";
    snprintf(err, errsz, "%s%s%s", state ? state : "", state ? ": " : "", msg);
    for (char *c = err; *c; c++)
        if (*c == '\n')
            *c = ' ';
}

/* After a failed statement: which of FAILED or LOST, rolling back a live
 * session's transaction. */
static relay_db_status_t failed(relay_db_t *db, PGresult *res, char *err, size_t errsz)
{
    server_message(res, db->conn, err, errsz);
    PQclear(res);
    if (!relay_db_connected(db)) {
        relay_db_disconnect(db);
        return RELAY_DB_LOST;
    }
    if (db->in_transaction || PQtransactionStatus(db->conn) != PQTRANS_IDLE)
        PQclear(PQexec(db->conn, "ROLLBACK"));
    db->in_transaction = false;
    if (!relay_db_connected(db)) { /* the session died during the rollback */
        relay_db_disconnect(db);
        return RELAY_DB_LOST;
    }
    return RELAY_DB_FAILED;
}

relay_db_status_t relay_db_connect(relay_db_t *db, char *err, size_t errsz)
{
    relay_db_disconnect(db);
    /* the store's session setup (keepalives, tcp_user_timeout, a connect
     * timeout the conninfo may override); our application_name wins */
    db->conn = lease_pg_session_open(db->conninfo, RELAY_DB_CONNECT_TIMEOUT_MS, "leased-relay",
                                     db->application_name, err, errsz);
    return db->conn ? RELAY_DB_OK : RELAY_DB_LOST;
}

bool relay_db_option(const relay_db_t *db, const char *keyword, char *out, size_t outsz)
{
    if (!db->conn)
        return false;
    PQconninfoOption *opts = PQconninfo(db->conn);
    bool found = false;
    for (PQconninfoOption *o = opts; o && o->keyword; o++) {
        if (strcmp(o->keyword, keyword) != 0 || (o->dispchar && strchr(o->dispchar, '*')))
            continue; /* never a password */
        snprintf(out, outsz, "%s", o->val ? o->val : "");
        found = o->val != NULL;
        break;
    }
    PQconninfoFree(opts);
    return found;
}

static relay_db_status_t command(relay_db_t *db, const char *sql, char *err, size_t errsz)
{
    if (!relay_db_connected(db)) {
        snprintf(err, errsz, "not connected");
        relay_db_disconnect(db);
        return RELAY_DB_LOST;
    }
    PGresult *res = PQexec(db->conn, sql);
    ExecStatusType st = PQresultStatus(res);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        return failed(db, res, err, errsz);
    PQclear(res);
    return RELAY_DB_OK;
}

static char *dup_or_null(const PGresult *res, int row, int col)
{
    return PQgetisnull(res, row, col) ? NULL : strdup(PQgetvalue(res, row, col));
}

/* The lock_identity object of a claimed row: normalised already by the
 * database; parsed back so messages carry each component. */
static bool parse_identity(const char *text, lease_identity_t *out)
{
    json_error_t jerr;
    json_t *o = json_loads(text, 0, &jerr);
    if (!json_is_object(o)) {
        json_decref(o);
        return false;
    }
    lease_identity_input_t in = {
        json_string_value(json_object_get(o, "tenant_id")),
        json_string_value(json_object_get(o, "program_id")),
        json_string_value(json_object_get(o, "target_namespace")),
        json_string_value(json_object_get(o, "target_id")),
        json_string_value(json_object_get(o, "actor_name")),
        json_string_value(json_object_get(o, "workflow_name")),
        json_string_value(json_object_get(o, "operation_class")),
    };
    bool ok = lease_identity_normalize(&in, out, NULL);
    json_decref(o);
    return ok;
}

relay_db_status_t relay_db_claim(relay_db_t *db, int batch_size, relay_batch_t *out, char *err,
                                 size_t errsz)
{
    out->rows = NULL;
    out->count = 0;
    /* SET LOCAL, not session settings: they hold behind a pooler in
     * transaction mode too */
    char begin[256];
    snprintf(begin, sizeof begin,
             "BEGIN ISOLATION LEVEL READ COMMITTED; "
             "SET LOCAL idle_in_transaction_session_timeout = %" PRId64 "; "
             "SET LOCAL statement_timeout = %" PRId64,
             db->hold_timeout_ms, db->hold_timeout_ms);
    relay_db_status_t st = command(db, begin, err, errsz);
    if (st != RELAY_DB_OK)
        return st;
    db->in_transaction = true;
    char n[16];
    snprintf(n, sizeof n, "%d", batch_size);
    const char *params[1] = {n};
    PGresult *res = PQexecParams(db->conn, claim_sql, 1, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQnfields(res) != 11)
        return failed(db, res, err, errsz);
    int rows = PQntuples(res);
    out->rows = rows ? calloc((size_t)rows, sizeof *out->rows) : NULL;
    if (rows && !out->rows) {
        snprintf(err, errsz, "out of memory");
        PQclear(res);
        relay_db_rollback(db);
        return RELAY_DB_FAILED;
    }
    for (int i = 0; i < rows; i++) {
        relay_row_t *r = &out->rows[i];
        out->count++;
        r->outbox_id = strtoll(PQgetvalue(res, i, 0), NULL, 10);
        snprintf(r->message_id, sizeof r->message_id, "%" PRId64, r->outbox_id);
        r->identity_json = dup_or_null(res, i, 1);
        r->topic = dup_or_null(res, i, 2);
        r->payload = dup_or_null(res, i, 3);
        r->fencing_token = strtoll(PQgetvalue(res, i, 4), NULL, 10);
        r->lease_id = dup_or_null(res, i, 5);
        r->execution_id = dup_or_null(res, i, 6);
        r->trace_id = dup_or_null(res, i, 7);
        snprintf(r->created_at, sizeof r->created_at, "%s", PQgetvalue(res, i, 8));
        r->created_at_ms = strtoll(PQgetvalue(res, i, 9), NULL, 10);
        r->attempts = atoi(PQgetvalue(res, i, 10));
        if (!r->identity_json || !r->topic || !r->payload || !r->lease_id || !r->execution_id ||
            !parse_identity(r->identity_json, &r->identity)) {
            snprintf(err, errsz, "outbox row %" PRId64 " is incomplete or out of memory",
                     r->outbox_id);
            PQclear(res);
            relay_batch_clear(out);
            relay_db_rollback(db);
            return RELAY_DB_FAILED;
        }
    }
    PQclear(res);
    return RELAY_DB_OK;
}

/* A call returning one integer, with text parameters. */
static relay_db_status_t call_int(relay_db_t *db, const char *sql, int nparams,
                                  const char *const *params, int *value, char *err, size_t errsz)
{
    if (!relay_db_connected(db)) {
        snprintf(err, errsz, "not connected");
        relay_db_disconnect(db);
        return RELAY_DB_LOST;
    }
    PGresult *res = PQexecParams(db->conn, sql, nparams, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
        return failed(db, res, err, errsz);
    if (value)
        *value = atoi(PQgetvalue(res, 0, 0));
    PQclear(res);
    return RELAY_DB_OK;
}

relay_db_status_t relay_db_mark_published(relay_db_t *db, const int64_t *ids, size_t n,
                                          const char *instance, int *marked, char *err,
                                          size_t errsz)
{
    if (marked)
        *marked = 0;
    if (n == 0)
        return RELAY_DB_OK;
    /* the array literal {1,2,3}: 20 digits and a comma per id */
    size_t cap = n * 21 + 3;
    char *array = malloc(cap);
    if (!array) {
        snprintf(err, errsz, "out of memory");
        return RELAY_DB_FAILED;
    }
    size_t len = 0;
    array[len++] = '{';
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(array + len, cap - len, "%s%" PRId64, i ? "," : "", ids[i]);
    snprintf(array + len, cap - len, "}");
    const char *params[2] = {array, instance};
    relay_db_status_t st = call_int(db, "SELECT lease.outbox_mark_published($1::bigint[], $2)", 2,
                                    params, marked, err, errsz);
    free(array);
    return st;
}

relay_db_status_t relay_db_mark_refused(relay_db_t *db, int64_t id, const char *instance,
                                        const char *reason, char *err, size_t errsz)
{
    char idtext[24];
    snprintf(idtext, sizeof idtext, "%" PRId64, id);
    const char *params[3] = {idtext, instance, reason};
    return call_int(db, "SELECT lease.outbox_mark_refused($1::bigint, $2, $3)", 3, params, NULL,
                    err, errsz);
}

relay_db_status_t relay_db_quarantine(relay_db_t *db, int64_t id, const char *instance,
                                      const char *reason, char *err, size_t errsz)
{
    char idtext[24];
    snprintf(idtext, sizeof idtext, "%" PRId64, id);
    const char *params[3] = {idtext, instance, reason};
    return call_int(db, "SELECT lease.outbox_quarantine($1::bigint, $2, $3)", 3, params, NULL, err,
                    errsz);
}

relay_db_status_t relay_db_defer(relay_db_t *db, int64_t id, int64_t delay_ms, const char *error,
                                 char *err, size_t errsz)
{
    char idtext[24], delay[24];
    snprintf(idtext, sizeof idtext, "%" PRId64, id);
    snprintf(delay, sizeof delay, "%" PRId64, delay_ms);
    const char *params[3] = {idtext, delay, error};
    return call_int(db, "SELECT lease.outbox_defer($1::bigint, $2::integer, $3)", 3, params, NULL,
                    err, errsz);
}

relay_db_status_t relay_db_commit(relay_db_t *db, char *err, size_t errsz)
{
    relay_db_status_t st = command(db, "COMMIT", err, errsz);
    db->in_transaction = false;
    return st;
}

void relay_db_rollback(relay_db_t *db)
{
    if (relay_db_connected(db))
        PQclear(PQexec(db->conn, "ROLLBACK"));
    db->in_transaction = false;
}

relay_db_status_t relay_db_lag(relay_db_t *db, relay_lag_t *out, char *err, size_t errsz)
{
    if (!relay_db_connected(db)) {
        snprintf(err, errsz, "not connected");
        relay_db_disconnect(db);
        return RELAY_DB_LOST;
    }
    PGresult *res =
        PQexec(db->conn, "SELECT unpublished, deferred, lag_seconds FROM lease.outbox_lag()");
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
        return failed(db, res, err, errsz);
    out->unpublished = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    out->deferred = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
    out->lag_seconds = strtod(PQgetvalue(res, 0, 2), NULL);
    PQclear(res);
    return RELAY_DB_OK;
}

relay_db_status_t relay_db_purge(relay_db_t *db, int64_t retention_ms, int batch, int *purged,
                                 char *err, size_t errsz)
{
    relay_db_status_t st = command(db, "BEGIN ISOLATION LEVEL READ COMMITTED", err, errsz);
    if (st != RELAY_DB_OK)
        return st;
    db->in_transaction = true;
    char ret[24], n[16];
    snprintf(ret, sizeof ret, "%" PRId64, retention_ms);
    snprintf(n, sizeof n, "%d", batch);
    const char *params[2] = {ret, n};
    st = call_int(db, "SELECT lease.outbox_purge($1::bigint, $2::integer)", 2, params, purged, err,
                  errsz);
    if (st != RELAY_DB_OK)
        return st;
    return relay_db_commit(db, err, errsz);
}
