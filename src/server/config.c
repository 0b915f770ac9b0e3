/*
 * config.c - the one table of leased settings and its parser.
 *
 * Each row: setting name, environment variable, flag, type, default, bounds,
 * where the value lands in leased_config_t, and a help line. Defaults are
 * applied first, then the environment, then flags (a flag wins). A bad value
 * is an error naming the setting; leased exits 2 on it.
 */
#include "config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>

typedef enum setting_type {
    SETTING_STRING, /* char *, copied */
    SETTING_SECRET, /* char *, copied, wiped on free, never echoed */
    SETTING_INT,    /* int64_t within [min, max] */
    SETTING_LISTEN, /* host:port */
    SETTING_RATE,   /* "<n>/s" */
    SETTING_LEVEL,  /* debug|info|warn|error */
    SETTING_FORMAT, /* json|text */
    SETTING_BOOL,   /* true|false */
} setting_type_t;

/* Defaults that depend on the machine. */
typedef enum setting_dynamic {
    DYN_NONE = 0,
    /* Four per core, at least eight: a request's thread waits on the
     * database, and with durable commits (fsync) it mostly waits for the
     * WAL flush, which concurrent commits share. Measured on 2 cores
     * (docs/benchmarks.md): 2 threads and 4 connections gave 250 ops/s and
     * p99 421 ms at 16 clients, 8 and 8 gave about 650 ops/s. */
    DYN_WAITERS,
} setting_dynamic_t;

typedef struct setting {
    const char *name; /* short name used in messages */
    const char *env;
    const char *flag;
    setting_type_t type;
    const char *default_value; /* NULL: required (or computed, see dynamic) */
    setting_dynamic_t dynamic;
    int64_t min, max; /* SETTING_INT and SETTING_RATE */
    size_t offset;    /* into leased_config_t */
    const char *help;
} setting_t;

#define AT(member) offsetof(leased_config_t, member)
#define MS_MAX (INT64_C(24) * 3600 * 1000)

