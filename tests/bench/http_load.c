/*
 * http_load.c - closed-loop HTTP load generator of the benchmark (tests/bench/run).
 *
 * N client threads, each with one keep-alive connection (one curl easy
 * handle, reused), run acquire -> release cycles for S seconds and record
 * the latency of every request. One op = one acquire or one release.
 *
 *   leased: POST /v1/leases/acquire, read lease.lease_id and
 *           lease.fencing_token, POST /v1/leases/release with them.
 *   etcd:   etcd's lock recipe over the v3 JSON gateway. Each client holds
 *           one session lease (granted before the run, kept alive between
 *           cycles); acquire = txn "create_revision(key) == 0" -> put
 *           key=mine attached to the session lease (the token is the
 *           revision of that put, i.e. the key's create revision), else
 *           range(key) (who holds it); release = txn "value(key) == mine"
 *           -> delete key.
 *
 * Targets: existing (a random identity t1..tN, the identities the run
 * seeded), new (an identity never used before for every acquire), disjoint
 * (client i always uses its own identity d<i>).
 *
 * Prints one line of key=value pairs (the run script parses it):
 *   ops, ops_per_s (successful operations: acquire granted, release done),
 *   p50_ms, p99_ms, max_ms (every request answered in the window, whatever
 *   its answer), cycles, conflicts (acquire refused: held), lost (release
 *   refused), failed (any other answer), connects (connections opened;
 *   equal to the clients when keep-alive held), errors (status/code:count).
 * Only requests completed inside the window count; a cycle running at the
 * end still releases its lease, uncounted.
 *
 * --latency-file appends every counted request's latency (microseconds,
 * one a line) to PATH, so that runs can be pooled.
 *
 * --rate R paces the run at R operations a second in all (an acquire and a
 * release each; clients start their cycles on a fixed schedule, staggered),
 * so that a soak runs at a rate the machine sustains instead of at
 * saturation, where latency is mostly queueing. A cycle that starts late
 * counts the acquire's latency from when it was due, not from when it was
 * sent (the correction wrk2 makes: a stalled server must not hide its stall
 * by holding the clients back), and late_cycles counts the cycles that
 * started more than one interval late: a run where it is more than a few
 * was not at a rate the machine sustains.
 *
 * The bearer token (leased mode) is read from the environment variable
 * LEASE_TOKEN, never from the command line (visible in ps).
 */
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum mode { MODE_LEASED, MODE_ETCD };
enum targets { TARGETS_EXISTING, TARGETS_NEW, TARGETS_DISJOINT };

typedef struct options {
    enum mode mode;
    enum targets targets;
    const char *url;
    const char *tag;
    const char *token;
    const char *latency_file;
    int clients;
    double seconds;
    long identities;
    long ttl_ms;
    long rate; /* operations a second in all; 0: as fast as answered */
} options_t;

/* Counts of answers other than success, keyed "status/code". */
#define MAX_ERROR_KINDS 16
typedef struct error_kind {
    char key[64];
    long count;
} error_kind_t;

typedef struct client {
    const options_t *opt;
    int index;
    pthread_t thread;
    CURL *curl;
    struct curl_slist *headers;
    char *body; /* response buffer */
    size_t body_len, body_cap;
    uint64_t rng; /* xorshift64 state */
    /* etcd session */
    char session_lease[32];
    int64_t last_keepalive_ns;
    int64_t due_ns; /* when the paced request being sent was due; 0 otherwise */
    /* results */
    uint32_t *lat_us;
    size_t n_lat, cap_lat;
    long ops, cycles, conflicts, lost, failed, connects, late_cycles;
    error_kind_t errors[MAX_ERROR_KINDS];
    int n_errors;
    bool setup_failed;
    char setup_error[256];
} client_t;

static pthread_barrier_t ready_barrier, go_barrier;
static int64_t window_end_ns;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static uint64_t next_random(client_t *c)
{
    uint64_t x = c->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c->rng = x;
    return x;
}

static size_t on_data(char *ptr, size_t size, size_t n, void *userdata)
{
    client_t *c = userdata;
    size_t add = size * n;
    if (c->body_len + add + 1 > c->body_cap) {
        size_t cap = (c->body_len + add + 1) * 2;
        char *nb = realloc(c->body, cap);
        if (!nb)
            return 0;
        c->body = nb;
        c->body_cap = cap;
    }
    memcpy(c->body + c->body_len, ptr, add);
    c->body_len += add;
    c->body[c->body_len] = '\0';
    return add;
}

