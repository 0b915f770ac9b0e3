/*
 * leased_proc.c - start, probe and stop a real leased for tests; make
 * credentials through leasectl.
 */
#include "leased_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "http_client.h"
#include "testpg.h"

extern char **environ;

struct leased_proc {
    pid_t pid;
    bool exited;
    int status;
    int port;
    char dir[128];
    char log_path[192];
    char url[64];
};

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return strdup("");
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 2) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
    }
    buf[len] = '\0';
    fclose(f);
    return buf;
}

char *leased_proc_log(const leased_proc_t *p)
{
    return read_file(p->log_path);
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
    char *log = leased_proc_log(p);
    size_t n = strlen(log);
    const char *tail = n > 8192 ? log + n - 8192 : log;
    fprintf(stderr, "---- leased log (%s) ----\n%s---- end of leased log ----\n", p->log_path,
            tail);
    free(log);
}

static void die(const leased_proc_t *p, const char *what)
{
    fprintf(stderr, "leased_proc: %s\n", what);
    if (p)
        leased_proc_dump_log(p);
    exit(1);
}

/* The test's environment without LEASE_* (so a developer's settings do not
 * leak in), then extra, then defaults for what extra does not set. */
static char **child_env(const char *const *extra, const char *const *defaults)
{
    size_t n = 0;
    for (char **e = environ; *e; e++)
        n++;
    for (const char *const *e = extra; e && *e; e++)
        n++;
    for (const char *const *e = defaults; e && *e; e++)
        n++;
    char **env = calloc(n + 1, sizeof *env);
    size_t k = 0;
    for (char **e = environ; *e; e++)
        if (strncmp(*e, "LEASE_", 6) != 0)
            env[k++] = strdup(*e);
    for (const char *const *e = extra; e && *e; e++)
        env[k++] = strdup(*e);
    for (const char *const *d = defaults; d && *d; d++) {
        size_t name_len = strcspn(*d, "=");
        bool set = false;
        for (const char *const *e = extra; e && *e; e++)
            if (strncmp(*e, *d, name_len + 1) == 0)
                set = true;
        if (!set)
            env[k++] = strdup(*d);
    }
    env[k] = NULL;
    return env;
}

static void free_env(char **env)
{
    for (char **e = env; e && *e; e++)
        free(*e);
    free(env);
}

/* fork + exec rather than posix_spawn: the child asks the kernel to send
 * it SIGKILL when the test process dies, so a failing test (cmocka jumps
 * out of it) never leaves a leased behind. */
static pid_t spawn(const char *path, char *const *argv, char **env, const char *out_path)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "leased_proc: fork: %s\n", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127); /* the parent died before prctl took effect */
        int in = open("/dev/null", O_RDONLY);
        int out = open(out_path, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (in < 0 || out < 0 || dup2(in, STDIN_FILENO) < 0 || dup2(out, STDOUT_FILENO) < 0 ||
            dup2(out, STDERR_FILENO) < 0)
            _exit(127);
        close(in);
        close(out);
        execve(path, argv, env);
        _exit(127);
    }
    return pid;
}

static bool reap(leased_proc_t *p, int flags)
{
    if (p->exited)
        return true;
    int st;
    pid_t r = waitpid(p->pid, &st, flags);
    if (r != p->pid)
        return false;
    p->exited = true;
    p->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return true;
}

/* The port from the "listening on HOST:PORT" log line. */
static int find_port(const char *log)
{
    const char *at = strstr(log, "listening on ");
    if (!at)
        return -1;
    const char *paren = strchr(at, '(');
    const char *colon = NULL;
    for (const char *c = at; *c && c < paren; c++)
        if (*c == ':')
            colon = c;
    return colon ? atoi(colon + 1) : -1;
}

