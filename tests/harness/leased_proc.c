/*
 * leased_proc.c - start, probe and stop a real leased for tests; make
 * credentials through leasectl.
 */
#include "leased_proc.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "child_proc.h"
#include "http_client.h"
#include "testpg.h"

struct leased_proc {
    child_daemon_t d;
    int port;
    char url[64];
};

char *leased_proc_log(const leased_proc_t *p)
{
    return child_proc_read_file(p->d.log_path);
}

int leased_proc_log_count(const leased_proc_t *p, const char *needle)
{
    char *log = leased_proc_log(p);
    int n = 0;
    size_t len = strlen(needle);
    for (const char *at = strstr(log, needle); at && len; at = strstr(at + len, needle))
        n++;
    free(log);
    return n;
}

void leased_proc_dump_log(const leased_proc_t *p)
{
    child_daemon_dump_log(&p->d);
}

static void die(const leased_proc_t *p, const char *what)
{
    fprintf(stderr, "leased_proc: %s\n", what);
    if (p)
        leased_proc_dump_log(p);
    exit(1);
}

/* The port from the "listening on HOST:PORT (" log line: the last colon
 * before the parenthesis of that same line. Other lines say "listening on"
 * too (the watch's "listening on lease_ended") and may hold colons and
 * parentheses of their own, so each occurrence is read within its line. */
static int find_port(const char *log)
{
    for (const char *at = strstr(log, "listening on "); at; at = strstr(at + 1, "listening on ")) {
        const char *colon = NULL;
        const char *c = at;
        for (; *c && *c != '\n' && *c != '('; c++)
            if (*c == ':')
                colon = c;
        if (*c == '(' && colon && atoi(colon + 1) > 0)
            return atoi(colon + 1);
    }
    return -1;
}

static leased_proc_t *start(const char *db_url, const char *const *extra, bool wait_ready)
{
    leased_proc_t *p = calloc(1, sizeof *p);
    child_daemon_init(&p->d, "leased", "leased-test", "leased.log");
    /* db_url NULL: no database (the store is in extra, LEASE_STORE_URL) */
    char url_setting[1200] = "LEASE_LOG_LEVEL=info";
    if (db_url) {
        char *service_url = testpg_service_url(db_url);
        snprintf(url_setting, sizeof url_setting, "LEASE_DATABASE_URL=%s", service_url);
        free(service_url);
    }
    const char *defaults[] = {url_setting, "LEASE_LISTEN=127.0.0.1:0", "LEASE_LOG_LEVEL=info",
                              "LEASE_HEALTH_INTERVAL_MS=200", NULL};
    char **env = child_proc_env(extra, defaults);
    char *argv[] = {strdup(LEASE_TEST_LEASED), NULL};
    child_daemon_spawn(&p->d, LEASE_TEST_LEASED, argv, env);
    child_proc_env_free(env);
    free(argv[0]);

    long end = child_proc_now_ms() + 15000;
    while (p->port <= 0) {
        if (child_daemon_reap(&p->d, WNOHANG))
            die(p, "leased exited before listening");
        if (child_proc_now_ms() > end)
            die(p, "leased did not report a port within 15 s");
        char *log = leased_proc_log(p);
        p->port = find_port(log);
        free(log);
        if (p->port <= 0)
            child_proc_sleep_ms(20);
    }
    snprintf(p->url, sizeof p->url, "http://127.0.0.1:%d", p->port);
    if (!wait_ready)
        return p;
    end = child_proc_now_ms() + 30000;
    for (;;) {
        http_client_t *c = http_client_new(p->url, 2000);
        http_resp_t *r = http_client_call(c, "GET", "/readyz", NULL, NULL, NULL, NULL);
        long status = r ? r->status : 0;
        http_resp_free(r);
        http_client_free(c);
        if (status == 200)
            return p;
        if (child_daemon_reap(&p->d, WNOHANG))
            die(p, "leased exited before it was ready");
        if (child_proc_now_ms() > end)
            die(p, "leased was not ready within 30 s");
        child_proc_sleep_ms(50);
    }
}

leased_proc_t *leased_proc_start(const char *db_url, const char *const *extra_env)
{
    return start(db_url, extra_env, true);
}

leased_proc_t *leased_proc_start_unready(const char *db_url, const char *const *extra_env)
{
    return start(db_url, extra_env, false);
}

const char *leased_proc_url(const leased_proc_t *p)
{
    return p->url;
}

