/*
 * pg_conn.c - one libpq session: deadline-bounded connect, reuse check, and
 * running one statement with a deadline and a confirmed cancel (see
 * pg_conn.h for the outcome rules).
 *
 * Why every result is read to the end: with the extended protocol the
 * server sends CommandComplete before the implicit COMMIT, which runs at
 * Sync. A SERIALIZABLE commit can still fail (40001) after the row arrived,
 * so only "no error up to ReadyForQuery" proves a commit.
 *
 * Why the cancel runs on its own thread: PQcancel opens a new connection
 * and blocks in connect(); against a partitioned server that may take far
 * longer than any deadline. The caller waits only STORE_PG_CANCEL_GRACE_MS
 * for the confirmation and otherwise gives the session up as lost.
 */
#include "pg_conn.h"

#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_log.h"
#include "pg_sqlstate.h"

#define MAX_HOSTS 64 /* more hosts than this: one attempt on the whole URL, as libpq reads it */

/* Splits a comma-separated list into *out (heap strings); returns the count,
 * or -1 when an entry is empty (libpq's default host or port: an override
 * cannot name it, so the URL is left to libpq whole) or on out of memory. */
static int split_list(const char *list, char ***out)
{
    *out = NULL;
    int n = 1;
    for (const char *c = list; *c; c++)
        n += *c == ',';
    if (n > MAX_HOSTS)
        return -1;
    char **v = calloc((size_t)n, sizeof *v);
    if (!v)
        return -1;
    const char *start = list;
    for (int i = 0; i < n; i++) {
        const char *end = strchr(start, ',');
        size_t len = end ? (size_t)(end - start) : strlen(start);
        v[i] = len ? strndup(start, len) : NULL;
        if (!v[i]) {
            for (int j = 0; j <= i; j++)
                free(v[j]);
            free(v);
            return -1;
        }
        start = end ? end + 1 : start + len;
    }
    *out = v;
    return n;
}