static const setting_t settings[] = {
    {"database url", "LEASE_DATABASE_URL", "--database-url", SETTING_SECRET, NULL, DYN_NONE, 0, 0,
     AT(database_url), "libpq connection string or URI (required)"},
    {"listen address", "LEASE_LISTEN", "--listen", SETTING_LISTEN, "127.0.0.1:8080", DYN_NONE, 0, 0,
     AT(listen), "numeric address and port to listen on (port 0: any free port)"},
    {"database pool size", "LEASE_DB_POOL_SIZE", "--db-pool-size", SETTING_INT, NULL,
     DYN_WAITERS, 1, 1000, AT(db_pool_size), "database connections kept"},
    {"database connect timeout", "LEASE_DB_CONNECT_TIMEOUT_MS", "--db-connect-timeout-ms",
     SETTING_INT, "2000", DYN_NONE, 100, 60000, AT(db_connect_timeout_ms),
     "bound on one connection attempt, ms"},
    {"HTTP worker threads", "LEASE_HTTP_THREADS", "--http-threads", SETTING_INT, NULL, DYN_WAITERS,
     1, 1024, AT(http_threads), "threads that run requests (they wait on the database)"},
    {"connection limit", "LEASE_MAX_CONNECTIONS", "--max-connections", SETTING_INT, "1024",
     DYN_NONE, 1, 65536, AT(max_connections),
     "open client connections at once; more are answered 503 and closed"},
    {"connections per source", "LEASE_MAX_CONNECTIONS_PER_SOURCE", "--max-connections-per-source",
     SETTING_INT, "256", DYN_NONE, 1, 65536, AT(max_connections_per_source),
     "open connections from one client address; more are answered 429 and closed"},
    {"receive timeout", "LEASE_RECEIVE_TIMEOUT_MS", "--receive-timeout-ms", SETTING_INT, "10000",
     DYN_NONE, 100, 600000, AT(receive_timeout_ms),
     "a request's head and body must arrive within this of its first byte, ms"},
    {"idle timeout", "LEASE_IDLE_TIMEOUT_MS", "--idle-timeout-ms", SETTING_INT, "60000", DYN_NONE,
     1000, 3600000, AT(idle_timeout_ms),
     "close a connection idle between requests (or not reading a reply) this long, ms"},
    {"default deadline", "LEASE_DEFAULT_DEADLINE_MS", "--default-deadline-ms", SETTING_INT, "5000",
     DYN_NONE, 1, MS_MAX, AT(default_deadline_ms), "deadline of a request that names none, ms"},
    {"maximum deadline", "LEASE_MAX_DEADLINE_MS", "--max-deadline-ms", SETTING_INT, "30000",
     DYN_NONE, 1, MS_MAX, AT(max_deadline_ms), "cap on any request's deadline, ms"},
    {"maximum wait", "LEASE_MAX_WAIT_MS", "--max-wait-ms", SETTING_INT, "10000", DYN_NONE, 0,
     MS_MAX, AT(max_wait_ms), "cap on an acquire's wait_ms, ms"},
    {"rate limit", "LEASE_RATE_LIMIT", "--rate-limit", SETTING_RATE, "200/s", DYN_NONE, 1, 1000000,
     AT(rate_limit_per_s), "requests per second per credential, burst the same"},
    {"in-flight limit", "LEASE_MAX_INFLIGHT", "--max-inflight", SETTING_INT, "256", DYN_NONE, 1,
     100000, AT(max_inflight), "requests being served at once; more answer 429"},
    {"in-flight per credential", "LEASE_MAX_INFLIGHT_PER_CREDENTIAL",
     "--max-inflight-per-credential", SETTING_INT, "64", DYN_NONE, 1, 100000,
     AT(max_inflight_per_credential), "requests of one credential being served at once"},
    {"in-flight per tenant", "LEASE_MAX_INFLIGHT_PER_TENANT", "--max-inflight-per-tenant",
     SETTING_INT, "128", DYN_NONE, 1, 100000, AT(max_inflight_per_tenant),
     "requests of one tenant's credentials being served at once"},
    {"waiting per credential", "LEASE_MAX_WAITING_PER_CREDENTIAL", "--max-waiting-per-credential",
     SETTING_INT, "16", DYN_NONE, 0, 100000, AT(max_waiting_per_credential),
     "acquires of one credential waiting (wait_ms) at once"},
    {"waiting per tenant", "LEASE_MAX_WAITING_PER_TENANT", "--max-waiting-per-tenant", SETTING_INT,
     "32", DYN_NONE, 0, 100000, AT(max_waiting_per_tenant),
     "acquires of one tenant waiting (wait_ms) at once"},
    {"source rate limit", "LEASE_SOURCE_RATE_LIMIT", "--source-rate-limit", SETTING_RATE, "1000/s",
     DYN_NONE, 1, 1000000, AT(source_rate_limit_per_s),
     "requests per second from one client address before authentication, burst the same"},
    {"authentication failure limit", "LEASE_AUTH_FAILURE_LIMIT", "--auth-failure-limit",
     SETTING_RATE, "10/s", DYN_NONE, 1, 1000000, AT(auth_failure_limit_per_s),
     "failed authentications per second from one client address before its unknown "
     "credentials are refused without a lookup, burst the same"},
    {"authentication audit window", "LEASE_AUTH_AUDIT_WINDOW_MS", "--auth-audit-window-ms",
     SETTING_INT, "10000", DYN_NONE, 100, 3600000, AT(auth_audit_window_ms),
     "authentication failures of one source are audited as one event per window, ms"},
    {"log level", "LEASE_LOG_LEVEL", "--log-level", SETTING_LEVEL, "info", DYN_NONE, 0, 0,
     AT(log_level), "debug, info, warn or error"},
    {"log format", "LEASE_LOG_FORMAT", "--log-format", SETTING_FORMAT, "json", DYN_NONE, 0, 0,
     AT(log_format), "json or text"},
    {"token pepper", "LEASE_TOKEN_PEPPER", "--token-pepper", SETTING_SECRET, "", DYN_NONE, 0, 0,
     AT(token_pepper), "HMAC key for stored token digests (must match leasectl's)"},
    {"credential cache", "LEASE_CREDENTIAL_CACHE_MS", "--credential-cache-ms", SETTING_INT, "2000",
     DYN_NONE, 1, 60000, AT(credential_cache_ms),
     "how long a looked-up credential is trusted; revocation takes this long, ms"},
    {"sweep interval", "LEASE_SWEEP_INTERVAL_MS", "--sweep-interval-ms", SETTING_INT, "5000",
     DYN_NONE, 100, 3600000, AT(sweep_interval_ms),
     "period of moving expired leases to history and purging retention, ms"},
    {"sweep batch", "LEASE_SWEEP_BATCH", "--sweep-batch", SETTING_INT, "500", DYN_NONE, 1, 100000,
     AT(sweep_batch), "rows one sweep handles at most"},
    {"health interval", "LEASE_HEALTH_INTERVAL_MS", "--health-interval-ms", SETTING_INT, "1000",
     DYN_NONE, 100, 60000, AT(health_interval_ms),
     "period of the readiness and active-lease probe, ms"},
    {"audit queue size", "LEASE_AUDIT_QUEUE_SIZE", "--audit-queue-size", SETTING_INT, "4096",
     DYN_NONE, 16, 1000000, AT(audit_queue_size),
     "audit events waiting to be written; more are dropped and counted"},
    {"audit batch", "LEASE_AUDIT_BATCH", "--audit-batch", SETTING_INT, "100", DYN_NONE, 1, 1000,
     AT(audit_batch), "audit events written per database call"},
    {"drain delay", "LEASE_DRAIN_DELAY_MS", "--drain-delay-ms", SETTING_INT, "0", DYN_NONE, 0,
     600000, AT(drain_delay_ms),
     "on SIGTERM: time between /readyz turning false and closing the listener, ms"},
    {"shutdown grace", "LEASE_SHUTDOWN_GRACE_MS", "--shutdown-grace-ms", SETTING_INT, "20000",
     DYN_NONE, 0, 600000, AT(shutdown_grace_ms),
     "on SIGTERM: bound on waiting for requests in flight, ms"},
    {"watch database url", "LEASE_WATCH_DATABASE_URL", "--watch-database-url", SETTING_SECRET, "",
     DYN_NONE, 0, 0, AT(watch_database_url),
     "the one session that LISTENs for ended leases; a direct connection, not PgBouncer in "
     "transaction mode (default: the database url)"},
    {"watch listen", "LEASE_WATCH_LISTEN", "--watch-listen", SETTING_BOOL, "true", DYN_NONE, 0, 0,
     AT(watch_listen), "true: LISTEN for ended leases; false: poll only"},
    {"watch poll interval", "LEASE_WATCH_POLL_MS", "--watch-poll-ms", SETTING_INT, "1000", DYN_NONE,
     50, 60000, AT(watch_poll_ms),
     "period of the batched check of every watched lease while watches wait, ms"},
    {"watch maximum wait", "LEASE_WATCH_MAX_WAIT_MS", "--watch-max-wait-ms", SETTING_INT, "60000",
     DYN_NONE, 0, 3600000, AT(watch_max_wait_ms), "cap on a watch's wait_ms, ms"},
    {"watch limit", "LEASE_MAX_WATCHES", "--max-watches", SETTING_INT, "1000", DYN_NONE, 1, 100000,
     AT(max_watches), "watches waiting at once; more answer 429"},
};

