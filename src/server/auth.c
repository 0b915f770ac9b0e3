/*
 * auth.c - bearer authentication, the credential cache, capability and scope
 * checks (see auth.h).
 *
 * Owns: parsing "Authorization: Bearer lsk_...", the short-lived cache of
 * credential rows looked up through the store, the constant-time digest
 * comparison, expiry and revocation checks, and the decisions "may this
 * caller do X" and "is this identity inside the caller's scope".
 *
 * Cache: a fixed set-associative table (AUTH_SETS x AUTH_WAYS slots), so its
 * memory is bounded whatever ids callers send. A row is trusted for the cache
 * TTL after it was fetched, so a revocation in the database is seen by every
 * instance within that TTL; an unknown id is remembered for a shorter time so
 * a flood of one bad token costs one lookup per interval, not one per request.
 * Unknown ids never push a fresh known credential out of its set, and the
 * caller may refuse a lookup before it is made (lease_auth_gate_t: leased
 * bounds the lookups of a source whose authentications keep failing).
 * Only one thread looks an id up at a time; the others wait for its answer
 * (bounded by their own deadline) instead of stampeding the database.
 * Expiry is the backend's: a lookup says how many milliseconds of validity
 * were left at backend time (0 for every past instant), and the credential
 * expires that long after the lookup began on the monotonic clock, checked
 * on every use, so a cached row never outlives its credential and leased's
 * wall clock plays no part.
 *
 * Costs and answers: a request whose credential the cache vouches for
 * (fresh, right secret, valid) costs no lookup and passes no budget.
 * Every other request costs its source (gate->admit_uncached); while the
 * source's failure budget is spent (gate->allow_lookup), every such request
 * answers LEASE_RATE_LIMITED alike, whether its id is unknown, idle or
 * cached with another secret, after the same work (one digest comparison),
 * so the answer tells nothing about which ids exist or are in use.
 *
 * Secrets: the presented secret and its digest live on the stack of one call
 * and are wiped before it returns. The cache holds stored digests, never
 * secrets. Nothing here logs.
 */
#include "auth.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "lease/token.h"
#include "copy_text.h"

#define AUTH_SETS 256 /* power of two */
#define AUTH_WAYS 4
#define AUTH_DEFAULT_TTL_MS 2000
#define AUTH_MAX_TTL_MS 60000     /* revocation must stay visible within a minute */
#define AUTH_NEGATIVE_TTL_MS 1000 /* unknown ids: at most this, at most the TTL */
#define AUTH_DEFAULT_WAIT_MS 5000 /* the deadline when the caller gives none */

typedef enum auth_slot_state {
    SLOT_EMPTY = 0, /* unused */
    SLOT_LOADING,   /* one thread is looking this id up */
    SLOT_READY,     /* holds the answer fetched at fetched_ns */
} auth_slot_state_t;

typedef struct auth_slot {
    auth_slot_state_t state;
    char credential_id[LEASE_CREDENTIAL_ID_LEN + 1];
    bool found;              /* READY: whether the store knew the id */
    lease_credential_t cred; /* READY and found */
    int64_t fetched_ns;      /* monotonic time of the lookup's start */
    uint64_t seq;            /* bumped by forget, so an in-flight load is not kept */
} auth_slot_t;

struct lease_auth {
    lease_store_t *store;
    int64_t ttl_ns;
    int64_t negative_ttl_ns;
    char *pepper; /* owned copy, wiped on free; NULL: plain SHA-256 */
    uint64_t hash_seed;
    pthread_mutex_t mu;
    pthread_cond_t changed; /* a slot left LOADING (CLOCK_MONOTONIC) */
    uint64_t forgets;       /* bumped by forget: a slot-less load started before is not kept */
    auth_slot_t slots[AUTH_SETS * AUTH_WAYS];
};

static const unsigned known_caps = LEASE_CAP_LEASE | LEASE_CAP_READ | LEASE_CAP_FORCE_RELEASE |
                                   LEASE_CAP_REVOKE | LEASE_CAP_AUDIT_READ;
static const unsigned admin_only_caps = LEASE_CAP_FORCE_RELEASE | LEASE_CAP_REVOKE;