static void free_list(char **v, int n)
{
    if (!v)
        return;
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* The URL's hosts one by one (store_pg_connparams_t): host, hostaddr and
 * port lists as libpq reads them (one port for every host, or one each).
 * Leaves nhosts 0 (one attempt on the whole URL) for a single host, lists
 * libpq would refuse, or empty entries. */
static void read_hosts(store_pg_connparams_t *p, const char *conninfo)
{
    PQconninfoOption *opts = PQconninfoParse(conninfo, NULL);
    if (!opts)
        return;
    const char *host = NULL, *hostaddr = NULL, *port = NULL;
    for (PQconninfoOption *o = opts; o->keyword; o++) {
        if (!o->val || !*o->val)
            continue;
        if (strcmp(o->keyword, "host") == 0)
            host = o->val;
        else if (strcmp(o->keyword, "hostaddr") == 0)
            hostaddr = o->val;
        else if (strcmp(o->keyword, "port") == 0)
            port = o->val;
    }
    int nh = host ? split_list(host, &p->host) : 0;
    int na = hostaddr ? split_list(hostaddr, &p->hostaddr) : 0;
    int np = port ? split_list(port, &p->port) : 0;
    int n = nh > na ? nh : na;
    bool ok = nh >= 0 && na >= 0 && np >= 0 && n > 1 && (!host || nh == n) &&
              (!hostaddr || na == n) && (np <= 1 || np == n);
    PQconninfoFree(opts);
    if (!ok) {
        free_list(p->host, nh > 0 ? nh : 0);
        free_list(p->hostaddr, na > 0 ? na : 0);
        free_list(p->port, np > 0 ? np : 0);
        p->host = p->hostaddr = p->port = NULL;
        return;
    }
    if (np == 1) { /* one port for every host: the URL's own says it */
        free_list(p->port, 1);
        p->port = NULL;
    }
    p->nhosts = n;
}

int store_pg_connparams_init(store_pg_connparams_t *p, const char *conninfo,
                             int64_t connect_timeout_ms, const char *application_name, char *err,
                             size_t errsz)
{
    memset(p, 0, sizeof *p);
    if (lease_pg_session_params_init(&p->session, conninfo, connect_timeout_ms, "leased",
                                     application_name, err, errsz) != 0)
        return -1;
    p->keywords = p->session.keywords;
    p->values = p->session.values;
    read_hosts(p, conninfo);
    atomic_init(&p->first_host, 0);
    return 0;
}

void store_pg_connparams_free(store_pg_connparams_t *p)
{
    if (!p)
        return;
    free_list(p->host, p->nhosts);
    free_list(p->hostaddr, p->nhosts);
    free_list(p->port, p->nhosts);
    lease_pg_session_params_free(&p->session);
    memset(p, 0, sizeof *p);
}

/* Milliseconds until mono_ns, rounded up so a wait never spins at 0. */
static int wait_ms_until(int64_t mono_ns)
{
    int64_t left = mono_ns - lease_mono_now_ns();
    if (left <= 0)
        return 0;
    int64_t ms = (left + 999999) / 1000000;
    return ms > 60000 ? 60000 : (int)ms;
}

/* Waits for the socket; 0 on readiness or timeout, -1 on a poll error. */
static int wait_socket(int sock, short events, int timeout_ms)
{
    struct pollfd pfd = {.fd = sock, .events = events};
    int rc;
    do
        rc = poll(&pfd, 1, timeout_ms);
    while (rc < 0 && errno == EINTR);
    return rc < 0 ? -1 : 0;
}

static void notice_to_log(void *arg, const char *message)
{
    (void)arg;
    if (!store_pg_log_enabled(STORE_PG_LOG_DEBUG))
        return;
    store_pg_log_rec_t rec = {.event = "backend_notice", .message = message};
    store_pg_log(STORE_PG_LOG_DEBUG, &rec);
}

/* Appends "; " and what to msg (a reason per host tried). */
static void add_reason(char *msg, size_t msgsz, const char *what)
{
    size_t used = strlen(msg);
    if (used + 3 >= msgsz)
        return;
    char line[256];
    lease_pg_copy_msg(line, sizeof line, what);
    snprintf(msg + used, msgsz - used, "%s%s", used ? "; " : "", line);
}

typedef enum attempt_end {
    ATTEMPT_CONNECTED,
    ATTEMPT_REFUSED,   /* libpq gave up on the host(s): refused, read-only, auth... */
    ATTEMPT_TIMED_OUT, /* no answer within the limit */
} attempt_end_t;

/* One non-blocking connection attempt with keywords/values, until limit.
 * On CONNECTED *out is the session; otherwise the reason is added to msg. */
static attempt_end_t attempt(const char *const *keywords, const char *const *values,
                             int64_t limit, PGconn **out, char *msg, size_t msgsz)
{
    *out = NULL;
    PGconn *conn = PQconnectStartParams(keywords, values, 1);
    if (!conn) {
        add_reason(msg, msgsz, "out of memory");
        return ATTEMPT_REFUSED;
    }
    PostgresPollingStatusType st = PGRES_POLLING_WRITING;
    if (PQstatus(conn) == CONNECTION_BAD)
        st = PGRES_POLLING_FAILED;
    while (st != PGRES_POLLING_OK && st != PGRES_POLLING_FAILED) {
        int wait = wait_ms_until(limit);
        if (wait == 0) {
            add_reason(msg, msgsz, "connection attempt timed out");
            PQfinish(conn);
            return ATTEMPT_TIMED_OUT;
        }
        /* the socket may change between attempts at several addresses */
        if (wait_socket(PQsocket(conn), st == PGRES_POLLING_READING ? POLLIN : POLLOUT, wait) < 0) {
            st = PGRES_POLLING_FAILED;
            break;
        }
        st = PQconnectPoll(conn);
    }
    if (st == PGRES_POLLING_FAILED || PQsetnonblocking(conn, 1) != 0) {
        add_reason(msg, msgsz, PQerrorMessage(conn));
        PQfinish(conn);
        return ATTEMPT_REFUSED;
    }
    *out = conn;
    return ATTEMPT_CONNECTED;
}

#define MAX_KEYWORDS 32

store_pg_connect_status_t store_pg_conn_connect(store_pg_connparams_t *p,
                                                const lease_deadline_t *deadline,
                                                struct pg_conn **out, char *msg, size_t msgsz)
{
    *out = NULL;
    lease_pg_copy_msg(msg, msgsz, "");
    char reasons[512] = "";
    if (lease_deadline_passed(deadline))
        return STORE_PG_CONNECT_DEADLINE;
    int64_t per_host_ns = p->session.connect_timeout_ms * 1000000;
    PGconn *conn = NULL;
    bool deadline_ended = false;
    if (p->nhosts < 2) {
        int64_t limit = lease_mono_now_ns() + per_host_ns;
        deadline_ended = deadline->mono_ns <= limit;
        if (deadline_ended)
            limit = deadline->mono_ns;
        if (attempt(p->session.keywords, p->session.values, limit, &conn, reasons,
                    sizeof reasons) != ATTEMPT_TIMED_OUT)
            deadline_ended = false;
    } else {
        /* the session's keywords, then this host's (a later keyword wins
         * over what the URL in dbname says) */
        const char *kw[MAX_KEYWORDS + 4], *val[MAX_KEYWORDS + 4];
        size_t base = 0;
        while (p->session.keywords[base] && base < MAX_KEYWORDS) {
            kw[base] = p->session.keywords[base];
            val[base] = p->session.values[base];
            base++;
        }
        int first = atomic_load(&p->first_host);
        for (int k = 0; k < p->nhosts && !conn; k++) {
            int h = (first + k) % p->nhosts;
            size_t n = base;
            if (p->host)
                kw[n] = "host", val[n++] = p->host[h];
            if (p->hostaddr)
                kw[n] = "hostaddr", val[n++] = p->hostaddr[h];
            if (p->port)
                kw[n] = "port", val[n++] = p->port[h];
            kw[n] = val[n] = NULL;
            if (lease_deadline_passed(deadline)) {
                deadline_ended = true;
                break;
            }
            int64_t limit = lease_mono_now_ns() + per_host_ns;
            bool deadline_first = deadline->mono_ns <= limit;
            if (deadline_first)
                limit = deadline->mono_ns;
            attempt_end_t end = attempt(kw, val, limit, &conn, reasons, sizeof reasons);
            if (end == ATTEMPT_CONNECTED)
                atomic_store(&p->first_host, h);
            else if (end == ATTEMPT_TIMED_OUT && deadline_first)
                deadline_ended = true;
        }
    }
    if (!conn) {
        lease_pg_copy_msg(msg, msgsz, reasons);
        return deadline_ended ? STORE_PG_CONNECT_DEADLINE : STORE_PG_CONNECT_FAILED;
    }
    PQsetNoticeProcessor(conn, notice_to_log, NULL);
    *out = (struct pg_conn *)conn;
    return STORE_PG_CONNECT_OK;
}

bool store_pg_conn_usable(struct pg_conn *c)
{
    PGconn *conn = (PGconn *)c;
    if (!conn || PQstatus(conn) != CONNECTION_OK || PQtransactionStatus(conn) != PQTRANS_IDLE)
        return false;
    struct pollfd pfd = {.fd = PQsocket(conn), .events = POLLIN};
    if (pfd.fd < 0)
        return false;
    /* An idle session has nothing to say unless the server is leaving
     * (terminated backend, shutdown). It then sends a FATAL, which libpq
     * hands to the notice processor while idle, and closes: keep reading
     * while there is input so the EOF behind the message is seen too. */
    for (int i = 0; i < 8 && poll(&pfd, 1, 0) > 0; i++) {
        if ((pfd.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0 && (pfd.revents & POLLIN) == 0)
            return false;
        if (!PQconsumeInput(conn))
            return false;
        PGnotify *n;
        while ((n = PQnotifies(conn)) != NULL)
            PQfreemem(n);
    }
    return PQstatus(conn) == CONNECTION_OK && PQtransactionStatus(conn) == PQTRANS_IDLE;
}

void store_pg_reply_clear(store_pg_reply_t *r)
{
    if (!r)
        return;
    for (int i = 0; i < STORE_PG_MAX_VALUES; i++)
        free(r->values[i]);
    memset(r, 0, sizeof *r);
}

static void *cancel_thread(void *arg)
{
    PGcancel *cancel = arg;
    char errbuf[256];
    if (!PQcancel(cancel, errbuf, sizeof errbuf)) {
        store_pg_log_rec_t rec = {.event = "cancel_failed", .message = errbuf};
        store_pg_log(STORE_PG_LOG_WARN, &rec);
    }
    PQfreeCancel(cancel);
    return NULL;
}

/* Asks the server to cancel the running statement, without waiting for
 * the cancel connection itself. */
static void request_cancel(PGconn *conn)
{
    PGcancel *cancel = PQgetCancel(conn);
    if (!cancel)
        return;
    pthread_t t;
    pthread_attr_t attr;
    bool started = false;
    if (pthread_attr_init(&attr) == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        started = pthread_create(&t, &attr, cancel_thread, cancel) == 0;
        pthread_attr_destroy(&attr);
    }
    if (!started) /* no thread: cancel inline rather than not at all */
        cancel_thread(cancel);
}

/* What the results read so far say. */
typedef struct collect {
    bool have_row;
    bool shape_error;  /* a result that is not one row */
    bool server_error; /* an ERROR-severity result with a SQLSTATE */
    bool fatal;        /* FATAL/PANIC, or a libpq error without SQLSTATE */
} collect_t;

static void absorb(PGresult *res, collect_t *c, store_pg_reply_t *out)
{
    ExecStatusType st = PQresultStatus(res);
    if (st == PGRES_TUPLES_OK) {
        if (c->have_row || PQntuples(res) != 1 || PQnfields(res) < 1 ||
            PQnfields(res) > STORE_PG_MAX_VALUES) {
            c->shape_error = true;
            return;
        }
        c->have_row = true;
        out->nvalues = PQnfields(res);
        for (int i = 0; i < out->nvalues; i++) {
            if (PQgetisnull(res, 0, i))
                continue;
            out->values[i] = strdup(PQgetvalue(res, 0, i));
            if (!out->values[i])
                c->shape_error = true;
        }
        return;
    }
    if (st == PGRES_COMMAND_OK)
        return;
    if (st != PGRES_FATAL_ERROR && st != PGRES_NONFATAL_ERROR) {
        c->shape_error = true;
        return;
    }
    const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    const char *sev = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
    if (!out->sqlstate[0] || (!c->server_error && state)) {
        lease_pg_copy_msg(out->sqlstate, sizeof out->sqlstate, state);
        lease_pg_copy_msg(out->message, sizeof out->message, PQresultErrorMessage(res));
        lease_pg_copy_msg(out->primary, sizeof out->primary,
                          PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY));
        lease_pg_copy_msg(out->detail, sizeof out->detail,
                          PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL));
        lease_pg_copy_msg(out->constraint, sizeof out->constraint,
                          PQresultErrorField(res, PG_DIAG_CONSTRAINT_NAME));
    }
    if (state && sev && strcmp(sev, "ERROR") == 0)
        c->server_error = true;
    else
        c->fatal = true;
}

