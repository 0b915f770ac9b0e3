/*
 * config.h - leased settings: one table, environment first, flags win.
 *
 * Every setting has an environment variable (LEASE_DB_POOL_SIZE) and a flag
 * of the same name in kebab-case (--db-pool-size 8 or --db-pool-size=8);
 * the flag wins. docs/config.md lists the same table with defaults, and
 * `leased --help` prints it from the table itself.
 */
#ifndef LEASED_CONFIG_H
#define LEASED_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lease/log.h"
#include "lease/result.h"
#include "lease/settings.h"
#include "trusted_proxies.h"

#define LEASED_LISTEN_HOST_MAX 64

typedef struct leased_config {
    char *database_url; /* secret-bearing: never logged */
    char *store_url;    /* LEASE_STORE_URL: redis:// or valkey:// ("" = PostgreSQL) */
    char *store_cacert; /* LEASE_STORE_CACERT: rediss://'s CA file ("": the system's) */
    char *store_cert;   /* LEASE_STORE_CERT, LEASE_STORE_KEY: rediss://'s client */
    char *store_key;    /* certificate and key ("": none) */
    char *listen;       /* "host:port" as given */
    char listen_host[LEASED_LISTEN_HOST_MAX + 1]; /* numeric IPv4/IPv6, no brackets */
    int listen_port;                              /* 0: any free port */
    char *metrics_listen;                         /* LEASE_METRICS_LISTEN; "" = none */
    char metrics_host[LEASED_LISTEN_HOST_MAX + 1];
    int metrics_port;
    int64_t db_pool_size;
    int64_t db_connect_timeout_ms;
    int64_t valkey_min_replicas; /* LEASE_VALKEY_MIN_REPLICAS: WAIT after each write (0: none) */
    int64_t valkey_combine_calls; /* LEASE_VALKEY_COMBINE_CALLS: lease calls in flight at once */
    int64_t valkey_combine_items; /* LEASE_VALKEY_COMBINE_ITEMS: requests a call (1: none combined) */
    bool db_prepared_statements; /* prepare the typed calls on direct sessions */
    int64_t http_threads;
    int64_t max_connections;
    int64_t max_connections_per_source; /* per client address, per instance */
    char *trusted_proxies;              /* LEASE_TRUSTED_PROXIES as given */
    leased_trusted_proxies_t trusted;   /* ... parsed */
    int64_t receive_timeout_ms;         /* first byte .. last byte of a request */
    int64_t idle_timeout_ms;
    int64_t default_deadline_ms;
    int64_t max_deadline_ms;
    int64_t max_wait_ms;
    int64_t rate_limit_per_s; /* tokens per second and burst, per credential */
    int64_t max_inflight;
    int64_t max_inflight_per_credential;
    int64_t max_inflight_per_tenant;
    int64_t max_queued_per_flow;        /* requests of one flow waiting for a worker */
    int64_t max_queue_wait_ms;          /* longest wait for a worker before 429 */
    int64_t max_waiting_per_credential; /* acquires with wait_ms in flight */
    int64_t max_waiting_per_tenant;
    int64_t source_rate_limit_per_s;  /* per client address, before authentication */
    int64_t auth_failure_limit_per_s; /* failed authentications per client address */
    int64_t auth_audit_window_ms;
    lease_log_level_t log_level;
    lease_log_format_t log_format;
    char *token_pepper; /* secret: never logged; "" when unset */
    int64_t credential_cache_ms;
    int64_t sweep_interval_ms;
    int64_t sweep_batch;
    int64_t health_interval_ms;
    int64_t audit_queue_size;
    int64_t audit_batch;
    int64_t drain_delay_ms;
    int64_t shutdown_grace_ms;
    char *watch_database_url; /* secret-bearing; "" = database_url */
    bool watch_listen;
    int64_t watch_poll_ms;
    int64_t watch_max_wait_ms;
    int64_t max_watches;
} leased_config_t;

typedef enum leased_config_status {
    LEASED_CONFIG_OK = LEASE_SETTINGS_OK,           /* cfg is filled */
    LEASED_CONFIG_HELP = LEASE_SETTINGS_HELP,       /* --help was asked for */
    LEASED_CONFIG_VERSION = LEASE_SETTINGS_VERSION, /* --version was asked for */
    LEASED_CONFIG_ERROR = LEASE_SETTINGS_ERROR,     /* err holds one line naming the setting */
} leased_config_status_t;

/*
 * Fills cfg from defaults, then envp ("NAME=value", NULL-terminated; may be
 * NULL), then argv[1..]. On LEASED_CONFIG_ERROR, err names the offending
 * setting and value rule; cfg must still be released with
 * leased_config_free. Values that carry secrets are never copied into err.
 */
LEASE_MUST_USE leased_config_status_t leased_config_load(leased_config_t *cfg, int argc,
                                                         char *const *argv, char *const *envp,
                                                         char *err, size_t errsz);

/* Releases the strings of cfg, wiping secrets; accepts NULL. */
void leased_config_free(leased_config_t *cfg);

/* Prints usage and the settings table with defaults (leased --help). */
void leased_config_print_help(FILE *out);

/* One row of the settings table, for docs checks and --help. */
typedef lease_setting_info_t leased_setting_info_t;

size_t leased_config_setting_count(void);
/* Row i (i < leased_config_setting_count()); default_text is "(required)",
 * "(none)" or the value, computed into default_buf for defaults that depend
 * on the machine (number of cores). */
void leased_config_setting(size_t i, leased_setting_info_t *out, char *default_buf,
                           size_t default_bufsz);

#endif
