/*
 * ctl_valkey.c - leasectl's administrative commands on the Valkey/Redis
 * backend (ctl_valkey.h). A build without hiredis has no Valkey adapter:
 * each answers that this leasectl was built without it.
 */
#include "ctl_valkey.h"

#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lease/clock.h"
#include "lease/result.h"

#ifdef LEASE_HAVE_VALKEY
#include "lease/store_valkey.h"

bool ctl_valkey_url(const char *url)
{
    return lease_valkey_url_is(url);
}

/* Opens the adapter for url: LEASE_ADMIN_INVALID for a URL it refuses,
 * LEASE_ADMIN_UNAVAILABLE for a server it cannot use (why in err). */
static lease_admin_status_t open_url(const char *url, bool check_only, lease_valkey_t **v,
                                     lease_valkey_url_t *u, char *err, size_t errsz)
{
    *v = NULL;
    if (!lease_valkey_url_parse(url, u, err, errsz))
        return LEASE_ADMIN_INVALID;
    /* OpenSSL writes a TLS session with write(): a server that closed it
     * must give EPIPE (a message), not a SIGPIPE that ends leasectl
     * silently. These commands start no child that could inherit it. */
    signal(SIGPIPE, SIG_IGN);
    /* rediss://: leased's TLS settings, from the environment */
    const char *ca = getenv("LEASE_STORE_CACERT"), *cert = getenv("LEASE_STORE_CERT"),
               *key = getenv("LEASE_STORE_KEY");
    if (!lease_valkey_tls_files_check(u, ca, cert, key, err, errsz)) {
        lease_valkey_url_wipe(u);
        return LEASE_ADMIN_INVALID;
    }
    lease_valkey_config_t cfg = {.host = u->host,
                                 .port = u->port,
                                 .ns = u->ns,
                                 .check_only = check_only,
                                 .user = u->user,
                                 .password = u->password,
                                 .tls = u->tls,
                                 .tls_ca_file = ca,
                                 .tls_cert_file = cert,
                                 .tls_key_file = key};
    bool opened = lease_valkey_open(&cfg, v, err, errsz) == LEASE_INSPECTED;
    lease_valkey_url_wipe(u); /* the adapter keeps its own copy */
    return opened ? LEASE_ADMIN_OK : LEASE_ADMIN_UNAVAILABLE;
}

static int exit_of(lease_admin_status_t st)
{
    return st == LEASE_ADMIN_INVALID ? LEASE_EXIT_USAGE : LEASE_EXIT_UNAVAILABLE;
}

int ctl_valkey_migrate(const char *url, bool status_only)
{
    char err[1024] = "";
    lease_valkey_t *v = NULL;
    lease_valkey_url_t u;
    lease_admin_status_t st = open_url(url, status_only, &v, &u, err, sizeof err);
    if (st != LEASE_ADMIN_OK) {
        fprintf(stderr, "leasectl migrate: %s\n", err);
        /* --status on a server without this build's library: pending */
        return status_only && st == LEASE_ADMIN_UNAVAILABLE && strstr(err, "not loaded")
                   ? LEASE_EXIT_FAILURE
                   : exit_of(st);
    }
    int rc = LEASE_EXIT_OK;
    int64_t epoch = -1;
    if (!status_only && lease_valkey_bind(v, 0, &epoch, err, sizeof err) != LEASE_INSPECTED) {
        /* bound to another incarnation, or sealed: that is a rebind */
        fprintf(stderr, "leasectl migrate: %s\n", err);
        rc = LEASE_EXIT_FAILURE;
    }
    lease_health_t h;
    lease_deadline_t dl = lease_deadline_in(5000);
    if (lease_valkey_health(v, &dl, &h) != LEASE_INSPECTED) {
        fprintf(stderr, "leasectl migrate: the library's health function did not answer\n");
        lease_valkey_close(v);
        return LEASE_EXIT_UNAVAILABLE;
    }
    lease_valkey_close(v);
    json_t *out = json_pack("{s:s, s:s, s:i, s:s, s:b, s:b, s:I}", "backend", "valkey", "library",
                            "leased_v1", "library_version", h.schema_version, "namespace", u.ns,
                            "bound", h.schema_current, "sealed", h.sealed, "active_leases",
                            (json_int_t)h.active_leases);
    if (epoch >= 0)
        json_object_set_new(out, "epoch", json_integer(epoch));
    char *text = json_dumps(out, JSON_COMPACT);
    json_decref(out);
    if (text) {
        puts(text);
        free(text);
    }
    if (rc == LEASE_EXIT_OK && (!h.schema_current || h.sealed))
        rc = LEASE_EXIT_FAILURE; /* --status: not bound yet, or sealed */
    return rc;
}

