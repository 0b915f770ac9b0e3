/*
 * store_valkey.c - the Valkey/Redis adapter: a pool of connections, one
 * FCALL per operation on one of them, transport failures mapped onto the
 * closed set of codes (store_valkey.h). The functions decide; nothing here
 * does.
 *
 * Pool: each call takes a free connection for the call (and its WAIT: WAIT
 * counts the replicas that acknowledged this connection's last write), so
 * a call waiting for replicas holds one connection, not the adapter; a call
 * that finds none free waits for one until its deadline (then nothing was
 * sent). A broken connection is dropped and opened again by the next call
 * that takes it. The server runs one function at a time anyway: what the
 * pool buys is the network round trips and WAITs of other calls overlapping
 * (docs/backends.md, "Connection pool").
 *
 * Combining: acquire, renew and release go through the combiner
 * (valkey_combiner.c): at most combine_calls of them in flight, the
 * requests that arrive meanwhile sent together as one leased_v1_combined
 * call by send_combined (docs/backends.md, "Combined calls").
 *
 * Failure mapping: a failure before the call was sent is
 * lease_backend_unavailable; a failure after a mutation was sent (timeout,
 * lost connection, an answer that cannot be read) is lease_outcome_unknown,
 * which the caller resolves by repeating the request id; a server error
 * reply (out of memory, read-only replica, missing function) means the
 * function did not run: lease_backend_unavailable with a reason.
 */
#include "lease/store_valkey.h"

#include <hiredis/hiredis.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "lease/clock.h"
#include "valkey_codec.h"
#include "valkey_combiner.h"
#include "valkey_connect.h"
#include "valkey_library.h"

#define NS_MAX 64
#define NS_KEY_MAX (NS_MAX + 16)

/* One pooled connection; owned by one call at a time. */
typedef struct valkey_conn {
    valkey_transport_t *link; /* NULL: reconnect at its next use */
} valkey_conn_t;

struct lease_valkey {
    pthread_mutex_t mu;  /* the free list */
    pthread_cond_t free; /* a connection was given back (CLOCK_MONOTONIC) */
    valkey_conn_t *conns;
    int nconns;
    int *free_list; /* indexes of the free connections */
    int nfree;
    valkey_endpoint_t ep; /* where, as whom, TLS; its password wiped at close */
    int min_replicas;     /* WAIT after each write function call (0: none) */
    char ns_key[NS_KEY_MAX];
    valkey_combiner_t comb; /* acquire, renew and release (valkey_combiner.h) */
    bool comb_ready;
};