int leased_proc_port(const leased_proc_t *p)
{
    return p->port;
}

pid_t leased_proc_pid(const leased_proc_t *p)
{
    return p->d.pid;
}

bool leased_proc_alive(leased_proc_t *p)
{
    return !child_daemon_reap(&p->d, WNOHANG);
}

void leased_proc_signal(leased_proc_t *p, int sig)
{
    child_daemon_signal(&p->d, sig);
}

int leased_proc_wait(leased_proc_t *p, int timeout_ms)
{
    return child_daemon_wait(&p->d, timeout_ms);
}

void leased_proc_free(leased_proc_t *p)
{
    if (!p)
        return;
    child_daemon_release(&p->d);
    free(p);
}

int leased_proc_stop(leased_proc_t *p)
{
    int status = child_daemon_stop(&p->d);
    free(p);
    return status;
}

/*
 * Runs argv (argv[0] the program, n entries, all heap: freed here) to
 * completion within timeout_ms, its stdout and stderr into a scratch file;
 * returns its exit status and, when out is not NULL, what it wrote (heap).
 */
static int run_to_end(char **argv, size_t n, const char *const *extra_env, int timeout_ms,
                      char **out)
{
    child_daemon_t d;
    child_daemon_init(&d, argv[0], "leased-run", "out");
    char **env = child_proc_env(extra_env, NULL);
    child_daemon_spawn(&d, argv[0], argv, env);
    child_proc_env_free(env);
    int status = child_daemon_wait(&d, timeout_ms);
    if (out)
        *out = child_proc_read_file(d.log_path);
    child_daemon_release(&d);
    for (size_t i = 0; i < n; i++)
        free(argv[i]);
    return status;
}

int leased_proc_run_cli(const char *const *args, const char *const *extra_env, char **out)
{
    char *argv[32];
    size_t n = 0;
    argv[n++] = strdup(LEASE_TEST_LEASED);
    for (const char *const *a = args; a && *a && n < 31; a++)
        argv[n++] = strdup(*a);
    argv[n] = NULL;
    return run_to_end(argv, n, extra_env, 10000, out);
}

static void add_list(char **argv, size_t *n, const char *flag, const char *csv)
{
    char *copy = strdup(csv);
    for (char *tok = strtok(copy, ","); tok; tok = strtok(NULL, ",")) {
        argv[(*n)++] = strdup(flag);
        argv[(*n)++] = strdup(tok);
    }
    free(copy);
}

char *leased_proc_credential(const char *db_url, const leased_cred_spec_t *spec,
                             char *credential_id)
{
    char client[160];
    snprintf(client, sizeof client, "cl_%s", spec->principal);
    char *argv[64];
    size_t n = 0;
    const char *fixed[] = {LEASE_TEST_LEASECTL, "credential", "create",
                           "--database-url",    db_url,       "--principal",
                           spec->principal,     "--client",   spec->client ? spec->client : client,
                           "--tenant",          spec->tenant, "--program",
                           spec->program};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        argv[n++] = strdup(fixed[i]);
    add_list(argv, &n, "--actor", spec->actors ? spec->actors : "*");
    add_list(argv, &n, "--capability", spec->capabilities);
    if (spec->admin)
        argv[n++] = strdup("--admin");
    if (spec->expires_in) {
        argv[n++] = strdup("--expires-in");
        argv[n++] = strdup(spec->expires_in);
    }
    argv[n] = NULL;
    char *text = NULL;
    int status = run_to_end(argv, n, NULL, 30000, &text);
    /* stdout and stderr share the file: the JSON object is the line that
     * starts with '{' */
    json_t *obj = NULL;
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (line[0] == '{') {
            json_error_t jerr;
            obj = json_loads(line, 0, &jerr);
            if (obj && json_object_get(obj, "token"))
                break;
            json_decref(obj);
            obj = NULL;
        }
        line = nl ? nl + 1 : NULL;
    }
    const char *token = obj ? json_string_value(json_object_get(obj, "token")) : NULL;
    if (status != 0 || !token) {
        fprintf(stderr, "leased_proc: leasectl credential create failed (%d): %s\n", status, text);
        exit(1);
    }
    char *result = strdup(token);
    if (credential_id)
        snprintf(credential_id, 32, "%s", json_string_value(json_object_get(obj, "credential_id")));
    json_decref(obj);
    free(text);
    return result;
}
