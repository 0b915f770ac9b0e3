/*
 * pg_listener.c - the Postgres feed of ended leases (include/lease/listener.h):
 * one dedicated libpq session that LISTENs on lease_ended and runs the
 * batched poll lease.watch_ended(ids).
 *
 * The session belongs to one thread (the watch hub), so nothing here locks.
 * Every statement is bounded by a deadline on the monotonic clock; when it
 * passes, or anything at all goes wrong, the session is simply dropped and
 * made again after a backoff: it only reads, so there is no outcome to
 * resolve, and whatever ended meanwhile is found by the next poll (the hub
 * polls at once after a new session).
 *
 * Statements run outside the lease functions' SERIALIZABLE rule on purpose:
 * the poll is a read of rows that only ever move from active to ended, so
 * READ COMMITTED (each statement its own implicit transaction) answers
 * correctly and takes no predicate locks that could conflict with lease
 * operations.
 */
#include "lease/store_pg.h"

#include <errno.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lease/log.h"
#include "pg_conn.h"
#include "pg_log.h"

#define CHANNEL "lease_ended"
#define SETUP_BUDGET_MS 5000
#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS 5000

typedef struct pg_listener {
    lease_listener_t base; /* base.mode: written by the hub's thread only */
    store_pg_connparams_t params;
    bool want_listen;
    PGconn *conn;
    int64_t next_connect_ns; /* no attempt before this (monotonic) */
    int64_t backoff_ms;
    bool down_logged; /* one warn line per outage, not per attempt */
} pg_listener_t;

static const lease_listener_ops_t pg_listener_ops;

static void log_event(store_pg_severity_t sev, const char *event, const char *message)
{
    if (!store_pg_log_enabled(sev))
        return;
    store_pg_log_rec_t rec = {.event = event, .op = "watch", .message = message};
    store_pg_log(sev, &rec);
}

int lease_listener_pg_open(const lease_listener_pg_config_t *cfg, lease_listener_t **out, char *err,
                           size_t errsz)
{
    *out = NULL;
    pg_listener_t *l = calloc(1, sizeof *l);
    if (!l) {
        snprintf(err, errsz, "out of memory");
        return -1;
    }
    if (store_pg_connparams_init(&l->params, cfg->conninfo, cfg->connect_timeout_ms,
                                 cfg->application_name, err, errsz) != 0) {
        free(l);
        return -1;
    }
    l->base.ops = &pg_listener_ops;
    l->want_listen = cfg->listen;
    l->backoff_ms = BACKOFF_FIRST_MS;
    *out = &l->base;
    return 0;
}

static void set_mode(pg_listener_t *l, lease_listener_mode_t mode)
{
    lease_listener_set_mode(&l->base, mode);
}

/* Ends the session (message may point into it: it is copied first). */
static void drop_session(pg_listener_t *l, const char *why, const char *message)
{
    char copy[256];
    snprintf(copy, sizeof copy, "%s", message ? message : "");
    if (l->conn) {
        PQfinish(l->conn);
        l->conn = NULL;
    }
    if (!l->down_logged) {
        log_event(STORE_PG_LOG_WARN, why, copy);
        l->down_logged = true;
    }
    set_mode(l, LEASE_LISTENER_DOWN);
    l->next_connect_ns = lease_mono_now_ns() + l->backoff_ms * 1000000;
    l->backoff_ms = l->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : l->backoff_ms * 2;
}

static void pg_close(lease_listener_t *base)
{
    pg_listener_t *l = (pg_listener_t *)base;
    if (l->conn)
        PQfinish(l->conn);
    store_pg_connparams_free(&l->params);
    free(l);
}

/* Hands every queued notification of our channel to ended. */
static void drain_notifies(pg_listener_t *l, lease_listener_ended_fn ended, void *arg)
{
    PGnotify *n;
    while ((n = PQnotifies(l->conn)) != NULL) {
        if (strcmp(n->relname, CHANNEL) == 0 && n->extra && *n->extra && ended)
            ended(arg, n->extra);
        PQfreemem(n);
    }
}

static int wait_fds(struct pollfd *fds, nfds_t n, int timeout_ms)
{
    int rc;
    do
        rc = poll(fds, n, timeout_ms);
    while (rc < 0 && errno == EINTR);
    return rc;
}

static int ms_left(const lease_deadline_t *d)
{
    int64_t ms = lease_deadline_remaining_ms(d);
    return ms <= 0 ? 0 : ms > 60000 ? 60000 : (int)ms;
}