static int64_t config_ttl_ms(const lease_auth_config_t *cfg)
{
    int64_t ms = cfg && cfg->cache_ttl_ms > 0 ? cfg->cache_ttl_ms : AUTH_DEFAULT_TTL_MS;
    return ms > AUTH_MAX_TTL_MS ? AUTH_MAX_TTL_MS : ms;
}

lease_auth_t *lease_auth_new(lease_store_t *store, const lease_auth_config_t *cfg)
{
    lease_auth_t *auth = calloc(1, sizeof *auth);
    pthread_condattr_t attr;
    bool attr_ready = false, mu_ready = false;
    if (!auth)
        return NULL;
    auth->store = store;
    int64_t ttl_ms = config_ttl_ms(cfg);
    auth->ttl_ns = ttl_ms * 1000000;
    auth->negative_ttl_ns =
        (ttl_ms < AUTH_NEGATIVE_TTL_MS ? ttl_ms : AUTH_NEGATIVE_TTL_MS) * 1000000;
    if (cfg && cfg->pepper && *cfg->pepper) {
        auth->pepper = strdup(cfg->pepper);
        if (!auth->pepper)
            goto fail;
    }
    /* A secret hash seed keeps callers from choosing ids that all land in one
     * set and evict each other. */
    if (RAND_bytes((unsigned char *)&auth->hash_seed, sizeof auth->hash_seed) != 1)
        auth->hash_seed = (uint64_t)lease_mono_now_ns() * 0x9e3779b97f4a7c15ull;

    if (pthread_mutex_init(&auth->mu, NULL) != 0)
        goto fail;
    mu_ready = true;
    if (pthread_condattr_init(&attr) != 0)
        goto fail;
    attr_ready = true;
    if (pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) != 0 ||
        pthread_cond_init(&auth->changed, &attr) != 0)
        goto fail;
    pthread_condattr_destroy(&attr);
    return auth;

fail:
    if (attr_ready)
        pthread_condattr_destroy(&attr);
    if (mu_ready)
        pthread_mutex_destroy(&auth->mu);
    if (auth->pepper) {
        OPENSSL_cleanse(auth->pepper, strlen(auth->pepper));
        free(auth->pepper);
    }
    free(auth);
    return NULL;
}

void lease_auth_free(lease_auth_t *auth)
{
    if (!auth)
        return;
    pthread_cond_destroy(&auth->changed);
    pthread_mutex_destroy(&auth->mu);
    if (auth->pepper) {
        OPENSSL_cleanse(auth->pepper, strlen(auth->pepper));
        free(auth->pepper);
    }
    OPENSSL_cleanse(auth->slots, sizeof auth->slots);
    free(auth);
}

static auth_slot_t *set_of(lease_auth_t *auth, const char *credential_id)
{
    uint64_t h = auth->hash_seed ^ 0xcbf29ce484222325ull;
    for (const char *p = credential_id; *p; p++) {
        h ^= (unsigned char)*p;
        h *= 0x100000001b3ull;
    }
    h ^= h >> 29;
    return &auth->slots[(h & (AUTH_SETS - 1)) * AUTH_WAYS];
}

/* Parses "Bearer <token>": the scheme is case-insensitive (RFC 7235),
 * followed by one or more spaces, then exactly the token. */
static const char *bearer_token(const char *authorization)
{
    if (!authorization || strncasecmp(authorization, "Bearer ", 7) != 0)
        return NULL;
    const char *p = authorization + 7;
    while (*p == ' ')
        p++;
    return *p ? p : NULL;
}

static void fill_timeout(const lease_deadline_t *deadline, struct timespec *ts)
{
    ts->tv_sec = (time_t)(deadline->mono_ns / 1000000000);
    ts->tv_nsec = (long)(deadline->mono_ns % 1000000000);
}

/* Whether a ready slot may give way to another id: it holds an unknown
 * id, or its answer is stale. */
static bool evictable(const lease_auth_t *auth, const auth_slot_t *s, int64_t now)
{
    return !s->found || now - s->fetched_ns >= auth->ttl_ns;
}

/* Maps the store's answer for one lookup: a success code or a definite "no
 * such credential" is an answer; anything else means no answer was had. */
