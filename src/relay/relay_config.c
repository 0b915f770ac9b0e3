/*
 * relay_config.c - the one table of leased-relay settings.
 *
 * Each row: setting name, environment variable, flag, type, default, bounds,
 * where the value lands in relay_config_t, and a help line. The parser is
 * core's (lease/settings.h, shared with leased): defaults first, then the
 * environment, then flags. A bad value is an error naming the
 * setting; leased-relay exits 2 on it. --once is a flag only (a mode of one
 * run, not a setting of a deployment).
 */
#include "relay_config.h"

#include <ctype.h>
#include <string.h>
#include <unistd.h>

#include "lease/identity.h"

#define AT(member) offsetof(relay_config_t, member)
#define MS_DAY (INT64_C(24) * 3600 * 1000)

/* host:port with a numeric IPv4 address, or [IPv6]:port; "off". */
static bool check_metrics_listen(const char *value, void *cfg)
{
    relay_config_t *c = cfg;
    if (strcmp(value, "off") == 0) {
        c->metrics_enabled = false;
        return true;
    }
    if (!lease_settings_parse_listen(value, c->metrics_host, sizeof c->metrics_host,
                                     &c->metrics_port))
        return false;
    c->metrics_enabled = true;
    return true;
}

/* Empty: host-pid, filled in after loading. */
static bool check_instance_id(const char *value, void *cfg)
{
    (void)cfg;
    return !*value || lease_id_valid(value);
}

static bool once_switch(const char *arg, void *cfg)
{
    if (strcmp(arg, "--once") != 0)
        return false;
    ((relay_config_t *)cfg)->once = true;
    return true;
}

/* One row is one setting: kept compact by hand. */
/* clang-format off */
static const lease_setting_t settings[] = {
    {.name = "database url", .env = "LEASE_DATABASE_URL", .flag = "--database-url",
     .type = LEASE_SETTING_SECRET, .offset = AT(database_url),
     .help = "libpq connection string or URI of a member of lease_relay (required)"},
    {.name = "AMQP url", .env = "LEASE_RELAY_AMQP_URL", .flag = "--amqp-url",
     .type = LEASE_SETTING_SECRET, .default_value = "amqp://guest:guest@127.0.0.1:5672/",
     .offset = AT(amqp_url),
     .help = "RabbitMQ: amqp:// or amqps://user:password@host:port/vhost"},
    {.name = "AMQP CA file", .env = "LEASE_RELAY_AMQP_CACERT", .flag = "--amqp-cacert",
     .type = LEASE_SETTING_STRING, .default_value = "", .offset = AT(amqp_cacert),
     .empty_default_text = "(system CAs)",
     .help = "amqps://: PEM file of the CAs that sign the broker's certificate"},
    {.name = "AMQP client certificate", .env = "LEASE_RELAY_AMQP_CERT", .flag = "--amqp-cert",
     .type = LEASE_SETTING_STRING, .default_value = "", .offset = AT(amqp_cert),
     .help = "amqps://: PEM client certificate for a broker that asks for one"},
    {.name = "AMQP client key", .env = "LEASE_RELAY_AMQP_KEY", .flag = "--amqp-key",
     .type = LEASE_SETTING_STRING, .default_value = "", .offset = AT(amqp_key),
     .help = "amqps://: PEM private key of LEASE_RELAY_AMQP_CERT"},
    {.name = "exchange", .env = "LEASE_RELAY_EXCHANGE", .flag = "--exchange",
     .type = LEASE_SETTING_STRING, .default_value = "leased.outbox", .offset = AT(exchange),
     .help = "exchange of topics no route names; the routing key is the topic"},
    {.name = "routes", .env = "LEASE_RELAY_ROUTES", .flag = "--routes",
     .type = LEASE_SETTING_STRING, .default_value = "", .offset = AT(routes),
     .help = "topic routes: PATTERN=amqp:EXCHANGE[/KEY] or PATTERN=couchdb:DB, comma-separated"},
    {.name = "declare exchanges", .env = "LEASE_RELAY_DECLARE_EXCHANGES",
     .flag = "--declare-exchanges", .type = LEASE_SETTING_BOOL, .default_value = "true",
     .offset = AT(declare_exchanges), .expect = "true or false",
     .help = "declare the exchanges as durable topic exchanges (false: they must exist)"},
    {.name = "CouchDB url", .env = "LEASE_RELAY_COUCHDB_URL", .flag = "--couchdb-url",
     .type = LEASE_SETTING_SECRET, .default_value = "", .offset = AT(couchdb_url),
     .help = "CouchDB server for couchdb: routes, http://user:password@host:5984"},
    {.name = "batch size", .env = "LEASE_RELAY_BATCH_SIZE", .flag = "--batch-size",
     .type = LEASE_SETTING_INT, .default_value = "500", .min = 1, .max = 10000,
     .offset = AT(batch_size),
     .help = "rows claimed, published and confirmed per transaction"},
    {.name = "poll interval", .env = "LEASE_RELAY_POLL_INTERVAL_MS", .flag = "--poll-interval-ms",
     .type = LEASE_SETTING_INT, .default_value = "100", .min = 1, .max = 60000,
     .offset = AT(poll_interval_ms),
     .help = "pause after a claim found nothing, ms"},
    {.name = "confirm timeout", .env = "LEASE_RELAY_CONFIRM_TIMEOUT_MS",
     .flag = "--confirm-timeout-ms", .type = LEASE_SETTING_INT, .default_value = "10000",
     .min = 100, .max = 600000, .offset = AT(confirm_timeout_ms),
     .help = "bound on waiting for the broker's confirms of a batch (and on one CouchDB call), ms"},
    {.name = "backoff minimum", .env = "LEASE_RELAY_BACKOFF_MIN_MS", .flag = "--backoff-min-ms",
     .type = LEASE_SETTING_INT, .default_value = "100", .min = 1, .max = 600000,
     .offset = AT(backoff_min_ms),
     .help = "first pause after the broker or database failed, ms"},
    {.name = "backoff maximum", .env = "LEASE_RELAY_BACKOFF_MAX_MS", .flag = "--backoff-max-ms",
     .type = LEASE_SETTING_INT, .default_value = "10000", .min = 1, .max = 3600000,
     .offset = AT(backoff_max_ms),
     .help = "cap on the doubling pause while they stay down, ms"},
    {.name = "retry delay", .env = "LEASE_RELAY_RETRY_DELAY_MS", .flag = "--retry-delay-ms",
     .type = LEASE_SETTING_INT, .default_value = "5000", .min = 0, .max = MS_DAY,
     .offset = AT(retry_delay_ms),
     .help = "first wait before a row the destination refused is tried again (doubles), ms"},
    {.name = "max message bytes", .env = "LEASE_RELAY_MAX_MESSAGE_BYTES",
     .flag = "--max-message-bytes", .type = LEASE_SETTING_INT, .default_value = "134217728",
     .min = 1024, .max = 536870912, .offset = AT(max_message_bytes),
     .help = "the broker's max_message_size: a larger payload is quarantined, never published"},
    {.name = "metrics listen", .env = "LEASE_RELAY_METRICS_LISTEN", .flag = "--metrics-listen",
     .type = LEASE_SETTING_STRING, .default_value = "127.0.0.1:8081", .offset = AT(metrics_listen),
     .check = check_metrics_listen,
     .expect = "off or a numeric address and port, e.g. 127.0.0.1:8081",
     .help = "address of GET /metrics and /healthz (port 0: any free port; off: none)"},
    {.name = "lag interval", .env = "LEASE_RELAY_LAG_INTERVAL_MS", .flag = "--lag-interval-ms",
     .type = LEASE_SETTING_INT, .default_value = "1000", .min = 100, .max = 3600000,
     .offset = AT(lag_interval_ms),
     .help = "period of the lag query behind relay_lag_*, ms"},
    {.name = "purge after", .env = "LEASE_RELAY_PURGE_AFTER_MS", .flag = "--purge-after-ms",
     .type = LEASE_SETTING_INT, .default_value = "604800000", .min = 0,
     .max = INT64_C(3650) * MS_DAY, .offset = AT(purge_after_ms),
     .help = "delete published rows older than this, ms (0: keep them)"},
    {.name = "instance id", .env = "LEASE_RELAY_INSTANCE_ID", .flag = "--instance-id",
     .type = LEASE_SETTING_STRING, .default_value = "", .offset = AT(instance_id),
     .check = check_instance_id, .expect = "1..128 of [A-Za-z0-9._:-]",
     .empty_default_text = "(host-pid)",
     .help = "name in logs, published_by and the session (default: host-pid)"},
    LEASE_SETTINGS_LOG_ROWS(relay_config_t, log_level, log_format),
};
/* clang-format on */

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
    return lease_settings_set_string(&cfg->instance_id, id);
}

