/*
 * leased_relay_main.c - the leased-relay program: settings, metrics
 * endpoint, signals, the delivery loop, exit codes.
 *
 * Exit status: 0 after SIGTERM/SIGINT (the batch in flight is finished and
 * recorded first) or after --once delivered what it could; 1 on a runtime
 * failure (cannot listen; --once could not reach the database or broker);
 * 2 on a bad setting or argument.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <curl/curl.h>

#include "lease/log.h"
#include "lease/schema.h"
#include "relay.h"
#include "relay_config.h"
#include "relay_http.h"
#include "relay_metrics.h"

#define RELAY_VERSION "0.1.0"

extern char **environ;

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

/* No SA_RESTART: a blocking wait returns EINTR and the loop sees the flag
 * within one of its bounded waits. */
static void install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

int main(int argc, char **argv)
{
    static relay_config_t cfg;
    static relay_metrics_t metrics;
    char err[512];
    switch (relay_config_load(&cfg, argc, argv, environ, err, sizeof err)) {
    case RELAY_CONFIG_OK:
        break;
    case RELAY_CONFIG_HELP:
        relay_config_print_help(stdout);
        relay_config_free(&cfg);
        return LEASE_EXIT_OK;
    case RELAY_CONFIG_VERSION:
        printf("leased-relay %s (schema %d)\n", RELAY_VERSION, LEASE_SCHEMA_VERSION);
        relay_config_free(&cfg);
        return LEASE_EXIT_OK;
    case RELAY_CONFIG_ERROR:
        fprintf(stderr, "leased-relay: %s\n", err);
        relay_config_free(&cfg);
        return LEASE_EXIT_USAGE;
    }
    lease_log_init(cfg.log_level, cfg.log_format);
    install_signals();
    curl_global_init(CURL_GLOBAL_DEFAULT);

    int status = LEASE_EXIT_FAILURE;
    relay_http_t *http = NULL;
    relay_t *relay = relay_new(&cfg, &metrics, err, sizeof err);
    if (!relay) {
        /* a bad route or URL is a setting error, caught before anything runs */
        fprintf(stderr, "leased-relay: %s\n", err);
        status = LEASE_EXIT_USAGE;
        goto done;
    }
    if (cfg.metrics_enabled) {
        http = relay_http_start(cfg.metrics_host, cfg.metrics_port, &metrics, err, sizeof err);
        if (!http) {
            LOG_ERROR("cannot start: %s", err);
            goto done;
        }
        LOG_INFO("metrics on %s%s%s:%d", strchr(cfg.metrics_host, ':') ? "[" : "", cfg.metrics_host,
                 strchr(cfg.metrics_host, ':') ? "]" : "", relay_http_port(http));
    }
    status = relay_run(relay, &stop_requested);
done:
    relay_http_stop(http);
    relay_free(relay);
    relay_config_free(&cfg);
    curl_global_cleanup();
    return status;
}
