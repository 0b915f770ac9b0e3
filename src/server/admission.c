/*
 * admission.c - token buckets (per credential; per client address for
 * requests the credential cache cannot vouch for; failed authentications
 * per client address), the global in-flight bound, and the fair-share
 * bounds per credential and tenant.
 *
 * Buckets live in small open hash tables keyed by a string (credential id
 * or address), guarded by one mutex (a take is a few arithmetic
 * operations). A bucket left untouched long enough to be full again
 * carries no information, so when a table fills, such buckets are dropped;
 * a table therefore stays bounded by the keys active within about one
 * second, capped at BUCKETS_MAX (beyond that, new keys share the refusal
 * path rather than growing memory without bound).
 *
 * Fair shares: a chained hash of counters keyed "c:<credential>" and
 * "t:<tenant>" counts requests in flight and acquires waiting; an entry
 * exists only while its counts are not zero, so the table is bounded by the
 * requests in flight (itself bounded by LEASE_MAX_INFLIGHT).
 */
#include "admission.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lease/identity.h"
#include "copy_text.h"

#define BUCKETS_MAX 8192 /* power of two */
#define PRUNE_EVERY_NS INT64_C(100000000)
#define SHARE_BUCKETS 1024 /* power of two */
#define UNLIMITED INT64_C(1000000000)

typedef struct bucket {
    char key[LEASE_ID_MAX + 1]; /* "" = free slot */
    double tokens;
    int64_t last_ns;
} bucket_t;

/* One kind of bucket: all keys share its rate and burst. */
typedef struct bucket_table {
    double rate;  /* tokens per second */
    double burst; /* bucket size */
    size_t used;
    int64_t last_prune_ns; /* a prune is O(table): at most one per PRUNE_EVERY_NS */
    bucket_t *buckets;
    uint64_t rejected; /* atomic */
} bucket_table_t;

/* Requests in flight and acquires waiting of one credential or tenant. */
typedef struct share {
    struct share *next;
    char key[LEASE_ID_MAX + 3]; /* "c:" or "t:" + id */
    int64_t inflight, waiting;
} share_t;

struct leased_admission {
    int64_t max_inflight;
    int64_t inflight;           /* atomic */
    uint64_t rejected_inflight; /* atomic */
    leased_admission_limits_t limits;
    pthread_mutex_t mutex;
    bucket_table_t credentials, sources, failures;
    share_t *shares[SHARE_BUCKETS];
    uint64_t rejected_share; /* under mutex */
};

static bool table_init(bucket_table_t *t, int64_t rate_per_s)
{
    memset(t, 0, sizeof *t);
    t->rate = (double)rate_per_s;
    t->burst = (double)rate_per_s;
    t->buckets = calloc(BUCKETS_MAX, sizeof *t->buckets);
    return t->buckets != NULL;
}

static void table_set_rate(bucket_table_t *t, int64_t rate_per_s)
{
    t->rate = (double)rate_per_s;
    t->burst = (double)rate_per_s;
}

leased_admission_t *leased_admission_new(int64_t rate_per_s, int64_t max_inflight)
{
    leased_admission_t *adm = calloc(1, sizeof *adm);
    if (!adm)
        return NULL;
    if (!table_init(&adm->credentials, rate_per_s) || !table_init(&adm->sources, UNLIMITED) ||
        !table_init(&adm->failures, UNLIMITED)) {
        free(adm->credentials.buckets);
        free(adm->sources.buckets);
        free(adm->failures.buckets);
        free(adm);
        return NULL;
    }
    adm->max_inflight = max_inflight;
    /* until configured: no bound beyond the global ones */
    adm->limits = (leased_admission_limits_t){max_inflight, max_inflight, max_inflight,
                                              max_inflight, UNLIMITED,    UNLIMITED};
    pthread_mutex_init(&adm->mutex, NULL);
    return adm;
}

void leased_admission_configure(leased_admission_t *adm, const leased_admission_limits_t *limits)
{
    pthread_mutex_lock(&adm->mutex);
    adm->limits = *limits;
    table_set_rate(&adm->sources, limits->source_rate_per_s);
    table_set_rate(&adm->failures, limits->auth_failure_rate_per_s);
    pthread_mutex_unlock(&adm->mutex);
}