/* The database url's presence is checked by the parser (no default). */
static bool check_relations(void *config, char *err, size_t errsz)
{
    relay_config_t *cfg = config;
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

static const lease_settings_t table = {
    .rows = settings,
    .n = sizeof settings / sizeof settings[0],
    .cfg_size = sizeof(relay_config_t),
    .program = "leased-relay",
    .usage = "usage: leased-relay [--once] [--SETTING VALUE | --SETTING=VALUE]... | --help | "
             "--version\n\n"
             "Delivers the outbox of leased (rows of lease.outbox written by fenced commits)\n"
             "to RabbitMQ with publisher confirms, and to CouchDB for couchdb: routes; marks a\n"
             "row published only after the destination confirmed it (docs/relay.md).\n"
             "--once delivers what can be delivered now, then exits. Every setting is an\n"
             "environment variable; the flag of the same name wins over it. Exit status: 0\n"
             "after SIGTERM/SIGINT (the batch in flight is finished) or --once, 1 on a runtime\n"
             "failure, 2 on a bad setting.\n\n",
    .help_widths = {32, 24, 36},
    .switch_arg = once_switch,
    .check_relations = check_relations,
};

size_t relay_config_setting_count(void)
{
    return table.n;
}

void relay_config_setting(size_t i, relay_setting_info_t *out)
{
    lease_settings_info(&table, i, out, NULL, 0); /* no computed defaults */
}

relay_config_status_t relay_config_load(relay_config_t *cfg, int argc, char *const *argv,
                                        char *const *envp, char *err, size_t errsz)
{
    /* the same values (relay_config.h) */
    return (relay_config_status_t)lease_settings_load(&table, cfg, argc, argv, envp, err, errsz);
}

void relay_config_free(relay_config_t *cfg)
{
    lease_settings_free(&table, cfg);
}

void relay_config_print_help(FILE *out)
{
    lease_settings_print_help(&table, out);
}
