/*
 * keepalive_load.c - keeps sessions alive through leased the way holders
 * do (tests/bench/sessions/held; docs/benchmarks.md, "Sessions"): one
 * POST /v1/sessions/{id}/keepalive per session every --interval-ms, the
 * sessions' keep-alives spread evenly over the interval, for --seconds.
 *
 *   LEASE_TOKEN=lsk_... keepalive_load --url http://127.0.0.1:8080 \
 *       --sessions FILE --interval-ms 10000 --seconds 60 [--threads 4]
 *
 * FILE holds one session id a line (opened by the credential whose token
 * LEASE_TOKEN is: only it may keep them alive). T threads, each with one
 * keep-alive connection (libcurl), each owning every T-th session. A
 * keep-alive due at time d and sent late counts its latency from d, not
 * from when it was sent (as http_load --rate does), so a stalled server
 * cannot hide its stall by holding the schedule back; late counts those
 * sent more than a second after they were due.
 *
 * Prints one line of key=value pairs: keepalives (answered in the window),
 * per_s, p50_ms, p99_ms, max_ms (every keep-alive answered, whatever its
 * answer), renewed (200 lease_renewed), lost (409 lease_lost: a session
 * that ended, which a held-leases run must never see), failed (any other
 * answer), late, connects, errors (status/code:count).
 *
 * The bearer token is read from LEASE_TOKEN, never from the command line
 * (visible in ps).
 */
#include <curl/curl.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct options {
    const char *url;
    const char *token;
    char **sessions;
    int n_sessions;
    int threads;
    long interval_ms;
    double seconds;
} options_t;

typedef struct worker {
    const options_t *opt;
    int index;
    pthread_t thread;
    CURL *curl;
    struct curl_slist *headers;
    char body[4096];
    size_t body_len;
    uint32_t *lat_us;
    size_t n_lat, cap_lat;
    long renewed, lost, failed, late, connects;
    char first_error[128];
    long other_errors;
} worker_t;

static int64_t start_ns, end_ns;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void sleep_until(int64_t t)
{
    int64_t now = now_ns();
    if (t <= now)
        return;
    struct timespec ts = {(time_t)((t - now) / 1000000000), (long)((t - now) % 1000000000)};
    nanosleep(&ts, NULL);
}

static size_t on_data(char *ptr, size_t size, size_t n, void *userdata)
{
    worker_t *w = userdata;
    size_t add = size * n;
    size_t room = sizeof w->body - 1 - w->body_len;
    memcpy(w->body + w->body_len, ptr, add < room ? add : room);
    w->body_len += add < room ? add : room;
    w->body[w->body_len] = '\0';
    return add;
}

static void record(worker_t *w, int64_t ns)
{
    if (w->n_lat == w->cap_lat) {
        size_t cap = w->cap_lat ? w->cap_lat * 2 : 1024;
        uint32_t *nl = realloc(w->lat_us, cap * sizeof *nl);
        if (!nl)
            return;
        w->lat_us = nl;
        w->cap_lat = cap;
    }
    int64_t us = ns / 1000;
    w->lat_us[w->n_lat++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

/* One keep-alive of session, due at due (monotonic ns). */
static void keepalive(worker_t *w, const char *session, int64_t due)
{
    char url[512];
    snprintf(url, sizeof url, "%s/v1/sessions/%s/keepalive", w->opt->url, session);
    curl_easy_setopt(w->curl, CURLOPT_URL, url);
    curl_easy_setopt(w->curl, CURLOPT_POSTFIELDS, "{}");
    curl_easy_setopt(w->curl, CURLOPT_POSTFIELDSIZE, 2L);
    w->body_len = 0;
    w->body[0] = '\0';
    int64_t t0 = now_ns();
    if (t0 - due > 1000000000LL)
        w->late++;
    if (due < t0)
        t0 = due;
    CURLcode rc = curl_easy_perform(w->curl);
    int64_t t1 = now_ns();
    long connects = 0, status = 0;
    curl_easy_getinfo(w->curl, CURLINFO_NUM_CONNECTS, &connects);
    w->connects += connects;
    record(w, t1 - t0);
    const char *code = NULL;
    json_t *j = NULL;
    if (rc == CURLE_OK) {
        curl_easy_getinfo(w->curl, CURLINFO_RESPONSE_CODE, &status);
        j = json_loadb(w->body, w->body_len, 0, NULL);
        code = j ? json_string_value(json_object_get(j, "code")) : NULL;
    }
    if (status == 200 && code && strcmp(code, "lease_renewed") == 0) {
        w->renewed++;
    } else if (status == 409 && code && strcmp(code, "lease_lost") == 0) {
        w->lost++;
    } else {
        w->failed++;
        if (!w->first_error[0])
            snprintf(w->first_error, sizeof w->first_error, "%ld/%s", status,
                     rc != CURLE_OK ? curl_easy_strerror(rc)
                     : code         ? code
                                    : "-");
        else
            w->other_errors++;
    }
    json_decref(j);
}

/* Worker i owns sessions i, i + T, ...; session s is due at
 * start + interval * s / n + k * interval (k = 0, 1, ...): in the order
 * the loop visits them, so each worker walks its sessions round robin. */
static void *worker_main(void *arg)
{
    worker_t *w = arg;
    const options_t *o = w->opt;
    int mine = 0;
    for (int s = w->index; s < o->n_sessions; s += o->threads)
        mine++;
    if (!mine)
        return NULL;
    int64_t interval = o->interval_ms * 1000000LL;
    for (long m = 0;; m++) {
        int s = w->index + o->threads * (int)(m % mine);
        int64_t due = start_ns + interval * s / o->n_sessions + (m / mine) * interval;
        if (due >= end_ns)
            break;
        sleep_until(due);
        keepalive(w, o->sessions[s], due);
    }
    return NULL;
}

static int compare_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static double percentile_ms(const uint32_t *sorted, size_t n, double q)
{
    if (!n)
        return 0;
    size_t rank = (size_t)(q * (double)n + 0.999999999);
    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    return sorted[rank - 1] / 1000.0;
}

static void usage(void)
{
    fprintf(stderr, "usage: keepalive_load --url URL --sessions FILE --interval-ms MS --seconds S "
                    "[--threads T]\n(the bearer token from LEASE_TOKEN)\n");
    exit(2);
}

static char **read_sessions(const char *path, int *n)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        perror(path);
        exit(1);
    }
    char line[256];
    char **out = NULL;
    int cap = 0;
    *n = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0])
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 256;
            out = realloc(out, (size_t)cap * sizeof *out);
            if (!out)
                exit(1);
        }
        out[(*n)++] = strdup(line);
    }
    fclose(f);
    return out;
}

