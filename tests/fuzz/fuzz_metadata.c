/*
 * fuzz_metadata.c - the metadata validator, end to end: the input is the
 * raw JSON text of an acquire's "metadata". What the request decoder
 * accepts must come back unchanged from the database result decoder (the
 * way jsonb would return it: re-printed by PostgreSQL with spaces and its
 * own key order, simulated here by re-parsing and re-printing), and every
 * number in it must be exact (|x| <= 2^53-1).
 */
#include <jansson.h>

#include "fuzz_common.h"
#include "lease/json_text.h"
#include "server/json_codec.h"
#include "store/pg_codec.h"

static const char lease_head[] =
    "{\"code\":\"lease_inspected\",\"lease\":{\"lock_identity\":{\"tenant_id\":\"t\","
    "\"program_id\":\"p\",\"target_namespace\":\"n\",\"target_id\":\"x\",\"actor_name\":\"a\","
    "\"workflow_name\":\"w\",\"operation_class\":\"default\"},\"lease_id\":\"lease_1\","
    "\"fencing_token\":1,\"state\":\"active\",\"acquired_at\":\"2026-08-05T12:00:00.000Z\","
    "\"renewed_at\":\"2026-08-05T12:00:00.000Z\",\"expires_at\":\"2026-08-05T12:00:30.000Z\","
    "\"ttl_ms\":30000,\"maximum_lifetime_ms\":3600000,\"metadata\":";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet();
    static const char prefix[] = "{\"request_id\":\"r\",\"lock_identity\":{\"tenant_id\":\"t\","
                                 "\"program_id\":\"p\",\"target_namespace\":\"n\","
                                 "\"target_id\":\"x\",\"actor_name\":\"a\","
                                 "\"workflow_name\":\"w\"},\"service_instance_id\":\"s\","
                                 "\"execution_id\":\"e\",\"job_id\":\"j\",\"metadata\":";
    size_t n = sizeof prefix - 1 + size + 2;
    char *body = malloc(n);
    if (!body)
        return 0;
    memcpy(body, prefix, sizeof prefix - 1);
    memcpy(body + sizeof prefix - 1, data, size);
    body[n - 2] = '}';
    body[n - 1] = '\0';
    leased_request_t *req = leased_request_new(LEASED_OP_ACQUIRE);
    leased_codec_limits_t limits = {0};
    leased_codec_error_t err;
    if (req && leased_codec_decode(LEASED_OP_ACQUIRE, body, n - 1, NULL, &limits, req, &err)) {
        const char *md = req->u.acquire.metadata_json;
        /* what jsonb gives back: the same values, another spelling */
        json_error_t jerr;
        json_t *v = json_loads(md, 0, &jerr);
        FUZZ_CHECK(json_is_object(v));
        char *pg = json_dumps(v, JSON_INDENT(0) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
        json_decref(v);
        FUZZ_CHECK(pg);
        size_t rn = sizeof lease_head - 1 + strlen(pg) + 3;
        char *result = malloc(rn);
        FUZZ_CHECK(result);
        snprintf(result, rn, "%s%s}}", lease_head, pg);
        lease_result_t res;
        lease_code_t code = store_pg_decode_result(STORE_PG_OP_INSPECT, result, &res);
        FUZZ_CHECK(code == LEASE_INSPECTED);
        /* same values: the decoder's canonical text equals the request's */
        FUZZ_CHECK(strcmp(res.lease.metadata_json, md) == 0);
        free(result);
        free(pg);
    } else if (req) {
        /* the input may also close the metadata and add fields of its own:
         * whatever is refused is named */
        FUZZ_CHECK(err.field[0] != '\0');
    }
    leased_request_free(req);
    free(body);
    return 0;
}
