/*
 * leased_main.c - the leased program: settings, wiring, signals, exit codes.
 *
 * Exit status: 0 after a clean shutdown on SIGTERM/SIGINT, 1 on a runtime
 * failure (cannot listen, cannot start a thread, shutdown grace elapsed
 * with requests still running), 2 on a bad setting or argument.
 *
 * Shutdown order: /readyz turns 503 ("draining") first; after
 * LEASE_DRAIN_DELAY_MS the listener closes; requests in flight finish
 * (bounded by LEASE_SHUTDOWN_GRACE_MS; acquire waits are cut short); then
 * the daemon, the sweeper and the audit queue (flushed) stop. Watches
 * waiting for their lease to end are answered at once when draining
 * begins (with the lease as it is), so they never hold the shutdown up.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lease/clock.h"
#include "lease/listener.h"
#include "lease/schema.h"
#include "lease/store_pg.h"
#ifdef LEASE_HAVE_VALKEY
#include "lease/store_valkey.h"
#endif
#include "app.h"
#include "auth.h"
#include "config.h"
#include "http.h"
#include "lease/log.h"
#include "routes.h"

#define LEASED_VERSION "0.1.0"
#define AUDIT_FLUSH_MAX_MS 5000

extern char **environ;

typedef struct parts {
    leased_config_t cfg;
    lease_store_t *store;
    lease_auth_t *auth;
    leased_audit_queue_t *audit;
    leased_service_t *service;
    leased_admission_t *admission;
    leased_metrics_t *metrics;
    leased_sweeper_t *sweeper;
    leased_watch_t *watch;
    leased_http_t *http;
    const char *route_names[32];
    leased_app_t app;
} parts_t;

static int wait_for_signal(const sigset_t *set)
{
    int sig = 0;
    while (sigwait(set, &sig) != 0)
        ;
    return sig;
}

#ifdef LEASE_HAVE_VALKEY
/* LEASE_STORE_URL parsed into u and the connection settings the store and
 * the watch's listener share; vc points into u, which the caller wipes once
 * the adapter has made its own copy. */
static bool valkey_config(const leased_config_t *cfg, lease_valkey_url_t *u,
                          lease_valkey_config_t *vc, char *err, size_t errsz)
{
    if (!lease_valkey_url_parse(cfg->store_url, u, err, errsz))
        return false;
    *vc = (lease_valkey_config_t){.host = u->host,
                                  .port = u->port,
                                  .ns = u->ns,
                                  .connect_timeout_ms = cfg->db_connect_timeout_ms,
                                  .user = u->user,
                                  .password = u->password,
                                  .tls = u->tls,
                                  .tls_ca_file = cfg->store_cacert,
                                  .tls_cert_file = cfg->store_cert,
                                  .tls_key_file = cfg->store_key};
    return true;
}
#endif

/* The store LEASE_STORE_URL or LEASE_DATABASE_URL names (config.c checked
 * that exactly one is set). Valkey: opening refuses a server without
 * appendonly yes, appendfsync always and maxmemory-policy noeviction. */
static bool open_store(parts_t *p, char *err, size_t errsz)
{
    const leased_config_t *cfg = &p->cfg;
#ifdef LEASE_HAVE_VALKEY
    if (*cfg->store_url) {
        lease_valkey_url_t u;
        lease_valkey_config_t vc;
        if (!valkey_config(cfg, &u, &vc, err, errsz))
            return false;
        vc.min_replicas = (int)cfg->valkey_min_replicas;
        vc.combine_calls = (int)cfg->valkey_combine_calls;
        vc.combine_items = (int)cfg->valkey_combine_items;
        vc.pool_size = (int)cfg->db_pool_size; /* the same setting as PostgreSQL's pool */
        char why[400];
        bool opened = lease_valkey_store_open(&vc, &p->store, why, sizeof why) == LEASE_INSPECTED;
        lease_valkey_url_wipe(&u); /* the adapter keeps its own copy */
        if (!opened) {
            snprintf(err, errsz, "valkey store %.100s:%d: %.300s", u.host, u.port, why);
            return false;
        }
        return true;
    }
#endif
    lease_store_pg_config_t pg = {cfg->database_url, (int)cfg->db_pool_size,
                                  cfg->db_connect_timeout_ms, "leased",
                                  !cfg->db_prepared_statements};
    return lease_store_pg_open(&pg, &p->store, err, errsz) == 0;
}

/* The watch hub's feed of ended leases (lease/listener.h), on the store's
 * backend: PostgreSQL's LISTEN and polls, or Valkey's SUBSCRIBE and polls
 * (LEASE_WATCH_LISTEN=false: polls only, on either). */
