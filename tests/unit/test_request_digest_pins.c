/*
 * test_request_digest_pins.c - the request digest of each operation's
 * sample body, from the wire: the body is decoded as leased decodes it
 * (leased_codec_decode) and digested as the service digests it
 * (leased_service_digest), and the hex must equal the value pinned here.
 *
 * Why pinned from the body and not from a store struct (test_digest.c does
 * that): the digest is persisted in idempotency rows, so a retry after an
 * upgrade is compared with the digest the old version wrote. Whatever
 * drives the decoder and the digest (hand-written functions, or the
 * operation descriptor, include/lease/operations.h) must give the same
 * bytes for the same body. A pin that changes is a broken replay across
 * upgrade, never a value to refresh. Set LEASE_PRINT_DIGESTS=1 to print
 * the values computed (for a new operation's pin only).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "server/json_codec.h"
#include "server/service.h"

static const leased_codec_limits_t limits = {60000};

#define IDENTITY                                                                                   \
    "\"lock_identity\":{\"tenant_id\":\"Tenant-Main\",\"program_id\":\"program-a\","               \
    "\"target_namespace\":\"starintel-target\",\"target_id\":\"Target_01\","                       \
    "\"actor_name\":\"usernamegen\",\"workflow_name\":\"default\"}"
#define IDENTITY_CLASSED                                                                           \
    "\"lock_identity\":{\"tenant_id\":\"tenant-main\",\"program_id\":\"program-a\","               \
    "\"target_namespace\":\"starintel-target\",\"target_id\":\"target_02\","                       \
    "\"actor_name\":\"usernamegen\",\"workflow_name\":\"nightly\","                                \
    "\"operation_class\":\"Enrich\"}"

typedef struct sample {
    const char *name;
    leased_op_t op;
    const char *body;
    const char *pins[3]; /* the request's digest, or each item's for a batch */
} sample_t;

static const sample_t samples[] = {
    {"acquire",
     LEASED_OP_ACQUIRE,
     "{\"request_id\":\"req_acq_01\"," IDENTITY ",\"service_instance_id\":\"instance_01\","
     "\"execution_id\":\"execution_01\",\"job_id\":\"job_01\",\"trace_id\":\"trace_01\","
     "\"ttl_ms\":30000,\"maximum_lifetime_ms\":300000,"
     "\"metadata\":{\"zeta\":1,\"alpha\":\"x\\u00e9\",\"mid\":true,\"r\":1.5},"
     "\"wait_ms\":500,\"deadline_ms\":2000}",
     {"0a6e20f5774215a3c081e4dd83f5d07f65f5d8d737bf2b1cefd80eadfa148d74"}},
    {"acquire_minimal",
     LEASED_OP_ACQUIRE,
     "{\"request_id\":\"req_acq_02\"," IDENTITY_CLASSED ",\"service_instance_id\":\"instance_01\","
     "\"execution_id\":\"execution_02\",\"job_id\":\"job_02\"}",
     {"294ac99707a8c07d883f5cb5faa682b071dbf61883b3e53210a2a1815db8dc1e"}},
    /* session_id enters the digest only when given: acquire_minimal's pin
     * above is the same body without it */
    {"acquire_in_session",
     LEASED_OP_ACQUIRE,
     "{\"request_id\":\"req_acq_02\"," IDENTITY_CLASSED ",\"service_instance_id\":\"instance_01\","
     "\"execution_id\":\"execution_02\",\"job_id\":\"job_02\","
     "\"session_id\":\"session_0192f3a4b5c6d7e8f90a1b2c3d4e5f60\"}",
     {"c1668b455d782a848e2d88ead4b4f22bb0f400a042906eb9af32a2860b3c505a"}},
    {"renew",
     LEASED_OP_RENEW,
     "{\"request_id\":\"req_ren_01\"," IDENTITY ",\"lease_id\":\"lease_01\","
     "\"fencing_token\":42,\"service_instance_id\":\"instance_01\",\"ttl_ms\":15000,"
     "\"deadline_at\":\"2030-01-01T00:00:00Z\"}",
     {"95806c6668687c44e60694b5d5452762d2bc7a400834c93cfdfe587f0056e926"}},
    {"renew_default_ttl",
     LEASED_OP_RENEW,
     "{\"request_id\":\"req_ren_02\"," IDENTITY_CLASSED ",\"lease_id\":\"lease_02\","
     "\"fencing_token\":9007199254740993,\"service_instance_id\":\"instance_02\"}",
     {"1b3a8884643576d22d413a6c480d6ccf79be375b7acf7f7efa620fe5e00045a4"}},
    {"release",
     LEASED_OP_RELEASE,
     "{\"request_id\":\"req_rel_01\"," IDENTITY ",\"lease_id\":\"lease_01\","
     "\"fencing_token\":42,\"service_instance_id\":\"instance_01\"}",
     {"1626d42ba99254160649fdf9f2506152b9237124cfa43c05ae4d88660ea5d911"}},
    {"force_release",
     LEASED_OP_FORCE_RELEASE,
     "{\"request_id\":\"req_frc_01\"," IDENTITY ",\"lease_id\":\"lease_01\","
     "\"fencing_token\":42,\"reason\":\"stuck worker \\u2014 \\\"quoted\\\" & <tags>\"}",
     {"ac35bc8f3eda683c0fb38f86df5846c90901e044b91b3e8f97c5204e180ed3be"}},
    {"revoke",
     LEASED_OP_REVOKE,
     "{\"request_id\":\"req_rvk_01\"," IDENTITY ",\"lease_id\":\"lease_01\","
     "\"fencing_token\":42,\"reason\":\"credential leaked\",\"incident_id\":\"INC-2026.12:3\"}",
     {"d070347def54a2d44d01101fbabb222543a60062a2df230da73752b78bc6e158"}},
    {"revoke_no_incident",
     LEASED_OP_REVOKE,
     "{\"request_id\":\"req_rvk_02\"," IDENTITY ",\"lease_id\":\"lease_01\","
     "\"fencing_token\":42,\"reason\":\"credential leaked\"}",
     {"d5681d1c9dc36d6bff5c6a471fd26419b334b2453c6e75c08624d536a9425eff"}},
    {"commit",
     LEASED_OP_COMMIT,
     "{\"request_id\":\"req_cmt_01\"," IDENTITY ",\"lease_id\":\"lease_01\","
     "\"fencing_token\":42,\"execution_id\":\"execution_01\",\"trace_id\":\"trace_01\","
     "\"writes\":[{\"kind\":\"document\",\"key\":\"docs/a.json\",\"expected_revision\":0,"
     "\"body\":{\"b\":[1,2.5,\"x\"],\"a\":{\"z\":null,\"y\":false}}},"
     "{\"kind\":\"publication\",\"topic\":\"leases.done\",\"payload\":{\"n\":1}}]}",
     {"c81a5649b93a196721fb759ee43c97e27eaf96e7a4ad2daaac0cda9b757b4d96"}},
    {"renew_batch",
     LEASED_OP_RENEW_BATCH,
     "{\"renewals\":[{\"request_id\":\"req_rb_01\"," IDENTITY ",\"lease_id\":\"lease_01\","
     "\"fencing_token\":42,\"service_instance_id\":\"instance_01\",\"ttl_ms\":15000},"
     "{\"request_id\":\"req_rb_02\"," IDENTITY_CLASSED ",\"lease_id\":\"lease_02\","
     "\"fencing_token\":7,\"service_instance_id\":\"instance_01\"}],\"deadline_ms\":900}",
     {"95806c6668687c44e60694b5d5452762d2bc7a400834c93cfdfe587f0056e926",
      "c5c056aa9026ee27c9c87603205d66efe0d9f4d52f6fb2cdae841ed44a3e450f"}},
    {"release_batch",
     LEASED_OP_RELEASE_BATCH,
     "{\"releases\":[{\"request_id\":\"req_lb_01\"," IDENTITY ",\"lease_id\":\"lease_01\","
     "\"fencing_token\":42,\"service_instance_id\":\"instance_01\"},"
     "{\"request_id\":\"req_lb_02\"," IDENTITY_CLASSED ",\"lease_id\":\"lease_02\","
     "\"fencing_token\":7,\"service_instance_id\":\"instance_01\"}]}",
     {"1626d42ba99254160649fdf9f2506152b9237124cfa43c05ae4d88660ea5d911",
      "db5c263c1097e9a888017b37bff5d267fae4133e528c8cd4f9dc0b0e44bd07e5"}},
};

