/*
 * relay_config.h - leased-relay settings: one table, environment first,
 * flags win (the same rules as leased's, docs/config.md).
 *
 * docs/relay.md lists the same table with defaults (a unit test keeps them
 * equal) and `leased-relay --help` prints it from the table itself.
 */
#ifndef LEASE_RELAY_CONFIG_H
#define LEASE_RELAY_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lease/log.h"
#include "lease/result.h"
#include "lease/settings.h"

#define RELAY_LISTEN_HOST_MAX 64

typedef struct relay_config {
    char *database_url; /* secret-bearing: never logged */
    char *amqp_url;     /* secret-bearing: never logged */
    char *amqp_cacert;  /* amqps: CA file; "" the system's CAs */
    char *amqp_cert;    /* amqps: client certificate file, or "" */
    char *amqp_key;     /* amqps: its private key file, or "" */
    char *exchange;     /* default exchange; routing key = topic */
    char *routes;       /* topic routes (relay_routes.h); "" none */
    bool declare_exchanges;
    char *couchdb_url; /* secret-bearing; "" when no CouchDB route */
    int64_t batch_size;
    int64_t poll_interval_ms;
    int64_t confirm_timeout_ms;
    int64_t backoff_min_ms;
    int64_t backoff_max_ms;
    int64_t retry_delay_ms;
    int64_t max_message_bytes; /* the broker's max_message_size: bigger rows are quarantined */
    char *metrics_listen;      /* "host:port" or "off" */
    bool metrics_enabled;
    char metrics_host[RELAY_LISTEN_HOST_MAX + 1];
    int metrics_port;
    int64_t lag_interval_ms;
    int64_t purge_after_ms; /* 0: keep published rows */
    char *instance_id;      /* "" until loaded: host name and pid */
    lease_log_level_t log_level;
    lease_log_format_t log_format;
    bool once; /* --once: deliver what is there, then exit */
} relay_config_t;

typedef enum relay_config_status {
    RELAY_CONFIG_OK = LEASE_SETTINGS_OK,           /* cfg is filled */
    RELAY_CONFIG_HELP = LEASE_SETTINGS_HELP,       /* --help */
    RELAY_CONFIG_VERSION = LEASE_SETTINGS_VERSION, /* --version */
    RELAY_CONFIG_ERROR = LEASE_SETTINGS_ERROR,     /* err names the setting */
} relay_config_status_t;

/*
 * Fills cfg from defaults, then envp ("NAME=value", NULL-terminated; may be
 * NULL), then argv[1..]. Secret values are never copied into err. cfg must
 * be released with relay_config_free whatever the status.
 */
LEASE_MUST_USE relay_config_status_t relay_config_load(relay_config_t *cfg, int argc,
                                                       char *const *argv, char *const *envp,
                                                       char *err, size_t errsz);
/* Releases the strings of cfg, wiping secrets; accepts NULL. */
void relay_config_free(relay_config_t *cfg);
/* leased-relay --help: usage and the settings table with defaults. */
void relay_config_print_help(FILE *out);

/* One row of the settings table, for the docs check and --help;
 * default_text is "(required)", "(none)", "(host-pid)" or the value. */
typedef lease_setting_info_t relay_setting_info_t;

size_t relay_config_setting_count(void);
void relay_config_setting(size_t i, relay_setting_info_t *out);

#endif