void leased_admission_free(leased_admission_t *adm)
{
    if (!adm)
        return;
    for (size_t i = 0; i < SHARE_BUCKETS; i++) {
        while (adm->shares[i]) {
            share_t *s = adm->shares[i];
            adm->shares[i] = s->next;
            free(s);
        }
    }
    pthread_mutex_destroy(&adm->mutex);
    free(adm->credentials.buckets);
    free(adm->sources.buckets);
    free(adm->failures.buckets);
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

static double refill(const bucket_table_t *t, const bucket_t *b, int64_t now_ns)
{
    /* callers read the clock before taking the mutex, so time may appear to
     * step back by a little: never refill negatively */
    int64_t elapsed = now_ns > b->last_ns ? now_ns - b->last_ns : 0;
    double tokens = b->tokens + (double)elapsed / 1e9 * t->rate;
    return tokens > t->burst ? t->burst : tokens;
}

/* Drops buckets that have refilled completely (under the mutex). Entries
 * are re-inserted, because open addressing cannot leave holes in probe
 * chains. */
static void prune(bucket_table_t *t, int64_t now_ns)
{
    bucket_t *old = t->buckets;
    bucket_t *fresh = calloc(BUCKETS_MAX, sizeof *fresh);
    if (!fresh)
        return;
    size_t used = 0;
    for (size_t i = 0; i < BUCKETS_MAX; i++) {
        if (!old[i].key[0] || refill(t, &old[i], now_ns) >= t->burst)
            continue;
        size_t j = hash_id(old[i].key) & (BUCKETS_MAX - 1);
        while (fresh[j].key[0])
            j = (j + 1) & (BUCKETS_MAX - 1);
        fresh[j] = old[i];
        used++;
    }
    t->buckets = fresh;
    t->used = used;
    free(old);
}

/* key's bucket, refilled to now (under the mutex); NULL when the table is
 * full of keys inside their window. */
static bucket_t *bucket_of(bucket_table_t *t, const char *key, int64_t now_ns)
{
    if (t->used >= BUCKETS_MAX * 3 / 4 &&
        (t->last_prune_ns == 0 || now_ns - t->last_prune_ns >= PRUNE_EVERY_NS)) {
        prune(t, now_ns);
        t->last_prune_ns = now_ns;
    }
    size_t i = hash_id(key) & (BUCKETS_MAX - 1);
    while (t->buckets[i].key[0] && strcmp(t->buckets[i].key, key) != 0)
        i = (i + 1) & (BUCKETS_MAX - 1);
    bucket_t *b = &t->buckets[i];
    if (!b->key[0]) {
        if (t->used >= BUCKETS_MAX * 3 / 4)
            return NULL;
        leased_copy_text(b->key, sizeof b->key, key);
        b->tokens = t->burst;
        b->last_ns = now_ns;
        t->used++;
    }
    b->tokens = refill(t, b, now_ns);
    if (now_ns > b->last_ns)
        b->last_ns = now_ns;
    return b;
}

static int64_t wait_for_token_ms(const bucket_table_t *t, const bucket_t *b)
{
    double tokens = b ? b->tokens : 0;
    return (int64_t)((1.0 - tokens) / t->rate * 1000.0) + 1;
}

/* Takes one token of key (take) or only looks (peek). */
static bool table_take(leased_admission_t *adm, bucket_table_t *t, const char *key, int64_t now_ns,
                       bool take, int64_t *retry_after_ms)
{
    bool ok = false;
    pthread_mutex_lock(&adm->mutex);
    bucket_t *b = bucket_of(t, key, now_ns);
    if (b && b->tokens >= 1.0) {
        if (take)
            b->tokens -= 1.0;
        ok = true;
    } else if (retry_after_ms) {
        *retry_after_ms = wait_for_token_ms(t, b);
    }
    pthread_mutex_unlock(&adm->mutex);
    if (!ok)
        __atomic_add_fetch(&t->rejected, 1, __ATOMIC_RELAXED);
    return ok;
}

bool leased_admission_take(leased_admission_t *adm, const char *credential_id, int64_t now_ns,
                           int64_t *retry_after_ms)
{
    return table_take(adm, &adm->credentials, credential_id, now_ns, true, retry_after_ms);
}

bool leased_admission_source_take(leased_admission_t *adm, const char *source, int64_t now_ns,
                                  int64_t *retry_after_ms)
{
    return table_take(adm, &adm->sources, source, now_ns, true, retry_after_ms);
}

bool leased_admission_lookup_allowed(leased_admission_t *adm, const char *source, int64_t now_ns,
                                     int64_t *retry_after_ms)
{
    return table_take(adm, &adm->failures, source, now_ns, false, retry_after_ms);
}

void leased_admission_auth_failed(leased_admission_t *adm, const char *source, int64_t now_ns)
{
    pthread_mutex_lock(&adm->mutex);
    bucket_t *b = bucket_of(&adm->failures, source, now_ns);
    if (b && b->tokens >= 1.0)
        b->tokens -= 1.0;
    else if (b)
        b->tokens = 0; /* already empty: stays empty for a whole refill */
    pthread_mutex_unlock(&adm->mutex);
}

/* ---- fair shares -------------------------------------------------------- */

static share_t *share_get(leased_admission_t *adm, const char *kind, const char *id, bool create)
{
    char key[LEASE_ID_MAX + 3];
    leased_copy_text2(key, sizeof key, kind, id);
    size_t b = hash_id(key) & (SHARE_BUCKETS - 1);
    for (share_t *s = adm->shares[b]; s; s = s->next)
        if (strcmp(s->key, key) == 0)
            return s;
    if (!create)
        return NULL;
    share_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    memcpy(s->key, key, sizeof s->key);
    s->next = adm->shares[b];
    adm->shares[b] = s;
    return s;
}

static void share_drop_if_idle(leased_admission_t *adm, share_t *s)
{
    if (!s || s->inflight > 0 || s->waiting > 0)
        return;
    share_t **pp = &adm->shares[hash_id(s->key) & (SHARE_BUCKETS - 1)];
    while (*pp && *pp != s)
        pp = &(*pp)->next;
    if (*pp)
        *pp = s->next;
    free(s);
}

bool leased_admission_claim(leased_admission_t *adm, const char *credential_id,
                            const char *tenant_id, bool waiting, int64_t *retry_after_ms)
{
    bool ok = false;
    pthread_mutex_lock(&adm->mutex);
    share_t *c = share_get(adm, "c:", credential_id, true);
    share_t *t = share_get(adm, "t:", tenant_id, true);
    if (c && t) {
        if (waiting)
            ok = c->waiting < adm->limits.max_waiting_per_credential &&
                 t->waiting < adm->limits.max_waiting_per_tenant;
        else
            ok = c->inflight < adm->limits.max_inflight_per_credential &&
                 t->inflight < adm->limits.max_inflight_per_tenant;
        if (ok && waiting) {
            c->waiting++;
            t->waiting++;
        } else if (ok) {
            c->inflight++;
            t->inflight++;
        }
    }
    if (!ok) {
        adm->rejected_share++;
        /* a share frees when one of its requests ends: soon, but not at a
         * known time */
        *retry_after_ms = 250;
    }
    share_drop_if_idle(adm, c);
    share_drop_if_idle(adm, t);
    pthread_mutex_unlock(&adm->mutex);
    return ok;
}

void leased_admission_unclaim(leased_admission_t *adm, const char *credential_id,
                              const char *tenant_id, bool waiting)
{
    pthread_mutex_lock(&adm->mutex);
    share_t *c = share_get(adm, "c:", credential_id, false);
    share_t *t = share_get(adm, "t:", tenant_id, false);
    if (c) {
        if (waiting && c->waiting > 0)
            c->waiting--;
        else if (!waiting && c->inflight > 0)
            c->inflight--;
        share_drop_if_idle(adm, c);
    }
    if (t) {
        if (waiting && t->waiting > 0)
            t->waiting--;
        else if (!waiting && t->inflight > 0)
            t->inflight--;
        share_drop_if_idle(adm, t);
    }
    pthread_mutex_unlock(&adm->mutex);
}

void leased_admission_stats(leased_admission_t *adm, leased_admission_stats_t *out)
{
    out->rejected_rate = __atomic_load_n(&adm->credentials.rejected, __ATOMIC_RELAXED);
    out->rejected_inflight = __atomic_load_n(&adm->rejected_inflight, __ATOMIC_RELAXED);
    out->rejected_source = __atomic_load_n(&adm->sources.rejected, __ATOMIC_RELAXED);
    out->rejected_lookups = __atomic_load_n(&adm->failures.rejected, __ATOMIC_RELAXED);
    pthread_mutex_lock(&adm->mutex);
    out->rejected_share = adm->rejected_share;
    pthread_mutex_unlock(&adm->mutex);
}

uint64_t leased_admission_rejected_rate(const leased_admission_t *adm)
{
    return __atomic_load_n(&adm->credentials.rejected, __ATOMIC_RELAXED);
}

uint64_t leased_admission_rejected_inflight(const leased_admission_t *adm)
{
    return __atomic_load_n(&adm->rejected_inflight, __ATOMIC_RELAXED);
}
