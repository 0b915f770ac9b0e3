/*
 * test_schema_version.c - LEASE_SCHEMA_VERSION (include/lease/schema.h) is
 * the number of the newest migration, so adding migrations/NNNN_name.sql
 * without raising it fails here instead of leaving leased "not ready"
 * against a database it could serve (or ready against one it cannot).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <glob.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "lease/schema.h"

#define MIGRATIONS LEASE_TEST_SOURCE_DIR "/migrations"

/* "0001_lease_store.sql" -> 1; -1 unless the name is NNNN_<name>.sql. */
static int migration_number(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t len = strlen(base);
    if (len < 4 + 1 + 1 + 4 || strcmp(base + len - 4, ".sql") != 0 || base[4] != '_')
        return -1;
    int n = 0;
    for (int i = 0; i < 4; i++) {
        if (base[i] < '0' || base[i] > '9')
            return -1;
        n = n * 10 + (base[i] - '0');
    }
    for (size_t i = 5; i < len - 4; i++) {
        char c = base[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
            return -1;
    }
    return n;
}

static void test_migration_name_parser(void **state)
{
    (void)state;
    assert_int_equal(migration_number("/x/0001_lease_store.sql"), 1);
    assert_int_equal(migration_number("0042_a.sql"), 42);
    assert_int_equal(migration_number("/x/001_short.sql"), -1);
    assert_int_equal(migration_number("/x/0001-dash.sql"), -1);
    assert_int_equal(migration_number("/x/0001_.sql"), -1);
    assert_int_equal(migration_number("/x/0001_Upper.sql"), -1);
    assert_int_equal(migration_number("/x/abcd_x.sql"), -1);
}

static void test_version_is_newest_migration(void **state)
{
    (void)state;
    glob_t g;
    memset(&g, 0, sizeof g);
    int rc = glob(MIGRATIONS "/*.sql", 0, NULL, &g);
    if (rc != 0)
        fail_msg("no migrations found in %s (glob %d)", MIGRATIONS, rc);

    int highest = 0;
    bool seen[10000] = {false};
    for (size_t i = 0; i < g.gl_pathc; i++) {
        int n = migration_number(g.gl_pathv[i]);
        if (n <= 0)
            fail_msg("%s is not named NNNN_name.sql (NNNN >= 0001)", g.gl_pathv[i]);
        if (seen[n])
            fail_msg("two migrations numbered %04d", n);
        seen[n] = true;
        if (n > highest)
            highest = n;
    }
    size_t count = g.gl_pathc;
    globfree(&g);

    assert_true(count > 0);
    if (highest != LEASE_SCHEMA_VERSION)
        fail_msg("LEASE_SCHEMA_VERSION is %d but the newest migration is %04d",
                 LEASE_SCHEMA_VERSION, highest);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_migration_name_parser),
        cmocka_unit_test(test_version_is_newest_migration),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
