/*
 * config.c - the one table of leased settings.
 *
 * Each row: setting name, environment variable, flag, type, default, bounds,
 * where the value lands in leased_config_t, and a help line. The parser is
 * core's (lease/settings.h, shared with leased-relay): defaults first, then
 * the environment, then flags (a flag wins). A bad value is an error naming
 * the setting; leased exits 2 on it. Relations between settings are checked
 * here.
 */
#include "config.h"

#include <string.h>
#include <unistd.h>

#include "lease/settings.h"
#ifdef LEASE_HAVE_VALKEY
#include "lease/store_valkey.h"
#endif

#define AT(member) offsetof(leased_config_t, member)
#define MS_MAX (INT64_C(24) * 3600 * 1000)

static long online_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n;
}

/* Four per core, at least eight: a request's thread waits on the database,
 * and with durable commits (fsync) it mostly waits for the WAL flush, which
 * concurrent commits share. Measured on 2 cores (docs/benchmarks.md): 2
 * threads and 4 connections gave 250 ops/s and p99 421 ms at 16 clients, 8
 * and 8 gave about 650 ops/s. */
static const char *waiters_default(char *buf, size_t bufsz)
{
    snprintf(buf, bufsz, "%ld", 4 * online_cores() < 8 ? 8 : 4 * online_cores());
    return buf;
}

/* On Valkey (LEASE_STORE_URL) a store call costs the server a fraction of a
 * millisecond of CPU, then waits for its fsync (appendfsync always), which
 * every call in flight at that moment shares: the more calls in flight, the
 * more share one fsync. Workers and connections are what keep calls in
 * flight (a worker blocks on its call), so the PostgreSQL default left the
 * server waiting: measured on 2 cores, 16 clients (docs/backends.md,
 * "Throughput against etcd"), 8 threads and 8 connections gave 3,321
 * ops/s, 24 and 24 gave 4,396, 48 and 48 the same as 24. Sixteen per core,
 * at least 32: above a typical client count, and one flow alone may use
 * LEASE_HTTP_THREADS - 1 workers. Applied only when the setting was not
 * given (valkey_waiters below). */
static int64_t valkey_waiters_default(void)
{
    return 16 * online_cores() < 32 ? 32 : 16 * online_cores();
}

/* host:port with a numeric IPv4 address, or [IPv6]:port. */
static bool check_listen(const char *value, void *cfg)
{
    leased_config_t *c = cfg;
    return lease_settings_parse_listen(value, c->listen_host, sizeof c->listen_host,
                                       &c->listen_port);
}

static bool check_metrics_listen(const char *value, void *cfg)
{
    leased_config_t *c = cfg;
    if (!value[0])
        return true; /* none: the probes are served on LEASE_LISTEN */
    return lease_settings_parse_listen(value, c->metrics_host, sizeof c->metrics_host,
                                       &c->metrics_port);
}

static bool check_trusted_proxies(const char *value, void *cfg)
{
    leased_config_t *c = cfg;
    return leased_trusted_proxies_parse(value, &c->trusted);
}