#define SERIALIZABLE_PREFIX "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE; "
#define READ_COMMITTED_PREFIX "SET TRANSACTION ISOLATION LEVEL READ COMMITTED; "
#define STMT_MAX_PARAMS 25 /* an acquisition's typed call, session_id last (pg_codec.h) */

/* The parameter a "$N" at sql names (1-based), its length in *len; 0 when
 * sql does not start a placeholder. */
static long placeholder_at(const char *sql, size_t *len)
{
    if (sql[0] != '$' || sql[1] < '1' || sql[1] > '9')
        return 0;
    char *end;
    long n = strtol(sql + 1, &end, 10);
    *len = (size_t)(end - sql);
    return n;
}

/* stmt's SQL behind prefix (SERIALIZABLE_PREFIX or READ_COMMITTED_PREFIX), each $N replaced by parameter N as
 * an escaped literal (store_pg_stmt_t.serializable). A parameter may appear
 * more than once. Returns a malloc'd string, or NULL (out of memory, or a
 * $N without its parameter). */
static char *isolated_text(PGconn *conn, const store_pg_stmt_t *stmt, const char *prefix)
{
    char *lits[STMT_MAX_PARAMS] = {NULL};
    size_t lens[STMT_MAX_PARAMS];
    char *text = NULL;
    if (stmt->nparams > STMT_MAX_PARAMS)
        return NULL;
    for (int i = 0; i < stmt->nparams; i++) {
        const char *v = stmt->params[i];
        lits[i] = v ? PQescapeLiteral(conn, v, strlen(v)) : NULL;
        if (v && !lits[i])
            goto cleanup;
        lens[i] = lits[i] ? strlen(lits[i]) : strlen("NULL");
    }
    /* two passes over the SQL: the exact length, then the text (copied,
     * not printed: a typed call has two dozen parameters) */
    size_t total = strlen(prefix) + 1;
    for (const char *r = stmt->sql; *r;) {
        size_t len;
        long n = placeholder_at(r, &len);
        if (n == 0) {
            total++, r++;
            continue;
        }
        if (n > stmt->nparams)
            goto cleanup;
        total += lens[n - 1];
        r += len;
    }
    text = malloc(total);
    if (!text)
        goto cleanup;
    memcpy(text, prefix, strlen(prefix));
    char *w = text + strlen(prefix);
    for (const char *r = stmt->sql; *r;) {
        size_t len;
        long n = placeholder_at(r, &len);
        if (n == 0) {
            *w++ = *r++;
            continue;
        }
        memcpy(w, lits[n - 1] ? lits[n - 1] : "NULL", lens[n - 1]);
        w += lens[n - 1];
        r += len;
    }
    *w = '\0';
cleanup:
    for (int i = 0; i < stmt->nparams; i++)
        PQfreemem(lits[i]);
    return text;
}