static bool lookup_answered(lease_code_t code, lease_code_t *failure)
{
    if (lease_code_is_success(code))
        return true;
    switch (code) {
    case LEASE_INVALID_CREDENTIAL:
    case LEASE_INVALID_LEASE_REQUEST:
    case LEASE_NOT_FOUND:
        return true;
    case LEASE_DEADLINE_EXCEEDED:
        *failure = LEASE_DEADLINE_EXCEEDED;
        return false;
    default:
        *failure = LEASE_BACKEND_UNAVAILABLE;
        return false;
    }
}

/*
 * Returns the credential row for id: from the cache while fresh, otherwise
 * from the store (one thread per id; others wait). On success returns true
 * with *found and (when found) *out set. On false, *code says why no answer
 * could be had.
 */
static bool credential_get(lease_auth_t *auth, const char *id, const lease_deadline_t *deadline,
                           lease_credential_t *out, bool *found, int64_t *fetched_ns,
                           lease_code_t *code)
{
    auth_slot_t *set = set_of(auth, id);
    /* Without a deadline from the caller, a bounded one of our own: neither
     * the wait for another thread's lookup nor the lookup may be endless. */
    lease_deadline_t fallback;
    if (!deadline) {
        fallback = lease_deadline_in(AUTH_DEFAULT_WAIT_MS);
        deadline = &fallback;
    }
    struct timespec until;
    fill_timeout(deadline, &until);

    pthread_mutex_lock(&auth->mu);
    for (;;) {
        int64_t now = lease_mono_now_ns();
        auth_slot_t *mine = NULL, *empty = NULL, *oldest = NULL;
        for (int w = 0; w < AUTH_WAYS; w++) {
            auth_slot_t *s = &set[w];
            if (s->state != SLOT_EMPTY && strcmp(s->credential_id, id) == 0) {
                mine = s;
                break;
            }
            if (s->state == SLOT_EMPTY) {
                if (!empty)
                    empty = s;
            } else if (s->state == SLOT_READY && evictable(auth, s, now) &&
                       (!oldest || s->fetched_ns < oldest->fetched_ns)) {
                /* A fresh known credential is never evicted: a flood of
                 * unknown ids must not push the callers that work out of
                 * the cache (and onto the database). */
                oldest = s;
            }
        }

        if (mine && mine->state == SLOT_READY) {
            int64_t ttl = mine->found ? auth->ttl_ns : auth->negative_ttl_ns;
            if (now - mine->fetched_ns < ttl) {
                *found = mine->found;
                *fetched_ns = mine->fetched_ns;
                if (mine->found)
                    *out = mine->cred;
                pthread_mutex_unlock(&auth->mu);
                return true;
            }
        }
        if (mine && mine->state == SLOT_LOADING) {
            /* Someone else is asking the store; their answer serves us too. */
            if (pthread_cond_timedwait(&auth->changed, &auth->mu, &until) == ETIMEDOUT) {
                pthread_mutex_unlock(&auth->mu);
                *code = LEASE_DEADLINE_EXCEEDED;
                return false;
            }
            continue;
        }

        /* We look it up. Claim a slot (stale own, empty, or the oldest
         * unknown or stale one); when there is none, look up without
         * caching. */
        auth_slot_t *slot = mine ? mine : empty ? empty : oldest;
        uint64_t seq = 0, forgets = auth->forgets;
        if (slot) {
            slot->state = SLOT_LOADING;
            memcpy(slot->credential_id, id, LEASE_CREDENTIAL_ID_LEN + 1);
            slot->seq++;
            seq = slot->seq;
        }
        pthread_mutex_unlock(&auth->mu);

        lease_credential_t cred;
        bool got = false;
        memset(&cred, 0, sizeof cred);
        lease_code_t rc = lease_store_credential_lookup(auth->store, id, deadline, &cred, &got);
        lease_code_t failure = LEASE_BACKEND_UNAVAILABLE;
        bool answered = lookup_answered(rc, &failure);
        if (answered && !lease_code_is_success(rc))
            got = false;
        /* A row for another id is corrupt: treat as unknown, fail closed. */
        if (answered && got && strcmp(cred.credential_id, id) != 0)
            got = false;

        pthread_mutex_lock(&auth->mu);
        if (slot && slot->state == SLOT_LOADING && slot->seq == seq &&
            strcmp(slot->credential_id, id) == 0) {
            if (answered) {
                slot->state = SLOT_READY;
                slot->found = got;
                slot->fetched_ns = now;
                if (got)
                    slot->cred = cred;
                else
                    memset(&slot->cred, 0, sizeof slot->cred);
            } else {
                slot->state = SLOT_EMPTY;
            }
        } else if (!slot && answered && got && forgets == auth->forgets) {
            /* Looked up without a slot (every way held a fresh known
             * credential): a known one may take the least recently fetched
             * ready way; an unknown one never does. */
            auth_slot_t *victim = NULL;
            bool present = false;
            for (int w = 0; w < AUTH_WAYS && !present; w++) {
                auth_slot_t *s = &set[w];
                if (s->state != SLOT_EMPTY && strcmp(s->credential_id, id) == 0)
                    present = true; /* another thread cached it meanwhile */
                else if (s->state == SLOT_EMPTY)
                    victim = s;
                else if (s->state == SLOT_READY &&
                         (!victim ||
                          (victim->state == SLOT_READY && s->fetched_ns < victim->fetched_ns)))
                    victim = s;
            }
            if (!present && victim) {
                victim->state = SLOT_READY;
                memcpy(victim->credential_id, id, LEASE_CREDENTIAL_ID_LEN + 1);
                victim->seq++;
                victim->found = true;
                victim->fetched_ns = now;
                victim->cred = cred;
            }
        }
        pthread_cond_broadcast(&auth->changed);
        pthread_mutex_unlock(&auth->mu);

        if (!answered) {
            *code = failure;
            OPENSSL_cleanse(&cred, sizeof cred);
            return false;
        }
        *found = got;
        *fetched_ns = now;
        if (got)
            *out = cred;
        OPENSSL_cleanse(&cred, sizeof cred);
        return true;
    }
}