/* One row is one setting: kept compact by hand. */
/* clang-format off */
static const lease_setting_t settings[] = {
    {.name = "database url", .env = "LEASE_DATABASE_URL", .flag = "--database-url",
     .type = LEASE_SETTING_SECRET, .default_value = "", .empty_default_text = "(required)",
     .offset = AT(database_url),
     .help = "libpq connection string or URI (required unless LEASE_STORE_URL)"},
    {.name = "store url", .env = "LEASE_STORE_URL", .flag = "--store-url",
     .type = LEASE_SETTING_SECRET, .default_value = "", .offset = AT(store_url),
     .help = "redis://HOST:PORT or valkey://...: run on Valkey/Redis (docs/backends.md)"},
    {.name = "store CA file", .env = "LEASE_STORE_CACERT", .flag = "--store-cacert",
     .type = LEASE_SETTING_STRING, .default_value = "", .offset = AT(store_cacert),
     .help = "rediss://: PEM file of the CAs that sign the server's certificate (none: the "
             "system's CAs)"},
    {.name = "store client certificate", .env = "LEASE_STORE_CERT", .flag = "--store-cert",
     .type = LEASE_SETTING_STRING, .default_value = "", .offset = AT(store_cert),
     .help = "rediss://: PEM client certificate for a server that asks for one"},
    {.name = "store client key", .env = "LEASE_STORE_KEY", .flag = "--store-key",
     .type = LEASE_SETTING_STRING, .default_value = "", .offset = AT(store_key),
     .help = "rediss://: PEM private key of LEASE_STORE_CERT"},
    {.name = "valkey minimum replicas", .env = "LEASE_VALKEY_MIN_REPLICAS",
     .flag = "--valkey-min-replicas", .type = LEASE_SETTING_INT, .default_value = "0", .min = 0,
     .max = 100, .offset = AT(valkey_min_replicas),
     .help = "Valkey only: answer a write only after WAIT confirms this many replicas, "
             "else lease_outcome_unknown"},
    {.name = "valkey combine calls", .env = "LEASE_VALKEY_COMBINE_CALLS",
     .flag = "--valkey-combine-calls", .type = LEASE_SETTING_INT, .default_value = "2", .min = 1,
     .max = 1000, .offset = AT(valkey_combine_calls),
     .help = "Valkey only: acquire/renew/release calls in flight at once; requests arriving "
             "meanwhile go together in the next call"},
    {.name = "valkey combine items", .env = "LEASE_VALKEY_COMBINE_ITEMS",
     .flag = "--valkey-combine-items", .type = LEASE_SETTING_INT, .default_value = "16", .min = 1,
     .max = 64, .offset = AT(valkey_combine_items),
     .help = "Valkey only: requests one combined call carries at most (1: no combining)"},
    {.name = "listen address", .env = "LEASE_LISTEN", .flag = "--listen",
     .type = LEASE_SETTING_STRING, .default_value = "127.0.0.1:8080", .offset = AT(listen),
     .check = check_listen,
     .expect = "a numeric address and port, e.g. 127.0.0.1:8080 or [::1]:8080",
     .help = "numeric address and port to listen on (port 0: any free port)"},
    {.name = "metrics listen address", .env = "LEASE_METRICS_LISTEN", .flag = "--metrics-listen",
     .type = LEASE_SETTING_STRING, .default_value = "", .offset = AT(metrics_listen),
     .check = check_metrics_listen,
     .expect = "empty, or a numeric address and port, e.g. 127.0.0.1:9090 or [::1]:9090",
     .help = "a listener of their own for /metrics, /healthz and /readyz"},
    {.name = "database pool size", .env = "LEASE_DB_POOL_SIZE", .flag = "--db-pool-size",
     .type = LEASE_SETTING_INT, .compute_default = waiters_default, .min = 1, .max = 1000,
     .offset = AT(db_pool_size),
     .help = "database connections kept (Valkey: 16 per core, at least 32)"},
    {.name = "database connect timeout", .env = "LEASE_DB_CONNECT_TIMEOUT_MS",
     .flag = "--db-connect-timeout-ms", .type = LEASE_SETTING_INT, .default_value = "2000",
     .min = 100, .max = 60000, .offset = AT(db_connect_timeout_ms),
     .help = "bound on one connection attempt, ms"},
    {.name = "database prepared statements", .env = "LEASE_DB_PREPARED_STATEMENTS",
     .flag = "--db-prepared-statements", .type = LEASE_SETTING_BOOL, .default_value = "true",
     .offset = AT(db_prepared_statements),
     .help = "true: a direct session (not through a pooler) prepares the lease calls once; "
             "false: every call is sent as text"},
    {.name = "HTTP worker threads", .env = "LEASE_HTTP_THREADS", .flag = "--http-threads",
     .type = LEASE_SETTING_INT, .compute_default = waiters_default, .min = 1, .max = 1024,
     .offset = AT(http_threads),
     .help = "threads that run requests (they wait on the database; Valkey: 16 per core, "
             "at least 32)"},
    {.name = "connection limit", .env = "LEASE_MAX_CONNECTIONS", .flag = "--max-connections",
     .type = LEASE_SETTING_INT, .default_value = "1024", .min = 1, .max = 65536,
     .offset = AT(max_connections),
     .help = "open client connections at once; more are answered 503 and closed"},
    {.name = "connections per source", .env = "LEASE_MAX_CONNECTIONS_PER_SOURCE",
     .flag = "--max-connections-per-source", .type = LEASE_SETTING_INT, .default_value = "256",
     .min = 1, .max = 65536, .offset = AT(max_connections_per_source),
     .help = "open connections from one client address; more are answered 429 and closed"},
    {.name = "trusted proxies", .env = "LEASE_TRUSTED_PROXIES", .flag = "--trusted-proxies",
     .type = LEASE_SETTING_STRING, .default_value = "", .offset = AT(trusted_proxies),
     .check = check_trusted_proxies,
     .expect = "a comma-separated list of numeric addresses or CIDR ranges, e.g. 10.0.0.0/8,::1",
     .help = "peers whose PROXY v2 header or X-Forwarded-For names the client"},
    {.name = "receive timeout", .env = "LEASE_RECEIVE_TIMEOUT_MS", .flag = "--receive-timeout-ms",
     .type = LEASE_SETTING_INT, .default_value = "10000", .min = 100, .max = 600000,
     .offset = AT(receive_timeout_ms),
     .help = "a request's head and body must arrive within this of its first byte, ms"},
    {.name = "idle timeout", .env = "LEASE_IDLE_TIMEOUT_MS", .flag = "--idle-timeout-ms",
     .type = LEASE_SETTING_INT, .default_value = "60000", .min = 1000, .max = 3600000,
     .offset = AT(idle_timeout_ms),
     .help = "close a connection idle between requests (or not reading a reply) this long, ms"},
    {.name = "default deadline", .env = "LEASE_DEFAULT_DEADLINE_MS",
     .flag = "--default-deadline-ms", .type = LEASE_SETTING_INT, .default_value = "5000", .min = 1,
     .max = MS_MAX, .offset = AT(default_deadline_ms),
     .help = "deadline of a request that names none, ms"},
    {.name = "maximum deadline", .env = "LEASE_MAX_DEADLINE_MS", .flag = "--max-deadline-ms",
     .type = LEASE_SETTING_INT, .default_value = "30000", .min = 1, .max = MS_MAX,
     .offset = AT(max_deadline_ms),
     .help = "cap on any request's deadline, ms"},
    {.name = "maximum wait", .env = "LEASE_MAX_WAIT_MS", .flag = "--max-wait-ms",
     .type = LEASE_SETTING_INT, .default_value = "10000", .min = 0, .max = MS_MAX,
     .offset = AT(max_wait_ms),
     .help = "cap on an acquire's wait_ms, ms"},
    {.name = "rate limit", .env = "LEASE_RATE_LIMIT", .flag = "--rate-limit",
     .type = LEASE_SETTING_RATE, .default_value = "5000/s", .min = 1, .max = 1000000,
     .offset = AT(rate_limit_per_s),
     .help = "requests per second per credential, burst the same"},
    {.name = "in-flight limit", .env = "LEASE_MAX_INFLIGHT", .flag = "--max-inflight",
     .type = LEASE_SETTING_INT, .default_value = "256", .min = 1, .max = 100000,
     .offset = AT(max_inflight),
     .help = "requests being served at once; more answer 429"},
    {.name = "in-flight per credential", .env = "LEASE_MAX_INFLIGHT_PER_CREDENTIAL",
     .flag = "--max-inflight-per-credential", .type = LEASE_SETTING_INT, .default_value = "64",
     .min = 1, .max = 100000, .offset = AT(max_inflight_per_credential),
     .help = "requests of one credential being served at once"},
    {.name = "in-flight per tenant", .env = "LEASE_MAX_INFLIGHT_PER_TENANT",
     .flag = "--max-inflight-per-tenant", .type = LEASE_SETTING_INT, .default_value = "128",
     .min = 1, .max = 100000, .offset = AT(max_inflight_per_tenant),
     .help = "requests of one tenant's credentials being served at once"},
    {.name = "queued per flow", .env = "LEASE_MAX_QUEUED_PER_FLOW",
     .flag = "--max-queued-per-flow", .type = LEASE_SETTING_INT, .default_value = "128",
     .min = 1, .max = 100000, .offset = AT(max_queued_per_flow),
     .help = "requests of one flow (a tenant, or a client address without a cached credential) "
             "waiting for a worker; more answer 429 at once"},
    {.name = "queue wait", .env = "LEASE_MAX_QUEUE_WAIT_MS", .flag = "--max-queue-wait-ms",
     .type = LEASE_SETTING_INT, .default_value = "2000", .min = 1, .max = MS_MAX,
     .offset = AT(max_queue_wait_ms),
     .help = "a request that waited this long for a worker answers 429 instead of running, ms"},
    {.name = "waiting per credential", .env = "LEASE_MAX_WAITING_PER_CREDENTIAL",
     .flag = "--max-waiting-per-credential", .type = LEASE_SETTING_INT, .default_value = "16",
     .min = 0, .max = 100000, .offset = AT(max_waiting_per_credential),
     .help = "acquires of one credential waiting (wait_ms) at once"},
    {.name = "waiting per tenant", .env = "LEASE_MAX_WAITING_PER_TENANT",
     .flag = "--max-waiting-per-tenant", .type = LEASE_SETTING_INT, .default_value = "32",
     .min = 0, .max = 100000, .offset = AT(max_waiting_per_tenant),
     .help = "acquires of one tenant waiting (wait_ms) at once"},
    {.name = "source rate limit", .env = "LEASE_SOURCE_RATE_LIMIT", .flag = "--source-rate-limit",
     .type = LEASE_SETTING_RATE, .default_value = "1000/s", .min = 1, .max = 1000000,
     .offset = AT(source_rate_limit_per_s),
     .help = "requests per second from one client address whose credential is not valid in the "
             "cache, burst the same"},
    {.name = "authentication failure limit", .env = "LEASE_AUTH_FAILURE_LIMIT",
     .flag = "--auth-failure-limit", .type = LEASE_SETTING_RATE, .default_value = "10/s", .min = 1,
     .max = 1000000, .offset = AT(auth_failure_limit_per_s),
     .help = "failed authentications per second from one client address before its requests "
             "not valid in the cache are refused (429) without a lookup, burst the same"},
    {.name = "authentication audit window", .env = "LEASE_AUTH_AUDIT_WINDOW_MS",
     .flag = "--auth-audit-window-ms", .type = LEASE_SETTING_INT, .default_value = "10000",
     .min = 100, .max = 3600000, .offset = AT(auth_audit_window_ms),
     .help = "authentication failures of one source are audited as one event per window, ms"},
    LEASE_SETTINGS_LOG_ROWS(leased_config_t, log_level, log_format),
    {.name = "token pepper", .env = "LEASE_TOKEN_PEPPER", .flag = "--token-pepper",
     .type = LEASE_SETTING_SECRET, .default_value = "", .offset = AT(token_pepper),
     .help = "HMAC key for stored token digests (must match leasectl's)"},
    {.name = "credential cache", .env = "LEASE_CREDENTIAL_CACHE_MS",
     .flag = "--credential-cache-ms", .type = LEASE_SETTING_INT, .default_value = "2000", .min = 1,
     .max = 60000, .offset = AT(credential_cache_ms),
     .help = "how long a looked-up credential is trusted; revocation takes this long, ms"},
    {.name = "sweep interval", .env = "LEASE_SWEEP_INTERVAL_MS", .flag = "--sweep-interval-ms",
     .type = LEASE_SETTING_INT, .default_value = "5000", .min = 100, .max = 3600000,
     .offset = AT(sweep_interval_ms),
     .help = "period of moving expired leases to history and purging retention, ms"},
    {.name = "sweep batch", .env = "LEASE_SWEEP_BATCH", .flag = "--sweep-batch",
     .type = LEASE_SETTING_INT, .default_value = "500", .min = 1, .max = 100000,
     .offset = AT(sweep_batch),
     .help = "rows one sweep handles at most"},
    {.name = "health interval", .env = "LEASE_HEALTH_INTERVAL_MS", .flag = "--health-interval-ms",
     .type = LEASE_SETTING_INT, .default_value = "1000", .min = 100, .max = 60000,
     .offset = AT(health_interval_ms),
     .help = "period of the readiness and active-lease probe, ms"},
    {.name = "audit queue size", .env = "LEASE_AUDIT_QUEUE_SIZE", .flag = "--audit-queue-size",
     .type = LEASE_SETTING_INT, .default_value = "16384", .min = 16, .max = 1000000,
     .offset = AT(audit_queue_size),
     .help = "audit events that may wait to be written, shared fairly per tenant; a tenant over "
             "its share is refused (429)"},
    {.name = "audit batch", .env = "LEASE_AUDIT_BATCH", .flag = "--audit-batch",
     .type = LEASE_SETTING_INT, .default_value = "100", .min = 1, .max = 1000,
     .offset = AT(audit_batch),
     .help = "audit events written per database call"},
    {.name = "drain delay", .env = "LEASE_DRAIN_DELAY_MS", .flag = "--drain-delay-ms",
     .type = LEASE_SETTING_INT, .default_value = "0", .min = 0, .max = 600000,
     .offset = AT(drain_delay_ms),
     .help = "on SIGTERM: time between /readyz turning false and closing the listener, ms"},
    {.name = "shutdown grace", .env = "LEASE_SHUTDOWN_GRACE_MS", .flag = "--shutdown-grace-ms",
     .type = LEASE_SETTING_INT, .default_value = "20000", .min = 0, .max = 600000,
     .offset = AT(shutdown_grace_ms),
     .help = "on SIGTERM: bound on waiting for requests in flight, ms"},
    {.name = "watch database url", .env = "LEASE_WATCH_DATABASE_URL",
     .flag = "--watch-database-url", .type = LEASE_SETTING_SECRET, .default_value = "",
     .offset = AT(watch_database_url),
     .help = "the one session that LISTENs for ended leases; a direct connection, not PgBouncer "
             "in transaction mode (default: the database url)"},
    {.name = "watch listen", .env = "LEASE_WATCH_LISTEN", .flag = "--watch-listen",
     .type = LEASE_SETTING_BOOL, .default_value = "true", .offset = AT(watch_listen),
     .help = "true: LISTEN (Valkey: SUBSCRIBE) for ended leases; false: poll only"},
    {.name = "watch poll interval", .env = "LEASE_WATCH_POLL_MS", .flag = "--watch-poll-ms",
     .type = LEASE_SETTING_INT, .default_value = "1000", .min = 50, .max = 60000,
     .offset = AT(watch_poll_ms),
     .help = "period of the batched check of every watched lease while watches wait, ms"},
    {.name = "watch maximum wait", .env = "LEASE_WATCH_MAX_WAIT_MS", .flag = "--watch-max-wait-ms",
     .type = LEASE_SETTING_INT, .default_value = "60000", .min = 0, .max = 3600000,
     .offset = AT(watch_max_wait_ms),
     .help = "cap on a watch's wait_ms, ms"},
    {.name = "watch limit", .env = "LEASE_MAX_WATCHES", .flag = "--max-watches",
     .type = LEASE_SETTING_INT, .default_value = "1000", .min = 1, .max = 100000,
     .offset = AT(max_watches),
     .help = "watches waiting at once; more answer 429"},
};
/* clang-format on */

