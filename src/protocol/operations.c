/*
 * operations.c - the tables of lease/operations.h: each operation's body
 * fields as lease_field_t rows of its store request, and its description.
 * Built from the lists; nothing here names an operation by hand.
 */
#include "lease/operations.h"

/* The store request a shape's fields land in (lease/operations.h, SHAPE). */
#define ROW_ACQUIRE(...) LEASE_FIELD_OF(lease_acquire_req_t, __VA_ARGS__)
#define ROW_OWNER(...) LEASE_FIELD_OF(lease_owner_req_t, __VA_ARGS__)
#define ROW_OWNER_BATCH(...) LEASE_FIELD_OF(lease_owner_req_t, __VA_ARGS__)
#define ROW_ADMIN(...) LEASE_FIELD_OF(lease_admin_req_t, __VA_ARGS__)
#define ROW_INSPECT(...) LEASE_FIELD_OF(lease_inspect_req_t, __VA_ARGS__)
#define ROW_GET(...) LEASE_FIELD_OF(lease_inspect_req_t, __VA_ARGS__)
#define ROW_LIST(...) LEASE_FIELD_OF(lease_list_req_t, __VA_ARGS__)
#define ROW_COMMIT(...) LEASE_FIELD_OF(lease_commit_req_t, __VA_ARGS__)
#define ROW_SESSION(...) LEASE_FIELD_OF(lease_session_req_t, __VA_ARGS__)
#define ROW_NONE(...) LEASE_FIELD_OF(lease_acquire_req_t, __VA_ARGS__)

/* Each list ends with a row without a name (the decoder's walks stop there). */
#define END_ROW                                                                                    \
    {                                                                                              \
        .name = NULL                                                                               \
    }

#define FIELD_TABLE(ID, METHOD, PATH, NAME, CAPS, MUTATES, SHAPE, HANDLER, EVENT, STORE, FIELDS)   \
    static const lease_field_t fields_##ID[] = {LEASE_FIELDS_##FIELDS(ROW_##SHAPE) END_ROW};
LEASE_OPERATIONS(FIELD_TABLE)
#undef FIELD_TABLE

#define N_ROWS(table) (sizeof(table) / sizeof((table)[0]) - 1)

static const lease_operation_t operations[LEASED_OP_COUNT] = {
#define OPERATION(ID, METHOD, PATH, NAME, CAPS, MUTATES, SHAPE, HANDLER, EVENT, STORE, FIELDS)     \
    [LEASED_OP_##                                                                                  \
        ID] = {NAME, MUTATES, LEASE_SHAPE_##SHAPE, EVENT, fields_##ID, N_ROWS(fields_##ID)},
    LEASE_OPERATIONS(OPERATION)
#undef OPERATION
};

const lease_operation_t *lease_operation(leased_op_t op)
{
    return &operations[(unsigned)op < LEASED_OP_COUNT ? op : LEASED_OP_HEALTHZ];
}

const lease_field_t lease_renew_item_fields[] = {LEASE_FIELDS_RENEW_ITEM(ROW_OWNER) END_ROW};
const size_t lease_renew_item_fields_n = N_ROWS(lease_renew_item_fields);
const lease_field_t lease_release_item_fields[] = {LEASE_FIELDS_RELEASE_ITEM(ROW_OWNER) END_ROW};
const size_t lease_release_item_fields_n = N_ROWS(lease_release_item_fields);

leased_op_t lease_operation_item(leased_op_t batch)
{
#define ITEM_OF(BATCH, ITEM, DECIDED)                                                              \
    if (batch == LEASED_OP_##BATCH)                                                                \
        return LEASED_OP_##ITEM;
    LEASE_BATCHES(ITEM_OF)
#undef ITEM_OF
    return LEASED_OP_COUNT;
}

lease_code_t lease_operation_decided(leased_op_t batch)
{
#define DECIDED_OF(BATCH, ITEM, DECIDED)                                                           \
    if (batch == LEASED_OP_##BATCH)                                                                \
        return DECIDED;
    LEASE_BATCHES(DECIDED_OF)
#undef DECIDED_OF
    return LEASE_CODE_COUNT;
}