static bool ns_ok(const char *ns)
{
    size_t n = ns ? strlen(ns) : 0;
    if (n == 0 || n > NS_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = ns[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return false;
    }
    return true;
}

/* Drops conn's connection when the server has closed it while it was idle
 * (a restart, CLIENT KILL, a timeout): an idle connection has nothing to
 * read, so a readable socket means end of file or an error (TLS's own
 * messages aside: valkey_transport_closed_while_idle). Checked at
 * checkout, so a call is not sent on a connection known to be dead and
 * answered lease_outcome_unknown for it; a close that arrives after this
 * check is still unknown, as it must be. */
static void conn_drop_if_closed(valkey_conn_t *conn)
{
    if (conn->link != NULL && valkey_transport_closed_while_idle(conn->link)) {
        valkey_transport_free(conn->link);
        conn->link = NULL;
    }
}

bool valkey_endpoint_set(valkey_endpoint_t *e, const lease_valkey_config_t *cfg, char *err,
                         size_t errlen)
{
    memset(e, 0, sizeof *e);
    const char *ca = cfg->tls_ca_file ? cfg->tls_ca_file : "";
    const char *cert = cfg->tls_cert_file ? cfg->tls_cert_file : "";
    const char *key = cfg->tls_key_file ? cfg->tls_key_file : "";
    if (strlen(cfg->host) >= sizeof e->host || (cfg->user && strlen(cfg->user) >= sizeof e->user) ||
        (cfg->password && strlen(cfg->password) >= sizeof e->password) ||
        strlen(ca) >= sizeof e->tls.ca_file || strlen(cert) >= sizeof e->tls.cert_file ||
        strlen(key) >= sizeof e->tls.key_file) {
        valkey_set_err(err, errlen,
                       "the store's host, user, password or a TLS file name is too long");
        return false;
    }
    snprintf(e->host, sizeof e->host, "%s", cfg->host);
    e->port = cfg->port;
    e->connect_timeout_ms = cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : 2000;
    snprintf(e->user, sizeof e->user, "%s", cfg->user ? cfg->user : "");
    snprintf(e->password, sizeof e->password, "%s", cfg->password ? cfg->password : "");
    e->tls.on = cfg->tls;
    snprintf(e->tls.ca_file, sizeof e->tls.ca_file, "%s", ca);
    snprintf(e->tls.cert_file, sizeof e->tls.cert_file, "%s", cert);
    snprintf(e->tls.key_file, sizeof e->tls.key_file, "%s", key);
    return true;
}

void valkey_endpoint_wipe(valkey_endpoint_t *e)
{
    volatile char *pw = (volatile char *)e->password;
    for (size_t i = 0; i < sizeof e->password; i++)
        pw[i] = 0;
}

valkey_transport_t *valkey_connect(const valkey_endpoint_t *e, char *err, size_t errlen)
{
    /* AUTH is answered within the connect timeout too (callers set their
     * own timeouts for what follows) */
    valkey_transport_t *c =
        valkey_transport_connect(e->host, e->port, e->connect_timeout_ms, &e->tls, err, errlen);
    if (c == NULL || e->password[0] == '\0')
        return c;
    redisReply *r = e->user[0] ? valkey_transport_command(c, "AUTH %s %s", e->user, e->password)
                               : valkey_transport_command(c, "AUTH %s", e->password);
    bool ok = r != NULL && r->type == REDIS_REPLY_STATUS;
    if (!ok)
        /* the server's reason (WRONGPASS ...) does not quote the password */
        valkey_set_err(err, errlen, "%s:%d refused the store URL's credentials: %s", e->host,
                       e->port,
                       r == NULL                      ? valkey_transport_error(c)
                       : r->type == REDIS_REPLY_ERROR ? r->str
                                                      : "unexpected answer");
    if (r)
        valkey_reply_free(r);
    if (!ok) {
        valkey_transport_free(c);
        return NULL;
    }
    return c;
}

/* Opens conn's connection if it has none. By its owner only. */
static bool conn_open(lease_valkey_t *v, valkey_conn_t *conn, char *err, size_t errlen)
{
    if (conn->link == NULL)
        conn->link = valkey_connect(&v->ep, err, errlen);
    return conn->link != NULL;
}

/* Drops a broken (or possibly out of step) connection: its next user
 * connects again. */
static void conn_drop(valkey_conn_t *conn)
{
    if (conn->link) {
        valkey_transport_free(conn->link);
        conn->link = NULL;
    }
}

/* Takes a free connection, waiting for one until deadline_mono_ns (0: no
 * bound); NULL when none came free in time. */
static valkey_conn_t *conn_take(lease_valkey_t *v, int64_t deadline_mono_ns)
{
    pthread_mutex_lock(&v->mu);
    while (v->nfree == 0) {
        if (deadline_mono_ns == 0) {
            pthread_cond_wait(&v->free, &v->mu);
            continue;
        }
        /* the deadline is CLOCK_MONOTONIC nanoseconds, as the condvar's clock */
        struct timespec ts = {.tv_sec = deadline_mono_ns / 1000000000,
                              .tv_nsec = deadline_mono_ns % 1000000000};
        if (pthread_cond_timedwait(&v->free, &v->mu, &ts) != 0 && v->nfree == 0) {
            pthread_mutex_unlock(&v->mu);
            return NULL;
        }
    }
    valkey_conn_t *conn = &v->conns[v->free_list[--v->nfree]];
    pthread_mutex_unlock(&v->mu);
    return conn;
}

static void conn_give(lease_valkey_t *v, valkey_conn_t *conn)
{
    pthread_mutex_lock(&v->mu);
    v->free_list[v->nfree++] = (int)(conn - v->conns);
    pthread_cond_signal(&v->free);
    pthread_mutex_unlock(&v->mu);
}

/* CONFIG GET name equals want. */
static bool config_is(valkey_transport_t *c, const char *name, const char *want, char *err,
                      size_t errlen)
{
    redisReply *r = valkey_transport_command(c, "CONFIG GET %s", name);
    if (r == NULL) {
        /* the connection failed: nothing is known of the setting */
        valkey_set_err(err, errlen, "no answer to CONFIG GET %s: %s", name,
                       valkey_transport_error(c));
        return false;
    }
    bool ok = r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
              r->element[1]->type == REDIS_REPLY_STRING && strcmp(r->element[1]->str, want) == 0;
    if (!ok && r->type == REDIS_REPLY_ERROR)
        /* refused, not a setting read: say what the operator must change
         * (the first command a connection without credentials sends is
         * this one, so NOAUTH comes here, not from a failed AUTH) */
        valkey_set_err(err, errlen, "the server refused CONFIG GET %s (%s): %s", name, r->str,
                       strncmp(r->str, "NOAUTH", 6) == 0 || strncmp(r->str, "WRONGPASS", 9) == 0
                           ? "the store URL needs the server's user and password"
                           : "leased reads appendonly, appendfsync and maxmemory-policy "
                             "before it starts; the user needs CONFIG GET");
    else if (!ok)
        valkey_set_err(err, errlen, "the server must run with %s %s (%s)", name, want,
                       r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                               r->element[1]->type == REDIS_REPLY_STRING
                           ? r->element[1]->str
                           : "unreadable");
    valkey_reply_free(r);
    return ok;
}

/* A library of this name is loaded, with the very same text as this
 * build's (a different one under this version's name would decide
 * differently). */
static bool library_is_ours(valkey_transport_t *c, const char *code, char *err, size_t errlen)
{
    redisReply *r = valkey_transport_command(c, "FUNCTION LIST LIBRARYNAME %s WITHCODE",
                                             LEASE_VALKEY_LIBRARY_NAME);
    bool ok = false;
    bool found = false;
    if (r && r->type == REDIS_REPLY_ARRAY) {
        for (size_t i = 0; i < r->elements && !ok; i++) {
            const redisReply *lib = r->element[i];
            const redisReply *name = valkey_field(lib, "library_name");
            const redisReply *text = valkey_field(lib, "library_code");
            bool named = name && name->type == REDIS_REPLY_STRING &&
                         strcmp(name->str, LEASE_VALKEY_LIBRARY_NAME) == 0;
            found |= named;
            ok = named && text && text->type == REDIS_REPLY_STRING && strcmp(text->str, code) == 0;
        }
    }
    if (!ok)
        valkey_set_err(err, errlen,
                       found ? "a different %s library is loaded on the server"
                             : "the %s library is not loaded (leasectl migrate loads it)",
                       LEASE_VALKEY_LIBRARY_NAME);
    if (r)
        valkey_reply_free(r);
    return ok;
}

/* Loads the library, or checks that the one loaded is this build's
 * (check_only: only checks). */
static bool load_library(valkey_transport_t *c, bool check_only, char *err, size_t errlen)
{
    const char *code = (const char *)lease_valkey_library;
    if (check_only)
        return library_is_ours(c, code, err, errlen);
    redisReply *r = valkey_transport_command(c, "FUNCTION LOAD %s", code);
    if (r == NULL) {
        valkey_set_err(err, errlen, "FUNCTION LOAD: %s", valkey_transport_error(c));
        return false;
    }
    bool ok = r->type == REDIS_REPLY_STRING;
    /* loaded already, or a replica (which has its primary's library, or none) */
    bool exists = r->type == REDIS_REPLY_ERROR &&
                  (strstr(r->str, "already exists") != NULL || strncmp(r->str, "READONLY", 8) == 0);
    if (!ok && !exists)
        valkey_set_err(err, errlen, "FUNCTION LOAD: %s",
                       r->type == REDIS_REPLY_ERROR ? r->str : "unexpected answer");
    valkey_reply_free(r);
    if (ok || !exists)
        return ok;
    return library_is_ours(c, code, err, errlen);
}
static const valkey_combiner_ops_t combiner_ops;

lease_code_t lease_valkey_open(const lease_valkey_config_t *cfg, lease_valkey_t **out, char *err,
                               size_t errlen)
{
    *out = NULL;
    if (cfg == NULL || cfg->host == NULL || strlen(cfg->host) >= 256 || cfg->port <= 0 ||
        cfg->port > 65535 || !ns_ok(cfg->ns)) {
        valkey_set_err(err, errlen,
                       "invalid configuration (host, port, namespace [a-z0-9_-]{1,64})");
        return LEASE_BACKEND_UNAVAILABLE;
    }
    lease_valkey_t *v = calloc(1, sizeof *v);
    if (v == NULL) {
        valkey_set_err(err, errlen, "out of memory");
        return LEASE_BACKEND_UNAVAILABLE;
    }
    pthread_mutex_init(&v->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&v->free, &ca);
    pthread_condattr_destroy(&ca);
    valkey_combiner_init(
        &v->comb, cfg->combine_calls > 0 ? cfg->combine_calls : LEASE_VALKEY_COMBINE_CALLS,
        cfg->combine_items > 0 ? cfg->combine_items : LEASE_VALKEY_COMBINE_ITEMS, &combiner_ops, v);
    v->comb_ready = true;
    v->nconns = cfg->pool_size > 0 ? cfg->pool_size : 1;
    v->conns = calloc((size_t)v->nconns, sizeof *v->conns);
    v->free_list = calloc((size_t)v->nconns, sizeof *v->free_list);
    if (v->conns == NULL || v->free_list == NULL) {
        lease_valkey_close(v);
        valkey_set_err(err, errlen, "out of memory");
        return LEASE_BACKEND_UNAVAILABLE;
    }
    /* the first connection is checked now; the others open at first use */
    for (int i = v->nconns - 1; i >= 0; i--)
        v->free_list[v->nfree++] = i;
    if (!valkey_endpoint_set(&v->ep, cfg, err, errlen)) {
        lease_valkey_close(v);
        return LEASE_BACKEND_UNAVAILABLE;
    }
    v->min_replicas = cfg->min_replicas > 0 ? cfg->min_replicas : 0;
    snprintf(v->ns_key, sizeof v->ns_key, "lease:{%s}:ns", cfg->ns);
    valkey_conn_t *first = &v->conns[0];
    bool ok = conn_open(v, first, err, errlen) &&
              valkey_transport_set_timeout(first->link, v->ep.connect_timeout_ms) &&
              config_is(first->link, "appendonly", "yes", err, errlen) &&
              config_is(first->link, "appendfsync", "always", err, errlen) &&
              config_is(first->link, "maxmemory-policy", "noeviction", err, errlen) &&
              load_library(first->link, cfg->check_only, err, errlen);
    if (!ok) {
        lease_valkey_close(v);
        return LEASE_BACKEND_UNAVAILABLE;
    }
    *out = v;
    return LEASE_INSPECTED;
}

int lease_valkey_pool_size(const lease_valkey_t *v)
{
    return v->nconns;
}

int lease_valkey_pool_in_use(lease_valkey_t *v)
{
    pthread_mutex_lock(&v->mu);
    int n = v->nconns - v->nfree;
    pthread_mutex_unlock(&v->mu);
    return n;
}

void lease_valkey_close(lease_valkey_t *v)
{
    if (v == NULL)
        return;
    for (int i = 0; v->conns != NULL && i < v->nconns; i++)
        conn_drop(&v->conns[i]);
    free(v->conns);
    free(v->free_list);
    if (v->comb_ready)
        valkey_combiner_destroy(&v->comb);
    valkey_endpoint_wipe(&v->ep);
    pthread_cond_destroy(&v->free);
    pthread_mutex_destroy(&v->mu);
    free(v);
}

typedef enum call_failure {
    CALL_OK = 0,
    CALL_NOT_SENT,    /* nothing reached the server */
    CALL_NO_ANSWER,   /* sent; the answer was lost */
    CALL_ERROR,       /* the server refused to run the function (reply error) */
    CALL_UNCONFIRMED, /* it ran on the primary; fewer than min_replicas acknowledged */
} call_failure_t;

/* WAIT min_replicas, bounded by what is left of budget_ms (WAIT 0 would
 * wait for ever), on the connection that made the write (WAIT counts the
 * replicas that acknowledged this client's last write). */
static call_failure_t wait_replicas(lease_valkey_t *v, valkey_conn_t *conn, int64_t budget_ms)
{
    if (budget_ms < 1)
        budget_ms = 1;
    /* the server answers WAIT at its timeout: read a little past it */
    if (!valkey_transport_set_timeout(conn->link, budget_ms + 1000)) {
        conn_drop(conn);
        return CALL_NO_ANSWER;
    }
    redisReply *w =
        valkey_transport_command(conn->link, "WAIT %d %lld", v->min_replicas, (long long)budget_ms);
    if (w == NULL) {
        conn_drop(conn);
        return CALL_NO_ANSWER;
    }
    bool confirmed = w->type == REDIS_REPLY_INTEGER && w->integer >= v->min_replicas;
    valkey_reply_free(w);
    return confirmed ? CALL_OK : CALL_UNCONFIRMED;
}

/* The call on conn, a connection taken from the pool (given back here):
 * FCALL ... as argv says, bounded by the deadline (none: the connect
 * timeout). write: a write function; with min_replicas its answer is given
 * only once WAIT confirms it (else CALL_UNCONFIRMED, the answer dropped).
 * On CALL_OK *reply is the answer (caller frees); on CALL_ERROR reason says
 * why in one word. */
static call_failure_t fcall_on(lease_valkey_t *v, valkey_conn_t *conn, int argc, const char **argv,
                               const lease_deadline_t *deadline, bool write, redisReply **reply,
                               char *reason, size_t reason_len)
{
    *reply = NULL;
    int64_t budget = v->ep.connect_timeout_ms;
    if (deadline != NULL) {
        /* what is left after waiting for the connection; the wait is
         * bounded on the monotonic clock, the function compares the wall
         * deadline with the server's TIME */
        budget = (deadline->mono_ns - lease_mono_now_ns()) / 1000000;
        if (budget <= 0) {
            conn_give(v, conn);
            return CALL_NOT_SENT;
        }
    }
    conn_drop_if_closed(conn);
    if (!conn_open(v, conn, NULL, 0) || !valkey_transport_set_timeout(conn->link, budget)) {
        conn_drop(conn);
        conn_give(v, conn);
        return CALL_NOT_SENT;
    }
    redisReply *r = valkey_transport_command_argv(conn->link, argc, argv, NULL);
    if (r == NULL) {
        /* the command was written and its answer awaited in one step: whether the command left
         * this process is not known, so a mutation's outcome is unknown */
        conn_drop(conn);
        conn_give(v, conn);
        return CALL_NO_ANSWER;
    }
    if (write && v->min_replicas > 0 && r->type != REDIS_REPLY_ERROR) {
        /* the WAIT shares the call's budget: the answer is due by the
         * deadline, confirmed or not */
        int64_t left = deadline != NULL ? (deadline->mono_ns - lease_mono_now_ns()) / 1000000
                                        : v->ep.connect_timeout_ms;
        call_failure_t w = wait_replicas(v, conn, left);
        if (w != CALL_OK) {
            conn_give(v, conn);
            valkey_reply_free(r);
            snprintf(reason, reason_len, "%s", "replicas_unconfirmed");
            return w;
        }
    }
    conn_give(v, conn);
    if (r->type == REDIS_REPLY_ERROR) {
        const char *why = strncmp(r->str, "OOM", 3) == 0        ? "out_of_memory"
                          : strncmp(r->str, "READONLY", 8) == 0 ? "read_only"
                          : strstr(r->str, "not found") != NULL ? "library_missing"
                                                                : "server_error";
        snprintf(reason, reason_len, "%s", why);
        valkey_reply_free(r);
        return CALL_ERROR;
    }
    *reply = r;
    return CALL_OK;
}

/* fcall_on with a connection taken from the pool, waiting for one until
 * the deadline (every connection busy until then: CALL_NOT_SENT). */
static call_failure_t fcall_argv(lease_valkey_t *v, int argc, const char **argv,
                                 const lease_deadline_t *deadline, bool write, redisReply **reply,
                                 char *reason, size_t reason_len)
{
    *reply = NULL;
    int64_t until = deadline != NULL ? deadline->mono_ns
                                     : lease_mono_now_ns() + v->ep.connect_timeout_ms * 1000000;
    if (until <= lease_mono_now_ns())
        return CALL_NOT_SENT;
    valkey_conn_t *conn = conn_take(v, until);
    if (conn == NULL)
        return CALL_NOT_SENT;
    return fcall_on(v, conn, argc, argv, deadline, write, reply, reason, reason_len);
}

static call_failure_t fcall(lease_valkey_t *v, const char *fn, const char *arg,
                            const lease_deadline_t *deadline, bool write, redisReply **reply,
                            char *reason, size_t reason_len)
{
    /* FCALL fn 1 ns_key arg, as "FCALL %s 1 %s %s" formats it, without
     * hiredis interpreting a format (valkey_transport.c, format_argv) */
    const char *argv[5] = {"FCALL", fn, "1", v->ns_key, arg};
    return fcall_argv(v, 5, argv, deadline, write, reply, reason, reason_len);
}

/* A mutation's failed call as lease codes: *code and reason (the
 * request's own deadline tells a pool wait that took it from a server out
 * of reach). */
static lease_code_t call_failure_code(call_failure_t f, const lease_deadline_t *deadline,
                                      bool mutation, const char *why, char *reason,
                                      size_t reason_len)
{
    switch (f) {
    case CALL_OK:
        break;
    case CALL_NOT_SENT:
        /* the deadline passed while every pooled connection was busy:
         * nothing was sent, deadline_exceeded, as the PostgreSQL pool
         * answers; otherwise the server could not be reached */
        return deadline->mono_ns <= lease_mono_now_ns() ? LEASE_DEADLINE_EXCEEDED
                                                        : LEASE_BACKEND_UNAVAILABLE;
    case CALL_NO_ANSWER:
        return mutation ? LEASE_OUTCOME_UNKNOWN : LEASE_BACKEND_UNAVAILABLE;
    case CALL_UNCONFIRMED:
        /* decided and applied on the primary, not yet on enough replicas:
         * a failover could lose it; repeating the request id resolves it */
        snprintf(reason, reason_len, "%s", why);
        return LEASE_OUTCOME_UNKNOWN;
    case CALL_ERROR:
        snprintf(reason, reason_len, "%s", why);
        return LEASE_BACKEND_UNAVAILABLE;
    }
    return LEASE_BACKEND_UNAVAILABLE;
}

/* The call half of a lease operation: FCALL fn with arg (consumed). On
 * success the answer (caller frees); otherwise NULL, *code the failure
 * (mutation: a lost answer is lease_outcome_unknown) and reason its word. */
static redisReply *op_call(lease_valkey_t *v, const char *fn, char *arg,
                           const lease_deadline_t *deadline, bool mutation, lease_code_t *code,
                           char *reason, size_t reason_len)
{
    reason[0] = '\0';
    if (arg == NULL) {
        *code = LEASE_BACKEND_UNAVAILABLE;
        return NULL;
    }
    if (deadline->mono_ns <= lease_mono_now_ns()) {
        free(arg);
        *code = LEASE_DEADLINE_EXCEEDED;
        return NULL;
    }
    redisReply *r = NULL;
    char why[32] = "";
    call_failure_t f = fcall(v, fn, arg, deadline, mutation, &r, why, sizeof why);
    free(arg);
    if (f == CALL_OK)
        return r;
    *code = call_failure_code(f, deadline, mutation, why, reason, reason_len);
    return NULL;
}

/* One lease operation: encode, call, decode. mutation: a lost answer is
 * lease_outcome_unknown. */
static lease_code_t lease_op(lease_valkey_t *v, const char *fn, char *arg,
                             const lease_deadline_t *deadline, bool mutation, lease_result_t *res)
{
    memset(res, 0, sizeof *res);
    redisReply *r =
        op_call(v, fn, arg, deadline, mutation, &res->code, res->reason, sizeof res->reason);
    if (r == NULL)
        return res->code;
    if (!valkey_decode_result(r, res)) {
        memset(res, 0, sizeof *res);
        res->code = mutation ? LEASE_OUTCOME_UNKNOWN : LEASE_BACKEND_UNAVAILABLE;
    }
    valkey_reply_free(r);
    return res->code;
}

/* One item's answer from its reply (its own call's, or its element of a
 * combined call's), as lease_op decodes it. */
static void decode_item(const redisReply *r, lease_result_t *res)
{
    if (!valkey_decode_result(r, res)) {
        memset(res, 0, sizeof *res);
        res->code = LEASE_OUTCOME_UNKNOWN; /* it ran; what it decided cannot be read */
    }
}

/* The combiner's send (valkey_combiner.h): one request as its own
 * function's call, exactly as before combining; several as one
 * leased_v1_combined call, its socket timeout bounded by the earliest
 * deadline among them. A combined call that fails is every item's
 * failure: sent and unanswered, each is lease_outcome_unknown. */
static void send_combined(void *ctx, void *conn, valkey_combined_item_t **items, int n)
{
    lease_valkey_t *v = ctx;
    const char *argv[4 + 2 * VALKEY_COMBINE_ITEMS_MAX];
    char fn[32];
    int argc = 0;
    const lease_deadline_t *earliest = items[0]->deadline;
    for (int i = 1; i < n; i++)
        if (items[i]->deadline->mono_ns < earliest->mono_ns)
            earliest = items[i]->deadline;
    if (n == 1) {
        snprintf(fn, sizeof fn, "leased_v1_%s", items[0]->op);
        argv[argc++] = "FCALL";
        argv[argc++] = fn;
        argv[argc++] = "1";
        argv[argc++] = v->ns_key;
        argv[argc++] = items[0]->arg;
    } else {
        argv[argc++] = "FCALL";
        argv[argc++] = "leased_v1_combined";
        argv[argc++] = "1";
        argv[argc++] = v->ns_key;
        for (int i = 0; i < n; i++) {
            argv[argc++] = items[i]->op;
            argv[argc++] = items[i]->arg;
        }
    }
    redisReply *r = NULL;
    char why[32] = "";
    call_failure_t f = fcall_on(v, conn, argc, argv, earliest, true, &r, why, sizeof why);
    for (int i = 0; i < n; i++) {
        lease_result_t *res = items[i]->res;
        memset(res, 0, sizeof *res);
        if (f != CALL_OK)
            res->code = call_failure_code(f, items[i]->deadline, true, why, res->reason,
                                          sizeof res->reason);
        else if (n == 1)
            decode_item(r, res);
        else if (r->type == REDIS_REPLY_ARRAY && r->elements == (size_t)n)
            decode_item(r->element[i], res);
        else
            res->code = LEASE_OUTCOME_UNKNOWN; /* ran; its answers cannot be read */
    }
    if (r)
        valkey_reply_free(r);
}

/* The combiner's pool connection: taken before its leader gathers a batch,
 * so each request waits for a connection until its own deadline only. */
static void *take_for_combined(void *ctx, const lease_deadline_t *deadline)
{
    return conn_take(ctx, deadline->mono_ns);
}

static void give_unused(void *ctx, void *conn)
{
    conn_give(ctx, conn);
}

static const valkey_combiner_ops_t combiner_ops = {
    .take = take_for_combined, .send = send_combined, .give = give_unused};

/* acquire, renew, release: through the combiner. */
static lease_code_t combined_op(lease_valkey_t *v, const char *op, char *arg,
                                const lease_deadline_t *deadline, lease_result_t *res)
{
    memset(res, 0, sizeof *res);
    if (arg == NULL) {
        res->code = LEASE_BACKEND_UNAVAILABLE;
        return res->code;
    }
    if (deadline->mono_ns <= lease_mono_now_ns()) {
        free(arg);
        res->code = LEASE_DEADLINE_EXCEEDED;
        return res->code;
    }
    valkey_combined_item_t item = {.op = op, .arg = arg, .deadline = deadline, .res = res};
    valkey_combiner_submit(&v->comb, &item);
    free(arg);
    return res->code;
}

lease_code_t lease_valkey_acquire(lease_valkey_t *v, const lease_acquire_req_t *req,
                                  lease_result_t *res)
{
    return combined_op(v, "acquire", valkey_encode_acquire(req), &req->call.deadline, res);
}

lease_code_t lease_valkey_renew(lease_valkey_t *v, const lease_owner_req_t *req,
                                lease_result_t *res)
{
    return combined_op(v, "renew", valkey_encode_owner(req, true), &req->call.deadline, res);
}

lease_code_t lease_valkey_release(lease_valkey_t *v, const lease_owner_req_t *req,
                                  lease_result_t *res)
{
    return combined_op(v, "release", valkey_encode_owner(req, false), &req->call.deadline, res);
}

void lease_valkey_combine_stats(lease_valkey_t *v, lease_valkey_combine_stats_t *out)
{
    valkey_combiner_stats_t s;
    valkey_combiner_stats(&v->comb, &s);
    out->calls = s.calls;
    out->combined_calls = s.combined_calls;
    out->combined_items = s.combined_items;
}

lease_code_t lease_valkey_force_release(lease_valkey_t *v, const lease_admin_req_t *req,
                                        lease_result_t *res)
{
    return lease_op(v, "leased_v1_force_release", valkey_encode_admin(req), &req->call.deadline,
                    true, res);
}

lease_code_t lease_valkey_revoke(lease_valkey_t *v, const lease_admin_req_t *req,
                                 lease_result_t *res)
{
    return lease_op(v, "leased_v1_revoke", valkey_encode_admin(req), &req->call.deadline, true,
                    res);
}

lease_code_t lease_valkey_inspect(lease_valkey_t *v, const lease_inspect_req_t *req,
                                  lease_result_t *res)
{
    return lease_op(v, "leased_v1_inspect", valkey_encode_inspect(req), &req->call.deadline, false,
                    res);
}

lease_code_t lease_valkey_fenced_commit(lease_valkey_t *v, const lease_commit_req_t *req,
                                        lease_commit_result_t *res)
{
    memset(res, 0, sizeof *res);
    if (req->n_writes == 0 || req->n_writes > LEASE_COMMIT_WRITES_MAX) {
        res->code = LEASE_INVALID_LEASE_REQUEST;
        snprintf(res->field, sizeof res->field, "writes");
        return res->code;
    }
    char reason[LEASE_REASON_MAX + 1];
    redisReply *r = op_call(v, "leased_v1_fenced_commit", valkey_encode_commit(req),
                            &req->call.deadline, true, &res->code, reason, sizeof reason);
    if (r == NULL)
        return res->code;
    if (!valkey_decode_commit(r, req->n_writes, res)) {
        /* it ran; what it decided cannot be read: repeat the request id */
        memset(res, 0, sizeof *res);
        res->code = LEASE_OUTCOME_UNKNOWN;
    }
    valkey_reply_free(r);
    return res->code;
}

/* renew_many / release_many: each item's answer in results[i]; the
 * return is success (the batch was decided) or the failure of the whole
 * call, with no result set, as lease_store_renew_many says. */
static lease_code_t batch_op(lease_valkey_t *v, const char *fn, const lease_owner_req_t *reqs,
                             size_t n, const lease_deadline_t *deadline, bool renew,
                             lease_result_t *results)
{
    lease_code_t decided = renew ? LEASE_RENEWED : LEASE_RELEASED;
    if (n == 0 || n > LEASE_RENEW_BATCH_MAX)
        return LEASE_INVALID_LEASE_REQUEST;
    if (deadline->mono_ns <= lease_mono_now_ns())
        return LEASE_DEADLINE_EXCEEDED;
    char *arg = valkey_encode_owner_many(reqs, n, renew);
    if (arg == NULL)
        return LEASE_BACKEND_UNAVAILABLE;
    redisReply *r = NULL;
    char reason[32] = "";
    call_failure_t f = fcall(v, fn, arg, deadline, true, &r, reason, sizeof reason);
    free(arg);
    if (f == CALL_NOT_SENT && deadline->mono_ns <= lease_mono_now_ns())
        return LEASE_DEADLINE_EXCEEDED; /* as op_call: the pool wait took the deadline */
    if (f == CALL_NOT_SENT || f == CALL_ERROR)
        return LEASE_BACKEND_UNAVAILABLE;
    if (f == CALL_NO_ANSWER || f == CALL_UNCONFIRMED)
        return LEASE_OUTCOME_UNKNOWN;
    lease_code_t refusal = LEASE_CODE_COUNT;
    bool ok = valkey_decode_many(r, n, results, &refusal);
    valkey_reply_free(r);
    if (!ok)
        return LEASE_OUTCOME_UNKNOWN;
    return refusal == LEASE_CODE_COUNT ? decided : refusal;
}

lease_code_t lease_valkey_renew_many(lease_valkey_t *v, const lease_owner_req_t *reqs, size_t n,
                                     const lease_deadline_t *deadline, lease_result_t *results)
{
    return batch_op(v, "leased_v1_renew_many", reqs, n, deadline, true, results);
}

lease_code_t lease_valkey_release_many(lease_valkey_t *v, const lease_owner_req_t *reqs, size_t n,
                                       const lease_deadline_t *deadline, lease_result_t *results)
{
    return batch_op(v, "leased_v1_release_many", reqs, n, deadline, false, results);
}

/* An administrative function's answer: pairs, or {"error", why} (then
 * *refused, when not NULL, is set: the function ran and said no). */
static bool admin_call_r(lease_valkey_t *v, const char *fn, const char *arg, redisReply **r,
                         bool *refused, char *err, size_t errlen)
{
    if (refused)
        *refused = false;
    char reason[32] = "";
    /* every administrative function writes but the two listings */
    bool write =
        strcmp(fn, "leased_v1_credential_list") != 0 && strcmp(fn, "leased_v1_audit_read") != 0;
    call_failure_t f = fcall(v, fn, arg, NULL, write, r, reason, sizeof reason);
    if (f != CALL_OK) {
        valkey_set_err(err, errlen, "%s: %s", fn,
                       f == CALL_ERROR         ? reason
                       : f == CALL_NOT_SENT    ? "not sent"
                       : f == CALL_UNCONFIRMED ? "applied on the primary, but fewer replicas than "
                                                 "LEASE_VALKEY_MIN_REPLICAS acknowledged it in time"
                                               : "no answer");
        return false;
    }
    const redisReply *e = valkey_field(*r, "error");
    if (e != NULL) {
        valkey_set_err(err, errlen, "%s: %s", fn,
                       e->type == REDIS_REPLY_STRING ? e->str : "refused");
        valkey_reply_free(*r);
        *r = NULL;
        if (refused)
            *refused = true;
        return false;
    }
    return true;
}

static bool admin_call(lease_valkey_t *v, const char *fn, const char *arg, redisReply **r,
                       char *err, size_t errlen)
{
    return admin_call_r(v, fn, arg, r, NULL, err, errlen);
}

/* An administrative function called with the JSON object q (consumed):
 * LEASE_INSPECTED with its answer in *r (caller frees),
 * LEASE_INVALID_LEASE_REQUEST when it refused, LEASE_BACKEND_UNAVAILABLE
 * when it did not run or its answer was lost (why in err for both). */
static lease_code_t admin_json_call(lease_valkey_t *v, const char *fn, json_t *q, redisReply **r,
                                    char *err, size_t errlen)
{
    *r = NULL;
    char *arg = q != NULL ? json_dumps(q, JSON_COMPACT) : NULL;
    json_decref(q);
    if (arg == NULL) {
        valkey_set_err(err, errlen, "out of memory");
        return LEASE_BACKEND_UNAVAILABLE;
    }
    bool refused = false;
    bool called = admin_call_r(v, fn, arg, r, &refused, err, errlen);
    free(arg);
    if (!called)
        return refused ? LEASE_INVALID_LEASE_REQUEST : LEASE_BACKEND_UNAVAILABLE;
    return LEASE_INSPECTED;
}

/* The key that signs the namespace's list page tokens, as the library
 * stores it: PAGE_TOKEN_KEY_BYTES random bytes in lowercase hex. Made here
 * because a function has no source of randomness; sent with every bind, kept
 * by the library only when the namespace has none (docs/backends.md). */
#define PAGE_TOKEN_KEY_BYTES 32

static bool page_token_key_hex(char out[PAGE_TOKEN_KEY_BYTES * 2 + 1])
{
    unsigned char key[PAGE_TOKEN_KEY_BYTES];
    if (getrandom(key, sizeof key, 0) != (ssize_t)sizeof key)
        return false;
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof key; i++) {
        out[2 * i] = digits[key[i] >> 4];
        out[2 * i + 1] = digits[key[i] & 15];
    }
    out[2 * sizeof key] = '\0';
    explicit_bzero(key, sizeof key);
    return true;
}