static void count_error(client_t *c, const char *key)
{
    for (int i = 0; i < c->n_errors; i++)
        if (strcmp(c->errors[i].key, key) == 0) {
            c->errors[i].count++;
            return;
        }
    /* The last slot collects every kind beyond the others. */
    int slot = c->n_errors < MAX_ERROR_KINDS - 1 ? c->n_errors++ : MAX_ERROR_KINDS - 1;
    if (slot == MAX_ERROR_KINDS - 1) {
        key = "other";
        c->n_errors = MAX_ERROR_KINDS;
    }
    if (c->errors[slot].count == 0)
        snprintf(c->errors[slot].key, sizeof c->errors[slot].key, "%s", key);
    c->errors[slot].count++;
}

static void record_latency(client_t *c, int64_t ns)
{
    if (c->n_lat == c->cap_lat) {
        size_t cap = c->cap_lat ? c->cap_lat * 2 : 4096;
        uint32_t *nl = realloc(c->lat_us, cap * sizeof *nl);
        if (!nl)
            return;
        c->lat_us = nl;
        c->cap_lat = cap;
    }
    int64_t us = ns / 1000;
    c->lat_us[c->n_lat++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

typedef struct answer {
    long status;    /* HTTP status, 0 when the transport failed */
    CURLcode curl;  /* transport result */
    json_t *json;   /* parsed body, NULL if none */
    bool in_window; /* completed before the end of the window */
} answer_t;

/* One POST on the client's connection; the latency is recorded when the
 * request completed inside the window. */
static answer_t post(client_t *c, const char *path, const char *body)
{
    char url[512];
    snprintf(url, sizeof url, "%s%s", c->opt->url, path);
    curl_easy_setopt(c->curl, CURLOPT_URL, url);
    curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    c->body_len = 0;
    if (c->body)
        c->body[0] = '\0';
    answer_t a = {0};
    int64_t t0 = now_ns();
    if (c->due_ns && c->due_ns < t0)
        t0 = c->due_ns;
    c->due_ns = 0;
    a.curl = curl_easy_perform(c->curl);
    int64_t t1 = now_ns();
    a.in_window = t1 <= __atomic_load_n(&window_end_ns, __ATOMIC_RELAXED);
    long connects = 0;
    curl_easy_getinfo(c->curl, CURLINFO_NUM_CONNECTS, &connects);
    c->connects += connects;
    if (a.in_window)
        record_latency(c, t1 - t0);
    if (a.curl == CURLE_OK) {
        curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &a.status);
        if (c->body_len)
            a.json = json_loadb(c->body, c->body_len, 0, NULL);
    }
    return a;
}

/* Counts an answer that is neither success nor the expected refusal. */
static void count_failure(client_t *c, const answer_t *a)
{
    if (!a->in_window)
        return;
    c->failed++;
    char key[64];
    if (a->curl != CURLE_OK) {
        snprintf(key, sizeof key, "curl/%d", (int)a->curl);
    } else {
        const char *code = a->json ? json_string_value(json_object_get(a->json, "code")) : NULL;
        if (!code && a->json) /* etcd's gateway: {"error":..,"code":N,"message":..} */
            code = json_string_value(json_object_get(a->json, "message"));
        snprintf(key, sizeof key, "%ld/%.40s", a->status, code ? code : "-");
    }
    count_error(c, key);
}

static bool error_code_is(const answer_t *a, const char *code)
{
    const char *got = a->json ? json_string_value(json_object_get(a->json, "code")) : NULL;
    return got && strcmp(got, code) == 0;
}

static void target_of(client_t *c, long seq, char *out, size_t n)
{
    switch (c->opt->targets) {
    case TARGETS_EXISTING:
        snprintf(out, n, "t%" PRIu64, 1 + next_random(c) % (uint64_t)c->opt->identities);
        break;
    case TARGETS_NEW:
        snprintf(out, n, "n%s-%d-%ld", c->opt->tag, c->index, seq);
        break;
    case TARGETS_DISJOINT:
        snprintf(out, n, "d%d", c->index);
        break;
    }
}

/* ---- leased ---------------------------------------------------------- */

static void leased_cycle(client_t *c, long seq)
{
    char target[96], identity[320], body[1024];
    target_of(c, seq, target, sizeof target);
    snprintf(identity, sizeof identity,
             "\"lock_identity\":{\"tenant_id\":\"bench\",\"program_id\":\"bench\","
             "\"target_namespace\":\"bench\",\"target_id\":\"%s\",\"actor_name\":\"bench\","
             "\"workflow_name\":\"default\"}",
             target);
    snprintf(body, sizeof body,
             "{\"request_id\":\"a-%s-%d-%ld\",%s,\"service_instance_id\":\"si%d\","
             "\"execution_id\":\"e-%s-%d-%ld\",\"job_id\":\"j\",\"ttl_ms\":%ld}",
             c->opt->tag, c->index, seq, identity, c->index, c->opt->tag, c->index, seq,
             c->opt->ttl_ms);
    answer_t a = post(c, "/v1/leases/acquire", body);
    json_t *lease = a.json ? json_object_get(a.json, "lease") : NULL;
    const char *lease_id = lease ? json_string_value(json_object_get(lease, "lease_id")) : NULL;
    json_t *token = lease ? json_object_get(lease, "fencing_token") : NULL;
    if (a.status == 200 && lease_id && json_is_integer(token)) {
        if (a.in_window)
            c->ops++;
        snprintf(body, sizeof body,
                 "{\"request_id\":\"r-%s-%d-%ld\",%s,\"lease_id\":\"%s\","
                 "\"fencing_token\":%" JSON_INTEGER_FORMAT ",\"service_instance_id\":\"si%d\"}",
                 c->opt->tag, c->index, seq, identity, lease_id, json_integer_value(token),
                 c->index);
        answer_t r = post(c, "/v1/leases/release", body);
        if (r.status == 200) {
            if (r.in_window) {
                c->ops++;
                c->cycles++;
            }
        } else if (r.status == 409 && error_code_is(&r, "lease_lost")) {
            if (r.in_window)
                c->lost++;
        } else {
            count_failure(c, &r);
        }
        json_decref(r.json);
    } else if (a.status == 409 && error_code_is(&a, "lease_conflict")) {
        if (a.in_window)
            c->conflicts++;
    } else {
        count_failure(c, &a);
    }
    json_decref(a.json);
}

static bool leased_setup(client_t *c)
{
    char url[512];
    snprintf(url, sizeof url, "%s/healthz", c->opt->url);
    curl_easy_setopt(c->curl, CURLOPT_URL, url);
    curl_easy_setopt(c->curl, CURLOPT_HTTPGET, 1L);
    CURLcode rc = curl_easy_perform(c->curl);
    long status = 0, connects = 0;
    curl_easy_getinfo(c->curl, CURLINFO_NUM_CONNECTS, &connects);
    c->connects += connects;
    curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_setopt(c->curl, CURLOPT_POST, 1L);
    if (rc != CURLE_OK || status != 200) {
        snprintf(c->setup_error, sizeof c->setup_error, "GET /healthz: %s, status %ld",
                 curl_easy_strerror(rc), status);
        return false;
    }
    return true;
}

/* ---- etcd ------------------------------------------------------------ */

static void base64(const char *in, char *out, size_t n)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t len = strlen(in), o = 0;
    for (size_t i = 0; i < len && o + 5 < n; i += 3) {
        uint32_t v = (uint32_t)(unsigned char)in[i] << 16;
        if (i + 1 < len)
            v |= (uint32_t)(unsigned char)in[i + 1] << 8;
        if (i + 2 < len)
            v |= (unsigned char)in[i + 2];
        out[o++] = abc[(v >> 18) & 63];
        out[o++] = abc[(v >> 12) & 63];
        out[o++] = i + 1 < len ? abc[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < len ? abc[v & 63] : '=';
    }
    out[o] = '\0';
}

static bool etcd_keepalive(client_t *c)
{
    char body[96];
    snprintf(body, sizeof body, "{\"ID\":\"%s\"}", c->session_lease);
    answer_t a = post(c, "/v3/lease/keepalive", body);
    json_t *result = a.json ? json_object_get(a.json, "result") : NULL;
    bool ok = a.status == 200 && result && json_object_get(result, "TTL");
    json_decref(a.json);
    c->last_keepalive_ns = now_ns();
    return ok;
}

static bool etcd_setup(client_t *c)
{
    /* Granted outside the window: post() records no latency before it. */
    char body[64];
    snprintf(body, sizeof body, "{\"TTL\":%ld}", (c->opt->ttl_ms + 999) / 1000);
    answer_t a = post(c, "/v3/lease/grant", body);
    const char *id = a.json ? json_string_value(json_object_get(a.json, "ID")) : NULL;
    bool ok = a.status == 200 && id && strlen(id) < sizeof c->session_lease;
    if (ok)
        snprintf(c->session_lease, sizeof c->session_lease, "%s", id);
    else
        snprintf(c->setup_error, sizeof c->setup_error, "POST /v3/lease/grant: %s, status %ld",
                 curl_easy_strerror(a.curl), a.status);
    json_decref(a.json);
    c->n_lat = 0; /* the grant is not part of the measurement */
    c->last_keepalive_ns = now_ns();
    return ok;
}

static void etcd_cycle(client_t *c, long seq)
{
    /* The session lease is refreshed between cycles, well before a third of
     * its TTL has passed, and the refresh is not counted. */
    if (now_ns() - c->last_keepalive_ns > c->opt->ttl_ms * 1000000LL / 3) {
        size_t keep = c->n_lat;
        if (!etcd_keepalive(c))
            count_error(c, "keepalive");
        c->n_lat = keep;
    }
    char target[96], key[128], value[96], key64[200], value64[160], body[1024];
    target_of(c, seq, target, sizeof target);
    snprintf(key, sizeof key, "/bench/%s", target);
    snprintf(value, sizeof value, "c%s-%d-%ld", c->opt->tag, c->index, seq);
    base64(key, key64, sizeof key64);
    base64(value, value64, sizeof value64);
    snprintf(body, sizeof body,
             "{\"compare\":[{\"key\":\"%s\",\"result\":\"EQUAL\",\"target\":\"CREATE\","
             "\"create_revision\":\"0\"}],"
             "\"success\":[{\"request_put\":{\"key\":\"%s\",\"value\":\"%s\",\"lease\":\"%s\"}}],"
             "\"failure\":[{\"request_range\":{\"key\":\"%s\"}}]}",
             key64, key64, value64, c->session_lease, key64);
    answer_t a = post(c, "/v3/kv/txn", body);
    json_t *header = a.json ? json_object_get(a.json, "header") : NULL;
    const char *revision = header ? json_string_value(json_object_get(header, "revision")) : NULL;
    bool succeeded = a.json && json_is_true(json_object_get(a.json, "succeeded"));
    if (a.status == 200 && succeeded && revision && strtoll(revision, NULL, 10) > 0) {
        if (a.in_window)
            c->ops++;
        snprintf(body, sizeof body,
                 "{\"compare\":[{\"key\":\"%s\",\"result\":\"EQUAL\",\"target\":\"VALUE\","
                 "\"value\":\"%s\"}],\"success\":[{\"request_delete_range\":{\"key\":\"%s\"}}]}",
                 key64, value64, key64);
        answer_t r = post(c, "/v3/kv/txn", body);
        bool released = r.json && json_is_true(json_object_get(r.json, "succeeded"));
        if (r.status == 200 && released) {
            if (r.in_window) {
                c->ops++;
                c->cycles++;
            }
        } else if (r.status == 200) {
            if (r.in_window)
                c->lost++;
        } else {
            count_failure(c, &r);
        }
        json_decref(r.json);
    } else if (a.status == 200) { /* the key exists: held */
        if (a.in_window)
            c->conflicts++;
    } else {
        count_failure(c, &a);
    }
    json_decref(a.json);
}

/* ---- threads ----------------------------------------------------------- */

static void *client_main(void *arg)
{
    client_t *c = arg;
    bool ok = c->opt->mode == MODE_LEASED ? leased_setup(c) : etcd_setup(c);
    c->setup_failed = !ok;
    pthread_barrier_wait(&ready_barrier);
    pthread_barrier_wait(&go_barrier);
    if (!ok)
        return NULL;
    int64_t end = __atomic_load_n(&window_end_ns, __ATOMIC_RELAXED);
    /* paced: client i starts its cycles every interval, i/N of one late */
    int64_t interval = c->opt->rate ? (int64_t)(2e9 * c->opt->clients / (double)c->opt->rate) : 0;
    int64_t start = now_ns() + interval * c->index / c->opt->clients;
    for (long seq = 0; now_ns() < end; seq++) {
        if (interval) {
            int64_t due = start + seq * interval, now = now_ns();
            if (due >= end)
                break;
            if (due > now) {
                struct timespec ts = {(time_t)((due - now) / 1000000000),
                                      (long)((due - now) % 1000000000)};
                nanosleep(&ts, NULL);
            } else if (now - due > interval) {
                c->late_cycles++;
            }
            c->due_ns = due;
        }
        if (c->opt->mode == MODE_LEASED)
            leased_cycle(c, seq);
        else
            etcd_cycle(c, seq);
    }
    return NULL;
}

static bool client_init(client_t *c, const options_t *opt, int index)
{
    c->opt = opt;
    c->index = index;
    c->rng =
        0x9E3779B97F4A7C15ULL ^ ((uint64_t)index + 1) * 0xBF58476D1CE4E5B9ULL ^ (uint64_t)now_ns();
    if (!c->rng)
        c->rng = 1;
    c->curl = curl_easy_init();
    if (!c->curl)
        return false;
    c->headers = curl_slist_append(NULL, "Content-Type: application/json");
    c->headers = curl_slist_append(c->headers, "Expect:");
    if (opt->token) {
        char auth[512];
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", opt->token);
        c->headers = curl_slist_append(c->headers, auth);
    }
    curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, c->headers);
    curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c->curl, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, 30000L);
    curl_easy_setopt(c->curl, CURLOPT_MAXCONNECTS, 1L);
    return true;
}

