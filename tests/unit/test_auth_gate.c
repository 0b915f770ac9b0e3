/*
 * test_auth_gate.c - the decisions of src/server/auth.c around its cache,
 * over a store of rows in memory that counts lookups:
 * - a valid credential fresh in the cache passes neither of its source's
 *   budgets; everything else pays admit_uncached;
 * - while the source's failure budget is spent, every failure answers
 *   LEASE_RATE_LIMITED alike (unknown, idle, cached with a wrong secret,
 *   malformed), with no lookup; with budget left, LEASE_INVALID_CREDENTIAL;
 * - expiry is the backend's remaining time counted from the lookup: 0 is
 *   expired (no "never" sentinel), and a cached row expires on time;
 * - revocation, and lease_auth_recheck within the cache TTL.
 * HTTP and a real database: tests/http/http_tenant_auth.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "lease/clock.h"
#include "lease/token.h"
#include "server/auth.h"

#define ROWS 4

typedef struct row {
    bool used;
    lease_credential_t cred;
} row_t;

static row_t rows[ROWS];
static int lookups;

static lease_code_t memory_lookup(lease_store_t *s, const char *id, const lease_deadline_t *d,
                                  lease_credential_t *out, bool *found)
{
    (void)s, (void)d;
    lookups++;
    memset(out, 0, sizeof *out);
    *found = false;
    for (int i = 0; i < ROWS; i++) {
        if (rows[i].used && strcmp(rows[i].cred.credential_id, id) == 0) {
            *out = rows[i].cred;
            *found = true;
            return LEASE_INSPECTED;
        }
    }
    return LEASE_NOT_FOUND;
}

static const lease_store_ops_t ops = {.credential_lookup = memory_lookup};
static lease_store_t store = {.ops = &ops, .impl = NULL};

/* A row in the store and its bearer header (header: >= 96 bytes). */
static lease_credential_t *add_row(char *header)
{
    char id[LEASE_CREDENTIAL_ID_LEN + 1], token[LEASE_TOKEN_MAX + 1];
    unsigned char secret[LEASE_SECRET_BYTES];
    assert_true(lease_token_generate(id, secret, token));
    for (int i = 0; i < ROWS; i++) {
        if (rows[i].used)
            continue;
        lease_credential_t *c = &rows[i].cred;
        memset(c, 0, sizeof *c);
        rows[i].used = true;
        snprintf(c->credential_id, sizeof c->credential_id, "%s", id);
        snprintf(c->principal_id, sizeof c->principal_id, "prn_%d", i);
        snprintf(c->client_id, sizeof c->client_id, "client_%d", i);
        snprintf(c->scope.tenant_id, sizeof c->scope.tenant_id, "tenant-main");
        snprintf(c->scope.program_id, sizeof c->scope.program_id, "program-a");
        c->scope.all_actors = true;
        c->capabilities = LEASE_CAP_LEASE;
        lease_token_digest(secret, NULL, c->secret_digest);
        snprintf(header, 96, "Bearer %s", token);
        return c;
    }
    fail();
    return NULL;
}

/* The same header with one secret character changed. */
static void wrong_secret(const char *header, char *out)
{
    snprintf(out, 96, "%s", header);
    size_t at = strlen(out) - LEASE_SECRET_B64_LEN;
    out[at] = out[at] == 'A' ? 'B' : 'A';
}

/* A source's budgets, counted. */
typedef struct budget {
    bool rate_left, failures_left;
    int rate_asked, failures_asked;
} budget_t;

static bool admit_uncached(void *cls, int64_t *retry_after_ms)
{
    budget_t *b = cls;
    b->rate_asked++;
    if (!b->rate_left)
        *retry_after_ms = 7;
    return b->rate_left;
}

static bool allow_lookup(void *cls, int64_t *retry_after_ms)
{
    budget_t *b = cls;
    b->failures_asked++;
    if (!b->failures_left)
        *retry_after_ms = 9;
    return b->failures_left;
}