/* One store: LEASE_DATABASE_URL (PostgreSQL) or LEASE_STORE_URL
 * (Valkey/Redis, docs/backends.md), never both, never neither. */
static bool check_store(const leased_config_t *cfg, char *err, size_t errsz)
{
    bool pg = cfg->database_url && *cfg->database_url;
    bool valkey = cfg->store_url && *cfg->store_url;
    if (!pg && !valkey) {
        snprintf(err, errsz,
                 "database url: set LEASE_DATABASE_URL, LEASE_DATABASE_URL_FILE or "
                 "--database-url (or LEASE_STORE_URL=redis://HOST:PORT for Valkey)");
        return false;
    }
    if (pg && valkey) {
        snprintf(err, errsz,
                 "store url: LEASE_STORE_URL and LEASE_DATABASE_URL are both set; "
                 "set one (docs/backends.md)");
        return false;
    }
    if (!valkey && cfg->valkey_min_replicas > 0) {
        snprintf(err, errsz,
                 "valkey minimum replicas (LEASE_VALKEY_MIN_REPLICAS) is for the Valkey backend "
                 "(LEASE_STORE_URL); on PostgreSQL use synchronous replication");
        return false;
    }
    if (!valkey)
        return true;
#ifdef LEASE_HAVE_VALKEY
    lease_valkey_url_t u;
    char why[200];
    if (!lease_valkey_url_parse(cfg->store_url, &u, why, sizeof why)) {
        snprintf(err, errsz, "store url (LEASE_STORE_URL): %s", why);
        return false;
    }
    lease_valkey_url_wipe(&u);
    if (!lease_valkey_tls_files_check(&u, cfg->store_cacert, cfg->store_cert, cfg->store_key, why,
                                      sizeof why)) {
        snprintf(err, errsz, "store TLS: %s", why);
        return false;
    }
    return true;
#else
    snprintf(err, errsz,
             "store url (LEASE_STORE_URL): this build has no Valkey backend "
             "(built without hiredis)");
    return false;
#endif
}

