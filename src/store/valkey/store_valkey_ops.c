/*
 * store_valkey_ops.c - the Valkey adapter as a lease_store_t: the
 * lease_store_ops vtable over the lease_valkey_* calls (store_valkey.c), and
 * store URLs (redis://, valkey://, and rediss://, valkeys:// for TLS).
 *
 * What the function library does not decide answers a typed refusal,
 * never a silent degrade (docs/backends.md, "What needs PostgreSQL"): a
 * fenced commit with publications (the outbox) and the old sweep are
 * lease_backend_unavailable and say so in the log once. Audit events go to
 * the namespace's Stream (the functions append those of the mutations
 * themselves). Housekeeping: the namespace step checks the incarnation
 * (health); the expire step moves leases nobody took into history
 * (leased_v1_expire_due); retention is the server's own (PEXPIRE on
 * idempotency and history records), so the purge step has nothing to
 * delete.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lease/log.h"
#include "lease/store_valkey.h"

typedef struct store_valkey {
    lease_store_t base;
    lease_valkey_t *v;
    atomic_uint_fast64_t outcome_unknown;
    atomic_uint_fast64_t backend_errors;
    atomic_uint_fast64_t sealed_refusals;
    atomic_int warned_outbox;
    atomic_int warned_sweep;
} store_valkey_t;

static store_valkey_t *impl(lease_store_t *s)
{
    return s->impl;
}

/* Counts what the stats report. */
static lease_code_t seen(lease_store_t *s, lease_code_t code, const char *reason)
{
    store_valkey_t *sv = impl(s);
    if (code == LEASE_OUTCOME_UNKNOWN)
        atomic_fetch_add(&sv->outcome_unknown, 1);
    if (code == LEASE_BACKEND_UNAVAILABLE) {
        atomic_fetch_add(&sv->backend_errors, 1);
        if (reason != NULL && strcmp(reason, "namespace_sealed") == 0)
            atomic_fetch_add(&sv->sealed_refusals, 1);
    }
    return code;
}

static lease_code_t v_acquire(lease_store_t *s, const lease_acquire_req_t *req, lease_result_t *res)
{
    return seen(s, lease_valkey_acquire(impl(s)->v, req, res), res->reason);
}

static lease_code_t v_renew(lease_store_t *s, const lease_owner_req_t *req, lease_result_t *res)
{
    return seen(s, lease_valkey_renew(impl(s)->v, req, res), res->reason);
}

static lease_code_t v_renew_many(lease_store_t *s, const lease_owner_req_t *reqs, size_t n,
                                 const lease_deadline_t *deadline, lease_result_t *results)
{
    return seen(s, lease_valkey_renew_many(impl(s)->v, reqs, n, deadline, results), NULL);
}

static lease_code_t v_release(lease_store_t *s, const lease_owner_req_t *req, lease_result_t *res)
{
    return seen(s, lease_valkey_release(impl(s)->v, req, res), res->reason);
}

static lease_code_t v_release_many(lease_store_t *s, const lease_owner_req_t *reqs, size_t n,
                                   const lease_deadline_t *deadline, lease_result_t *results)
{
    return seen(s, lease_valkey_release_many(impl(s)->v, reqs, n, deadline, results), NULL);
}

static lease_code_t v_force_release(lease_store_t *s, const lease_admin_req_t *req,
                                    lease_result_t *res)
{
    return seen(s, lease_valkey_force_release(impl(s)->v, req, res), res->reason);
}

static lease_code_t v_revoke(lease_store_t *s, const lease_admin_req_t *req, lease_result_t *res)
{
    return seen(s, lease_valkey_revoke(impl(s)->v, req, res), res->reason);
}

static lease_code_t v_inspect(lease_store_t *s, const lease_inspect_req_t *req, lease_result_t *res)
{
    return seen(s, lease_valkey_inspect(impl(s)->v, req, res), res->reason);
}

static lease_code_t v_list(lease_store_t *s, const lease_list_req_t *req, lease_list_result_t *res)
{
    return seen(s, lease_valkey_list(impl(s)->v, req, res), NULL);
}