int main(int argc, char **argv)
{
    options_t o = {.threads = 4, .interval_ms = 10000, .seconds = 0};
    const char *file = NULL;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc)
            usage();
        if (strcmp(argv[i], "--url") == 0)
            o.url = argv[++i];
        else if (strcmp(argv[i], "--sessions") == 0)
            file = argv[++i];
        else if (strcmp(argv[i], "--interval-ms") == 0)
            o.interval_ms = atol(argv[++i]);
        else if (strcmp(argv[i], "--seconds") == 0)
            o.seconds = atof(argv[++i]);
        else if (strcmp(argv[i], "--threads") == 0)
            o.threads = atoi(argv[++i]);
        else
            usage();
    }
    o.token = getenv("LEASE_TOKEN");
    if (!o.url || !file || o.interval_ms <= 0 || o.seconds <= 0 || o.threads <= 0 || !o.token ||
        !*o.token)
        usage();
    o.sessions = read_sessions(file, &o.n_sessions);
    if (!o.n_sessions) {
        fprintf(stderr, "keepalive_load: no session in %s\n", file);
        return 1;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    worker_t *w = calloc((size_t)o.threads, sizeof *w);
    char auth[512];
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", o.token);
    start_ns = now_ns() + 100000000LL; /* every worker ready before the first is due */
    end_ns = start_ns + (int64_t)(o.seconds * 1e9);
    for (int i = 0; i < o.threads; i++) {
        w[i].opt = &o;
        w[i].index = i;
        w[i].curl = curl_easy_init();
        w[i].headers = curl_slist_append(NULL, "Content-Type: application/json");
        w[i].headers = curl_slist_append(w[i].headers, "Expect:");
        w[i].headers = curl_slist_append(w[i].headers, auth);
        curl_easy_setopt(w[i].curl, CURLOPT_HTTPHEADER, w[i].headers);
        curl_easy_setopt(w[i].curl, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(w[i].curl, CURLOPT_WRITEDATA, &w[i]);
        curl_easy_setopt(w[i].curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(w[i].curl, CURLOPT_TCP_NODELAY, 1L);
        curl_easy_setopt(w[i].curl, CURLOPT_TIMEOUT_MS, 30000L);
        curl_easy_setopt(w[i].curl, CURLOPT_MAXCONNECTS, 1L);
        if (pthread_create(&w[i].thread, NULL, worker_main, &w[i]) != 0) {
            fprintf(stderr, "keepalive_load: cannot start worker %d\n", i);
            return 1;
        }
    }
    size_t n = 0;
    long renewed = 0, lost = 0, failed = 0, late = 0, connects = 0;
    for (int i = 0; i < o.threads; i++) {
        pthread_join(w[i].thread, NULL);
        n += w[i].n_lat;
    }
    uint32_t *all = malloc((n ? n : 1) * sizeof *all);
    size_t k = 0;
    for (int i = 0; i < o.threads; i++) {
        memcpy(all + k, w[i].lat_us, w[i].n_lat * sizeof *all);
        k += w[i].n_lat;
        renewed += w[i].renewed;
        lost += w[i].lost;
        failed += w[i].failed;
        late += w[i].late;
        connects += w[i].connects;
    }
    qsort(all, n, sizeof *all, compare_u32);
    printf("sessions=%d keepalives=%zu per_s=%.1f p50_ms=%.3f p99_ms=%.3f max_ms=%.3f renewed=%ld "
           "lost=%ld failed=%ld late=%ld connects=%ld errors=",
           o.n_sessions, n, (double)n / o.seconds, percentile_ms(all, n, 0.50),
           percentile_ms(all, n, 0.99), n ? all[n - 1] / 1000.0 : 0.0, renewed, lost, failed, late,
           connects);
    bool any = false;
    for (int i = 0; i < o.threads; i++)
        if (w[i].first_error[0]) {
            printf("%s%s(+%ld)", any ? "," : "", w[i].first_error, w[i].other_errors);
            any = true;
        }
    printf("%s\n", any ? "" : "-");
    for (int i = 0; i < o.threads; i++) {
        curl_easy_cleanup(w[i].curl);
        curl_slist_free_all(w[i].headers);
        free(w[i].lat_us);
    }
    for (int i = 0; i < o.n_sessions; i++)
        free(o.sessions[i]);
    free(o.sessions);
    free(all);
    free(w);
    curl_global_cleanup();
    return 0;
}