/* Who runs leasectl, as the audit records it: "leasectl:" and the login
 * name (lease._sql_principal's "sql:" and the session user on PostgreSQL),
 * characters outside [A-Za-z0-9._:-] as '_'. */
static void operator_id(char *out, size_t outsz)
{
    const struct passwd *pw = getpwuid(geteuid());
    const char *name = pw && pw->pw_name ? pw->pw_name : "unknown";
    int n = snprintf(out, outsz, "leasectl:%s", name);
    for (size_t i = 9; n > 0 && i < (size_t)n && i < outsz; i++) {
        char c = out[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == ':' || c == '-';
        if (!ok)
            out[i] = '_';
    }
}

lease_admin_status_t ctl_valkey_credential_create(const char *url, const json_t *request,
                                                  json_t **row, char *err, size_t errsz)
{
    *row = NULL;
    json_t *req = json_deep_copy(request);
    if (req == NULL) {
        snprintf(err, errsz, "out of memory");
        return LEASE_ADMIN_FAILED;
    }
    const char *at = json_string_value(json_object_get(req, "expires_at"));
    if (at != NULL) {
        int64_t ms = 0;
        if (!lease_time_parse(at, &ms)) {
            json_decref(req);
            snprintf(err, errsz, "expires_at is not a time");
            return LEASE_ADMIN_INVALID;
        }
        json_object_set_new(req, "expires_at_ms", json_integer(ms));
    }
    json_object_del(req, "expires_at");
    char who[128];
    operator_id(who, sizeof who);
    json_object_set_new(req, "operator", json_string(who)); /* for the audit */
    char *text = json_dumps(req, JSON_COMPACT);
    /* the request carries the secret's digest: wiped once sent */
    json_t *digest = json_object_get(req, "secret_digest");
    if (json_is_string(digest))
        json_string_set(digest, "");
    json_decref(req);
    if (text == NULL) {
        snprintf(err, errsz, "out of memory");
        return LEASE_ADMIN_FAILED;
    }
    lease_valkey_t *v = NULL;
    lease_valkey_url_t u;
    lease_admin_status_t st = open_url(url, false, &v, &u, err, errsz);
    char *row_text = NULL;
    if (st == LEASE_ADMIN_OK) {
        lease_code_t c = lease_valkey_credential_create(v, text, &row_text, err, errsz);
        st = c == LEASE_INSPECTED               ? LEASE_ADMIN_OK
             : c == LEASE_INVALID_LEASE_REQUEST ? LEASE_ADMIN_INVALID
                                                : LEASE_ADMIN_UNAVAILABLE;
        lease_valkey_close(v);
    }
    memset(text, 0, strlen(text));
    free(text);
    if (st == LEASE_ADMIN_OK) {
        json_t *r = json_loads(row_text, 0, NULL);
        free(row_text);
        if (r == NULL) {
            snprintf(err, errsz, "unreadable answer");
            return LEASE_ADMIN_FAILED;
        }
        /* times as on PostgreSQL: RFC 3339, null when none */
        const char *names[] = {"created_at", "expires_at"};
        for (size_t i = 0; i < 2; i++) {
            json_t *t = json_object_get(r, names[i]);
            if (json_is_integer(t)) {
                char s[LEASE_TIME_LEN + 1];
                lease_time_format((int64_t)json_integer_value(t), s);
                json_object_set_new(r, names[i], json_string(s));
            }
        }
        *row = r;
    }
    return st;
}

lease_admin_status_t ctl_valkey_credential_revoke(const char *url, const char *credential_id,
                                                  bool *revoked, char *err, size_t errsz)
{
    *revoked = false;
    lease_valkey_t *v = NULL;
    lease_valkey_url_t u;
    lease_admin_status_t st = open_url(url, false, &v, &u, err, errsz);
    if (st != LEASE_ADMIN_OK)
        return st;
    char who[128];
    operator_id(who, sizeof who);
    lease_code_t c = lease_valkey_credential_revoke_by(v, credential_id, who, revoked, err, errsz);
    lease_valkey_close(v);
    return c == LEASE_INSPECTED               ? LEASE_ADMIN_OK
           : c == LEASE_INVALID_LEASE_REQUEST ? LEASE_ADMIN_INVALID
                                              : LEASE_ADMIN_UNAVAILABLE;
}

lease_admin_status_t ctl_valkey_credential_list(const char *url, json_t **rows, char *err,
                                                size_t errsz)
{
    *rows = NULL;
    lease_valkey_t *v = NULL;
    lease_valkey_url_t u;
    lease_admin_status_t st = open_url(url, false, &v, &u, err, errsz);
    if (st != LEASE_ADMIN_OK)
        return st;
    char *text = NULL;
    lease_code_t c = lease_valkey_credential_list(v, &text, err, errsz);
    lease_valkey_close(v);
    if (c != LEASE_INSPECTED)
        return LEASE_ADMIN_UNAVAILABLE;
    *rows = json_loads(text, 0, NULL);
    free(text);
    if (*rows == NULL) {
        snprintf(err, errsz, "unreadable answer");
        return LEASE_ADMIN_FAILED;
    }
    return LEASE_ADMIN_OK;
}

int ctl_valkey_recover(const char *url, const char *reason, int64_t floor_token)
{
    char err[1024] = "";
    lease_valkey_t *v = NULL;
    lease_valkey_url_t u;
    lease_admin_status_t st = open_url(url, true, &v, &u, err, sizeof err);
    if (st != LEASE_ADMIN_OK) {
        fprintf(stderr, "leasectl recover: %s\n", err);
        return exit_of(st);
    }
    char who[128];
    operator_id(who, sizeof who);
    int64_t epoch = 0, revoked = 0;
    lease_code_t c =
        lease_valkey_rebind_by(v, reason, who, floor_token, &epoch, &revoked, err, sizeof err);
    lease_valkey_close(v);
    if (c != LEASE_INSPECTED) {
        fprintf(stderr, "leasectl recover: %s\n", err);
        return c == LEASE_INVALID_LEASE_REQUEST ? LEASE_EXIT_INVALID : LEASE_EXIT_UNAVAILABLE;
    }
    /* every token from now on is above token_floor (docs/backends.md,
     * "Token layout"): epoch * 2^32 */
    json_t *out = json_pack(
        "{s:s, s:s, s:I, s:I, s:I, s:I}", "backend", "valkey", "namespace", u.ns, "epoch",
        (json_int_t)epoch, "token_floor", (json_int_t)(epoch * 4294967296LL), "first_token",
        (json_int_t)(epoch * 4294967296LL + 1), "leases_revoked", (json_int_t)revoked);
    char *text = json_dumps(out, JSON_COMPACT);
    json_decref(out);
    if (text) {
        puts(text);
        free(text);
    }
    return LEASE_EXIT_OK;
}

#else /* built without hiredis */

static const char without[] =
    "this leasectl was built without the Valkey adapter (hiredis): use a build with it";

bool ctl_valkey_url(const char *url)
{
    return url != NULL &&
           (strncmp(url, "redis://", 8) == 0 || strncmp(url, "valkey://", 9) == 0 ||
            strncmp(url, "rediss://", 9) == 0 || strncmp(url, "valkeys://", 10) == 0);
}

int ctl_valkey_migrate(const char *url, bool status_only)
{
    (void)url;
    (void)status_only;
    fprintf(stderr, "leasectl migrate: %s\n", without);
    return LEASE_EXIT_UNAVAILABLE;
}

int ctl_valkey_recover(const char *url, const char *reason, int64_t floor_token)
{
    (void)url;
    (void)reason;
    (void)floor_token;
    fprintf(stderr, "leasectl recover: %s\n", without);
    return LEASE_EXIT_UNAVAILABLE;
}

lease_admin_status_t ctl_valkey_credential_create(const char *url, const json_t *request,
                                                  json_t **row, char *err, size_t errsz)
{
    (void)url;
    (void)request;
    *row = NULL;
    snprintf(err, errsz, "%s", without);
    return LEASE_ADMIN_UNAVAILABLE;
}

lease_admin_status_t ctl_valkey_credential_revoke(const char *url, const char *credential_id,
                                                  bool *revoked, char *err, size_t errsz)
{
    (void)url;
    (void)credential_id;
    *revoked = false;
    snprintf(err, errsz, "%s", without);
    return LEASE_ADMIN_UNAVAILABLE;
}

lease_admin_status_t ctl_valkey_credential_list(const char *url, json_t **rows, char *err,
                                                size_t errsz)
{
    (void)url;
    *rows = NULL;
    snprintf(err, errsz, "%s", without);
    return LEASE_ADMIN_UNAVAILABLE;
}

#endif