static void client_cleanup(client_t *c)
{
    if (c->curl)
        curl_easy_cleanup(c->curl);
    curl_slist_free_all(c->headers);
    free(c->body);
    free(c->lat_us);
}

static int compare_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The smallest sample with at least q of all samples at or below it. */
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

static void report(const options_t *opt, client_t *clients)
{
    size_t n = 0;
    long ops = 0, cycles = 0, conflicts = 0, lost = 0, failed = 0, connects = 0, late = 0;
    for (int i = 0; i < opt->clients; i++)
        n += clients[i].n_lat;
    uint32_t *all = malloc((n ? n : 1) * sizeof *all);
    if (!all) {
        fprintf(stderr, "http_load: out of memory\n");
        exit(1);
    }
    size_t k = 0;
    error_kind_t errors[MAX_ERROR_KINDS * 4];
    int n_errors = 0;
    for (int i = 0; i < opt->clients; i++) {
        client_t *c = &clients[i];
        memcpy(all + k, c->lat_us, c->n_lat * sizeof *all);
        k += c->n_lat;
        ops += c->ops;
        cycles += c->cycles;
        conflicts += c->conflicts;
        lost += c->lost;
        failed += c->failed;
        connects += c->connects;
        late += c->late_cycles;
        for (int e = 0; e < c->n_errors; e++) {
            int j = 0;
            while (j < n_errors && strcmp(errors[j].key, c->errors[e].key) != 0)
                j++;
            if (j == n_errors) {
                if (n_errors == (int)(sizeof errors / sizeof errors[0]))
                    continue;
                errors[n_errors++] = c->errors[e];
            } else {
                errors[j].count += c->errors[e].count;
            }
        }
    }
    qsort(all, n, sizeof *all, compare_u32);
    if (opt->latency_file) {
        FILE *f = fopen(opt->latency_file, "a");
        if (!f) {
            fprintf(stderr, "http_load: %s: %s\n", opt->latency_file, strerror(errno));
            exit(1);
        }
        for (size_t i = 0; i < n; i++)
            fprintf(f, "%" PRIu32 "\n", all[i]);
        fclose(f);
    }
    printf("mode=%s targets=%s clients=%d seconds=%.2f ops=%ld ops_per_s=%.1f requests=%zu "
           "p50_ms=%.3f p99_ms=%.3f max_ms=%.3f cycles=%ld conflicts=%ld lost=%ld failed=%ld "
           "connects=%ld rate=%ld late_cycles=%ld errors=",
           opt->mode == MODE_LEASED ? "leased" : "etcd",
           opt->targets == TARGETS_EXISTING ? "existing"
           : opt->targets == TARGETS_NEW    ? "new"
                                            : "disjoint",
           opt->clients, opt->seconds, ops, (double)ops / opt->seconds, n,
           percentile_ms(all, n, 0.50), percentile_ms(all, n, 0.99), n ? all[n - 1] / 1000.0 : 0.0,
           cycles, conflicts, lost, failed, connects, opt->rate, late);
    if (!n_errors)
        printf("-");
    for (int e = 0; e < n_errors; e++)
        printf("%s%s:%ld", e ? "," : "", errors[e].key, errors[e].count);
    printf("\n");
    free(all);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: http_load --mode leased|etcd --url URL --clients N --seconds S\n"
            "                 [--targets existing|new|disjoint] [--identities N] [--tag STR]\n"
            "                 [--ttl-ms N] [--latency-file PATH] [--rate OPS_PER_S]\n"
            "leased mode reads its bearer token from LEASE_TOKEN.\n");
    exit(2);
}