static bool open_listener(const leased_config_t *cfg, lease_listener_t **out, char *err,
                          size_t errsz)
{
#ifdef LEASE_HAVE_VALKEY
    if (*cfg->store_url) {
        lease_valkey_url_t u;
        lease_valkey_config_t vc;
        if (!valkey_config(cfg, &u, &vc, err, errsz))
            return false;
        int rc = lease_valkey_listener_open(&vc, cfg->watch_listen, out, err, errsz);
        lease_valkey_url_wipe(&u); /* the listener keeps its own copy */
        return rc == 0;
    }
#endif
    /* the watch hub's one session: LISTEN needs a direct connection, so it
     * may have a URL of its own when the pool goes through PgBouncer */
    lease_listener_pg_config_t lc = {*cfg->watch_database_url ? cfg->watch_database_url
                                                              : cfg->database_url,
                                     cfg->db_connect_timeout_ms, "leased-watch", cfg->watch_listen};
    return lease_listener_pg_open(&lc, out, err, errsz) == 0;
}

static bool open_watch(parts_t *p, char *err, size_t errsz)
{
    const leased_config_t *cfg = &p->cfg;
    lease_listener_t *listener = NULL;
    if (!open_listener(cfg, &listener, err, errsz))
        return false;
    leased_watch_config_t wc = {cfg->watch_poll_ms, cfg->max_watches};
    p->watch = leased_watch_new(listener, &wc);
    if (!p->watch) {
        lease_listener_close(listener);
        snprintf(err, errsz, "out of memory");
        return false;
    }
    return true;
}

static bool build(parts_t *p, char *err, size_t errsz)
{
    const leased_config_t *cfg = &p->cfg;
    if (!open_store(p, err, errsz))
        return false;
    lease_auth_config_t ac = {cfg->credential_cache_ms, cfg->token_pepper};
    p->auth = lease_auth_new(p->store, &ac);
    p->audit =
        leased_audit_queue_new(p->store, (size_t)cfg->audit_queue_size, (size_t)cfg->audit_batch);
    leased_service_config_t sc = {cfg->default_deadline_ms, cfg->max_deadline_ms, cfg->max_wait_ms};
    p->service = p->auth && p->audit ? leased_service_new(p->store, p->auth, p->audit, &sc) : NULL;
    p->admission = leased_admission_new(cfg->rate_limit_per_s, cfg->max_inflight);
    if (p->admission) {
        leased_admission_limits_t lim = {
            cfg->max_inflight_per_credential, cfg->max_inflight_per_tenant,
            cfg->max_waiting_per_credential,  cfg->max_waiting_per_tenant,
            cfg->source_rate_limit_per_s,     cfg->auth_failure_limit_per_s};
        leased_admission_configure(p->admission, &lim);
    }
    if (p->audit)
        leased_audit_queue_set_window(p->audit, cfg->auth_audit_window_ms);
    size_t n_routes;
    const leased_route_t *routes = leased_routes_table(&n_routes);
    size_t n_names = sizeof p->route_names / sizeof p->route_names[0];
    for (size_t i = 0; i < n_routes && i < n_names; i++)
        p->route_names[i] = routes[i].name;
    /* a route table larger than the label array is a build mistake */
    p->metrics = n_routes <= n_names ? leased_metrics_new(n_routes, p->route_names) : NULL;
    leased_sweeper_config_t swc = {cfg->sweep_interval_ms, (int)cfg->sweep_batch,
                                   cfg->health_interval_ms};
    p->sweeper = leased_sweeper_new(p->store, &swc);
    if (!open_watch(p, err, errsz))
        return false;
    if (!p->service || !p->admission || !p->metrics || !p->sweeper) {
        snprintf(err, errsz, "out of memory");
        return false;
    }
    if (!leased_audit_queue_start(p->audit) || !leased_sweeper_start(p->sweeper) ||
        !leased_watch_start(p->watch)) {
        snprintf(err, errsz, "cannot start background threads");
        return false;
    }
    p->app = (leased_app_t){.config = cfg,
                            .store = p->store,
                            .service = p->service,
                            .admission = p->admission,
                            .metrics = p->metrics,
                            .audit = p->audit,
                            .sweeper = p->sweeper,
                            .watch = p->watch,
                            .limits = {cfg->max_wait_ms}};
    p->http = leased_http_start(&p->app, leased_routes_for_http(), err, errsz);
    p->app.http = p->http;
    return p->http != NULL;
}