#define N_SETTINGS (sizeof settings / sizeof settings[0])

size_t leased_config_setting_count(void)
{
    return N_SETTINGS;
}

static long online_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n;
}

static const char *default_text(const setting_t *s, char *buf, size_t bufsz)
{
    switch (s->dynamic) {
    case DYN_WAITERS:
        snprintf(buf, bufsz, "%ld", 4 * online_cores() < 8 ? 8 : 4 * online_cores());
        return buf;
    case DYN_NONE:
        break;
    }
    return s->default_value;
}

void leased_config_setting(size_t i, leased_setting_info_t *out, char *default_buf,
                           size_t default_bufsz)
{
    const setting_t *s = &settings[i];
    out->env = s->env;
    out->flag = s->flag;
    out->help = s->help;
    out->default_text = default_text(s, default_buf, default_bufsz);
    if (!out->default_text)
        out->default_text = "(required)";
}

static bool parse_int(const char *v, int64_t *out)
{
    if (!*v || isspace((unsigned char)*v))
        return false;
    errno = 0;
    char *end;
    long long n = strtoll(v, &end, 10);
    if (errno || *end)
        return false;
    *out = n;
    return true;
}

/* host:port with a numeric IPv4 address, or [IPv6]:port. */
static bool parse_listen(const char *v, leased_config_t *cfg)
{
    const char *colon;
    char host[LEASED_LISTEN_HOST_MAX + 1];
    if (v[0] == '[') {
        const char *close = strchr(v, ']');
        if (!close || close[1] != ':' || (size_t)(close - v - 1) > LEASED_LISTEN_HOST_MAX)
            return false;
        memcpy(host, v + 1, (size_t)(close - v - 1));
        host[close - v - 1] = '\0';
        colon = close + 1;
        struct in6_addr a6;
        if (inet_pton(AF_INET6, host, &a6) != 1)
            return false;
    } else {
        colon = strrchr(v, ':');
        if (!colon || (size_t)(colon - v) > LEASED_LISTEN_HOST_MAX)
            return false;
        memcpy(host, v, (size_t)(colon - v));
        host[colon - v] = '\0';
        struct in_addr a4;
        if (inet_pton(AF_INET, host, &a4) != 1)
            return false;
    }
    int64_t port;
    if (!parse_int(colon + 1, &port) || port < 0 || port > 65535)
        return false;
    snprintf(cfg->listen_host, sizeof cfg->listen_host, "%s", host);
    cfg->listen_port = (int)port;
    return true;
}

