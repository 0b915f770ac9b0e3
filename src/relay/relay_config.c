/*
 * relay_config.c - the one table of leased-relay settings and its parser.
 *
 * Each row: setting name, environment variable, flag, type, default, bounds,
 * where the value lands in relay_config_t, and a help line. Defaults first,
 * then the environment, then flags. A bad value is an error naming the
 * setting; leased-relay exits 2 on it. --once is a flag only (a mode of one
 * run, not a setting of a deployment).
 */
#include "relay_config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "lease/identity.h"

typedef enum setting_type {
    SETTING_STRING, /* char *, copied */
    SETTING_SECRET, /* char *, copied, wiped on free, never echoed */
    SETTING_INT,    /* int64_t within [min, max] */
    SETTING_BOOL,   /* true|false */
    SETTING_LISTEN, /* host:port or "off" */
    SETTING_ID,     /* an identifier of [A-Za-z0-9._:-], 1..128 */
    SETTING_LEVEL,  /* debug|info|warn|error */
    SETTING_FORMAT, /* json|text */
} setting_type_t;

typedef struct setting {
    const char *name;
    const char *env;
    const char *flag;
    setting_type_t type;
    const char *default_value; /* NULL: required */
    int64_t min, max;
    size_t offset;
    const char *help;
} setting_t;

#define AT(member) offsetof(relay_config_t, member)
#define MS_DAY (INT64_C(24) * 3600 * 1000)

static const setting_t settings[] = {
    {"database url", "LEASE_DATABASE_URL", "--database-url", SETTING_SECRET, NULL, 0, 0,
     AT(database_url), "libpq connection string or URI of a member of lease_relay (required)"},
    {"AMQP url", "LEASE_RELAY_AMQP_URL", "--amqp-url", SETTING_SECRET,
     "amqp://guest:guest@127.0.0.1:5672/", 0, 0, AT(amqp_url),
     "RabbitMQ: amqp://user:password@host:port/vhost"},
    {"exchange", "LEASE_RELAY_EXCHANGE", "--exchange", SETTING_STRING, "leased.outbox", 0, 0,
     AT(exchange), "exchange of topics no route names; the routing key is the topic"},
    {"routes", "LEASE_RELAY_ROUTES", "--routes", SETTING_STRING, "", 0, 0, AT(routes),
     "topic routes: PATTERN=amqp:EXCHANGE[/KEY] or PATTERN=couchdb:DB, comma-separated"},
    {"declare exchanges", "LEASE_RELAY_DECLARE_EXCHANGES", "--declare-exchanges", SETTING_BOOL,
     "true", 0, 0, AT(declare_exchanges),
     "declare the exchanges as durable topic exchanges (false: they must exist)"},
    {"CouchDB url", "LEASE_RELAY_COUCHDB_URL", "--couchdb-url", SETTING_SECRET, "", 0, 0,
     AT(couchdb_url), "CouchDB server for couchdb: routes, http://user:password@host:5984"},
    {"batch size", "LEASE_RELAY_BATCH_SIZE", "--batch-size", SETTING_INT, "500", 1, 10000,
     AT(batch_size), "rows claimed, published and confirmed per transaction"},
    {"poll interval", "LEASE_RELAY_POLL_INTERVAL_MS", "--poll-interval-ms", SETTING_INT, "100", 1,
     60000, AT(poll_interval_ms), "pause after a claim found nothing, ms"},
    {"confirm timeout", "LEASE_RELAY_CONFIRM_TIMEOUT_MS", "--confirm-timeout-ms", SETTING_INT,
     "10000", 100, 600000, AT(confirm_timeout_ms),
     "bound on waiting for the broker's confirms of a batch (and on one CouchDB call), ms"},
    {"backoff minimum", "LEASE_RELAY_BACKOFF_MIN_MS", "--backoff-min-ms", SETTING_INT, "100", 1,
     600000, AT(backoff_min_ms), "first pause after the broker or database failed, ms"},
    {"backoff maximum", "LEASE_RELAY_BACKOFF_MAX_MS", "--backoff-max-ms", SETTING_INT, "10000", 1,
     3600000, AT(backoff_max_ms), "cap on the doubling pause while they stay down, ms"},
    {"retry delay", "LEASE_RELAY_RETRY_DELAY_MS", "--retry-delay-ms", SETTING_INT, "5000", 0,
     MS_DAY, AT(retry_delay_ms),
     "first wait before a row the destination refused is tried again (doubles), ms"},
    {"metrics listen", "LEASE_RELAY_METRICS_LISTEN", "--metrics-listen", SETTING_LISTEN,
     "127.0.0.1:8081", 0, 0, AT(metrics_listen),
     "address of GET /metrics and /healthz (port 0: any free port; off: none)"},
    {"lag interval", "LEASE_RELAY_LAG_INTERVAL_MS", "--lag-interval-ms", SETTING_INT, "1000", 100,
     3600000, AT(lag_interval_ms), "period of the lag query behind relay_lag_*, ms"},
    {"purge after", "LEASE_RELAY_PURGE_AFTER_MS", "--purge-after-ms", SETTING_INT, "604800000", 0,
     INT64_C(3650) * MS_DAY, AT(purge_after_ms),
     "delete published rows older than this, ms (0: keep them)"},
    {"instance id", "LEASE_RELAY_INSTANCE_ID", "--instance-id", SETTING_ID, "", 0, 0,
     AT(instance_id), "name in logs, published_by and the session (default: host-pid)"},
    {"log level", "LEASE_LOG_LEVEL", "--log-level", SETTING_LEVEL, "info", 0, 0, AT(log_level),
     "debug, info, warn or error"},
    {"log format", "LEASE_LOG_FORMAT", "--log-format", SETTING_FORMAT, "json", 0, 0, AT(log_format),
     "json or text"},
};

