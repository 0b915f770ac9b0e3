/*
 * types.c - the lease-state names and the list page's release (see
 * include/lease/types.h), shared by every layer; part of the installed
 * client library.
 */
#include "lease/types.h"

#include <stdlib.h>
#include <string.h>

static const char *const state_names[] = {
    [LEASE_STATE_NONE] = "",           [LEASE_STATE_ACTIVE] = "active",
    [LEASE_STATE_EXPIRED] = "expired", [LEASE_STATE_RELEASED] = "released",
    [LEASE_STATE_REVOKED] = "revoked",
};

const char *lease_state_name(lease_state_t s)
{
    if ((unsigned)s > LEASE_STATE_REVOKED)
        return "";
    return state_names[s];
}

bool lease_state_parse(const char *s, lease_state_t *out)
{
    if (!s || !*s)
        return false;
    for (unsigned i = LEASE_STATE_ACTIVE; i <= LEASE_STATE_REVOKED; i++) {
        if (strcmp(state_names[i], s) == 0) {
            *out = (lease_state_t)i;
            return true;
        }
    }
    return false;
}

void lease_list_result_free(lease_list_result_t *res)
{
    if (!res)
        return;
    free(res->leases);
    res->leases = NULL;
    res->count = 0;
}
