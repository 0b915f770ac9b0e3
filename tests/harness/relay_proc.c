/*
 * relay_proc.c - start, probe and stop a real leased-relay for tests.
 */
#include "relay_proc.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child_proc.h"
#include "http_client.h"
#include "testbroker.h"
#include "testpg.h"

struct relay_proc {
    child_daemon_t d;
    int port;
    char url[64];
};

char *relay_proc_log(const relay_proc_t *p)
{
    return child_proc_read_file(p->d.log_path);
}

void relay_proc_dump_log(const relay_proc_t *p)
{
    child_daemon_dump_log(&p->d);
}

static void die(const relay_proc_t *p, const char *what)
{
    fprintf(stderr, "relay_proc: %s\n", what);
    if (p)
        relay_proc_dump_log(p);
    exit(1);
}

/* The port of the "metrics on HOST:PORT" log line. */
static int find_port(const char *log)
{
    const char *at = strstr(log, "metrics on ");
    if (!at)
        return -1;
    const char *end = strchr(at, '"');
    const char *colon = NULL;
    for (const char *c = at; *c && (!end || c < end); c++)
        if (*c == ':')
            colon = c;
    return colon ? atoi(colon + 1) : -1;
}

char *relay_proc_db_url(const char *db_url)
{
    return testpg_url_as(db_url, "leased_relay_app");
}

/* The settings every test relay gets unless extra names them. */
static char **relay_env(const char *db_url, const char *const *extra, char *db_setting,
                        size_t db_setting_sz, char *amqp_setting, size_t amqp_setting_sz)
{
    const char *defaults[8];
    size_t n = 0;
    if (db_url) {
        char *relay_url = relay_proc_db_url(db_url);
        snprintf(db_setting, db_setting_sz, "LEASE_DATABASE_URL=%s", relay_url);
        free(relay_url);
        defaults[n++] = db_setting;
    }
    if (db_url) { /* a run that delivers: the fixture's broker (unit tests have none) */
        snprintf(amqp_setting, amqp_setting_sz, "LEASE_RELAY_AMQP_URL=%s", testbroker_url());
        defaults[n++] = amqp_setting;
    }
    defaults[n++] = "LEASE_RELAY_METRICS_LISTEN=127.0.0.1:0";
    defaults[n++] = "LEASE_LOG_LEVEL=debug";
    defaults[n++] = "LEASE_RELAY_LAG_INTERVAL_MS=100";
    defaults[n++] = "LEASE_RELAY_BACKOFF_MAX_MS=1000";
    defaults[n] = NULL;
    return child_proc_env(extra, defaults);
}

relay_proc_t *relay_proc_start(const char *db_url, const char *const *extra_env)
{
    relay_proc_t *p = calloc(1, sizeof *p);
    child_daemon_init(&p->d, "leased-relay", "leased-relay-test", "relay.log");
    char db_setting[1200], amqp_setting[600];
    char **env = relay_env(db_url, extra_env, db_setting, sizeof db_setting, amqp_setting,
                           sizeof amqp_setting);
    char *argv[] = {strdup(LEASE_TEST_RELAY), NULL};
    child_daemon_spawn(&p->d, LEASE_TEST_RELAY, argv, env);
    child_proc_env_free(env);
    free(argv[0]);
    long end = child_proc_now_ms() + 30000;
    while (p->port <= 0) {
        if (child_daemon_reap(&p->d, WNOHANG))
            die(p, "leased-relay exited before serving metrics");
        if (child_proc_now_ms() > end)
            die(p, "leased-relay did not report its metrics port within 30 s");
        char *log = relay_proc_log(p);
        p->port = find_port(log);
        free(log);
        if (p->port <= 0)
            child_proc_sleep_ms(20);
    }
    snprintf(p->url, sizeof p->url, "http://127.0.0.1:%d", p->port);
    return p;
}

pid_t relay_proc_pid(const relay_proc_t *p)
{
    return p->d.pid;
}

const char *relay_proc_url(const relay_proc_t *p)
{
    return p->url;
}

double relay_proc_metric(const relay_proc_t *p, const char *series)
{
    http_client_t *c = http_client_new(p->url, 3000);
    http_resp_t *r = http_client_call(c, "GET", "/metrics", NULL, NULL, NULL, NULL);
    http_client_free(c);
    double v = -1;
    if (r && r->status == 200) {
        size_t n = strlen(series);
        for (const char *line = r->body; line && *line;) {
            if (strncmp(line, series, n) == 0 && line[n] == ' ') {
                v = strtod(line + n + 1, NULL);
                break;
            }
            line = strchr(line, '\n');
            if (line)
                line++;
        }
    }
    http_resp_free(r);
    return v;
}

void relay_proc_signal(relay_proc_t *p, int sig)
{
    child_daemon_signal(&p->d, sig);
}

int relay_proc_wait(relay_proc_t *p, int timeout_ms)
{
    return child_daemon_wait(&p->d, timeout_ms);
}

void relay_proc_free(relay_proc_t *p)
{
    if (!p)
        return;
    child_daemon_release(&p->d);
    free(p);
}

int relay_proc_stop(relay_proc_t *p)
{
    int status = child_daemon_stop(&p->d);
    free(p);
    return status;
}

int relay_proc_run(const char *db_url, const char *const *args, const char *const *extra_env,
                   int timeout_ms, char **out)
{
    child_daemon_t d;
    child_daemon_init(&d, "leased-relay", "leased-relay-run", "out");
    char db_setting[1200], amqp_setting[600];
    char **env = relay_env(db_url, extra_env, db_setting, sizeof db_setting, amqp_setting,
                           sizeof amqp_setting);
    char *argv[32];
    size_t n = 0;
    argv[n++] = strdup(LEASE_TEST_RELAY);
    for (const char *const *a = args; a && *a && n < 31; a++)
        argv[n++] = strdup(*a);
    argv[n] = NULL;
    child_daemon_spawn(&d, LEASE_TEST_RELAY, argv, env);
    child_proc_env_free(env);
    for (size_t i = 0; i < n; i++)
        free(argv[i]);
    int status = child_daemon_wait(&d, timeout_ms);
    if (out)
        *out = child_proc_read_file(d.log_path);
    child_daemon_release(&d);
    return status;
}