/* What the cache alone says about id, without waiting or asking the
 * store: CACHED_KNOWN (a row fetched within known_ns, in *out),
 * CACHED_UNKNOWN (fresh "no such id") or CACHED_NONE. */
typedef enum cached { CACHED_NONE, CACHED_KNOWN, CACHED_UNKNOWN } cached_t;

static cached_t cache_probe(lease_auth_t *auth, const char *id, lease_credential_t *out,
                            int64_t *fetched_ns, int64_t known_ns)
{
    cached_t answer = CACHED_NONE;
    auth_slot_t *set = set_of(auth, id);
    pthread_mutex_lock(&auth->mu);
    int64_t now = lease_mono_now_ns();
    for (int w = 0; w < AUTH_WAYS; w++) {
        auth_slot_t *s = &set[w];
        if (s->state != SLOT_READY || strcmp(s->credential_id, id) != 0)
            continue;
        if (now - s->fetched_ns < (s->found ? known_ns : auth->negative_ttl_ns)) {
            answer = s->found ? CACHED_KNOWN : CACHED_UNKNOWN;
            if (s->found)
                *out = s->cred;
            *fetched_ns = s->fetched_ns;
        }
        break;
    }
    pthread_mutex_unlock(&auth->mu);
    return answer;
}

/* Whether a credential row (looked up at monotonic fetched_ns) is expired
 * now: its validity left at backend time has run out since. */
static bool expired(const lease_credential_t *cred, int64_t fetched_ns)
{
    if (!cred->has_expiry)
        return false;
    int64_t until = lease_time_add_sat(fetched_ns, lease_ms_to_ns_sat(cred->expires_in_ms));
    return lease_mono_now_ns() >= until;
}

/* The credential's scope as stored, normalised again: rows written around
 * leasectl must not widen what they grant. False when any part is invalid. */