lease_code_t lease_valkey_bind(lease_valkey_t *v, int64_t floor_token, int64_t *epoch, char *err,
                               size_t errlen)
{
    char key[PAGE_TOKEN_KEY_BYTES * 2 + 1];
    if (!page_token_key_hex(key)) {
        valkey_set_err(err, errlen, "no random bytes for the page-token key");
        return LEASE_BACKEND_UNAVAILABLE;
    }
    char arg[160];
    if (floor_token > 0)
        snprintf(arg, sizeof arg, "{\"floor_token\":%lld,\"page_token_key\":\"%s\"}",
                 (long long)floor_token, key);
    else
        snprintf(arg, sizeof arg, "{\"page_token_key\":\"%s\"}", key);
    explicit_bzero(key, sizeof key);
    redisReply *r = NULL;
    bool called = admin_call(v, "leased_v1_bind", arg, &r, err, errlen);
    explicit_bzero(arg, sizeof arg);
    if (!called)
        return LEASE_BACKEND_UNAVAILABLE;
    long long e = 0;
    bool ok = valkey_int_field(r, "epoch", &e);
    valkey_reply_free(r);
    if (!ok) {
        valkey_set_err(err, errlen, "leased_v1_bind: unreadable answer");
        return LEASE_BACKEND_UNAVAILABLE;
    }
    *epoch = e;
    return LEASE_INSPECTED;
}