static leased_proc_t *start(const char *db_url, const char *const *extra, bool wait_ready)
{
    leased_proc_t *p = calloc(1, sizeof *p);
    snprintf(p->dir, sizeof p->dir, "/tmp/leased-test.XXXXXX");
    if (!mkdtemp(p->dir))
        die(NULL, "mkdtemp failed");
    snprintf(p->log_path, sizeof p->log_path, "%s/leased.log", p->dir);
    char *service_url = testpg_service_url(db_url);
    char url_setting[1200];
    snprintf(url_setting, sizeof url_setting, "LEASE_DATABASE_URL=%s", service_url);
    free(service_url);
    const char *defaults[] = {url_setting, "LEASE_LISTEN=127.0.0.1:0", "LEASE_LOG_LEVEL=info",
                              "LEASE_HEALTH_INTERVAL_MS=200", NULL};
    char **env = child_env(extra, defaults);
    char *argv[] = {strdup(LEASE_TEST_LEASED), NULL};
    p->pid = spawn(LEASE_TEST_LEASED, argv, env, p->log_path);
    free_env(env);
    free(argv[0]);
    if (p->pid < 0)
        die(p, "cannot start leased");

    long end = now_ms() + 15000;
    while (p->port <= 0) {
        if (reap(p, WNOHANG))
            die(p, "leased exited before listening");
        if (now_ms() > end)
            die(p, "leased did not report a port within 15 s");
        char *log = leased_proc_log(p);
        p->port = find_port(log);
        free(log);
        if (p->port <= 0)
            sleep_ms(20);
    }
    snprintf(p->url, sizeof p->url, "http://127.0.0.1:%d", p->port);
    if (!wait_ready)
        return p;
    end = now_ms() + 30000;
    for (;;) {
        http_client_t *c = http_client_new(p->url, 2000);
        http_resp_t *r = http_client_call(c, "GET", "/readyz", NULL, NULL, NULL, NULL);
        long status = r ? r->status : 0;
        http_resp_free(r);
        http_client_free(c);
        if (status == 200)
            return p;
        if (reap(p, WNOHANG))
            die(p, "leased exited before it was ready");
        if (now_ms() > end)
            die(p, "leased was not ready within 30 s");
        sleep_ms(50);
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
    return p->pid;
}

bool leased_proc_alive(leased_proc_t *p)
{
    return !reap(p, WNOHANG);
}

void leased_proc_signal(leased_proc_t *p, int sig)
{
    if (!p->exited)
        kill(p->pid, sig);
}

int leased_proc_wait(leased_proc_t *p, int timeout_ms)
{
    long end = now_ms() + timeout_ms;
    while (!reap(p, WNOHANG)) {
        if (now_ms() > end) {
            fprintf(stderr, "leased_proc: pid %d did not exit within %d ms; killing it\n",
                    (int)p->pid, timeout_ms);
            leased_proc_dump_log(p);
            kill(p->pid, SIGKILL);
            reap(p, 0);
            break;
        }
        sleep_ms(10);
    }
    return p->status;
}

void leased_proc_free(leased_proc_t *p)
{
    if (!p)
        return;
    if (!p->exited) {
        kill(p->pid, SIGKILL);
        reap(p, 0);
    }
    if (!getenv("LEASE_TEST_KEEP_LOGS")) {
        unlink(p->log_path);
        rmdir(p->dir);
    }
    free(p);
}

int leased_proc_stop(leased_proc_t *p)
{
    leased_proc_signal(p, SIGTERM);
    int status = leased_proc_wait(p, 30000);
    if (status != 0)
        leased_proc_dump_log(p);
    leased_proc_free(p);
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
    char dir[] = "/tmp/leased-run.XXXXXX";
    if (!mkdtemp(dir))
        die(NULL, "mkdtemp failed");
    char path[64];
    snprintf(path, sizeof path, "%s/out", dir);
    char **env = child_env(extra_env, NULL);
    leased_proc_t p = {.pid = spawn(argv[0], argv, env, path)};
    free_env(env);
    if (p.pid < 0) {
        fprintf(stderr, "leased_proc: cannot run %s\n", argv[0]);
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        free(argv[i]);
    snprintf(p.log_path, sizeof p.log_path, "%s", path);
    int status = leased_proc_wait(&p, timeout_ms);
    if (out)
        *out = read_file(path);
    unlink(path);
    rmdir(dir);
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