static bool check_relations(void *config, char *err, size_t errsz)
{
    const leased_config_t *cfg = config;
    if (!check_store(cfg, err, errsz))
        return false;
    if (cfg->default_deadline_ms > cfg->max_deadline_ms) {
        snprintf(err, errsz,
                 "default deadline (%lld ms) exceeds the maximum deadline (%lld ms): "
                 "LEASE_DEFAULT_DEADLINE_MS must be <= LEASE_MAX_DEADLINE_MS",
                 (long long)cfg->default_deadline_ms, (long long)cfg->max_deadline_ms);
        return false;
    }
    return true;
}

static const lease_settings_t table = {
    .rows = settings,
    .n = sizeof settings / sizeof settings[0],
    .cfg_size = sizeof(leased_config_t),
    .program = "leased",
    .usage = "usage: leased [--SETTING VALUE | --SETTING=VALUE]... | --help | --version\n\n"
             "The HTTP lease service. Every setting is an environment variable; the flag\n"
             "of the same name in kebab-case wins over it. Exit status: 0 after a clean\n"
             "shutdown (SIGTERM/SIGINT), 1 on a runtime failure, 2 on a bad setting.\n\n",
    .help_widths = {28, 26, 16},
    .check_relations = check_relations,
};

size_t leased_config_setting_count(void)
{
    return table.n;
}