lease_code_t lease_valkey_rebind(lease_valkey_t *v, const char *reason, int64_t floor_token,
                                 int64_t *epoch, int64_t *leases_revoked, char *err, size_t errlen)
{
    return lease_valkey_rebind_by(v, reason, NULL, floor_token, epoch, leases_revoked, err, errlen);
}

lease_code_t lease_valkey_rebind_by(lease_valkey_t *v, const char *reason, const char *operator_id,
                                    int64_t floor_token, int64_t *epoch, int64_t *leases_revoked,
                                    char *err, size_t errlen)
{
    json_t *o = json_object();
    json_object_set_new(o, "reason", json_string(reason ? reason : ""));
    if (operator_id != NULL && *operator_id)
        json_object_set_new(o, "operator", json_string(operator_id));
    if (floor_token > 0)
        json_object_set_new(o, "floor_token", json_integer(floor_token));
    redisReply *r = NULL;
    lease_code_t called = admin_json_call(v, "leased_v1_rebind", o, &r, err, errlen);
    if (called != LEASE_INSPECTED)
        return called;
    long long e = 0, n = 0;
    bool ok = valkey_int_field(r, "epoch", &e) && valkey_int_field(r, "leases_revoked", &n);
    valkey_reply_free(r);
    if (!ok) {
        valkey_set_err(err, errlen, "leased_v1_rebind: unreadable answer");
        return LEASE_BACKEND_UNAVAILABLE;
    }
    *epoch = e;
    *leases_revoked = n;
    return LEASE_INSPECTED;
}