static bool parse_rate(const char *v, int64_t *out)
{
    const char *slash = strchr(v, '/');
    if (!slash || strcmp(slash, "/s") != 0 || slash == v)
        return false;
    char num[32];
    size_t n = (size_t)(slash - v);
    if (n >= sizeof num)
        return false;
    memcpy(num, v, n);
    num[n] = '\0';
    return parse_int(num, out);
}

/* Applies one textual value. On failure writes the reason into err. */
static bool apply(const setting_t *s, const char *origin, const char *value, leased_config_t *cfg,
                  char *err, size_t errsz)
{
    void *field = (char *)cfg + s->offset;
    int64_t n = 0;
    switch (s->type) {
    case SETTING_STRING:
    case SETTING_SECRET:
    case SETTING_LISTEN: {
        if (s->type == SETTING_LISTEN && !parse_listen(value, cfg)) {
            snprintf(err, errsz,
                     "%s (%s): '%.80s' is not a numeric address and port, e.g. 127.0.0.1:8080 "
                     "or [::1]:8080",
                     s->name, origin, value);
            return false;
        }
        char *copy = strdup(value);
        if (!copy) {
            snprintf(err, errsz, "%s: out of memory", s->name);
            return false;
        }
        char **slot = field;
        if (*slot) {
            OPENSSL_cleanse(*slot, strlen(*slot));
            free(*slot);
        }
        *slot = copy;
        return true;
    }
    case SETTING_INT:
    case SETTING_RATE: {
        bool rate = s->type == SETTING_RATE;
        if (!(rate ? parse_rate(value, &n) : parse_int(value, &n)) || n < s->min || n > s->max) {
            snprintf(err, errsz, "%s (%s): '%.40s' is not %s in %lld..%lld", s->name, origin, value,
                     rate ? "<n>/s with n" : "an integer", (long long)s->min, (long long)s->max);
            return false;
        }
        *(int64_t *)field = n;
        return true;
    }
    case SETTING_LEVEL:
        if (!lease_log_parse_level(value, field)) {
            snprintf(err, errsz, "%s (%s): '%.40s' is not one of debug, info, warn, error", s->name,
                     origin, value);
            return false;
        }
        return true;
    case SETTING_FORMAT:
        if (!lease_log_parse_format(value, field)) {
            snprintf(err, errsz, "%s (%s): '%.40s' is not one of json, text", s->name, origin,
                     value);
            return false;
        }
        return true;
    case SETTING_BOOL:
        if (strcmp(value, "true") != 0 && strcmp(value, "false") != 0) {
            snprintf(err, errsz, "%s (%s): '%.40s' is not one of true, false", s->name, origin,
                     value);
            return false;
        }
        *(bool *)field = strcmp(value, "true") == 0;
        return true;
    }
    return false;
}

/* Secrets must not leak into error messages: their value is never echoed. */
static bool apply_checked(const setting_t *s, const char *origin, const char *value,
                          leased_config_t *cfg, char *err, size_t errsz)
{
    if (s->type == SETTING_SECRET && !*value && s->default_value == NULL) {
        snprintf(err, errsz, "%s (%s) is empty", s->name, origin);
        return false;
    }
    return apply(s, origin, value, cfg, err, errsz);
}

