/*
 * test_pg_known.c - the set of identities whose row is known to exist
 * (src/store/pg_known.c): a hint that may forget, never one that invents.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "store/pg_known.h"

static lease_identity_t identity(const char *target)
{
    lease_identity_t id;
    memset(&id, 0, sizeof id);
    strcpy(id.tenant_id, "tenant-main");
    strcpy(id.program_id, "program-a");
    strcpy(id.target_namespace, "starintel-target");
    snprintf(id.target_id, sizeof id.target_id, "%s", target);
    strcpy(id.actor_name, "usernamegen");
    strcpy(id.workflow_name, "default");
    strcpy(id.operation_class, "default");
    return id;
}

static void test_remembers_what_it_was_told(void **state)
{
    (void)state;
    store_pg_known_t *k = store_pg_known_new(10);
    assert_non_null(k);
    lease_identity_t a = identity("t-a"), b = identity("t-b");
    uint64_t fa = store_pg_known_fingerprint(&a), fb = store_pg_known_fingerprint(&b);
    assert_true(fa != 0 && fb != 0 && fa != fb);
    assert_false(store_pg_known_has(k, fa));
    store_pg_known_add(k, fa);
    assert_true(store_pg_known_has(k, fa));
    /* another identity is not known unless added (unless it shares a slot
     * and a fingerprint, which for distinct keys means a 64-bit collision) */
    assert_false(store_pg_known_has(k, fb));
    store_pg_known_free(k);
}

static void test_fingerprint_is_the_identity(void **state)
{
    (void)state;
    lease_identity_t a = identity("t-a"), again = identity("t-a");
    assert_int_equal(store_pg_known_fingerprint(&a), store_pg_known_fingerprint(&again));
    /* an absent operation class is the default one */
    again.operation_class[0] = '\0';
    assert_int_equal(store_pg_known_fingerprint(&a), store_pg_known_fingerprint(&again));
    lease_identity_t collect = identity("t-a");
    strcpy(collect.operation_class, "collect");
    assert_true(store_pg_known_fingerprint(&a) != store_pg_known_fingerprint(&collect));
    /* an incomplete identity has no fingerprint: no hint */
    lease_identity_t none = identity("");
    assert_int_equal(store_pg_known_fingerprint(&none), 0);
}

static void test_overwrites_and_forgets_never_invents(void **state)
{
    (void)state;
    store_pg_known_t *k = store_pg_known_new(1); /* two slots */
    char name[32];
    uint64_t fps[64];
    for (int i = 0; i < 64; i++) {
        snprintf(name, sizeof name, "t-%d", i);
        lease_identity_t id = identity(name);
        fps[i] = store_pg_known_fingerprint(&id);
        store_pg_known_add(k, fps[i]);
    }
    int known = 0;
    for (int i = 0; i < 64; i++)
        known += store_pg_known_has(k, fps[i]);
    assert_true(known >= 1 && known <= 2); /* only the last ones per slot survive */
    assert_false(store_pg_known_has(k, 0));
    assert_null(store_pg_known_new(0));
    assert_null(store_pg_known_new(25));
    store_pg_known_free(k);
    store_pg_known_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_remembers_what_it_was_told),
        cmocka_unit_test(test_fingerprint_is_the_identity),
        cmocka_unit_test(test_overwrites_and_forgets_never_invents),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
