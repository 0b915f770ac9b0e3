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
    pid_t pid;
    bool exited;
    int status;
    int port;
    char dir[128];
    char log_path[192];
    char url[64];
};

char *relay_proc_log(const relay_proc_t *p)
{
    return child_proc_read_file(p->log_path);
}

void relay_proc_dump_log(const relay_proc_t *p)
{
    char *log = relay_proc_log(p);
    size_t n = strlen(log);
    const char *tail = n > 12000 ? log + n - 12000 : log;
    fprintf(stderr, "---- leased-relay log (%s) ----\n%s---- end of leased-relay log ----\n",
            p->log_path, tail);
    free(log);
}

static void die(const relay_proc_t *p, const char *what)
{
    fprintf(stderr, "relay_proc: %s\n", what);
    if (p)
        relay_proc_dump_log(p);
    exit(1);
}

static bool reap(relay_proc_t *p, int flags)
{
    if (p->exited)
        return true;
    if (!child_proc_reap(p->pid, flags, &p->status))
        return false;
    p->exited = true;
    return true;
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
    snprintf(p->dir, sizeof p->dir, "/tmp/leased-relay-test.XXXXXX");
    if (!mkdtemp(p->dir))
        die(NULL, "mkdtemp failed");
    snprintf(p->log_path, sizeof p->log_path, "%s/relay.log", p->dir);
    char db_setting[1200], amqp_setting[600];
    char **env = relay_env(db_url, extra_env, db_setting, sizeof db_setting, amqp_setting,
                           sizeof amqp_setting);
    char *argv[] = {strdup(LEASE_TEST_RELAY), NULL};
    p->pid = child_proc_spawn(LEASE_TEST_RELAY, argv, env, p->log_path);
    child_proc_env_free(env);
    free(argv[0]);
    if (p->pid < 0)
        die(p, "cannot start leased-relay");
    long end = child_proc_now_ms() + 30000;
    while (p->port <= 0) {
        if (reap(p, WNOHANG))
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
    return p->pid;
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
    if (!p->exited)
        kill(p->pid, sig);
}

int relay_proc_wait(relay_proc_t *p, int timeout_ms)
{
    long end = child_proc_now_ms() + timeout_ms;
    while (!reap(p, WNOHANG)) {
        if (child_proc_now_ms() > end) {
            fprintf(stderr, "relay_proc: pid %d did not exit within %d ms; killing it\n",
                    (int)p->pid, timeout_ms);
            relay_proc_dump_log(p);
            kill(p->pid, SIGKILL);
            reap(p, 0);
            break;
        }
        child_proc_sleep_ms(10);
    }
    return p->status;
}

void relay_proc_free(relay_proc_t *p)
{
    if (!p)
        return;
    if (!p->exited) {
        kill(p->pid, SIGCONT);
        kill(p->pid, SIGKILL);
        reap(p, 0);
    }
    if (!getenv("LEASE_TEST_KEEP_LOGS")) {
        unlink(p->log_path);
        rmdir(p->dir);
    }
    free(p);
}

int relay_proc_stop(relay_proc_t *p)
{
    relay_proc_signal(p, SIGTERM);
    int status = relay_proc_wait(p, 30000);
    if (status != 0)
        relay_proc_dump_log(p);
    relay_proc_free(p);
    return status;
}

int relay_proc_run(const char *db_url, const char *const *args, const char *const *extra_env,
                   int timeout_ms, char **out)
{
    char dir[] = "/tmp/leased-relay-run.XXXXXX";
    if (!mkdtemp(dir))
        die(NULL, "mkdtemp failed");
    relay_proc_t p = {0};
    snprintf(p.log_path, sizeof p.log_path, "%s/out", dir);
    char db_setting[1200], amqp_setting[600];
    char **env = relay_env(db_url, extra_env, db_setting, sizeof db_setting, amqp_setting,
                           sizeof amqp_setting);
    char *argv[32];
    size_t n = 0;
    argv[n++] = strdup(LEASE_TEST_RELAY);
    for (const char *const *a = args; a && *a && n < 31; a++)
        argv[n++] = strdup(*a);
    argv[n] = NULL;
    p.pid = child_proc_spawn(LEASE_TEST_RELAY, argv, env, p.log_path);
    child_proc_env_free(env);
    for (size_t i = 0; i < n; i++)
        free(argv[i]);
    if (p.pid < 0)
        die(NULL, "cannot run leased-relay");
    int status = relay_proc_wait(&p, timeout_ms);
    if (out)
        *out = child_proc_read_file(p.log_path);
    unlink(p.log_path);
    rmdir(dir);
    return status;
}
