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

/* Where the call part of each shape's store request lies inside the
 * request (lease/operations.h, SHAPE); routes without a store call use the
 * acquire slot. */
#define CALL_ACQUIRE offsetof(leased_request_t, u.acquire.call)
#define CALL_OWNER offsetof(leased_request_t, u.owner.call)
#define CALL_OWNER_BATCH offsetof(leased_request_t, u.owner.call)
#define CALL_ADMIN offsetof(leased_request_t, u.admin.call)
#define CALL_INSPECT offsetof(leased_request_t, u.inspect.call)
#define CALL_GET offsetof(leased_request_t, u.inspect.call)
#define CALL_LIST offsetof(leased_request_t, u.list.call)
#define CALL_COMMIT offsetof(leased_request_t, u.commit.call)
#define CALL_SESSION offsetof(leased_request_t, u.session.call)
#define CALL_NONE offsetof(leased_request_t, u.acquire.call)

static const size_t call_offsets[LEASED_OP_COUNT] = {
#define CALL_OFFSET(ID, METHOD, PATH, NAME, CAPS, MUTATES, SHAPE, HANDLER, EVENT, STORE, FIELDS)   \
    [LEASED_OP_##ID] = CALL_##SHAPE,
    LEASE_OPERATIONS(CALL_OFFSET)
#undef CALL_OFFSET
};

static size_t call_offset(leased_op_t op)
{
    return call_offsets[(unsigned)op < LEASED_OP_COUNT ? op : LEASED_OP_ACQUIRE];
}

lease_call_t *leased_request_call(leased_request_t *req)
{
    return (lease_call_t *)(void *)((char *)req + call_offset(req->op));
}

const lease_call_t *leased_request_call_const(const leased_request_t *req)
{
    return (const lease_call_t *)(const void *)((const char *)req + call_offset(req->op));
}