static void teardown(parts_t *p)
{
    leased_watch_free(p->watch);
    p->watch = NULL;
    leased_sweeper_stop(p->sweeper);
    leased_audit_queue_stop(p->audit, AUDIT_FLUSH_MAX_MS);
    leased_sweeper_free(p->sweeper);
    leased_metrics_free(p->metrics);
    leased_admission_free(p->admission);
    leased_service_free(p->service);
    leased_audit_queue_free(p->audit);
    lease_auth_free(p->auth);
    lease_store_close(p->store);
    leased_config_free(&p->cfg);
}

/* SIGTERM/SIGINT: returns the exit status. */
static int drain(parts_t *p, int sig)
{
    const leased_config_t *cfg = &p->cfg;
    int64_t start = lease_mono_now_ns();
    __atomic_store_n(&p->app.draining, 1, __ATOMIC_RELEASE);
    LOG_INFO("%s received: draining (readiness is false; %lld requests active)",
             sig == SIGINT ? "SIGINT" : "SIGTERM", (long long)leased_http_active(p->http));
    lease_sleep_ms(cfg->drain_delay_ms);
    leased_http_quiesce(p->http);
    leased_service_stop_waiting(p->service);
    leased_watch_release_all(p->watch);
    int64_t left = cfg->shutdown_grace_ms - (lease_mono_now_ns() - start) / 1000000;
    bool idle = leased_http_wait_idle(p->http, left > 0 ? left : 0);
    if (!idle)
        LOG_WARN("shutdown grace elapsed with %lld requests active",
                 (long long)leased_http_active(p->http));
    left = cfg->shutdown_grace_ms - (lease_mono_now_ns() - start) / 1000000;
    if (!leased_http_stop(p->http, left > 1000 ? left : 1000)) {
        /* requests are still running on workers: their clients resolve by
         * request id; the process cannot stop the HTTP library cleanly */
        LOG_ERROR("exiting with requests in flight");
        leased_audit_queue_stop(p->audit, AUDIT_FLUSH_MAX_MS);
        _exit(LEASE_EXIT_FAILURE);
    }
    p->http = NULL;
    teardown(p);
    LOG_INFO("stopped");
    return LEASE_EXIT_OK;
}

int main(int argc, char **argv)
{
    static parts_t p;
    char err[512];
    signal(SIGPIPE, SIG_IGN);
    switch (leased_config_load(&p.cfg, argc, argv, environ, err, sizeof err)) {
    case LEASED_CONFIG_OK:
        break;
    case LEASED_CONFIG_HELP:
        leased_config_print_help(stdout);
        leased_config_free(&p.cfg);
        return LEASE_EXIT_OK;
    case LEASED_CONFIG_VERSION:
        printf("leased %s (schema %d)\n", LEASED_VERSION, LEASE_SCHEMA_VERSION);
        leased_config_free(&p.cfg);
        return LEASE_EXIT_OK;
    case LEASED_CONFIG_ERROR:
        fprintf(stderr, "leased: %s\n", err);
        leased_config_free(&p.cfg);
        return LEASE_EXIT_USAGE;
    }
    lease_log_init(p.cfg.log_level, p.cfg.log_format);

    /* Signals are taken by sigwait in this thread only: block them before
     * any thread starts so every thread inherits the mask. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    if (!build(&p, err, sizeof err)) {
        LOG_ERROR("cannot start: %s", err);
        (void)leased_http_stop(p.http, 0);
        teardown(&p);
        return LEASE_EXIT_FAILURE;
    }
    /* the schema the database has, not the one this build expects: the
     * line answers "what is this instance talking to" */
    char schema[64];
    lease_health_t h;
    lease_deadline_t probe = lease_deadline_in(p.cfg.db_connect_timeout_ms + 1000);
    if (lease_store_health(p.store, &probe, &h) == LEASE_INSPECTED)
        snprintf(schema, sizeof schema, "schema %d%s", h.schema_version,
                 h.schema_current ? "" : ", not the one this build expects");
    else
        snprintf(schema, sizeof schema, "schema unknown: database unreachable");
    LOG_INFO("listening on %s%s%s:%d (pool %lld, workers %lld, %s; build expects schema %d)",
             strchr(p.cfg.listen_host, ':') ? "[" : "", p.cfg.listen_host,
             strchr(p.cfg.listen_host, ':') ? "]" : "", leased_http_port(p.http),
             (long long)p.cfg.db_pool_size, (long long)p.cfg.http_threads, schema,
             LEASE_SCHEMA_VERSION);
    int sig = wait_for_signal(&set);
    return drain(&p, sig);
}
