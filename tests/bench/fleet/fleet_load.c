/*
 * fleet_load.c - a fleet's steady load (issue 20): K worker processes
 * (threads here, each with a lease_client_t of its own, as a process has),
 * each holding M leases of TTL T renewed every T/3, through libleaseclient
 * against a real leased.
 *
 *   --mode single  one POST /v1/leases/renew per lease per period (how the
 *                  C worker renewed before issue 20)
 *   --mode batch   one POST /v1/leases/renew-batch per worker per period,
 *                  --batch renewals a call at most (default 100: the
 *                  route's limit, and what the client's renewal thread
 *                  sends for a process holding M leases)
 *
 * After all leases are acquired it runs --seconds and prints one line:
 * the renewals done and expected (K*M*3/T per second), the latency of the
 * call that carried each renewal (p50, p99, max, ms), how late renewals
 * started after their due time (p99, ms), and renewals that failed or
 * found their lease lost. Each renewal is anchored at its send, as the
 * worker anchors it: the next one is due T/3 after the last one started.
 *
 *   LEASE_TOKEN=lsk_... fleet_load --url URL --mode batch --workers 8
 *       --leases 500 --ttl-ms 3000 --seconds 20 [--tag run1]
 */
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lease/client.h"

#define NS_PER_MS 1000000LL
#define BATCH_MAX 100 /* the route's limit */

static const char *url, *token, *mode = "batch", *tag = "fleet";
static int workers = 4, leases = 100, seconds = 20, batch = BATCH_MAX;
static int64_t ttl_ms = 3000;
static int64_t measure_from_ns, measure_until_ns;
static pthread_barrier_t all_acquired, window_set;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void sleep_until(int64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000LL), (long)(ns % 1000000000LL)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
        ;
}

typedef struct held {
    lease_record_t lease;
    int64_t due_ns;
} held_t;

typedef struct worker {
    int index;
    lease_client_t *client;
    held_t *held;
    int n_held;
    /* measured renewals: latency of their call and lateness, microseconds */
    int64_t *latency_us, *late_us;
    size_t n, cap;
    long failed, lost, calls;
    int acquire_failed;
} worker_t;

static void note(worker_t *w, int64_t latency_ns, int64_t late_ns, int count)
{
    for (int i = 0; i < count; i++) {
        if (w->n == w->cap) {
            w->cap = w->cap ? w->cap * 2 : 4096;
            w->latency_us = realloc(w->latency_us, w->cap * sizeof *w->latency_us);
            w->late_us = realloc(w->late_us, w->cap * sizeof *w->late_us);
            if (!w->latency_us || !w->late_us) {
                fprintf(stderr, "fleet_load: out of memory\n");
                exit(1);
            }
        }
        w->latency_us[w->n] = latency_ns / 1000;
        w->late_us[w->n] = late_ns > 0 ? late_ns / 1000 : 0;
        w->n++;
    }
}

static lease_client_owner_t owner_of(const held_t *h)
{
    /* renewed with the fleet's TTL (acquired with a long one: see acquire_all) */
    return (lease_client_owner_t){lease_client_identity_of(&h->lease.identity), h->lease.lease_id,
                                  h->lease.fencing_token, "fleet-load", ttl_ms};
}

static bool measuring(int64_t t)
{
    return t >= measure_from_ns && t < measure_until_ns;
}

/* Acquired with a TTL of 5 minutes, so that the first leases do not expire
 * while a large fleet is still being acquired; every renewal then sets T. */
#define ACQUIRE_TTL_MS 300000
static void acquire_all(worker_t *w)
{
    char target[64];
    for (int i = 0; i < leases; i++) {
        snprintf(target, sizeof target, "%s-w%d-l%d", tag, w->index, i);
        lease_client_acquire_t req = {
            .identity = {"bench", "bench", "fleet", target, "fleet", "default", NULL},
            .service_instance_id = "fleet-load",
            .execution_id = "exec_fleet",
            .job_id = "job_fleet",
            .ttl_ms = ACQUIRE_TTL_MS,
        };
        lease_client_call_t call = {.deadline_ms = 30000};
        lease_result_t res;
        if (lease_client_acquire(w->client, &req, &call, &res) != LEASE_ACQUIRED) {
            w->acquire_failed++;
            continue;
        }
        w->held[w->n_held++].lease = res.lease;
    }
}