/* What the service puts into a call before digesting: the caller. */
static void set_caller(lease_call_t *call)
{
    snprintf(call->principal.principal_id, sizeof call->principal.principal_id, "prn_actor_01");
    snprintf(call->principal.client_id, sizeof call->principal.client_id, "client_01");
    snprintf(call->principal.credential_id, sizeof call->principal.credential_id, "key_01");
    snprintf(call->principal.principal_class, sizeof call->principal.principal_class, "worker");
}

static void check_sample(const sample_t *s, bool print)
{
    leased_request_t *req = leased_request_new(s->op);
    assert_non_null(req);
    leased_codec_error_t err;
    bool ok = leased_codec_decode(s->op, s->body, strlen(s->body), NULL, &limits, req, &err);
    if (!ok)
        fail_msg("%s: decode failed at %s (%s)", s->name, err.field, err.reason ? err.reason : "?");
    size_t n = req->n_items ? req->n_items : 1;
    for (size_t i = 0; i < req->n_items; i++)
        set_caller(&req->items[i].call);
    if (!req->n_items)
        set_caller(leased_request_call(req));
    assert_true(leased_service_digest(req));
    for (size_t i = 0; i < n; i++) {
        const char *got = req->n_items ? req->items[i].call.request_digest
                                       : leased_request_call(req)->request_digest;
        if (print) {
            printf("%s[%zu] %s\n", s->name, i, got);
            continue;
        }
        assert_non_null(s->pins[i]);
        if (strcmp(got, s->pins[i]) != 0)
            fail_msg("%s[%zu]: digest %s, pinned %s", s->name, i, got, s->pins[i]);
    }
    leased_request_free(req);
}

static void test_digests_pinned(void **state)
{
    (void)state;
    const char *env = getenv("LEASE_PRINT_DIGESTS");
    bool print = env && strcmp(env, "1") == 0;
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++)
        check_sample(&samples[i], print);
}

/* Reads carry no digest: the service leaves their call's digest empty. */
static void test_reads_carry_no_digest(void **state)
{
    (void)state;
    static const char inspect[] = "{" IDENTITY "}";
    leased_request_t *req = leased_request_new(LEASED_OP_INSPECT);
    assert_non_null(req);
    leased_codec_error_t err;
    assert_true(
        leased_codec_decode(LEASED_OP_INSPECT, inspect, strlen(inspect), NULL, &limits, req, &err));
    set_caller(leased_request_call(req));
    assert_true(leased_service_digest(req));
    assert_string_equal(leased_request_call(req)->request_digest, "");
    leased_request_free(req);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_digests_pinned),
        cmocka_unit_test(test_reads_carry_no_digest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
