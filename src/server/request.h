/*
 * request.h - one decoded HTTP request, between the codec and the service.
 *
 * The codec (json_codec.c) fills it from a body; the service (service.c)
 * completes the store request inside it (caller, deadline, digest) and runs
 * it. Types only.
 */
#ifndef LEASED_REQUEST_H
#define LEASED_REQUEST_H

#include <stdbool.h>
#include <stdint.h>

#include "lease/operations.h"
#include "lease/store.h"

/* The operations (leased_op_t, LEASED_OP_*) are lease/operations.h's. */

/* How the request named its deadline. */
typedef enum leased_deadline_kind {
    LEASED_DEADLINE_NONE = 0, /* server default applies */
    LEASED_DEADLINE_RELATIVE, /* deadline_ms */
    LEASED_DEADLINE_ABSOLUTE, /* deadline_at (wall epoch ms) */
} leased_deadline_kind_t;

typedef struct leased_deadline_input {
    leased_deadline_kind_t kind;
    int64_t ms; /* RELATIVE: milliseconds from receipt; ABSOLUTE: epoch ms */
} leased_deadline_input_t;

typedef struct leased_request {
    leased_op_t op;
    leased_deadline_input_t deadline;
    int64_t wait_ms; /* acquire: 0 = no waiting */
    union {
        lease_acquire_req_t acquire; /* ACQUIRE */
        lease_owner_req_t owner;     /* RENEW, RELEASE; RENEW_BATCH, RELEASE_BATCH: its call only */
        lease_admin_req_t admin;     /* FORCE_RELEASE, REVOKE */
        lease_inspect_req_t inspect; /* GET, INSPECT, WATCH */
        lease_list_req_t list;       /* LIST */
        lease_commit_req_t commit;   /* COMMIT */
        lease_session_req_t session; /* SESSION_OPEN, SESSION_KEEPALIVE, SESSION_CLOSE */
    } u;
    /* COMMIT: the compact JSON the writes borrow (u.commit.writes[i].json);
     * freed by leased_request_free. */
    char *write_json[LEASE_COMMIT_WRITES_MAX];
    /* RENEW_BATCH, RELEASE_BATCH: the renewals or releases,
     * 1..LEASE_RENEW_BATCH_MAX (heap; freed by
     * leased_request_free) */
    lease_owner_req_t *items;
    size_t n_items;
} leased_request_t;

/* The call part of whichever store request the op uses. */
lease_call_t *leased_request_call(leased_request_t *req);
const lease_call_t *leased_request_call_const(const leased_request_t *req);

/* A zeroed request for op; NULL when out of memory. */
leased_request_t *leased_request_new(leased_op_t op);
/* Frees the request and what it owns; accepts NULL. */
void leased_request_free(leased_request_t *req);

#endif
