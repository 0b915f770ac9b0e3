/*
 * fuzz_identity.c - the identity normaliser (src/core/identity.c): seven
 * components separated by NUL bytes.
 *
 * Checks: an accepted identity is ASCII of the documented alphabets and
 * lengths, normalising it again changes nothing, and its lock key has the
 * documented prefix and length; a refusal names one of the seven fields.
 */
#include "fuzz_common.h"
#include "lease/identity.h"

static const char *const fields[] = {"tenant_id",  "program_id",    "target_namespace", "target_id",
                                     "actor_name", "workflow_name", "operation_class"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 8);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    memset(buf + size, 0, 8);
    const char *part[7];
    size_t at = 0;
    for (int i = 0; i < 7; i++) {
        part[i] = buf + at;
        at += strlen(buf + at) + 1;
        if (at > size + 7)
            at = size + 7;
    }
    lease_identity_input_t in = {
        part[0], part[1], part[2], part[3], part[4], part[5], part[6][0] ? part[6] : NULL};
    lease_identity_t id, again;
    const char *bad = NULL;
    if (lease_identity_normalize(&in, &id, &bad)) {
        const char *comp[] = {id.tenant_id,  id.program_id,    id.target_namespace, id.target_id,
                              id.actor_name, id.workflow_name, id.operation_class};
        for (int i = 0; i < 7; i++) {
            size_t n = strlen(comp[i]);
            FUZZ_CHECK(n >= 1 && n <= 128);
            for (size_t k = 0; k < n; k++)
                FUZZ_CHECK((unsigned char)comp[i][k] > 0x20 && (unsigned char)comp[i][k] < 0x7f &&
                           comp[i][k] != '/' && comp[i][k] != '\\');
            FUZZ_CHECK(strstr(comp[i], "..") == NULL);
        }
        lease_identity_input_t in2 = {id.tenant_id,      id.program_id, id.target_namespace,
                                      id.target_id,      id.actor_name, id.workflow_name,
                                      id.operation_class};
        const char *bad2 = NULL;
        FUZZ_CHECK(lease_identity_normalize(&in2, &again, &bad2));
        FUZZ_CHECK(lease_identity_equal(&id, &again));
        char key[LEASE_LOCK_KEY_LEN + 1];
        lease_lock_key(&id, key);
        FUZZ_CHECK(strncmp(key, "starintel:target-lease:v1:", 26) == 0);
        FUZZ_CHECK(strlen(key) == LEASE_LOCK_KEY_LEN);
    } else {
        bool named = false;
        for (int i = 0; i < 7; i++)
            named |= bad && strcmp(bad, fields[i]) == 0;
        FUZZ_CHECK(named);
    }
    /* one component at a time, through every field's rule */
    for (int i = 0; i < 7; i++) {
        char out[160];
        if (lease_identity_component_normalize(fields[i], part[0], out, sizeof out))
            FUZZ_CHECK(strlen(out) >= 1 && strlen(out) < sizeof out);
    }
    free(buf);
    return 0;
}