static bool normalize_scope(const lease_credential_t *cred, lease_scope_t *scope)
{
    memset(scope, 0, sizeof *scope);
    if (!lease_identity_component_normalize("tenant_id", cred->scope.tenant_id, scope->tenant_id,
                                            sizeof scope->tenant_id))
        return false;
    if (strcmp(cred->scope.program_id, "*") == 0) {
        if (!cred->admin)
            return false;
        memcpy(scope->program_id, "*", 2);
    } else if (!lease_identity_component_normalize("program_id", cred->scope.program_id,
                                                   scope->program_id, sizeof scope->program_id)) {
        return false;
    }
    scope->all_actors = cred->scope.all_actors;
    if (cred->scope.n_actors > LEASE_SCOPE_ACTORS_MAX)
        return false;
    for (size_t i = 0; i < cred->scope.n_actors; i++) {
        if (strcmp(cred->scope.actor_names[i], "*") == 0) {
            scope->all_actors = true;
            continue;
        }
        if (!lease_identity_component_normalize("actor_name", cred->scope.actor_names[i],
                                                scope->actor_names[scope->n_actors],
                                                sizeof scope->actor_names[0]))
            return false;
        scope->n_actors++;
    }
    return scope->all_actors || scope->n_actors > 0;
}

static bool digest_is_zero(const unsigned char d[32])
{
    static const unsigned char zero[32];
    return CRYPTO_memcmp(d, zero, 32) == 0;
}

bool lease_auth_authenticate(lease_auth_t *auth, const char *authorization,
                             const lease_deadline_t *deadline, lease_caller_t *out,
                             lease_code_t *code)
{
    return lease_auth_authenticate_gated(auth, authorization, deadline, NULL, out, code);
}

bool lease_auth_parse_bearer(const char *authorization, char id[LEASE_CREDENTIAL_ID_LEN + 1],
                             unsigned char secret[LEASE_SECRET_BYTES])
{
    const char *token = bearer_token(authorization);
    return token && lease_token_parse(token, id, secret);
}

/* Fills the caller from a row whose secret matched: true when the row is
 * valid now (not revoked, not expired, a scope that normalises). */
static bool caller_from(const lease_credential_t *cred, int64_t fetched_ns, const char *id,
                        lease_caller_t *out)
{
    if (cred->revoked || expired(cred, fetched_ns) || !normalize_scope(cred, &out->scope))
        return false;
    leased_copy_text(out->principal.principal_id, sizeof out->principal.principal_id,
                     cred->principal_id);
    leased_copy_text(out->principal.client_id, sizeof out->principal.client_id, cred->client_id);
    leased_copy_text(out->principal.credential_id, sizeof out->principal.credential_id, id);
    leased_copy_text(out->principal.principal_class, sizeof out->principal.principal_class,
                     cred->admin ? "admin" : "worker");
    if (!out->principal.principal_id[0] || !out->principal.client_id[0])
        return false;
    out->admin = cred->admin;
    out->capabilities = cred->capabilities & known_caps;
    if (!cred->admin)
        out->capabilities &= ~admin_only_caps;
    return true;
}

/* The presented digest against a row's, or against a fixed stand-in when
 * there is no row: every failure does the same comparison. */
static bool secret_matches(const unsigned char presented[32], const lease_credential_t *cred)
{
    static const unsigned char stand_in[32] = {0x5a};
    bool match = lease_token_digest_equal(presented, cred ? cred->secret_digest : stand_in);
    return cred && match;
}

/* The credential id of a bearer token and the peppered digest of its
 * secret (the secret itself is wiped here); false for a malformed token.
 * An all-zero digest only comes from a failed libcrypto call. */
static bool presented_digest(lease_auth_t *auth, const char *authorization,
                             char id[LEASE_CREDENTIAL_ID_LEN + 1], unsigned char presented[32])
{
    unsigned char secret[LEASE_SECRET_BYTES];
    memset(presented, 0, 32);
    bool parsed = lease_auth_parse_bearer(authorization, id, secret);
    if (parsed) {
        lease_token_digest(secret, auth->pepper, presented);
        parsed = !digest_is_zero(presented);
    }
    OPENSSL_cleanse(secret, sizeof secret);
    return parsed;
}

/* Whether the cache alone vouches for the caller: a row of id fetched
 * within known_ns, the right secret, still valid (then *out is the caller).
 * *cached says what the cache held, for a caller that goes on to ask the
 * store. Both the authentication of a request (rows of the cache window)
 * and the classification of its flow (lease_auth_cached_tenant, older
 * rows too) ask this one question. */