void leased_config_setting(size_t i, leased_setting_info_t *out, char *default_buf,
                           size_t default_bufsz)
{
    lease_settings_info(&table, i, out, default_buf, default_bufsz);
}

/* Whether the environment or a flag names the setting (--flag VALUE or
 * --flag=VALUE), whatever its value. */
static bool setting_given(const char *env, const char *flag, int argc, char *const *argv,
                          char *const *envp)
{
    size_t el = strlen(env), fl = strlen(flag);
    for (char *const *e = envp; e && *e; e++)
        if (strncmp(*e, env, el) == 0 && (*e)[el] == '=')
            return true;
    for (int i = 1; i < argc && argv[i]; i++)
        if (strncmp(argv[i], flag, fl) == 0 && (argv[i][fl] == '\0' || argv[i][fl] == '='))
            return true;
    return false;
}

/* The Valkey backend's own defaults of the worker threads and the pool
 * (valkey_waiters_default), where neither the environment nor a flag set
 * them; PostgreSQL keeps the table's. */
static void valkey_waiters(leased_config_t *cfg, int argc, char *const *argv, char *const *envp)
{
    if (!cfg->store_url || !*cfg->store_url)
        return;
    if (!setting_given("LEASE_HTTP_THREADS", "--http-threads", argc, argv, envp))
        cfg->http_threads = valkey_waiters_default();
    if (!setting_given("LEASE_DB_POOL_SIZE", "--db-pool-size", argc, argv, envp))
        cfg->db_pool_size = valkey_waiters_default();
}

leased_config_status_t leased_config_load(leased_config_t *cfg, int argc, char *const *argv,
                                          char *const *envp, char *err, size_t errsz)
{
    /* the same values (config.h) */
    lease_settings_status_t st = lease_settings_load(&table, cfg, argc, argv, envp, err, errsz);
    if (st == LEASE_SETTINGS_OK)
        valkey_waiters(cfg, argc, argv, envp);
    return (leased_config_status_t)st;
}

void leased_config_free(leased_config_t *cfg)
{
    lease_settings_free(&table, cfg);
}

void leased_config_print_help(FILE *out)
{
    lease_settings_print_help(&table, out);
}