#define N_SETTINGS (sizeof settings / sizeof settings[0])

size_t relay_config_setting_count(void)
{
    return N_SETTINGS;
}

void relay_config_setting(size_t i, relay_setting_info_t *out)
{
    const setting_t *s = &settings[i];
    out->env = s->env;
    out->flag = s->flag;
    out->help = s->help;
    if (!s->default_value)
        out->default_text = "(required)";
    else if (!*s->default_value)
        out->default_text = s->type == SETTING_ID ? "(host-pid)" : "(none)";
    else
        out->default_text = s->default_value;
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

/* host:port with a numeric IPv4 address, or [IPv6]:port; "off". */
static bool parse_listen(const char *v, relay_config_t *cfg)
{
    if (strcmp(v, "off") == 0) {
        cfg->metrics_enabled = false;
        return true;
    }
    const char *colon;
    char host[RELAY_LISTEN_HOST_MAX + 1];
    if (v[0] == '[') {
        const char *close = strchr(v, ']');
        if (!close || close[1] != ':' || (size_t)(close - v - 1) > RELAY_LISTEN_HOST_MAX)
            return false;
        memcpy(host, v + 1, (size_t)(close - v - 1));
        host[close - v - 1] = '\0';
        colon = close + 1;
        struct in6_addr a6;
        if (inet_pton(AF_INET6, host, &a6) != 1)
            return false;
    } else {
        colon = strrchr(v, ':');
        if (!colon || (size_t)(colon - v) > RELAY_LISTEN_HOST_MAX)
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
    snprintf(cfg->metrics_host, sizeof cfg->metrics_host, "%s", host);
    cfg->metrics_port = (int)port;
    cfg->metrics_enabled = true;
    return true;
}

static bool set_string(char **slot, const char *value)
{
    char *copy = strdup(value);
    if (!copy)
        return false;
    if (*slot) {
        OPENSSL_cleanse(*slot, strlen(*slot));
        free(*slot);
    }
    *slot = copy;
    return true;
}

static bool apply(const setting_t *s, const char *origin, const char *value, relay_config_t *cfg,
                  char *err, size_t errsz)
{
    void *field = (char *)cfg + s->offset;
    int64_t n = 0;
    switch (s->type) {
    case SETTING_LISTEN:
        if (!parse_listen(value, cfg)) {
            snprintf(err, errsz,
                     "%s (%s): '%.80s' is not off or a numeric address and port, e.g. "
                     "127.0.0.1:8081",
                     s->name, origin, value);
            return false;
        }
        break;
    case SETTING_ID:
        if (*value && !lease_id_valid(value)) {
            snprintf(err, errsz, "%s (%s): '%.80s' is not 1..128 of [A-Za-z0-9._:-]", s->name,
                     origin, value);
            return false;
        }
        break;
    case SETTING_STRING:
    case SETTING_SECRET:
        break;
    case SETTING_INT:
        if (!parse_int(value, &n) || n < s->min || n > s->max) {
            snprintf(err, errsz, "%s (%s): '%.40s' is not an integer in %lld..%lld", s->name,
                     origin, value, (long long)s->min, (long long)s->max);
            return false;
        }
        *(int64_t *)field = n;
        return true;
    case SETTING_BOOL:
        if (strcmp(value, "true") != 0 && strcmp(value, "false") != 0) {
            snprintf(err, errsz, "%s (%s): '%.40s' is not true or false", s->name, origin, value);
            return false;
        }
        *(bool *)field = strcmp(value, "true") == 0;
        return true;
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
    }
    if (!set_string(field, value)) {
        snprintf(err, errsz, "%s: out of memory", s->name);
        return false;
    }
    return true;
}

static bool apply_checked(const setting_t *s, const char *origin, const char *value,
                          relay_config_t *cfg, char *err, size_t errsz)
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

/* "<hostname>-<pid>", characters outside [A-Za-z0-9._:-] replaced. */
static bool default_instance(relay_config_t *cfg)
{
    char host[64] = "relay";
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "relay");
    host[sizeof host - 1] = '\0';
    char id[LEASE_ID_MAX + 1];
    snprintf(id, sizeof id, "%s-%ld", host, (long)getpid());
    for (char *c = id; *c; c++)
        if (!isalnum((unsigned char)*c) && !strchr("._:-", *c))
            *c = '-';
    return set_string(&cfg->instance_id, id);
}

static bool check_relations(relay_config_t *cfg, char *err, size_t errsz)
{
    if (!cfg->database_url) {
        snprintf(err, errsz, "database url: set LEASE_DATABASE_URL or --database-url");
        return false;
    }
    if (cfg->backoff_min_ms > cfg->backoff_max_ms) {
        snprintf(err, errsz,
                 "backoff minimum (%lld ms) exceeds the backoff maximum (%lld ms): "
                 "LEASE_RELAY_BACKOFF_MIN_MS must be <= LEASE_RELAY_BACKOFF_MAX_MS",
                 (long long)cfg->backoff_min_ms, (long long)cfg->backoff_max_ms);
        return false;
    }
    if (!*cfg->instance_id && !default_instance(cfg)) {
        snprintf(err, errsz, "instance id: out of memory");
        return false;
    }
    return true;
}

relay_config_status_t relay_config_load(relay_config_t *cfg, int argc, char *const *argv,
                                        char *const *envp, char *err, size_t errsz)
{
    memset(cfg, 0, sizeof *cfg);
    err[0] = '\0';
    for (size_t i = 0; i < N_SETTINGS; i++)
        if (settings[i].default_value &&
            !apply(&settings[i], "default", settings[i].default_value, cfg, err, errsz))
            return RELAY_CONFIG_ERROR;
    for (size_t i = 0; i < N_SETTINGS; i++) {
        const char *v = env_lookup(envp, settings[i].env);
        if (v && !apply_checked(&settings[i], settings[i].env, v, cfg, err, errsz))
            return RELAY_CONFIG_ERROR;
    }
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0)
            return RELAY_CONFIG_HELP;
        if (strcmp(arg, "--version") == 0)
            return RELAY_CONFIG_VERSION;
        if (strcmp(arg, "--once") == 0) {
            cfg->once = true;
            continue;
        }
        const char *eq = strchr(arg, '=');
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        const setting_t *s = strncmp(arg, "--", 2) == 0 ? find_flag(arg, len) : NULL;
        if (!s) {
            snprintf(err, errsz, "unknown argument '%.*s' (see leased-relay --help)",
                     (int)(len > 60 ? 60 : len), arg);
            return RELAY_CONFIG_ERROR;
        }
        const char *value = eq ? eq + 1 : NULL;
        if (!value) {
            if (a + 1 >= argc) {
                snprintf(err, errsz, "%s needs a value", s->flag);
                return RELAY_CONFIG_ERROR;
            }
            value = argv[++a];
        }
        if (!apply_checked(s, s->flag, value, cfg, err, errsz))
            return RELAY_CONFIG_ERROR;
    }
    return check_relations(cfg, err, errsz) ? RELAY_CONFIG_OK : RELAY_CONFIG_ERROR;
}