/*
 * Runs one statement on the session within the deadline and returns its
 * single-row, single-column result as a heap string ("" for a command
 * without rows), or NULL when it failed (the reason in msg). Notifications
 * that arrive meanwhile stay queued in libpq for drain_notifies.
 */
static char *run(pg_listener_t *l, const char *sql, const char *param,
                 const lease_deadline_t *deadline, char *msg, size_t msgsz)
{
    const char *params[1] = {param};
    int sent = param ? PQsendQueryParams(l->conn, sql, 1, NULL, params, NULL, NULL, 0)
                     : PQsendQuery(l->conn, sql);
    if (!sent) {
        snprintf(msg, msgsz, "%s", PQerrorMessage(l->conn));
        return NULL;
    }
    /* non-blocking session: push the query out, then read to the end */
    for (;;) {
        int f = PQflush(l->conn);
        if (f == 0)
            break;
        struct pollfd pfd = {.fd = PQsocket(l->conn), .events = POLLOUT | POLLIN};
        if (f < 0 || wait_fds(&pfd, 1, ms_left(deadline)) <= 0) {
            snprintf(msg, msgsz, "%s", f < 0 ? PQerrorMessage(l->conn) : "sending timed out");
            return NULL;
        }
        if ((pfd.revents & POLLIN) && !PQconsumeInput(l->conn)) {
            snprintf(msg, msgsz, "%s", PQerrorMessage(l->conn));
            return NULL;
        }
    }
    char *value = NULL;
    bool failed = false;
    for (;;) {
        while (PQisBusy(l->conn)) {
            struct pollfd pfd = {.fd = PQsocket(l->conn), .events = POLLIN};
            if (wait_fds(&pfd, 1, ms_left(deadline)) <= 0) {
                snprintf(msg, msgsz, "no answer before the deadline");
                free(value);
                return NULL;
            }
            if (!PQconsumeInput(l->conn)) {
                snprintf(msg, msgsz, "%s", PQerrorMessage(l->conn));
                free(value);
                return NULL;
            }
        }
        PGresult *r = PQgetResult(l->conn);
        if (!r)
            break;
        ExecStatusType st = PQresultStatus(r);
        if (st == PGRES_TUPLES_OK && !value)
            value = strdup(PQntuples(r) > 0 && PQnfields(r) > 0 ? PQgetvalue(r, 0, 0) : "");
        else if (st == PGRES_COMMAND_OK && !value)
            value = strdup("");
        else if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK && !failed) {
            snprintf(msg, msgsz, "%s", PQresultErrorMessage(r));
            failed = true;
        }
        PQclear(r);
    }
    if (failed || !value) {
        if (!failed)
            snprintf(msg, msgsz, "out of memory");
        free(value);
        return NULL;
    }
    return value;
}

/*
 * Makes the session: connect, tell a pooler from a direct connection, and
 * LISTEN when wanted and possible. Returns true when a session exists
 * afterwards.
 */
static bool make_session(pg_listener_t *l)
{
    if (lease_mono_now_ns() < l->next_connect_ns)
        return false;
    lease_deadline_t budget = lease_deadline_in(SETUP_BUDGET_MS);
    char msg[256] = "";
    struct pg_conn *c = NULL;
    if (store_pg_conn_connect(&l->params, &budget, &c, msg, sizeof msg) != STORE_PG_CONNECT_OK) {
        drop_session(l, "watch_connect_failed", msg);
        return false;
    }
    l->conn = (PGconn *)c;
    char *pid = run(l, "SELECT pg_backend_pid()", NULL, &budget, msg, sizeof msg);
    if (!pid) {
        drop_session(l, "watch_session_failed", msg);
        return false;
    }
    /* PgBouncer answers the startup with a cancel key of its own making:
     * the pid in it is not the backend that runs our statements */
    bool direct = atoi(pid) == PQbackendPID(l->conn);
    free(pid);
    set_mode(l, LEASE_LISTENER_POLLING);
    if (l->want_listen && direct) {
        char *ok = run(l, "LISTEN " CHANNEL, NULL, &budget, msg, sizeof msg);
        if (!ok) {
            drop_session(l, "watch_listen_failed", msg);
            return false;
        }
        free(ok);
        set_mode(l, LEASE_LISTENER_LISTENING);
    }
    if (lease_listener_mode(&l->base) == LEASE_LISTENER_LISTENING)
        LOG_INFO("watch: listening on %s", CHANNEL);
    else if (l->want_listen)
        LOG_WARN("watch: the watch connection goes through a pooler (the backend pid differs "
                 "from the connection's cancel key); LISTEN needs a direct connection "
                 "(LEASE_WATCH_DATABASE_URL): ended leases are found by polling only");
    else
        LOG_INFO("watch: LISTEN switched off (LEASE_WATCH_LISTEN=false): polling only");
    l->down_logged = false;
    l->backoff_ms = BACKOFF_FIRST_MS;
    return true;
}