/* Once per process and operation: what a caller was refused, and why. */
static void warn_once(atomic_int *flag, const char *what)
{
    if (atomic_exchange(flag, 1) == 0)
        LOG_WARN("%s needs the PostgreSQL backend: not implemented on Valkey "
                 "(docs/backends.md); answered lease_backend_unavailable",
                 what);
}

/* Documents are decided by leased_v1_fenced_commit; publications need the
 * outbox and relay of PostgreSQL: such a commit is refused whole before
 * anything is sent, so none of its documents is written either. */
static lease_code_t v_fenced_commit(lease_store_t *s, const lease_commit_req_t *req,
                                    lease_commit_result_t *res)
{
    for (size_t i = 0; i < req->n_writes && i < LEASE_COMMIT_WRITES_MAX; i++) {
        if (req->writes[i].kind == LEASE_WRITE_PUBLICATION) {
            memset(res, 0, sizeof *res);
            warn_once(&impl(s)->warned_outbox, "a fenced commit's publications (the outbox)");
            res->code = LEASE_BACKEND_UNAVAILABLE;
            return seen(s, res->code, NULL);
        }
    }
    return seen(s, lease_valkey_fenced_commit(impl(s)->v, req, res), NULL);
}

static lease_code_t v_sweep(lease_store_t *s, int batch, const lease_deadline_t *deadline,
                            lease_sweep_result_t *res)
{
    (void)batch;
    (void)deadline;
    memset(res, 0, sizeof *res);
    warn_once(&impl(s)->warned_sweep, "lease_store_sweep");
    return seen(s, LEASE_BACKEND_UNAVAILABLE, NULL);
}

static lease_code_t v_record_audit(lease_store_t *s, const lease_audit_event_t *events, size_t n,
                                   const lease_deadline_t *deadline)
{
    /* appended to the namespace's audit Stream (leased_v1_record_audit);
     * a refusal sends the batch to the audit queue's fallback, the log */
    return seen(s, lease_valkey_record_audit(impl(s)->v, events, n, deadline), NULL);
}

static lease_code_t v_housekeep(lease_store_t *s, lease_housekeeping_step_t step, int batch,
                                int64_t grace_ms, const lease_deadline_t *deadline,
                                lease_housekeeping_result_t *res)
{
    memset(res, 0, sizeof *res);
    if (step == LEASE_STEP_NAMESPACE) {
        /* the incarnation check, read-only: a restart or promotion is
         * sealed by the next write function, reported here */
        lease_health_t h;
        lease_code_t code = lease_valkey_health(impl(s)->v, deadline, &h);
        if (code != LEASE_INSPECTED)
            return seen(s, code, NULL);
        res->ran = true;
        if (h.sealed)
            return seen(s, LEASE_BACKEND_UNAVAILABLE, "namespace_sealed");
        return LEASE_INSPECTED;
    }
    if (step == LEASE_STEP_EXPIRE)
        /* leases nobody takes: to history once expired grace_ms ago */
        return seen(s, lease_valkey_expire_due(impl(s)->v, batch, grace_ms, deadline, res), NULL);
    /* purge: the server expires idempotency and history records itself
     * (PEXPIRE) */
    res->ran = true;
    return LEASE_INSPECTED;
}

static lease_code_t v_credential_lookup(lease_store_t *s, const char *credential_id,
                                        const lease_deadline_t *deadline, lease_credential_t *out,
                                        bool *found)
{
    return seen(s, lease_valkey_credential_lookup(impl(s)->v, credential_id, deadline, out, found),
                NULL);
}

static lease_code_t v_health(lease_store_t *s, const lease_deadline_t *deadline, lease_health_t *h)
{
    return lease_valkey_health(impl(s)->v, deadline, h);
}

