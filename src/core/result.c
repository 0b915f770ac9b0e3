/*
 * result.c - the one table of typed results: wire name, HTTP status,
 * retryability, message and leasectl exit status. docs/api.md mirrors it and
 * tests/unit/test_result.c asserts both agree with docs/api.md.
 */
#include "lease/result.h"

#include <string.h>

typedef struct code_info {
    const char *name;
    int http_status;
    bool retryable;
    lease_exit_t exit_status;
    const char *message;
} code_info_t;

static const code_info_t code_table[LEASE_CODE_COUNT] = {
    [LEASE_ACQUIRED] = {"lease_acquired", 200, false, LEASE_EXIT_OK, "Target lease acquired"},
    [LEASE_RENEWED] = {"lease_renewed", 200, false, LEASE_EXIT_OK, "Target lease renewed"},
    [LEASE_RELEASED] = {"lease_released", 200, false, LEASE_EXIT_OK, "Target lease released"},
    [LEASE_INSPECTED] = {"lease_inspected", 200, false, LEASE_EXIT_OK, "Target lease found"},
    [LEASE_LISTED] = {"lease_listed", 200, false, LEASE_EXIT_OK, "Target leases listed"},
    [LEASE_REVOKED] = {"lease_revoked", 200, false, LEASE_EXIT_OK, "Target lease revoked"},
    [LEASE_COMMIT_ACCEPTED] = {"commit_accepted", 200, false, LEASE_EXIT_OK,
                               "Fenced commit accepted"},
    [LEASE_INVALID_LEASE_REQUEST] = {"invalid_lease_request", 400, false, LEASE_EXIT_INVALID,
                                     "Lease request is invalid"},
    [LEASE_INVALID_CREDENTIAL] = {"invalid_credential", 401, false, LEASE_EXIT_DENIED,
                                  "Credential is missing or invalid"},
    [LEASE_ACCESS_DENIED] = {"access_denied", 403, false, LEASE_EXIT_DENIED,
                             "Credential is not allowed to do this"},
    [LEASE_NOT_FOUND] = {"lease_not_found", 404, false, LEASE_EXIT_FAILURE,
                         "Target lease not found"},
    [LEASE_DEADLINE_EXCEEDED] = {"deadline_exceeded", 408, true, LEASE_EXIT_UNAVAILABLE,
                                 "Deadline elapsed before the operation began"},
    [LEASE_CONFLICT] = {"lease_conflict", 409, true, LEASE_EXIT_HELD,
                        "Target lease is unavailable"},
    [LEASE_LOST] = {"lease_lost", 409, false, LEASE_EXIT_FAILURE, "Target lease is no longer held"},
    [LEASE_IDEMPOTENCY_CONFLICT] = {"idempotency_conflict", 409, false, LEASE_EXIT_FAILURE,
                                    "Request id was reused with different inputs"},
    [LEASE_WRITE_CONFLICT] = {"write_conflict", 409, false, LEASE_EXIT_FAILURE,
                              "Document revision does not match"},
    [LEASE_RATE_LIMITED] = {"lease_rate_limited", 429, true, LEASE_EXIT_UNAVAILABLE,
                            "Too many requests"},
    [LEASE_BACKEND_UNAVAILABLE] = {"lease_backend_unavailable", 503, true, LEASE_EXIT_UNAVAILABLE,
                                   "Lease backend cannot give a safe answer"},
    [LEASE_OUTCOME_UNKNOWN] = {"lease_outcome_unknown", 503, true, LEASE_EXIT_UNAVAILABLE,
                               "Outcome unknown; repeat the request id to resolve it"},
};

static const code_info_t *info(lease_code_t code)
{
    static const code_info_t unknown = {"lease_backend_unavailable", 503, true,
                                        LEASE_EXIT_UNAVAILABLE, "Internal error"};
    if ((unsigned)code >= LEASE_CODE_COUNT)
        return &unknown;
    return &code_table[code];
}

const char *lease_code_name(lease_code_t code)
{
    return info(code)->name;
}

int lease_code_http_status(lease_code_t code)
{
    return info(code)->http_status;
}

bool lease_code_retryable(lease_code_t code)
{
    return info(code)->retryable;
}

const char *lease_code_message(lease_code_t code)
{
    return info(code)->message;
}

bool lease_code_is_success(lease_code_t code)
{
    return (unsigned)code < LEASE_CODE_COUNT && info(code)->http_status == 200;
}

int lease_code_exit_status(lease_code_t code)
{
    return info(code)->exit_status;
}

bool lease_code_parse(const char *name, lease_code_t *out)
{
    if (!name)
        return false;
    for (int i = 0; i < LEASE_CODE_COUNT; i++) {
        if (strcmp(code_table[i].name, name) == 0) {
            *out = (lease_code_t)i;
            return true;
        }
    }
    return false;
}