static bool cache_vouches(lease_auth_t *auth, const char *id, const unsigned char presented[32],
                          lease_credential_t *cred, int64_t *fetched_ns, cached_t *cached,
                          lease_caller_t *out, int64_t known_ns)
{
    *cached = cache_probe(auth, id, cred, fetched_ns, known_ns);
    return *cached == CACHED_KNOWN && secret_matches(presented, cred) &&
           caller_from(cred, *fetched_ns, id, out);
}

bool lease_auth_authenticate_gated(lease_auth_t *auth, const char *authorization,
                                   const lease_deadline_t *deadline, lease_auth_gate_t *gate,
                                   lease_caller_t *out, lease_code_t *code)
{
    char id[LEASE_CREDENTIAL_ID_LEN + 1];
    unsigned char presented[32];
    lease_credential_t cred;
    bool found = false, ok = false;
    int64_t fetched_ns = 0;
    lease_code_t failure = LEASE_INVALID_CREDENTIAL;
    cached_t cached = CACHED_NONE;

    memset(&cred, 0, sizeof cred);
    memset(out, 0, sizeof *out);
    bool parsed = presented_digest(auth, authorization, id, presented);

    /* 1. The cache alone: a fresh row, the right secret, still valid. */
    if (parsed &&
        cache_vouches(auth, id, presented, &cred, &fetched_ns, &cached, out, auth->ttl_ns)) {
        ok = true;
        goto cleanup;
    }

    /* 2. Everything else costs: its source pays, and while the source's
     * failure budget is spent, it answers 429 whatever its id. */
    if (gate && gate->admit_uncached && !gate->admit_uncached(gate->cls, &gate->retry_after_ms)) {
        failure = LEASE_RATE_LIMITED;
        goto cleanup;
    }
    bool lookups_left =
        !gate || !gate->allow_lookup || gate->allow_lookup(gate->cls, &gate->retry_after_ms);
    failure = lookups_left ? LEASE_INVALID_CREDENTIAL : LEASE_RATE_LIMITED;
    if (!parsed)
        goto cleanup;
    if (cached != CACHED_NONE || !lookups_left) {
        /* The answer is a failure already (a cached row that did not
         * pass, an id known not to exist) or the lookup is not allowed;
         * a skipped row costs the comparison a row would have. */
        if (cached != CACHED_KNOWN)
            (void)secret_matches(presented, NULL);
        goto cleanup;
    }

    /* 3. The store (one lookup per id at a time). */
    if (!credential_get(auth, id, deadline, &cred, &found, &fetched_ns, &failure))
        goto cleanup;
    failure = LEASE_INVALID_CREDENTIAL;
    if (secret_matches(presented, found ? &cred : NULL) && caller_from(&cred, fetched_ns, id, out))
        ok = true;

cleanup:
    OPENSSL_cleanse(presented, sizeof presented);
    OPENSSL_cleanse(&cred, sizeof cred);
    if (!ok) {
        memset(out, 0, sizeof *out);
        *code = failure;
    }
    return ok;
}

/* How old a cached row may be to name a request's tenant for queueing
 * (lease_auth_cached_tenant): not to authenticate it. */
#define CLASSIFY_KNOWN_NS (60 * INT64_C(1000000000))

bool lease_auth_cached_tenant(lease_auth_t *auth, const char *authorization, char *tenant)
{
    char id[LEASE_CREDENTIAL_ID_LEN + 1];
    unsigned char presented[32];
    lease_credential_t cred;
    lease_caller_t caller;
    int64_t fetched_ns = 0;
    cached_t cached = CACHED_NONE;
    memset(&cred, 0, sizeof cred);
    bool ok = presented_digest(auth, authorization, id, presented) &&
              cache_vouches(auth, id, presented, &cred, &fetched_ns, &cached, &caller,
                            CLASSIFY_KNOWN_NS);
    if (ok)
        leased_copy_text(tenant, LEASE_NAME_MAX + 1, caller.scope.tenant_id);
    OPENSSL_cleanse(presented, sizeof presented);
    OPENSSL_cleanse(&cred, sizeof cred);
    return ok;
}