static void v_stats(lease_store_t *s, lease_store_stats_t *out)
{
    store_valkey_t *sv = impl(s);
    memset(out, 0, sizeof *out);
    out->pool_size = lease_valkey_pool_size(sv->v);
    out->pool_in_use = lease_valkey_pool_in_use(sv->v);
    out->outcome_unknown = atomic_load(&sv->outcome_unknown);
    out->backend_errors = atomic_load(&sv->backend_errors);
    out->sealed_refusals = atomic_load(&sv->sealed_refusals);
    lease_valkey_combine_stats_t c;
    lease_valkey_combine_stats(sv->v, &c);
    out->combined_calls = c.combined_calls;
    out->combined_items = c.combined_items;
}

static void v_close(lease_store_t *s)
{
    store_valkey_t *sv = impl(s);
    lease_valkey_close(sv->v);
    free(sv);
}

static const lease_store_ops_t valkey_ops = {
    .acquire = v_acquire,
    .renew = v_renew,
    .renew_many = v_renew_many,
    .release = v_release,
    .release_many = v_release_many,
    .force_release = v_force_release,
    .revoke = v_revoke,
    .inspect = v_inspect,
    .list = v_list,
    .fenced_commit = v_fenced_commit,
    .sweep = v_sweep,
    .housekeep = v_housekeep,
    .record_audit = v_record_audit,
    .credential_lookup = v_credential_lookup,
    .health = v_health,
    .stats = v_stats,
    .close = v_close,
};

lease_code_t lease_valkey_store_open(const lease_valkey_config_t *cfg, lease_store_t **out,
                                     char *err, size_t errlen)
{
    *out = NULL;
    store_valkey_t *sv = calloc(1, sizeof *sv);
    if (sv == NULL) {
        snprintf(err, errlen, "out of memory");
        return LEASE_BACKEND_UNAVAILABLE;
    }
    lease_code_t code = lease_valkey_open(cfg, &sv->v, err, errlen);
    if (code != LEASE_INSPECTED) {
        free(sv);
        return code;
    }
    sv->base.ops = &valkey_ops;
    sv->base.impl = sv;
    *out = &sv->base;
    return LEASE_INSPECTED;
}

lease_valkey_t *lease_valkey_of(lease_store_t *s)
{
    return s != NULL && s->ops == &valkey_ops ? impl(s)->v : NULL;
}

/* redis://host[:port][/0][?namespace=NAME], valkey:// the same; rediss://
 * and valkeys:// over TLS. */
bool lease_valkey_url_is(const char *url)
{
    return url != NULL &&
           (strncmp(url, "redis://", 8) == 0 || strncmp(url, "valkey://", 9) == 0 ||
            strncmp(url, "rediss://", 9) == 0 || strncmp(url, "valkeys://", 10) == 0);
}

/* Percent-decodes in[0..n) into out (NUL-terminated); false when it does
 * not fit or an escape is malformed or decodes to NUL. */
static bool pct_decode(const char *in, size_t n, char *out, size_t outsz)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = in[i];
        if (c == '%') {
            if (i + 2 >= n)
                return false;
            char hx[3] = {in[i + 1], in[i + 2], 0};
            char *end = NULL;
            long v = strtol(hx, &end, 16);
            if (end != hx + 2 || v == 0)
                return false;
            c = (char)v;
            i += 2;
        }
        if (o + 1 >= outsz)
            return false;
        out[o++] = c;
    }
    out[o] = '\0';
    return true;
}

void lease_valkey_url_wipe(lease_valkey_url_t *u)
{
    volatile char *p = (volatile char *)u->password;
    for (size_t i = 0; i < sizeof u->password; i++)
        p[i] = 0;
}

