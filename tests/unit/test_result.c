/*
 * test_result.c - the result table against docs/api.md: every code has a
 * unique wire name, the HTTP status of section 4's table, the leasectl exit
 * status of section 5, the documented retryability, a message, and parses
 * back from its name.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>

#include "lease/result.h"

/* Transcribed from docs/api.md and docs/executor.md and the contract's error
 * envelope, independently of src/core/result.c. Retryable: the caller may
 * repeat the same request and succeed (conflicts clear, deadlines and
 * admission are transient, the backend comes back, outcome-unknown is
 * resolved by repeating the request id). */
static const struct {
    lease_code_t code;
    const char *name;
    int http;
    bool retryable;
    int exit_status;
} spec[] = {
    {LEASE_ACQUIRED, "lease_acquired", 200, false, 0},
    {LEASE_RENEWED, "lease_renewed", 200, false, 0},
    {LEASE_RELEASED, "lease_released", 200, false, 0},
    {LEASE_INSPECTED, "lease_inspected", 200, false, 0},
    {LEASE_LISTED, "lease_listed", 200, false, 0},
    {LEASE_REVOKED, "lease_revoked", 200, false, 0},
    {LEASE_COMMIT_ACCEPTED, "commit_accepted", 200, false, 0},
    {LEASE_INVALID_LEASE_REQUEST, "invalid_lease_request", 400, false, 65},
    {LEASE_INVALID_CREDENTIAL, "invalid_credential", 401, false, 77},
    {LEASE_ACCESS_DENIED, "access_denied", 403, false, 77},
    {LEASE_NOT_FOUND, "lease_not_found", 404, false, 1},
    {LEASE_DEADLINE_EXCEEDED, "deadline_exceeded", 408, true, 69},
    {LEASE_CONFLICT, "lease_conflict", 409, true, 75},
    {LEASE_LOST, "lease_lost", 409, false, 1},
    {LEASE_IDEMPOTENCY_CONFLICT, "idempotency_conflict", 409, false, 1},
    {LEASE_WRITE_CONFLICT, "write_conflict", 409, false, 1},
    {LEASE_RATE_LIMITED, "lease_rate_limited", 429, true, 69},
    {LEASE_BACKEND_UNAVAILABLE, "lease_backend_unavailable", 503, true, 69},
    {LEASE_OUTCOME_UNKNOWN, "lease_outcome_unknown", 503, true, 69},
};
#define N_SPEC (sizeof spec / sizeof spec[0])

static void test_table_covers_every_code(void **state)
{
    (void)state;
    assert_int_equal(N_SPEC, LEASE_CODE_COUNT);
    bool seen[LEASE_CODE_COUNT] = {false};
    for (size_t i = 0; i < N_SPEC; i++) {
        assert_in_range(spec[i].code, 0, LEASE_CODE_COUNT - 1);
        assert_false(seen[spec[i].code]);
        seen[spec[i].code] = true;
    }
}

static void test_names_unique_and_round_trip(void **state)
{
    (void)state;
    for (int i = 0; i < LEASE_CODE_COUNT; i++) {
        const char *name = lease_code_name((lease_code_t)i);
        assert_non_null(name);
        assert_true(strlen(name) > 0);
        for (int j = 0; j < i; j++)
            assert_string_not_equal(name, lease_code_name((lease_code_t)j));
        lease_code_t parsed = LEASE_CODE_COUNT;
        assert_true(lease_code_parse(name, &parsed));
        assert_int_equal(parsed, i);
    }
}

static void test_matches_interface(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_SPEC; i++) {
        lease_code_t c = spec[i].code;
        assert_string_equal(lease_code_name(c), spec[i].name);
        if (lease_code_http_status(c) != spec[i].http)
            fail_msg("%s: HTTP %d, docs/api.md says %d", spec[i].name, lease_code_http_status(c),
                     spec[i].http);
        if (lease_code_retryable(c) != spec[i].retryable)
            fail_msg("%s: retryable %d, expected %d", spec[i].name, lease_code_retryable(c),
                     spec[i].retryable);
        if (lease_code_exit_status(c) != spec[i].exit_status)
            fail_msg("%s: exit %d, docs/executor.md says %d", spec[i].name,
                     lease_code_exit_status(c), spec[i].exit_status);
        assert_int_equal(lease_code_is_success(c), spec[i].http == 200);
        const char *msg = lease_code_message(c);
        assert_non_null(msg);
        assert_true(strlen(msg) > 0);
    }
}

/* The contract's example envelope: lease_conflict, "Target lease is
 * unavailable", retryable. */
static void test_contract_example_message(void **state)
{
    (void)state;
    assert_string_equal(lease_code_message(LEASE_CONFLICT), "Target lease is unavailable");
}

static void test_parse_rejects(void **state)
{
    (void)state;
    lease_code_t out = LEASE_ACQUIRED;
    assert_false(lease_code_parse(NULL, &out));
    assert_false(lease_code_parse("", &out));
    assert_false(lease_code_parse("LEASE_ACQUIRED", &out));
    assert_false(lease_code_parse("lease_acquired ", &out));
    assert_false(lease_code_parse("lease_acquire", &out));
    assert_false(lease_code_parse("internal_error", &out));
    assert_int_equal(out, LEASE_ACQUIRED); /* untouched on failure */
}

/* A value outside the enum (a bug elsewhere) must still map to a safe,
 * non-success, server-side answer rather than crash or claim success. */
static void test_out_of_range(void **state)
{
    (void)state;
    lease_code_t bogus = (lease_code_t)(LEASE_CODE_COUNT + 7);
    assert_non_null(lease_code_name(bogus));
    assert_non_null(lease_code_message(bogus));
    assert_false(lease_code_is_success(bogus));
    assert_int_equal(lease_code_http_status(bogus), 503);
    assert_int_not_equal(lease_code_exit_status(bogus), 0);
    assert_false(lease_code_is_success(LEASE_CODE_COUNT));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_covers_every_code),
        cmocka_unit_test(test_names_unique_and_round_trip),
        cmocka_unit_test(test_matches_interface),
        cmocka_unit_test(test_contract_example_message),
        cmocka_unit_test(test_parse_rejects),
        cmocka_unit_test(test_out_of_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