lease_code_t lease_valkey_health(lease_valkey_t *v, const lease_deadline_t *deadline,
                                 lease_health_t *out)
{
    memset(out, 0, sizeof *out);
    out->expected_schema_version = 5; /* LIB_VERSION of leased.lua */
    /* a deadline that passed before the call or while every pooled
     * connection was busy: deadline_exceeded, nothing sent, as on
     * PostgreSQL */
    if (deadline != NULL && deadline->mono_ns <= lease_mono_now_ns())
        return LEASE_DEADLINE_EXCEEDED;
    redisReply *r = NULL;
    char reason[32] = "";
    call_failure_t f =
        fcall(v, "leased_v1_health", "{}", deadline, false, &r, reason, sizeof reason);
    if (f == CALL_NOT_SENT && deadline != NULL && deadline->mono_ns <= lease_mono_now_ns())
        return LEASE_DEADLINE_EXCEEDED;
    if (f != CALL_OK)
        return LEASE_BACKEND_UNAVAILABLE;
    long long version = 0, bound = 0, sealed = 0, active = 0;
    bool ok = valkey_int_field(r, "version", &version) && valkey_int_field(r, "bound", &bound) &&
              valkey_int_field(r, "sealed", &sealed) &&
              valkey_int_field(r, "active_leases", &active);
    valkey_reply_free(r);
    if (!ok)
        return LEASE_BACKEND_UNAVAILABLE;
    out->reachable = true;
    out->schema_version = (int)version;
    /* an unbound namespace cannot decide: not current until bound */
    out->schema_current = version == out->expected_schema_version && bound == 1;
    out->sealed = sealed == 1;
    out->active_leases = active;
    return LEASE_INSPECTED;
}