static long parse_long(const char *v, long min, long max)
{
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || *end || end == v || n < min || n > max)
        usage();
    return n;
}

int main(int argc, char **argv)
{
    options_t opt = {.mode = MODE_LEASED,
                     .targets = TARGETS_EXISTING,
                     .clients = 1,
                     .seconds = 5,
                     .identities = 100000,
                     .ttl_ms = 30000,
                     .tag = "x"};
    const char *mode = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            usage();
        i++;
        if (strcmp(a, "--mode") == 0)
            mode = v;
        else if (strcmp(a, "--url") == 0)
            opt.url = v;
        else if (strcmp(a, "--clients") == 0)
            opt.clients = (int)parse_long(v, 1, 4096);
        else if (strcmp(a, "--seconds") == 0)
            opt.seconds = (double)parse_long(v, 1, 86400);
        else if (strcmp(a, "--identities") == 0)
            opt.identities = parse_long(v, 1, 1000000000);
        else if (strcmp(a, "--ttl-ms") == 0)
            opt.ttl_ms = parse_long(v, 1000, 3600000);
        else if (strcmp(a, "--tag") == 0)
            opt.tag = v;
        else if (strcmp(a, "--rate") == 0)
            opt.rate = parse_long(v, 1, 10000000);
        else if (strcmp(a, "--latency-file") == 0)
            opt.latency_file = v;
        else if (strcmp(a, "--targets") == 0) {
            if (strcmp(v, "existing") == 0)
                opt.targets = TARGETS_EXISTING;
            else if (strcmp(v, "new") == 0)
                opt.targets = TARGETS_NEW;
            else if (strcmp(v, "disjoint") == 0)
                opt.targets = TARGETS_DISJOINT;
            else
                usage();
        } else
            usage();
    }
    if (!mode || !opt.url || strlen(opt.url) > 256 || strlen(opt.tag) > 24)
        usage();
    if (strcmp(mode, "leased") == 0) {
        opt.mode = MODE_LEASED;
        opt.token = getenv("LEASE_TOKEN");
        if (!opt.token || !*opt.token || strlen(opt.token) > 400) {
            fprintf(stderr, "http_load: leased mode needs LEASE_TOKEN\n");
            return 2;
        }
    } else if (strcmp(mode, "etcd") == 0) {
        opt.mode = MODE_ETCD;
    } else {
        usage();
    }

    curl_global_init(CURL_GLOBAL_DEFAULT);
    client_t *clients = calloc((size_t)opt.clients, sizeof *clients);
    if (!clients)
        return 1;
    pthread_barrier_init(&ready_barrier, NULL, (unsigned)opt.clients + 1);
    pthread_barrier_init(&go_barrier, NULL, (unsigned)opt.clients + 1);
    /* Until the window opens nothing counts: setup requests complete
     * "after" an end that lies in the past. */
    window_end_ns = 0;
    int started = 0;
    for (int i = 0; i < opt.clients; i++) {
        if (!client_init(&clients[i], &opt, i) ||
            pthread_create(&clients[i].thread, NULL, client_main, &clients[i]) != 0) {
            fprintf(stderr, "http_load: cannot start client %d\n", i);
            return 1;
        }
        started++;
    }
    pthread_barrier_wait(&ready_barrier);
    __atomic_store_n(&window_end_ns, now_ns() + (int64_t)(opt.seconds * 1e9), __ATOMIC_RELAXED);
    pthread_barrier_wait(&go_barrier);
    int status = 0;
    for (int i = 0; i < started; i++) {
        pthread_join(clients[i].thread, NULL);
        if (clients[i].setup_failed) {
            fprintf(stderr, "http_load: client %d: %s\n", i, clients[i].setup_error);
            status = 1;
        }
    }
    if (status == 0)
        report(&opt, clients);
    for (int i = 0; i < opt.clients; i++)
        client_cleanup(&clients[i]);
    free(clients);
    pthread_barrier_destroy(&ready_barrier);
    pthread_barrier_destroy(&go_barrier);
    curl_global_cleanup();
    return status;
}
