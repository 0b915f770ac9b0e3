/*
 * fuzz_request_decoder.c - leased_codec_decode, the strict decoder of every
 * request body (src/server/json_codec.c). The first byte picks the route;
 * the rest is the body (for GET, the {lease_id} path segment).
 *
 * Checks: a refusal names a field; an accepted request satisfies the rules
 * the database relies on (normalised identity, bounded metadata whose
 * numbers are within 2^53-1 and whose text is what lease_json_dumps writes).
 */
#include <jansson.h>

#include "fuzz_common.h"
#include "lease/identity.h"
#include "lease/json_text.h"
#include "server/json_codec.h"

static const leased_op_t ops[] = {
    LEASED_OP_ACQUIRE,       LEASED_OP_RENEW,  LEASED_OP_RELEASE,
    LEASED_OP_FORCE_RELEASE, LEASED_OP_REVOKE, LEASED_OP_GET,
    LEASED_OP_INSPECT,       LEASED_OP_LIST,   LEASED_OP_COMMIT,
};

static void check_identity(const lease_identity_t *id)
{
    lease_identity_input_t in = {id->tenant_id,      id->program_id, id->target_namespace,
                                 id->target_id,      id->actor_name, id->workflow_name,
                                 id->operation_class};
    lease_identity_t again;
    const char *bad = NULL;
    /* normalised identities are fixed points of normalisation */
    FUZZ_CHECK(lease_identity_normalize(&in, &again, &bad));
    FUZZ_CHECK(lease_identity_equal(id, &again));
}

static void check_metadata(const char *text)
{
    json_error_t err;
    json_t *md = json_loads(text, JSON_REJECT_DUPLICATES, &err);
    FUZZ_CHECK(json_is_object(md));
    FUZZ_CHECK(strlen(text) <= LEASE_METADATA_MAX);
    const char *key;
    json_t *v;
    json_object_foreach(md, key, v)
    {
        FUZZ_CHECK(json_is_string(v) || json_is_boolean(v) || lease_json_number_safe(v));
    }
    char *again = lease_json_dumps(md, JSON_SORT_KEYS);
    FUZZ_CHECK(again && strcmp(again, text) == 0);
    free(again);
    json_decref(md);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet();
    if (size < 1)
        return 0;
    leased_op_t op = ops[data[0] % (sizeof ops / sizeof ops[0])];
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    char *segment = op == LEASED_OP_GET ? fuzz_cstr(data + 1, len) : NULL;
    leased_request_t *req = leased_request_new(op);
    if (!req) {
        free(segment);
        return 0;
    }
    leased_codec_limits_t limits = {10000};
    leased_codec_error_t err;
    bool ok = leased_codec_decode(op, op == LEASED_OP_GET ? "" : body,
                                  op == LEASED_OP_GET ? 0 : len, segment, &limits, req, &err);
    if (!ok) {
        FUZZ_CHECK(err.field[0] != '\0');
    } else if (op == LEASED_OP_ACQUIRE) {
        check_identity(&req->u.acquire.identity);
        check_metadata(req->u.acquire.metadata_json);
        FUZZ_CHECK(lease_id_valid(req->u.acquire.call.request_id));
        FUZZ_CHECK(req->wait_ms >= 0 && req->wait_ms <= limits.max_wait_ms);
    } else if (op == LEASED_OP_RENEW || op == LEASED_OP_RELEASE) {
        check_identity(&req->u.owner.identity);
        FUZZ_CHECK(req->u.owner.fencing_token >= 1);
    } else if (op == LEASED_OP_COMMIT) {
        check_identity(&req->u.commit.identity);
        FUZZ_CHECK(req->u.commit.n_writes >= 1 &&
                   req->u.commit.n_writes <= LEASE_COMMIT_WRITES_MAX);
        for (size_t i = 0; i < req->u.commit.n_writes; i++) {
            json_error_t jerr;
            json_t *w = json_loads(req->u.commit.writes[i].json, 0, &jerr);
            FUZZ_CHECK(json_is_object(w));
            json_decref(w);
        }
    } else if (op == LEASED_OP_GET) {
        FUZZ_CHECK(lease_id_valid(req->u.inspect.lease_id));
    }
    leased_request_free(req);
    free(segment);
    return 0;
}