void relay_config_free(relay_config_t *cfg)
{
    if (!cfg)
        return;
    for (size_t i = 0; i < N_SETTINGS; i++) {
        const setting_t *s = &settings[i];
        if (s->type != SETTING_STRING && s->type != SETTING_SECRET && s->type != SETTING_LISTEN &&
            s->type != SETTING_ID)
            continue;
        char **slot = (char **)((char *)cfg + s->offset);
        if (*slot) {
            OPENSSL_cleanse(*slot, strlen(*slot));
            free(*slot);
            *slot = NULL;
        }
    }
}

void relay_config_print_help(FILE *out)
{
    fprintf(out,
            "usage: leased-relay [--once] [--SETTING VALUE | --SETTING=VALUE]... | --help | "
            "--version\n\n"
            "Delivers the outbox of leased (rows of lease.outbox written by fenced commits)\n"
            "to RabbitMQ with publisher confirms, and to CouchDB for couchdb: routes; marks a\n"
            "row published only after the destination confirmed it (docs/relay.md).\n"
            "--once delivers what can be delivered now, then exits. Every setting is an\n"
            "environment variable; the flag of the same name wins over it. Exit status: 0\n"
            "after SIGTERM/SIGINT (the batch in flight is finished) or --once, 1 on a runtime\n"
            "failure, 2 on a bad setting.\n\n");
    fprintf(out, "%-32s %-24s %-36s %s\n", "environment", "flag", "default", "meaning");
    for (size_t i = 0; i < N_SETTINGS; i++) {
        relay_setting_info_t info;
        relay_config_setting(i, &info);
        fprintf(out, "%-32s %-24s %-36s %s\n", info.env, info.flag, info.default_text, info.help);
    }
}