bool lease_auth_recheck(lease_auth_t *auth, const lease_caller_t *caller,
                        const lease_deadline_t *deadline, lease_code_t *code)
{
    lease_credential_t cred;
    bool found = false, ok = false;
    int64_t fetched_ns = 0;
    lease_caller_t again;
    memset(&cred, 0, sizeof cred);
    memset(&again, 0, sizeof again);
    const char *id = caller->principal.credential_id;
    *code = LEASE_INVALID_CREDENTIAL;
    if (!id[0])
        return false;
    if (!credential_get(auth, id, deadline, &cred, &found, &fetched_ns, code))
        goto cleanup;
    *code = LEASE_INVALID_CREDENTIAL;
    /* rows are never edited, only revoked or expired; the same principal
     * and tenant make sure the id was not given to someone else */
    ok = found && caller_from(&cred, fetched_ns, id, &again) &&
         strcmp(again.principal.principal_id, caller->principal.principal_id) == 0 &&
         strcmp(again.scope.tenant_id, caller->scope.tenant_id) == 0;
cleanup:
    OPENSSL_cleanse(&cred, sizeof cred);
    OPENSSL_cleanse(&again, sizeof again);
    return ok;
}

bool lease_auth_has(const lease_caller_t *caller, unsigned caps)
{
    if (!caller)
        return false;
    if ((caps & admin_only_caps) && !caller->admin)
        return false;
    return (caller->capabilities & caps) == caps;
}

static bool tenant_program_match(const lease_caller_t *caller, const char *tenant_id,
                                 const char *program_id)
{
    const lease_scope_t *scope = &caller->scope;
    if (!tenant_id || !program_id || !tenant_id[0] || !program_id[0])
        return false;
    /* A tenant is always concrete; "*" in a stored tenant matches nothing
     * because no normalised identity can spell it. */
    if (strcmp(scope->tenant_id, tenant_id) != 0)
        return false;
    if (strcmp(scope->program_id, "*") == 0)
        return caller->admin; /* a wildcard program is an administrator's only */
    return strcmp(scope->program_id, program_id) == 0;
}

bool lease_auth_in_scope(const lease_caller_t *caller, const lease_identity_t *id)
{
    if (!caller || !id)
        return false;
    const lease_scope_t *scope = &caller->scope;
    if (strcmp(id->program_id, "*") == 0 ||
        !tenant_program_match(caller, id->tenant_id, id->program_id))
        return false;
    if (scope->all_actors)
        return true;
    size_t n = scope->n_actors < LEASE_SCOPE_ACTORS_MAX ? scope->n_actors : LEASE_SCOPE_ACTORS_MAX;
    for (size_t i = 0; i < n; i++)
        if (strcmp(scope->actor_names[i], id->actor_name) == 0)
            return true;
    return false;
}

bool lease_auth_program_in_scope(const lease_caller_t *caller, const char *tenant_id,
                                 const char *program_id)
{
    if (!caller || !program_id || strcmp(program_id, "*") == 0)
        return false;
    return tenant_program_match(caller, tenant_id, program_id);
}

void lease_auth_forget(lease_auth_t *auth, const char *credential_id)
{
    if (!auth || !credential_id)
        return;
    auth_slot_t *set = set_of(auth, credential_id);
    pthread_mutex_lock(&auth->mu);
    auth->forgets++;
    for (int w = 0; w < AUTH_WAYS; w++) {
        auth_slot_t *s = &set[w];
        if (s->state == SLOT_EMPTY || strcmp(s->credential_id, credential_id) != 0)
            continue;
        /* An in-flight load may have read the row before the change this
         * forget reports: bumping seq keeps its answer out of the cache. */
        s->seq++;
        if (s->state == SLOT_READY) {
            OPENSSL_cleanse(&s->cred, sizeof s->cred);
            s->state = SLOT_EMPTY;
        } else {
            s->state = SLOT_EMPTY;
        }
    }
    pthread_cond_broadcast(&auth->changed);
    pthread_mutex_unlock(&auth->mu);
}
