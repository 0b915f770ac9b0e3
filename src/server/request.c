/*
 * request.c - allocation of decoded requests and access to their call part.
 */
#include "request.h"

#include <stddef.h>
#include <stdlib.h>

leased_request_t *leased_request_new(leased_op_t op)
{
    leased_request_t *req = calloc(1, sizeof *req);
    if (req)
        req->op = op;
    return req;
}

void leased_request_free(leased_request_t *req)
{
    if (!req)
        return;
    for (size_t i = 0; i < LEASE_COMMIT_WRITES_MAX; i++)
        free(req->write_json[i]);
    free(req->items);
    free(req);
}

/* Where the call part of op's store request lies inside the request. */
static size_t call_offset(leased_op_t op)
{
    switch (op) {
    case LEASED_OP_RENEW:
    case LEASED_OP_RENEW_BATCH:
    case LEASED_OP_RELEASE_BATCH:
    case LEASED_OP_RELEASE:
        return offsetof(leased_request_t, u.owner.call);
    case LEASED_OP_FORCE_RELEASE:
    case LEASED_OP_REVOKE:
        return offsetof(leased_request_t, u.admin.call);
    case LEASED_OP_GET:
    case LEASED_OP_INSPECT:
    case LEASED_OP_WATCH:
        return offsetof(leased_request_t, u.inspect.call);
    case LEASED_OP_LIST:
        return offsetof(leased_request_t, u.list.call);
    case LEASED_OP_COMMIT:
        return offsetof(leased_request_t, u.commit.call);
    default:
        /* acquire; health routes carry no store call and use the same slot */
        return offsetof(leased_request_t, u.acquire.call);
    }
}

lease_call_t *leased_request_call(leased_request_t *req)
{
    return (lease_call_t *)(void *)((char *)req + call_offset(req->op));
}

const lease_call_t *leased_request_call_const(const leased_request_t *req)
{
    return (const lease_call_t *)(const void *)((const char *)req + call_offset(req->op));
}