lease_code_t lease_valkey_list(lease_valkey_t *v, const lease_list_req_t *req,
                               lease_list_result_t *res)
{
    memset(res, 0, sizeof *res);
    if (req->call.deadline.mono_ns <= lease_mono_now_ns()) {
        res->code = LEASE_DEADLINE_EXCEEDED;
        return res->code;
    }
    char *arg = valkey_encode_list(req);
    if (arg == NULL) {
        res->code = LEASE_BACKEND_UNAVAILABLE;
        return res->code;
    }
    redisReply *r = NULL;
    char reason[32] = "";
    call_failure_t f =
        fcall(v, "leased_v1_list", arg, &req->call.deadline, false, &r, reason, sizeof reason);
    free(arg);
    if (f != CALL_OK) {
        res->code = LEASE_BACKEND_UNAVAILABLE;
        return res->code;
    }
    lease_code_t code = valkey_decode_list(r, res);
    valkey_reply_free(r);
    if (code == LEASE_CODE_COUNT) {
        memset(res, 0, sizeof *res);
        res->code = LEASE_BACKEND_UNAVAILABLE;
    }
    return res->code;
}

/* Wipes the secret's digest from an answer before it is freed. */
static void wipe_digest(redisReply *r)
{
    if (r == NULL || r->type != REDIS_REPLY_ARRAY)
        return;
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const redisReply *k = r->element[i];
        redisReply *d = r->element[i + 1];
        if (k->type == REDIS_REPLY_STRING && strcmp(k->str, "secret_digest") == 0 &&
            d->type == REDIS_REPLY_STRING)
            memset(d->str, 0, d->len);
    }
}