static lease_listener_mode_t pg_wait(lease_listener_t *base, int wake_fd, int64_t timeout_ms,
                                     lease_listener_ended_fn ended, void *arg, bool *new_session)
{
    pg_listener_t *l = (pg_listener_t *)base;
    *new_session = false;
    int64_t end_ns = lease_mono_now_ns() + (timeout_ms > 0 ? timeout_ms : 0) * 1000000;
    if (!l->conn) {
        *new_session = make_session(l);
        if (!l->conn) {
            /* no session: sleep on the wake fd until the next attempt is due */
            int64_t until = l->next_connect_ns < end_ns ? l->next_connect_ns : end_ns;
            int64_t ms = (until - lease_mono_now_ns() + 999999) / 1000000;
            struct pollfd pfd = {.fd = wake_fd, .events = POLLIN};
            if (ms > 0)
                (void)wait_fds(&pfd, wake_fd >= 0 ? 1 : 0, (int)ms);
            return lease_listener_mode(base);
        }
        if (*new_session)
            return lease_listener_mode(base); /* let the caller poll at once */
    }
    drain_notifies(l, ended, arg); /* any left from a statement */
    int64_t ms = (end_ns - lease_mono_now_ns() + 999999) / 1000000;
    struct pollfd fds[2] = {{.fd = PQsocket(l->conn), .events = POLLIN},
                            {.fd = wake_fd, .events = POLLIN}};
    int rc = wait_fds(fds, wake_fd >= 0 ? 2 : 1, ms > 0 ? (int)(ms > 60000 ? 60000 : ms) : 0);
    if (rc < 0)
        return lease_listener_mode(base);
    if (fds[0].revents) {
        /* notifications, or the server leaving (terminated, shut down) */
        if (!PQconsumeInput(l->conn) || PQstatus(l->conn) != CONNECTION_OK) {
            drop_session(l, "watch_session_lost", PQerrorMessage(l->conn));
            return lease_listener_mode(base);
        }
        drain_notifies(l, ended, arg);
    }
    return lease_listener_mode(base);
}

/* The ids as a Postgres array literal; they hold no character that needs
 * quoting ([A-Za-z0-9._:-], checked here). NULL when one does not. */
static char *array_literal(const char *const *ids, size_t n)
{
    size_t len = 3;
    for (size_t i = 0; i < n; i++)
        len += strlen(ids[i]) + 1;
    char *out = malloc(len);
    if (!out)
        return NULL;
    char *p = out;
    *p++ = '{';
    for (size_t i = 0; i < n; i++) {
        const char *id = ids[i];
        if (!*id ||
            strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-") !=
                strlen(id)) {
            free(out);
            return NULL;
        }
        if (i > 0)
            *p++ = ',';
        size_t k = strlen(id);
        memcpy(p, id, k);
        p += k;
    }
    *p++ = '}';
    *p = '\0';
    return out;
}

static lease_code_t pg_poll(lease_listener_t *base, const char *const *ids, size_t n,
                            const lease_deadline_t *deadline, lease_listener_ended_fn ended,
                            void *arg)
{
    pg_listener_t *l = (pg_listener_t *)base;
    if (!l->conn && !make_session(l))
        return LEASE_BACKEND_UNAVAILABLE;
    if (n == 0)
        return LEASE_INSPECTED;
    char *literal = array_literal(ids, n);
    if (!literal)
        return LEASE_BACKEND_UNAVAILABLE;
    char msg[256] = "";
    char *answer =
        run(l, "SELECT lease.watch_ended($1::text[])::text", literal, deadline, msg, sizeof msg);
    free(literal);
    if (!answer) {
        drop_session(l, "watch_poll_failed", msg);
        return LEASE_BACKEND_UNAVAILABLE;
    }
    json_t *arr = json_loads(answer, 0, NULL);
    free(answer);
    if (!json_is_array(arr)) {
        json_decref(arr);
        log_event(STORE_PG_LOG_ERROR, "watch_poll_undecodable",
                  "lease.watch_ended answered no array");
        return LEASE_BACKEND_UNAVAILABLE;
    }
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v)
    {
        if (json_is_string(v) && ended)
            ended(arg, json_string_value(v));
    }
    json_decref(arr);
    drain_notifies(l, ended, arg);
    return LEASE_INSPECTED;
}

static const lease_listener_ops_t pg_listener_ops = {pg_wait, pg_poll, pg_close};
