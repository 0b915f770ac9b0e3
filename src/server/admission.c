/*
 * admission.c - per-credential token buckets and the global in-flight bound.
 *
 * Buckets live in a small open hash table keyed by credential id, guarded
 * by one mutex (a take is a few arithmetic operations). A bucket left
 * untouched long enough to be full again carries no information, so when
 * the table fills, such buckets are dropped; the table therefore stays
 * bounded by the number of credentials active within about one second,
 * capped at BUCKETS_MAX (beyond that, new credentials share the refusal
 * path rather than growing memory without bound).
 */
#include "server/admission.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lease/identity.h"

#define BUCKETS_MAX 8192 /* power of two */
#define PRUNE_EVERY_NS INT64_C(100000000)

typedef struct bucket {
    char credential_id[LEASE_ID_MAX + 1]; /* "" = free slot */
    double tokens;
    int64_t last_ns;
} bucket_t;

struct leased_admission {
    double rate;  /* tokens per second */
    double burst; /* bucket size */
    int64_t max_inflight;
    int64_t inflight;                          /* atomic */
    uint64_t rejected_rate, rejected_inflight; /* atomic */
    pthread_mutex_t mutex;
    size_t used;
    int64_t last_prune_ns; /* a prune is O(table): at most one per PRUNE_EVERY_NS */
    bucket_t *buckets;
};

leased_admission_t *leased_admission_new(int64_t rate_per_s, int64_t max_inflight)
{
    leased_admission_t *adm = calloc(1, sizeof *adm);
    if (!adm)
        return NULL;
    adm->buckets = calloc(BUCKETS_MAX, sizeof *adm->buckets);
    if (!adm->buckets) {
        free(adm);
        return NULL;
    }
    adm->rate = (double)rate_per_s;
    adm->burst = (double)rate_per_s;
    adm->max_inflight = max_inflight;
    pthread_mutex_init(&adm->mutex, NULL);
    return adm;
}

void leased_admission_free(leased_admission_t *adm)
{
    if (!adm)
        return;
    pthread_mutex_destroy(&adm->mutex);
    free(adm->buckets);
    free(adm);
}

bool leased_admission_enter(leased_admission_t *adm, int64_t *retry_after_ms)
{
    int64_t now = __atomic_add_fetch(&adm->inflight, 1, __ATOMIC_ACQ_REL);
    if (now <= adm->max_inflight)
        return true;
    __atomic_sub_fetch(&adm->inflight, 1, __ATOMIC_ACQ_REL);
    __atomic_add_fetch(&adm->rejected_inflight, 1, __ATOMIC_RELAXED);
    /* Requests finish within their deadlines; a short pause spreads retries. */
    *retry_after_ms = 100;
    return false;
}

void leased_admission_leave(leased_admission_t *adm)
{
    __atomic_sub_fetch(&adm->inflight, 1, __ATOMIC_ACQ_REL);
}

int64_t leased_admission_inflight(const leased_admission_t *adm)
{
    return __atomic_load_n(&adm->inflight, __ATOMIC_ACQUIRE);
}

static uint64_t hash_id(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

static double refill(const leased_admission_t *adm, const bucket_t *b, int64_t now_ns)
{
    /* callers read the clock before taking the mutex, so time may appear to
     * step back by a little: never refill negatively */
    int64_t elapsed = now_ns > b->last_ns ? now_ns - b->last_ns : 0;
    double t = b->tokens + (double)elapsed / 1e9 * adm->rate;
    return t > adm->burst ? adm->burst : t;
}

/* Drops buckets that have refilled completely (under the mutex). Entries
 * are re-inserted, because open addressing cannot leave holes in probe
 * chains. */
static void prune(leased_admission_t *adm, int64_t now_ns)
{
    bucket_t *old = adm->buckets;
    bucket_t *fresh = calloc(BUCKETS_MAX, sizeof *fresh);
    if (!fresh)
        return;
    size_t used = 0;
    for (size_t i = 0; i < BUCKETS_MAX; i++) {
        if (!old[i].credential_id[0] || refill(adm, &old[i], now_ns) >= adm->burst)
            continue;
        size_t j = hash_id(old[i].credential_id) & (BUCKETS_MAX - 1);
        while (fresh[j].credential_id[0])
            j = (j + 1) & (BUCKETS_MAX - 1);
        fresh[j] = old[i];
        used++;
    }
    adm->buckets = fresh;
    adm->used = used;
    free(old);
}

bool leased_admission_take(leased_admission_t *adm, const char *credential_id, int64_t now_ns,
                           int64_t *retry_after_ms)
{
    bool ok = false;
    pthread_mutex_lock(&adm->mutex);
    if (adm->used >= BUCKETS_MAX * 3 / 4 &&
        (adm->last_prune_ns == 0 || now_ns - adm->last_prune_ns >= PRUNE_EVERY_NS)) {
        prune(adm, now_ns);
        adm->last_prune_ns = now_ns;
    }
    size_t i = hash_id(credential_id) & (BUCKETS_MAX - 1);
    while (adm->buckets[i].credential_id[0] &&
           strcmp(adm->buckets[i].credential_id, credential_id) != 0)
        i = (i + 1) & (BUCKETS_MAX - 1);
    bucket_t *b = &adm->buckets[i];
    if (!b->credential_id[0]) {
        if (adm->used >= BUCKETS_MAX * 3 / 4) {
            /* every slot is busy with a credential inside its window */
            *retry_after_ms = (int64_t)(1000.0 / adm->rate) + 1;
            goto cleanup;
        }
        snprintf(b->credential_id, sizeof b->credential_id, "%s", credential_id);
        b->tokens = adm->burst;
        b->last_ns = now_ns;
        adm->used++;
    }
    b->tokens = refill(adm, b, now_ns);
    if (now_ns > b->last_ns)
        b->last_ns = now_ns;
    if (b->tokens >= 1.0) {
        b->tokens -= 1.0;
        ok = true;
    } else {
        double wait_ms = (1.0 - b->tokens) / adm->rate * 1000.0;
        *retry_after_ms = (int64_t)wait_ms + 1;
    }
cleanup:
    pthread_mutex_unlock(&adm->mutex);
    if (!ok)
        __atomic_add_fetch(&adm->rejected_rate, 1, __ATOMIC_RELAXED);
    return ok;
}

uint64_t leased_admission_rejected_rate(const leased_admission_t *adm)
{
    return __atomic_load_n(&adm->rejected_rate, __ATOMIC_RELAXED);
}

uint64_t leased_admission_rejected_inflight(const leased_admission_t *adm)
{
    return __atomic_load_n(&adm->rejected_inflight, __ATOMIC_RELAXED);
}