lease_code_t lease_valkey_credential_lookup(lease_valkey_t *v, const char *credential_id,
                                            const lease_deadline_t *deadline,
                                            lease_credential_t *out, bool *found)
{
    memset(out, 0, sizeof *out);
    *found = false;
    if (credential_id == NULL || !*credential_id || strlen(credential_id) > LEASE_ID_MAX)
        return LEASE_INVALID_LEASE_REQUEST;
    json_t *o = json_object();
    json_object_set_new(o, "credential_id", json_string(credential_id));
    char *arg = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (arg == NULL)
        return LEASE_BACKEND_UNAVAILABLE;
    redisReply *r = NULL;
    char reason[32] = "";
    call_failure_t f =
        fcall(v, "leased_v1_credential_lookup", arg, deadline, false, &r, reason, sizeof reason);
    free(arg);
    if (f != CALL_OK)
        return LEASE_BACKEND_UNAVAILABLE;
    bool ok = valkey_decode_credential(r, out, found);
    wipe_digest(r);
    valkey_reply_free(r);
    if (!ok)
        return LEASE_BACKEND_UNAVAILABLE;
    return *found ? LEASE_INSPECTED : LEASE_NOT_FOUND;
}

lease_code_t lease_valkey_credential_create(lease_valkey_t *v, const char *request_json,
                                            char **row_json, char *err, size_t errlen)
{
    *row_json = NULL;
    redisReply *r = NULL;
    bool refused = false;
    if (!admin_call_r(v, "leased_v1_credential_create", request_json, &r, &refused, err, errlen))
        return refused ? LEASE_INVALID_LEASE_REQUEST : LEASE_BACKEND_UNAVAILABLE;
    json_t *row = json_object();
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const redisReply *k = r->element[i], *val = r->element[i + 1];
        if (k->type != REDIS_REPLY_STRING)
            continue;
        json_object_set_new(row, k->str,
                            val->type == REDIS_REPLY_INTEGER  ? json_integer(val->integer)
                            : val->type == REDIS_REPLY_STRING ? json_string(val->str)
                                                              : json_null());
    }
    valkey_reply_free(r);
    *row_json = json_dumps(row, JSON_COMPACT);
    json_decref(row);
    if (*row_json == NULL) {
        valkey_set_err(err, errlen, "out of memory");
        return LEASE_BACKEND_UNAVAILABLE;
    }
    return LEASE_INSPECTED;
}

lease_code_t lease_valkey_credential_revoke(lease_valkey_t *v, const char *credential_id,
                                            bool *revoked, char *err, size_t errlen)
{
    return lease_valkey_credential_revoke_by(v, credential_id, NULL, revoked, err, errlen);
}

lease_code_t lease_valkey_credential_revoke_by(lease_valkey_t *v, const char *credential_id,
                                               const char *operator_id, bool *revoked, char *err,
                                               size_t errlen)
{
    *revoked = false;
    json_t *o = json_object();
    json_object_set_new(o, "credential_id", json_string(credential_id ? credential_id : ""));
    if (operator_id != NULL && *operator_id)
        json_object_set_new(o, "operator", json_string(operator_id));
    redisReply *r = NULL;
    lease_code_t called = admin_json_call(v, "leased_v1_credential_revoke", o, &r, err, errlen);
    if (called != LEASE_INSPECTED)
        return called;
    long long n = 0;
    bool ok = valkey_int_field(r, "revoked", &n);
    valkey_reply_free(r);
    if (!ok) {
        valkey_set_err(err, errlen, "leased_v1_credential_revoke: unreadable answer");
        return LEASE_BACKEND_UNAVAILABLE;
    }
    *revoked = n == 1;
    return LEASE_INSPECTED;
}

/* A time of the list (Unix ms, or RESP null) as the wire form, or null. */
static json_t *time_or_null(const redisReply *val)
{
    if (val == NULL || val->type != REDIS_REPLY_INTEGER)
        return json_null();
    char at[LEASE_TIME_LEN + 1];
    lease_time_format(val->integer, at);
    return json_string(at);
}

static json_t *credential_row(const redisReply *pairs)
{
    json_t *row = json_object();
    for (size_t i = 0; i + 1 < pairs->elements; i += 2) {
        const redisReply *k = pairs->element[i], *val = pairs->element[i + 1];
        if (k->type != REDIS_REPLY_STRING)
            continue;
        json_t *j;
        if (strcmp(k->str, "created_at") == 0 || strcmp(k->str, "expires_at") == 0 ||
            strcmp(k->str, "revoked_at") == 0)
            j = time_or_null(val);
        else if (strcmp(k->str, "admin") == 0)
            j = json_boolean(val->type == REDIS_REPLY_INTEGER && val->integer == 1);
        else if (strcmp(k->str, "actor_names") == 0 || strcmp(k->str, "capabilities") == 0)
            j = val->type == REDIS_REPLY_STRING ? json_loads(val->str, 0, NULL) : NULL;
        else
            j = val->type == REDIS_REPLY_STRING ? json_string(val->str) : json_null();
        json_object_set_new(row, k->str, j ? j : json_null());
    }
    return row;
}

