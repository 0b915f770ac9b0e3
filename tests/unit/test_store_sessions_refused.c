/*
 * test_store_sessions_refused.c - a backend without sessions (its
 * session ops NULL, as Valkey's) never sees a request that names one: the
 * dispatcher (src/protocol/store.c) answers invalid_lease_request naming
 * session_id, with a detail that says sessions need PostgreSQL, for an
 * acquire with session_id and for each session call; an acquire without a
 * session reaches the backend as before.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "lease/store.h"

static int acquires; /* calls the backend saw */

static lease_code_t fake_acquire(lease_store_t *s, const lease_acquire_req_t *req,
                                 lease_result_t *res)
{
    (void)s;
    (void)req;
    acquires++;
    memset(res, 0, sizeof *res);
    res->code = LEASE_ACQUIRED;
    return res->code;
}

static const lease_store_ops_t no_sessions = {.acquire = fake_acquire};

static void assert_refused(lease_code_t code, const lease_result_t *res)
{
    assert_int_equal(code, LEASE_INVALID_LEASE_REQUEST);
    assert_int_equal(res->code, LEASE_INVALID_LEASE_REQUEST);
    assert_string_equal(res->field, "session_id");
    assert_non_null(strstr(res->detail, "PostgreSQL"));
}

static void test_refused_without_sessions(void **state)
{
    (void)state;
    lease_store_t store = {.ops = &no_sessions, .impl = NULL};
    lease_acquire_req_t acq;
    memset(&acq, 0, sizeof acq);
    lease_result_t res;

    acquires = 0;
    assert_int_equal(lease_store_acquire(&store, &acq, &res), LEASE_ACQUIRED);
    assert_int_equal(acquires, 1);

    strcpy(acq.session_id, "session_01");
    assert_refused(lease_store_acquire(&store, &acq, &res), &res);
    assert_int_equal(acquires, 1); /* the backend never saw it */

    lease_session_req_t s;
    memset(&s, 0, sizeof s);
    strcpy(s.session_id, "session_01");
    assert_refused(lease_store_session_open(&store, &s, &res), &res);
    assert_refused(lease_store_session_keepalive(&store, &s, &res), &res);
    assert_refused(lease_store_session_close(&store, &s, &res), &res);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refused_without_sessions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