static lease_code_t attempt(lease_auth_t *auth, const char *header, budget_t *b)
{
    lease_auth_gate_t gate = {admit_uncached, allow_lookup, b, 0};
    lease_caller_t caller;
    lease_code_t code = LEASE_CODE_COUNT;
    if (lease_auth_authenticate_gated(auth, header, NULL, b ? &gate : NULL, &caller, &code))
        return LEASE_INSPECTED; /* stands for "authenticated" */
    return code;
}

static int reset(void **state)
{
    (void)state;
    memset(rows, 0, sizeof rows);
    lookups = 0;
    return 0;
}

static void test_cached_valid_credential_pays_no_source_budget(void **state)
{
    (void)state;
    lease_auth_t *auth = lease_auth_new(&store, &(lease_auth_config_t){.cache_ttl_ms = 60000});
    char header[96];
    add_row(header);
    budget_t b = {true, true, 0, 0};
    assert_int_equal(attempt(auth, header, &b), LEASE_INSPECTED);
    assert_int_equal(b.rate_asked, 1); /* not in the cache yet: it costs */
    assert_int_equal(lookups, 1);
    /* from the cache: neither budget is asked, even when both are spent */
    b = (budget_t){false, false, 0, 0};
    for (int i = 0; i < 100; i++)
        assert_int_equal(attempt(auth, header, &b), LEASE_INSPECTED);
    assert_int_equal(b.rate_asked, 0);
    assert_int_equal(b.failures_asked, 0);
    assert_int_equal(lookups, 1);
    lease_auth_free(auth);
}

static void test_one_answer_per_budget_state(void **state)
{
    (void)state;
    lease_auth_t *auth = lease_auth_new(&store, &(lease_auth_config_t){.cache_ttl_ms = 60000});
    char used[96], idle[96], used_wrong[96], idle_wrong[96], unknown[96], negative[96];
    add_row(used);
    add_row(idle);
    wrong_secret(used, used_wrong);
    wrong_secret(idle, idle_wrong);
    char id[LEASE_CREDENTIAL_ID_LEN + 1], token[LEASE_TOKEN_MAX + 1];
    unsigned char secret[LEASE_SECRET_BYTES];
    assert_true(lease_token_generate(id, secret, token));
    snprintf(unknown, sizeof unknown, "Bearer %s", token);
    assert_true(lease_token_generate(id, secret, token));
    snprintf(negative, sizeof negative, "Bearer %s", token);

    budget_t b = {true, true, 0, 0};
    assert_int_equal(attempt(auth, used, &b), LEASE_INSPECTED);              /* cached now */
    assert_int_equal(attempt(auth, negative, &b), LEASE_INVALID_CREDENTIAL); /* cached as unknown */
    assert_int_equal(attempt(auth, used_wrong, &b), LEASE_INVALID_CREDENTIAL); /* budget left */
    int before = lookups;

    /* spent: every failure the same 429, whatever the id, and no lookup */
    b = (budget_t){true, false, 0, 0};
    const char *failing[] = {used_wrong, idle_wrong, idle, unknown, negative, "Bearer x", NULL};
    for (size_t i = 0; i < sizeof failing / sizeof failing[0]; i++) {
        lease_auth_gate_t gate = {admit_uncached, allow_lookup, &b, 0};
        lease_caller_t caller;
        lease_code_t code = LEASE_CODE_COUNT;
        assert_false(lease_auth_authenticate_gated(auth, failing[i], NULL, &gate, &caller, &code));
        assert_int_equal(code, LEASE_RATE_LIMITED);
        assert_int_equal(gate.retry_after_ms, 9);
    }
    assert_int_equal(lookups, before);
    /* the working client is not refused */
    assert_int_equal(attempt(auth, used, &b), LEASE_INSPECTED);

    /* the source's rate spent: refused before anything else */
    b = (budget_t){false, true, 0, 0};
    assert_int_equal(attempt(auth, idle, &b), LEASE_RATE_LIMITED);
    assert_int_equal(b.failures_asked, 0);
    assert_int_equal(lookups, before);
    assert_int_equal(attempt(auth, used, &b), LEASE_INSPECTED);

    /* budget left again: failures are 401, the idle credential works */
    b = (budget_t){true, true, 0, 0};
    assert_int_equal(attempt(auth, unknown, &b), LEASE_INVALID_CREDENTIAL);
    assert_int_equal(attempt(auth, idle_wrong, &b), LEASE_INVALID_CREDENTIAL);
    assert_int_equal(attempt(auth, idle, &b), LEASE_INSPECTED);
    lease_auth_free(auth);
}