lease_code_t lease_valkey_credential_list(lease_valkey_t *v, char **rows_json, char *err,
                                          size_t errlen)
{
    *rows_json = NULL;
    redisReply *r = NULL;
    if (!admin_call(v, "leased_v1_credential_list", "{}", &r, err, errlen))
        return LEASE_BACKEND_UNAVAILABLE;
    const redisReply *list = valkey_field(r, "credentials");
    if (list == NULL || list->type != REDIS_REPLY_ARRAY) {
        valkey_reply_free(r);
        valkey_set_err(err, errlen, "leased_v1_credential_list: unreadable answer");
        return LEASE_BACKEND_UNAVAILABLE;
    }
    json_t *rows = json_array();
    for (size_t i = 0; i < list->elements; i++)
        if (list->element[i]->type == REDIS_REPLY_ARRAY)
            json_array_append_new(rows, credential_row(list->element[i]));
    valkey_reply_free(r);
    *rows_json = json_dumps(rows, JSON_COMPACT);
    json_decref(rows);
    if (*rows_json == NULL) {
        valkey_set_err(err, errlen, "out of memory");
        return LEASE_BACKEND_UNAVAILABLE;
    }
    return LEASE_INSPECTED;
}

lease_code_t lease_valkey_record_audit(lease_valkey_t *v, const lease_audit_event_t *events,
                                       size_t n, const lease_deadline_t *deadline)
{
    if (n == 0)
        return LEASE_INSPECTED;
    if (deadline->mono_ns <= lease_mono_now_ns())
        return LEASE_DEADLINE_EXCEEDED;
    char *arg = valkey_encode_audit(events, n);
    if (arg == NULL)
        return LEASE_BACKEND_UNAVAILABLE;
    redisReply *r = NULL;
    char reason[32] = "";
    /* a write, but not a decision: no WAIT (a short one would send the
     * batch to the log as well as to the Stream) */
    call_failure_t f =
        fcall(v, "leased_v1_record_audit", arg, deadline, false, &r, reason, sizeof reason);
    free(arg);
    if (f != CALL_OK)
        return LEASE_BACKEND_UNAVAILABLE;
    const redisReply *code = valkey_field(r, "code");
    long long count = 0;
    bool ok = code && code->type == REDIS_REPLY_STRING &&
              strcmp(code->str, "audit_recorded") == 0 && valkey_int_field(r, "count", &count) &&
              count == (long long)n;
    bool invalid =
        code && code->type == REDIS_REPLY_STRING && strcmp(code->str, "invalid_lease_request") == 0;
    valkey_reply_free(r);
    return ok ? LEASE_INSPECTED : invalid ? LEASE_INVALID_LEASE_REQUEST : LEASE_BACKEND_UNAVAILABLE;
}

lease_code_t lease_valkey_expire_due(lease_valkey_t *v, int batch, int64_t grace_ms,
                                     const lease_deadline_t *deadline,
                                     lease_housekeeping_result_t *res)
{
    memset(res, 0, sizeof *res);
    if (deadline->mono_ns <= lease_mono_now_ns())
        return LEASE_DEADLINE_EXCEEDED;
    char arg[96];
    snprintf(arg, sizeof arg, "{\"batch\":%d,\"grace_ms\":%lld}", batch, (long long)grace_ms);
    redisReply *r = NULL;
    char reason[32] = "";
    /* a write, but housekeeping: no WAIT (an expiry lost with a failover
     * is found again by the next step, or by the next acquisition) */
    call_failure_t f =
        fcall(v, "leased_v1_expire_due", arg, deadline, false, &r, reason, sizeof reason);
    if (f != CALL_OK)
        return LEASE_BACKEND_UNAVAILABLE;
    long long ran = 0, expired = 0, more = 0, lag = 0;
    bool ok = valkey_int_field(r, "ran", &ran) && valkey_int_field(r, "expired", &expired) &&
              valkey_int_field(r, "more", &more) && valkey_int_field(r, "lag_ms", &lag);
    valkey_reply_free(r);
    if (!ok) /* refused (sealed, a bad batch) or unreadable */
        return LEASE_BACKEND_UNAVAILABLE;
    res->ran = ran == 1;
    res->expired = expired;
    res->more = more == 1;
    res->lag_ms = lag;
    return LEASE_INSPECTED;
}

/* An entry of XRANGE ({id, {field, value, ...}}) as {"id": id, field: value}. */
static json_t *audit_entry(const redisReply *e)
{
    if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
        e->element[0]->type != REDIS_REPLY_STRING || e->element[1]->type != REDIS_REPLY_ARRAY)
        return NULL;
    json_t *o = json_pack("{s:s}", "id", e->element[0]->str);
    const redisReply *f = e->element[1];
    for (size_t i = 0; o && i + 1 < f->elements; i += 2)
        if (f->element[i]->type == REDIS_REPLY_STRING &&
            f->element[i + 1]->type == REDIS_REPLY_STRING)
            json_object_set_new(o, f->element[i]->str, json_string(f->element[i + 1]->str));
    return o;
}

/* A Stream id answered (a string) as JSON, or null. */
static json_t *id_or_null(const redisReply *v)
{
    return v != NULL && v->type == REDIS_REPLY_STRING ? json_string(v->str) : json_null();
}

lease_code_t lease_valkey_audit_read(lease_valkey_t *v, const char *after, int count,
                                     char **page_json, char *err, size_t errlen)
{
    *page_json = NULL;
    json_t *q = json_object();
    if (after != NULL && after[0] != '\0')
        json_object_set_new(q, "after", json_string(after));
    if (count > 0)
        json_object_set_new(q, "count", json_integer(count));
    redisReply *r = NULL;
    lease_code_t called = admin_json_call(v, "leased_v1_audit_read", q, &r, err, errlen);
    if (called != LEASE_INSPECTED)
        return called;
    const redisReply *entries = valkey_field(r, "entries");
    json_t *list = json_array();
    bool ok = entries != NULL && entries->type == REDIS_REPLY_ARRAY;
    for (size_t i = 0; ok && i < entries->elements; i++) {
        json_t *e = audit_entry(entries->element[i]);
        ok = e != NULL && json_array_append_new(list, e) == 0;
    }
    json_t *page = json_pack("{s:o, s:o, s:o}", "entries", list, "cursor",
                             id_or_null(valkey_field(r, "cursor")), "first",
                             id_or_null(valkey_field(r, "first")));
    valkey_reply_free(r);
    if (ok && page != NULL)
        *page_json = json_dumps(page, JSON_COMPACT);
    json_decref(page);
    if (*page_json == NULL) {
        valkey_set_err(err, errlen, "leased_v1_audit_read: unreadable answer");
        return LEASE_BACKEND_UNAVAILABLE;
    }
    return LEASE_INSPECTED;
}

lease_code_t lease_valkey_audit_ack(lease_valkey_t *v, const char *id, long long *trimmed,
                                    char *err, size_t errlen)
{
    *trimmed = 0;
    redisReply *r = NULL;
    lease_code_t called = admin_json_call(v, "leased_v1_audit_ack",
                                          json_pack("{s:s}", "id", id ? id : ""), &r, err, errlen);
    if (called != LEASE_INSPECTED)
        return called;
    bool ok = valkey_int_field(r, "trimmed", trimmed);
    valkey_reply_free(r);
    if (!ok) {
        valkey_set_err(err, errlen, "leased_v1_audit_ack: unreadable answer");
        return LEASE_BACKEND_UNAVAILABLE;
    }
    return LEASE_INSPECTED;
}