bool lease_valkey_url_parse(const char *url, lease_valkey_url_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    snprintf(out->ns, sizeof out->ns, "leased");
    out->port = 6379;
    const char *rest;
    if (strncmp(url, "redis://", 8) == 0)
        rest = url + 8;
    else if (strncmp(url, "valkey://", 9) == 0)
        rest = url + 9;
    else if (strncmp(url, "rediss://", 9) == 0)
        rest = url + 9;
    else if (strncmp(url, "valkeys://", 10) == 0)
        rest = url + 10;
    else {
        snprintf(err, errlen,
                 "a Valkey store URL starts with redis:// or valkey:// (rediss:// or valkeys:// "
                 "for TLS)");
        return false;
    }
    out->tls = strncmp(url, "rediss://", 9) == 0 || strncmp(url, "valkeys://", 10) == 0;
    size_t authority = strcspn(rest, "/?");
    const char *at = memchr(rest, '@', authority);
    if (at != NULL) {
        /* [user][:password]@: AUTH at every connection. The messages never
         * quote the credentials. */
        size_t userinfo = (size_t)(at - rest);
        const char *colon = memchr(rest, ':', userinfo);
        size_t ulen = colon ? (size_t)(colon - rest) : userinfo;
        if (!colon) {
            snprintf(err, errlen,
                     "the store URL's user needs a password (redis://USER:PASSWORD@HOST)");
            return false;
        }
        if (!pct_decode(rest, ulen, out->user, sizeof out->user) ||
            !pct_decode(colon + 1, userinfo - ulen - 1, out->password, sizeof out->password) ||
            out->password[0] == '\0') {
            lease_valkey_url_wipe(out);
            snprintf(err, errlen,
                     "the store URL's user or password is empty, too long or badly "
                     "percent-encoded");
            return false;
        }
        rest = at + 1;
    }
    size_t hostlen = strcspn(rest, ":/?");
    if (hostlen == 0 || hostlen >= sizeof out->host) {
        snprintf(err, errlen, "the store URL has no host (redis://HOST[:PORT])");
        return false;
    }
    memcpy(out->host, rest, hostlen);
    rest += hostlen;
    if (*rest == ':') {
        char *end = NULL;
        long port = strtol(rest + 1, &end, 10);
        if (end == rest + 1 || port < 1 || port > 65535 || (*end && *end != '/' && *end != '?')) {
            snprintf(err, errlen, "the store URL's port must be 1..65535");
            return false;
        }
        out->port = (int)port;
        rest = end;
    }
    if (*rest == '/') {
        /* functions and keys of one namespace live in database 0 */
        rest++;
        if (*rest == '0')
            rest++;
        if (*rest && *rest != '?') {
            snprintf(err, errlen, "only database 0 is supported (redis://HOST:PORT/0)");
            return false;
        }
    }
    if (*rest == '?') {
        rest++;
        if (strncmp(rest, "namespace=", 10) != 0) {
            snprintf(err, errlen, "the store URL's only parameter is namespace=NAME");
            return false;
        }
        rest += 10;
        size_t n = strlen(rest);
        if (n == 0 || n >= sizeof out->ns ||
            strspn(rest, "abcdefghijklmnopqrstuvwxyz0123456789_-") != n) {
            snprintf(err, errlen, "namespace must be [a-z0-9_-]{1,64}");
            return false;
        }
        memcpy(out->ns, rest, n + 1);
    } else if (*rest) {
        snprintf(err, errlen, "cannot read the store URL after the host and port");
        return false;
    }
    return true;
}

bool lease_valkey_tls_files_check(const lease_valkey_url_t *u, const char *ca_file,
                                  const char *cert_file, const char *key_file, char *err,
                                  size_t errlen)
{
    bool ca = ca_file && *ca_file, cert = cert_file && *cert_file, key = key_file && *key_file;
    if ((ca || cert || key) && !u->tls) {
        snprintf(err, errlen,
                 "LEASE_STORE_CACERT, _CERT and _KEY are for rediss:// or valkeys:// URLs; the "
                 "store URL is plain (no TLS)");
        return false;
    }
    if (cert != key) {
        snprintf(err, errlen,
                 "a client certificate needs both LEASE_STORE_CERT and LEASE_STORE_KEY");
        return false;
    }
    const char *names[] = {"LEASE_STORE_CACERT", "LEASE_STORE_CERT", "LEASE_STORE_KEY"};
    const char *paths[] = {ca ? ca_file : NULL, cert ? cert_file : NULL, key ? key_file : NULL};
    for (int i = 0; i < 3; i++)
        if (paths[i] && access(paths[i], R_OK) != 0) {
            snprintf(err, errlen, "%s: cannot read %s", names[i], paths[i]);
            return false;
        }
    return true;
}