static void test_expiry_without_sentinel(void **state)
{
    (void)state;
    lease_auth_t *auth = lease_auth_new(&store, &(lease_auth_config_t){.cache_ttl_ms = 60000});
    char past[96], soon[96], never[96], revoked[96];
    lease_credential_t *c = add_row(past);
    c->has_expiry = true;
    c->expires_in_ms = 0; /* the epoch, -infinity: passed */
    c = add_row(soon);
    c->has_expiry = true;
    c->expires_in_ms = 300;
    add_row(never);
    c = add_row(revoked);
    c->revoked = true;

    assert_int_equal(attempt(auth, past, NULL), LEASE_INVALID_CREDENTIAL);
    assert_int_equal(attempt(auth, never, NULL), LEASE_INSPECTED);
    assert_int_equal(attempt(auth, revoked, NULL), LEASE_INVALID_CREDENTIAL);
    assert_int_equal(attempt(auth, soon, NULL), LEASE_INSPECTED);
    int before = lookups;
    lease_sleep_ms(350);
    /* the cached row expires on time, without another lookup */
    assert_int_equal(attempt(auth, soon, NULL), LEASE_INVALID_CREDENTIAL);
    assert_int_equal(lookups, before);
    lease_auth_free(auth);
}

static void test_recheck_sees_revocation_within_ttl(void **state)
{
    (void)state;
    lease_auth_t *auth = lease_auth_new(&store, &(lease_auth_config_t){.cache_ttl_ms = 100});
    char header[96];
    lease_credential_t *c = add_row(header);
    lease_auth_gate_t gate = {NULL, NULL, NULL, 0};
    lease_caller_t caller;
    lease_code_t code;
    assert_true(lease_auth_authenticate_gated(auth, header, NULL, &gate, &caller, &code));
    assert_true(lease_auth_recheck(auth, &caller, NULL, &code));
    c->revoked = true; /* in the store; the cache still holds the old row */
    int64_t revoked_ns = lease_mono_now_ns();
    bool valid = true;
    while (valid && lease_mono_now_ns() - revoked_ns < INT64_C(1000000000)) {
        valid = lease_auth_recheck(auth, &caller, NULL, &code);
        lease_sleep_ms(5);
    }
    assert_false(valid);
    assert_int_equal(code, LEASE_INVALID_CREDENTIAL);
    assert_true(lease_mono_now_ns() - revoked_ns < INT64_C(100000000) + INT64_C(50000000));
    /* a caller whose id names another principal's row is not valid */
    c->revoked = false;
    lease_sleep_ms(110);
    snprintf(caller.principal.principal_id, sizeof caller.principal.principal_id, "prn_other");
    assert_false(lease_auth_recheck(auth, &caller, NULL, &code));
    assert_int_equal(code, LEASE_INVALID_CREDENTIAL);
    lease_auth_free(auth);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_cached_valid_credential_pays_no_source_budget, reset),
        cmocka_unit_test_setup(test_one_answer_per_budget_state, reset),
        cmocka_unit_test_setup(test_expiry_without_sentinel, reset),
        cmocka_unit_test_setup(test_recheck_sees_revocation_within_ttl, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