/* Clears out; true (out NOT_SENT) when the deadline has already passed. */
static bool not_sent_when_late(const lease_deadline_t *deadline, store_pg_reply_t *out)
{
    memset(out, 0, sizeof *out);
    if (!lease_deadline_passed(deadline))
        return false;
    out->status = STORE_PG_EXEC_NOT_SENT;
    return true;
}

void store_pg_conn_exec(struct pg_conn *c, const store_pg_stmt_t *stmt,
                        const lease_deadline_t *deadline, store_pg_reply_t *out)
{
    PGconn *conn = (PGconn *)c;
    if (not_sent_when_late(deadline, out))
        return;
    int sent;
    if (stmt->prepared) {
        sent =
            PQsendQueryPrepared(conn, stmt->prepared, stmt->nparams, stmt->params, NULL, NULL, 0);
    } else if (stmt->serializable || stmt->read_committed) {
        char *text = isolated_text(conn, stmt,
                                   stmt->read_committed ? READ_COMMITTED_PREFIX : SERIALIZABLE_PREFIX);
        sent = text ? PQsendQuery(conn, text) : 0;
        if (text) /* it may hold a request: never leave it in freed memory */
            memset(text, 0, strlen(text));
        free(text);
    } else if (stmt->simple) {
        sent = PQsendQuery(conn, stmt->sql);
    } else {
        sent = PQsendQueryParams(conn, stmt->sql, stmt->nparams, NULL, stmt->params, NULL, NULL, 0);
    }
    if (!sent) {
        out->status = STORE_PG_EXEC_SEND_FAILED;
        out->discard = true;
        lease_pg_copy_msg(out->message, sizeof out->message, PQerrorMessage(conn));
        return;
    }

    /* From here on the server may have the statement. */
    collect_t col = {0};
    bool flushed = false, done = false, lost = false;
    /* Nothing is read before the socket was waited for once: the answer
     * cannot be there the moment the query is sent, and reading would be
     * one more system call per statement that finds nothing. */
    bool waited = false;
    int64_t wait_until = deadline->mono_ns;
    while (!done && !lost) {
        if (!flushed) {
            int f = PQflush(conn);
            if (f < 0) {
                lost = true;
                break;
            }
            flushed = f == 0;
        }
        if (waited && !PQconsumeInput(conn))
            lost = true; /* still drain what was parsed: it may say why */
        while (!PQisBusy(conn)) {
            PGresult *res = PQgetResult(conn);
            if (!res) {
                done = true;
                break;
            }
            absorb(res, &col, out);
            PQclear(res);
        }
        if (done || lost || PQstatus(conn) == CONNECTION_BAD)
            break;
        if (lease_mono_now_ns() >= wait_until) {
            if (out->cancel_sent)
                break; /* silence through the grace: give up */
            request_cancel(conn);
            out->cancel_sent = true;
            wait_until = lease_mono_now_ns() + (int64_t)STORE_PG_CANCEL_GRACE_MS * 1000000;
        }
        if (wait_socket(PQsocket(conn), (short)(POLLIN | (flushed ? 0 : POLLOUT)),
                        wait_ms_until(wait_until)) < 0)
            lost = true;
        waited = true;
    }

    bool session_ok = PQstatus(conn) == CONNECTION_OK;
    if (col.server_error) {
        /* an ERROR rolled the transaction back whatever followed */
        out->status = STORE_PG_EXEC_ERROR;
        out->discard = !done || !session_ok || PQtransactionStatus(conn) != PQTRANS_IDLE;
    } else if (done && session_ok && !col.fatal) {
        out->status = STORE_PG_EXEC_OK;
        out->discard = PQtransactionStatus(conn) != PQTRANS_IDLE;
        if (col.shape_error || !col.have_row) {
            /* committed, but not the one row we asked for: the caller's
             * decoder sees no value and fails closed */
            for (int i = 0; i < STORE_PG_MAX_VALUES; i++) {
                free(out->values[i]);
                out->values[i] = NULL;
            }
            out->nvalues = 0;
        }
    } else {
        out->status = STORE_PG_EXEC_LOST;
        out->discard = true;
        if (!out->message[0])
            lease_pg_copy_msg(out->message, sizeof out->message,
                              session_ok ? "no reply before the deadline and cancel grace"
                                         : PQerrorMessage(conn));
    }
    /* A cancel we asked for may reach the server after this statement
     * ended (it raced the reply, or the function's own lock_timeout fired
     * first) and would then cancel the session's next statement: never
     * reuse a session that has a cancel in flight. */
    if (out->cancel_sent)
        out->discard = true;
}

