/*
 * result.h - the closed set of typed results every layer speaks.
 *
 * One table (src/core/result.c) gives each code its wire name, HTTP status,
 * retryability, stable message and leasectl exit status; docs/api.md mirrors
 * it. Nothing outside this enum crosses a layer boundary: no bool, no NULL,
 * no raw backend error.
 */
#ifndef LEASE_RESULT_H
#define LEASE_RESULT_H

#include <stdbool.h>

#define LEASE_MUST_USE __attribute__((warn_unused_result))

typedef enum lease_code {
    /* success */
    LEASE_ACQUIRED = 0,    /* acquire-if-free created a lease */
    LEASE_RENEWED,         /* renew-if-owner extended the lease */
    LEASE_RELEASED,        /* release or force-release ended the lease */
    LEASE_INSPECTED,       /* inspect found the lease */
    LEASE_LISTED,          /* a list page */
    LEASE_REVOKED,         /* privileged revoke ended the lease */
    LEASE_COMMIT_ACCEPTED, /* fenced commit linearized and wrote */
    /* failures */
    LEASE_INVALID_LEASE_REQUEST, /* malformed identity, TTL, deadline, page, metadata */
    LEASE_INVALID_CREDENTIAL,    /* authentication failed before lease access */
    LEASE_ACCESS_DENIED,         /* capability or canonical scope mismatch */
    LEASE_NOT_FOUND,             /* inspect only, when absence discloses nothing */
    LEASE_DEADLINE_EXCEEDED,     /* deadline elapsed before the backend section began */
    LEASE_CONFLICT,              /* another unexpired lease owns the identity */
    LEASE_LOST,                  /* stale, expired, wrong owner/instance/token */
    LEASE_IDEMPOTENCY_CONFLICT,  /* request id reused with different inputs */
    LEASE_WRITE_CONFLICT,        /* commit: a document's expected revision differs */
    LEASE_RATE_LIMITED,          /* admission control rejected the work */
    LEASE_BACKEND_UNAVAILABLE,   /* the backend cannot give a safe answer */
    LEASE_OUTCOME_UNKNOWN,       /* may have committed: resolve by request id */
    LEASE_CODE_COUNT
} lease_code_t;

/* Exit statuses of leasectl (docs/executor.md, "Exit statuses"),
 * defined here once: lease_code_exit_status maps results onto them and
 * every leasectl command returns them. leased and leased-relay use the
 * first three. */
typedef enum lease_exit {
    LEASE_EXIT_OK = 0,
    LEASE_EXIT_FAILURE = 1,          /* anything else */
    LEASE_EXIT_USAGE = 2,            /* a usage error */
    LEASE_EXIT_INVALID = 65,         /* invalid input */
    LEASE_EXIT_UNAVAILABLE = 69,     /* the service or database cannot answer */
    LEASE_EXIT_HELD = 75,            /* the lease is held by someone else */
    LEASE_EXIT_LEASE_LOST = 76,      /* run: the lease was lost under the command */
    LEASE_EXIT_DENIED = 77,          /* credential or role refused */
    LEASE_EXIT_CANNOT_EXECUTE = 126, /* run: the command could not be executed */
    LEASE_EXIT_NOT_FOUND = 127,      /* run: the command was not found */
} lease_exit_t;

/* Wire name ("lease_acquired"); never NULL for a valid code. */
const char *lease_code_name(lease_code_t code);
/* HTTP status of the error table in docs/api.md. */
int lease_code_http_status(lease_code_t code);
/* Whether repeating the same request may succeed. */
bool lease_code_retryable(lease_code_t code);
/* Stable, non-secret human message ("Target lease is unavailable"). */
const char *lease_code_message(lease_code_t code);
/* True for the seven success codes. */
bool lease_code_is_success(lease_code_t code);
/* leasectl exit status for a result of a client command (docs/executor.md). */
int lease_code_exit_status(lease_code_t code);
/* Parses a wire name; false when it names no code. */
LEASE_MUST_USE bool lease_code_parse(const char *name, lease_code_t *out);

#endif