/* One lease_client_renew per lease, each when its own period is over. */
static void run_single(worker_t *w)
{
    for (;;) {
        held_t *next = NULL;
        for (int i = 0; i < w->n_held; i++)
            if (!next || w->held[i].due_ns < next->due_ns)
                next = &w->held[i];
        if (!next || next->due_ns >= measure_until_ns)
            return;
        sleep_until(next->due_ns);
        int64_t start = now_ns();
        lease_client_owner_t req = owner_of(next);
        lease_client_call_t call = {.deadline_ms = ttl_ms / 2};
        lease_result_t res;
        lease_code_t code = lease_client_renew(w->client, &req, &call, &res);
        int64_t end = now_ns();
        if (measuring(start)) {
            w->calls++;
            note(w, end - start, start - next->due_ns, 1);
            w->failed += code != LEASE_RENEWED && code != LEASE_LOST;
            w->lost += code == LEASE_LOST;
        }
        next->due_ns = start + ttl_ms * NS_PER_MS / 3;
    }
}

/* One renew-batch (--batch renewals at most a call) for every lease of the worker, once
 * a period: the client's renewal thread in steady state. */
static void run_batch(worker_t *w)
{
    lease_client_owner_t *reqs = calloc(BATCH_MAX, sizeof *reqs);
    lease_result_t *res = calloc(BATCH_MAX, sizeof *res);
    /* the workers' periods spread over the first one */
    int64_t period = ttl_ms * NS_PER_MS / 3;
    int64_t due = measure_from_ns - period + period * w->index / workers;
    while (due < measure_until_ns) {
        sleep_until(due);
        int64_t period_start = now_ns();
        for (int off = 0; off < w->n_held; off += batch) {
            int n = w->n_held - off < batch ? w->n_held - off : batch;
            for (int i = 0; i < n; i++)
                reqs[i] = owner_of(&w->held[off + i]);
            int64_t start = now_ns();
            lease_client_call_t call = {.deadline_ms = ttl_ms / 2};
            lease_code_t code =
                lease_client_renew_many(w->client, reqs, (size_t)n, NULL, &call, res);
            int64_t end = now_ns();
            if (!measuring(start))
                continue;
            w->calls++;
            note(w, end - start, start - due, n);
            for (int i = 0; i < n; i++) {
                lease_code_t c = code == LEASE_RENEWED ? res[i].code : code;
                w->failed += c != LEASE_RENEWED && c != LEASE_LOST;
                w->lost += c == LEASE_LOST;
            }
        }
        due = period_start + ttl_ms * NS_PER_MS / 3;
    }
    free(reqs);
    free(res);
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    w->client = lease_client_new(url, token);
    w->held = calloc((size_t)leases, sizeof *w->held);
    if (!w->client || !w->held) {
        fprintf(stderr, "fleet_load: cannot start worker %d\n", w->index);
        exit(1);
    }
    acquire_all(w);
    pthread_barrier_wait(&all_acquired);
    pthread_barrier_wait(&window_set); /* measure_from_ns and _until_ns */
    /* single: the leases' periods spread over the first one */
    int64_t period = ttl_ms * NS_PER_MS / 3;
    for (int i = 0; i < w->n_held; i++)
        w->held[i].due_ns = measure_from_ns - period +
                            period * ((int64_t)w->index * leases + i) / ((int64_t)workers * leases);
    if (strcmp(mode, "single") == 0)
        run_single(w);
    else
        run_batch(w);
    /* give the leases back, a batch at a time */
    lease_result_t res[BATCH_MAX];
    lease_client_owner_t reqs[BATCH_MAX];
    for (int off = 0; off < w->n_held; off += batch) {
        int n = w->n_held - off < batch ? w->n_held - off : batch;
        for (int i = 0; i < n; i++)
            reqs[i] = owner_of(&w->held[off + i]);
        lease_client_call_t call = {.deadline_ms = 10000};
        if (lease_client_release_many(w->client, reqs, (size_t)n, NULL, &call, res) !=
            LEASE_RELEASED)
            fprintf(stderr, "fleet_load: a release batch failed (the leases expire)\n");
    }
    lease_client_free(w->client);
    free(w->held);
    return NULL;
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double pct_ms(int64_t *v, size_t n, double p)
{
    if (n == 0)
        return 0;
    size_t i = (size_t)(p * (double)(n - 1));
    return (double)v[i] / 1000.0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"url", required_argument, NULL, 'u'},
        {"mode", required_argument, NULL, 'm'},
        {"workers", required_argument, NULL, 'k'},
        {"leases", required_argument, NULL, 'l'},
        {"ttl-ms", required_argument, NULL, 't'},
        {"seconds", required_argument, NULL, 's'},
        {"tag", required_argument, NULL, 'g'},
        {"batch", required_argument, NULL, 'b'},
        {NULL, 0, NULL, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'u':
            url = optarg;
            break;
        case 'm':
            mode = optarg;
            break;
        case 'k':
            workers = atoi(optarg);
            break;
        case 'l':
            leases = atoi(optarg);
            break;
        case 't':
            ttl_ms = atoll(optarg);
            break;
        case 's':
            seconds = atoi(optarg);
            break;
        case 'g':
            tag = optarg;
            break;
        case 'b':
            batch = atoi(optarg);
            break;
        default:
            return 2;
        }
    }
    token = getenv("LEASE_TOKEN");
    if (!url || !token || batch < 1 || batch > BATCH_MAX || workers < 1 || leases < 1 ||
        ttl_ms < 1500 || seconds < 1 ||
        (strcmp(mode, "single") != 0 && strcmp(mode, "batch") != 0)) {
        fprintf(stderr, "usage: LEASE_TOKEN=... fleet_load --url URL --mode single|batch "
                        "--workers K --leases M --ttl-ms T --seconds S [--tag TAG]\n");
        return 2;
    }
    worker_t *ws = calloc((size_t)workers, sizeof *ws);
    pthread_t *th = calloc((size_t)workers, sizeof *th);
    pthread_barrier_init(&all_acquired, NULL, (unsigned)workers + 1);
    pthread_barrier_init(&window_set, NULL, (unsigned)workers + 1);
    measure_from_ns = measure_until_ns = INT64_MAX;
    for (int i = 0; i < workers; i++) {
        ws[i].index = i;
        pthread_create(&th[i], NULL, worker_main, &ws[i]);
    }
    pthread_barrier_wait(&all_acquired);
    /* one period of warm-up (the first renewals of a freshly acquired fleet
     * are bunched), then the measurement */
    int64_t t0 = now_ns() + ttl_ms * NS_PER_MS / 3;
    measure_until_ns = t0 + (int64_t)seconds * 1000000000LL;
    measure_from_ns = t0;
    pthread_barrier_wait(&window_set);
    for (int i = 0; i < workers; i++)
        pthread_join(th[i], NULL);

    size_t n = 0;
    long failed = 0, lost = 0, calls = 0, acquire_failed = 0;
    for (int i = 0; i < workers; i++) {
        n += ws[i].n;
        failed += ws[i].failed;
        lost += ws[i].lost;
        calls += ws[i].calls;
        acquire_failed += ws[i].acquire_failed;
    }
    int64_t *lat = malloc((n ? n : 1) * sizeof *lat), *late = malloc((n ? n : 1) * sizeof *late);
    size_t k = 0;
    for (int i = 0; i < workers; i++) {
        memcpy(lat + k, ws[i].latency_us, ws[i].n * sizeof *lat);
        memcpy(late + k, ws[i].late_us, ws[i].n * sizeof *late);
        k += ws[i].n;
        free(ws[i].latency_us);
        free(ws[i].late_us);
    }
    qsort(lat, n, sizeof *lat, cmp64);
    qsort(late, n, sizeof *late, cmp64);
    double expected = (double)workers * leases * 3000.0 / (double)ttl_ms;
    printf("mode=%s batch=%d workers=%d leases_per_worker=%d held=%d ttl_ms=%lld seconds=%d "
           "renewals_per_s=%.1f expected_per_s=%.1f calls_per_s=%.1f p50_ms=%.1f p99_ms=%.1f "
           "max_ms=%.1f late_p99_ms=%.1f failed=%ld lost=%ld acquire_failed=%ld\n",
           mode, batch, workers, leases, workers * leases, (long long)ttl_ms, seconds,
           (double)n / seconds, expected, (double)calls / seconds, pct_ms(lat, n, 0.50),
           pct_ms(lat, n, 0.99), n ? (double)lat[n - 1] / 1000.0 : 0, pct_ms(late, n, 0.99), failed,
           lost, acquire_failed);
    free(lat);
    free(late);
    free(ws);
    free(th);
    return 0;
}