static const setting_t *find_flag(const char *arg, size_t len)
{
    for (size_t i = 0; i < N_SETTINGS; i++)
        if (strlen(settings[i].flag) == len && strncmp(settings[i].flag, arg, len) == 0)
            return &settings[i];
    return NULL;
}

static const char *env_lookup(char *const *envp, const char *name)
{
    if (!envp)
        return NULL;
    size_t n = strlen(name);
    for (char *const *e = envp; *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

static bool check_relations(const leased_config_t *cfg, char *err, size_t errsz)
{
    if (!cfg->database_url) {
        snprintf(err, errsz, "database url: set LEASE_DATABASE_URL or --database-url");
        return false;
    }
    if (cfg->default_deadline_ms > cfg->max_deadline_ms) {
        snprintf(err, errsz,
                 "default deadline (%lld ms) exceeds the maximum deadline (%lld ms): "
                 "LEASE_DEFAULT_DEADLINE_MS must be <= LEASE_MAX_DEADLINE_MS",
                 (long long)cfg->default_deadline_ms, (long long)cfg->max_deadline_ms);
        return false;
    }
    return true;
}

leased_config_status_t leased_config_load(leased_config_t *cfg, int argc, char *const *argv,
                                          char *const *envp, char *err, size_t errsz)
{
    memset(cfg, 0, sizeof *cfg);
    err[0] = '\0';
    for (size_t i = 0; i < N_SETTINGS; i++) {
        char buf[32];
        const char *def = default_text(&settings[i], buf, sizeof buf);
        if (def && !apply(&settings[i], "default", def, cfg, err, errsz))
            return LEASED_CONFIG_ERROR;
    }
    for (size_t i = 0; i < N_SETTINGS; i++) {
        const char *v = env_lookup(envp, settings[i].env);
        if (v && !apply_checked(&settings[i], settings[i].env, v, cfg, err, errsz))
            return LEASED_CONFIG_ERROR;
    }
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0)
            return LEASED_CONFIG_HELP;
        if (strcmp(arg, "--version") == 0)
            return LEASED_CONFIG_VERSION;
        const char *eq = strchr(arg, '=');
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        const setting_t *s = strncmp(arg, "--", 2) == 0 ? find_flag(arg, len) : NULL;
        if (!s) {
            snprintf(err, errsz, "unknown argument '%.*s' (see leased --help)",
                     (int)(len > 60 ? 60 : len), arg);
            return LEASED_CONFIG_ERROR;
        }
        const char *value = eq ? eq + 1 : NULL;
        if (!value) {
            if (a + 1 >= argc) {
                snprintf(err, errsz, "%s needs a value", s->flag);
                return LEASED_CONFIG_ERROR;
            }
            value = argv[++a];
        }
        if (!apply_checked(s, s->flag, value, cfg, err, errsz))
            return LEASED_CONFIG_ERROR;
    }
    return check_relations(cfg, err, errsz) ? LEASED_CONFIG_OK : LEASED_CONFIG_ERROR;
}

void leased_config_free(leased_config_t *cfg)
{
    if (!cfg)
        return;
    for (size_t i = 0; i < N_SETTINGS; i++) {
        const setting_t *s = &settings[i];
        if (s->type != SETTING_STRING && s->type != SETTING_SECRET && s->type != SETTING_LISTEN)
            continue;
        char **slot = (char **)((char *)cfg + s->offset);
        if (*slot) {
            OPENSSL_cleanse(*slot, strlen(*slot));
            free(*slot);
            *slot = NULL;
        }
    }
}

void leased_config_print_help(FILE *out)
{
    fprintf(out, "usage: leased [--SETTING VALUE | --SETTING=VALUE]... | --help | --version\n\n"
                 "The HTTP lease service. Every setting is an environment variable; the flag\n"
                 "of the same name in kebab-case wins over it. Exit status: 0 after a clean\n"
                 "shutdown (SIGTERM/SIGINT), 1 on a runtime failure, 2 on a bad setting.\n\n");
    fprintf(out, "%-28s %-26s %-16s %s\n", "environment", "flag", "default", "meaning");
    for (size_t i = 0; i < N_SETTINGS; i++) {
        leased_setting_info_t info;
        char buf[32];
        leased_config_setting(i, &info, buf, sizeof buf);
        const char *def = *info.default_text ? info.default_text : "(none)";
        fprintf(out, "%-28s %-26s %-16s %s\n", info.env, info.flag, def, info.help);
    }
}