void store_pg_conn_exec_pipeline(struct pg_conn *c, const store_pg_stmt_t *stmts, int n,
                                 const lease_deadline_t *deadline, store_pg_reply_t *out)
{
    PGconn *conn = (PGconn *)c;
    if (not_sent_when_late(deadline, out))
        return;
    /* queued in libpq's buffer, sent by the flushes below */
    bool queued = PQenterPipelineMode(conn) == 1;
    for (int i = 0; queued && i < n; i++)
        queued = (stmts[i].prepare_as
                      ? PQsendPrepare(conn, stmts[i].prepare_as, stmts[i].sql, 0, NULL)
                      : PQsendQueryParams(conn, stmts[i].sql, 0, NULL, NULL, NULL, NULL, 0)) == 1;
    queued = queued && PQpipelineSync(conn) == 1;

    collect_t col = {0};
    bool flushed = false, synced = false, lost = !queued;
    while (!synced && !lost) {
        if (!flushed) {
            int f = PQflush(conn);
            lost = f < 0;
            flushed = f == 0;
        }
        if (!lost && !PQconsumeInput(conn))
            lost = true;
        /* each statement's results end with a NULL; the Sync's own result
         * ends the pipeline */
        while (!lost && !synced && !PQisBusy(conn)) {
            PGresult *res = PQgetResult(conn);
            if (!res)
                continue;
            ExecStatusType st = PQresultStatus(res);
            if (st == PGRES_PIPELINE_SYNC)
                synced = true;
            else if (st != PGRES_PIPELINE_ABORTED) /* skipped after an error */
                absorb(res, &col, out);
            PQclear(res);
        }
        if (synced || lost || PQstatus(conn) == CONNECTION_BAD)
            break;
        /* no cancel: what runs here changes no data, and the caller gives
         * the session up */
        if (lease_mono_now_ns() >= deadline->mono_ns ||
            wait_socket(PQsocket(conn), (short)(POLLIN | (flushed ? 0 : POLLOUT)),
                        wait_ms_until(deadline->mono_ns)) < 0)
            lost = true;
    }
    if (synced && PQexitPipelineMode(conn) != 1)
        lost = true;
    if (lost || !synced || col.fatal || PQstatus(conn) != CONNECTION_OK) {
        out->status = STORE_PG_EXEC_LOST;
        out->discard = true;
        if (!out->message[0])
            lease_pg_copy_msg(out->message, sizeof out->message, PQerrorMessage(conn));
    } else if (col.server_error) {
        out->status = STORE_PG_EXEC_ERROR;
        out->discard = PQtransactionStatus(conn) != PQTRANS_IDLE;
    } else {
        out->status = STORE_PG_EXEC_OK;
        out->discard = PQtransactionStatus(conn) != PQTRANS_IDLE;
    }
}
