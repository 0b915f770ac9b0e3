/*
 * fuzz_result_decoder.c - the database result decoders (src/store/
 * pg_codec_result.c): the first byte picks the operation, the rest is the
 * function's jsonb text.
 *
 * Checks: a failure leaves nothing half-decoded (no lease, no list); a
 * mutation whose answer cannot be read is outcome_unknown, a read's is
 * backend_unavailable; a success carries its lease; the decoded code is one
 * the operation may answer.
 */
#include "fuzz_common.h"
#include "store/pg_codec.h"

static const store_pg_op_t lease_ops[] = {
    STORE_PG_OP_ACQUIRE,       STORE_PG_OP_RENEW,  STORE_PG_OP_RELEASE,
    STORE_PG_OP_FORCE_RELEASE, STORE_PG_OP_REVOKE, STORE_PG_OP_INSPECT,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet();
    if (size < 1)
        return 0;
    char *text = fuzz_cstr(data + 1, size - 1);
    unsigned pick = data[0] % 11;
    if (pick < 6) {
        store_pg_op_t op = lease_ops[pick];
        lease_result_t r;
        lease_code_t c = store_pg_decode_result(op, text, &r);
        FUZZ_CHECK(c == r.code);
        if (c == LEASE_BACKEND_UNAVAILABLE || c == LEASE_OUTCOME_UNKNOWN) {
            FUZZ_CHECK(!r.has_lease && r.lease.fencing_token == 0);
        }
        if (!store_pg_op_allows(op, c))
            FUZZ_CHECK(c == (store_pg_op_resolvable(op) ? LEASE_OUTCOME_UNKNOWN
                                                        : LEASE_BACKEND_UNAVAILABLE));
        /* a success carries its lease; a renewal's or an ending's brief
         * answer may leave the lease id and token to the request (the
         * adapter completes them), an acquisition's or an inspection's not */
        if (lease_code_is_success(c)) {
            FUZZ_CHECK(r.has_lease);
            if (op == STORE_PG_OP_ACQUIRE || op == STORE_PG_OP_INSPECT)
                FUZZ_CHECK(r.lease.fencing_token >= 1 && r.lease.lease_id[0]);
            FUZZ_CHECK(r.lease.expires_at_ms >= r.lease.acquired_at_ms);
        }
    } else if (pick < 9) {
        store_pg_op_t op = pick == 6   ? STORE_PG_OP_LIST_BY_OWNER
                           : pick == 7 ? STORE_PG_OP_LIST_BY_TARGET
                                       : STORE_PG_OP_LIST_BY_PROGRAM;
        lease_list_result_t l;
        lease_code_t c = store_pg_decode_list(op, text, &l);
        if (c != LEASE_LISTED)
            FUZZ_CHECK(!l.leases && l.count == 0);
        for (size_t i = 0; i < l.count; i++)
            FUZZ_CHECK(l.leases[i].fencing_token >= 1);
        lease_list_result_free(&l);
    } else if (pick == 9) {
        lease_commit_result_t cr;
        lease_code_t c = store_pg_decode_commit(text, 2, &cr);
        if (c != LEASE_COMMIT_ACCEPTED)
            FUZZ_CHECK(cr.n_writes == 0);
        else
            FUZZ_CHECK(cr.n_writes == 2 && cr.revisions[0] >= 1 && cr.revisions[1] >= 1);
    } else {
        lease_credential_t cred;
        bool found;
        (void)store_pg_decode_credential(text, &cred, &found);
        lease_health_t h = {0};
        (void)store_pg_decode_health(text, &h);
        lease_sweep_result_t s;
        (void)store_pg_decode_sweep(text, text, &s);
    }
    free(text);
    return 0;
}
