/*
 * pg_conn.h - one libpq session: connecting within a deadline, checking a
 * pooled session before reuse, and running one statement with a deadline,
 * a cancel and an honest account of whether it may have committed.
 *
 * The statement is one implicit transaction (or, for health, an explicit
 * one in the same string). Its fate is one of:
 * - NOT_SENT / SEND_FAILED: nothing reached the server (no commit possible);
 * - OK: every result was read up to ReadyForQuery, no error: committed;
 * - ERROR: the server answered an ERROR (not FATAL): the transaction rolled
 *   back, whatever came before;
 * - LOST: sent, then the session ended (FATAL, EOF, reset) or nothing came
 *   back before the deadline plus the cancel grace: it may have committed.
 */
#ifndef LEASE_STORE_PG_CONN_H
#define LEASE_STORE_PG_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lease/clock.h"
#include "lease/pg_session.h"
#include "lease/result.h"

struct pg_conn;

#define STORE_PG_MAX_VALUES 3
/* How long a cancelled statement may take to confirm before the session is
 * given up as lost. A call may therefore overrun its deadline by this much,
 * and only after it sent a statement. */
#define STORE_PG_CANCEL_GRACE_MS 1000

/*
 * The parameters every session opens with (lease/pg_session.h), for
 * PQconnectStartParams, and the hosts of a multi-host URL one by one.
 *
 * Why the hosts one by one: libpq tries the hosts of a multi-host URL in
 * turn, moving on when one refuses or, in its blocking connect, when one
 * does not answer within connect_timeout. A non-blocking connect
 * (PQconnectPoll, what a deadline needs) ignores connect_timeout: a host
 * that does not answer at all (a frozen or powered-off primary, a dropped
 * route) holds the attempt until the caller gives up, and the hosts behind
 * it are never tried. So each host gets an attempt of its own, bounded by
 * the connect timeout and the deadline, and the next connection starts at
 * the host that answered last: after a failover only the first connection
 * pays for the lost primary's silence.
 */
typedef struct store_pg_connparams {
    /* session.keywords / session.values: every host of the URL at once */
    const char **keywords, **values;
    lease_pg_session_params_t session;
    /* hosts of a multi-host URL (0: one host, or a URL whose host list
     * libpq alone should read: then one attempt on the whole URL) */
    int nhosts;
    char **host, **hostaddr, **port; /* per host; an array is NULL when the URL sets none */
    _Atomic int first_host;          /* where the next connection starts */
} store_pg_connparams_t;

/* lease_pg_session_params_init with leased's fallback application name
 * ("leased"); application_name, when configured, wins over the URL's. */
LEASE_MUST_USE int store_pg_connparams_init(store_pg_connparams_t *p, const char *conninfo,
                                            int64_t connect_timeout_ms,
                                            const char *application_name, char *err, size_t errsz);
void store_pg_connparams_free(store_pg_connparams_t *p);

typedef enum store_pg_connect_status {
    STORE_PG_CONNECT_OK = 0,
    STORE_PG_CONNECT_DEADLINE, /* the call's deadline passed while connecting */
    STORE_PG_CONNECT_FAILED,   /* refused, timed out, authentication, ... */
} store_pg_connect_status_t;

/* Connects within the deadline, giving each host of the URL at most the
 * connect timeout (in turn, from the one that answered last). On OK *out is
 * a non-blocking session; otherwise *out is NULL and msg (if not NULL)
 * receives libpq's reasons, for the log only. */
LEASE_MUST_USE store_pg_connect_status_t store_pg_conn_connect(store_pg_connparams_t *p,
                                                               const lease_deadline_t *deadline,
                                                               struct pg_conn **out, char *msg,
                                                               size_t msgsz);

/* Whether a pooled, idle session can take a statement: connected, outside
 * any transaction, and not closed by the server while it sat idle. */
bool store_pg_conn_usable(struct pg_conn *conn);

typedef enum store_pg_exec_status {
    STORE_PG_EXEC_OK = 0,
    STORE_PG_EXEC_NOT_SENT,    /* deadline passed before sending */
    STORE_PG_EXEC_SEND_FAILED, /* libpq could not dispatch it: nothing sent */
    STORE_PG_EXEC_ERROR,       /* server ERROR: rolled back */
    STORE_PG_EXEC_LOST,        /* may have committed */
} store_pg_exec_status_t;

typedef struct store_pg_reply {
    store_pg_exec_status_t status;
    bool cancel_sent;                  /* the deadline passed and a cancel was requested */
    bool discard;                      /* the session must not be reused */
    char sqlstate[6];                  /* ERROR (and LOST when the server said why) */
    char message[256];                 /* backend or libpq text: for the log only */
    char primary[192];                 /* the error's primary message alone */
    char detail[192];                  /* the error DETAIL (LS001 names the lock key) */
    char constraint[64];               /* the constraint an ERROR names (23505), or "" */
    int nvalues;                       /* columns of the single row read (OK) */
    char *values[STORE_PG_MAX_VALUES]; /* heap, NULL for SQL null */
} store_pg_reply_t;

/* Frees the values; the struct may be reused. */
void store_pg_reply_clear(store_pg_reply_t *r);

typedef struct store_pg_stmt {
    const char *sql;
    int nparams; /* text parameters, unnamed statement */
    const char *const *params;
    bool simple; /* PQsendQuery (several statements, no params) */
    /* Run as its own SERIALIZABLE transaction, whatever the session's or
     * the login role's default: sent as one simple-protocol string
     * "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE; <sql>" with the
     * parameters inlined as escaped literals. One round trip, one implicit
     * transaction (an error rolls it back), and no session state: behind
     * PgBouncer in transaction mode nothing leaks to other clients. */
    bool serializable;
    /* As serializable, at READ COMMITTED: the housekeeping steps, which
     * must take no predicate locks (lease.expire_due, lease.purge_due). */
    bool read_committed;
    /* The name of a statement this session prepared (prepare_as below):
     * sent as Bind and Execute of it with the parameters, one implicit
     * transaction at the session's own isolation, which the session that
     * prepared it set to SERIALIZABLE (store_pg.c). sql is not sent. */
    const char *prepared;
    /* Only in store_pg_conn_exec_pipeline: Parse sql (its parameters' types
     * the server's inference) as a statement of this name; nothing runs. */
    const char *prepare_as;
} store_pg_stmt_t;

/* Runs one statement (see the header comment for the outcomes). */
void store_pg_conn_exec(struct pg_conn *conn, const store_pg_stmt_t *stmt,
                        const lease_deadline_t *deadline, store_pg_reply_t *out);

/* Runs n statements without parameters, each a prepare_as or an SQL text,
 * in one pipeline (libpq's pipeline mode: one round trip). They are one
 * implicit transaction that ends at the pipeline's Sync: an error rolls back
 * what ran before it and skips the rest (a statement Parse made stays made,
 * as the server keeps those). OK: all succeeded; ERROR: the first error;
 * NOT_SENT: the deadline had passed; LOST (discard): the deadline passed on
 * the way, without a cancel, or the session broke. */
void store_pg_conn_exec_pipeline(struct pg_conn *conn, const store_pg_stmt_t *stmts, int n,
                                 const lease_deadline_t *deadline, store_pg_reply_t *out);

#endif
