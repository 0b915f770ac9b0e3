/*
 * race_migrate.c - leasectl migrate, verify and recover against a real
 * Postgres: concurrent migrators apply each file once, reruns are no-ops, a
 * changed applied file is refused, --status reports pending work, and
 * verify/recover find and repair a fencing inconsistency.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <glob.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <glob.h>

#include "lease/schema.h"
#include "testpg.h"

/* Runs a shell command; returns its exit status and captures stdout+stderr. */
static int run(char *out, size_t outsz, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int run(char *out, size_t outsz, const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    strncat(cmd, " 2>&1", sizeof cmd - strlen(cmd) - 1);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, outsz - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* How many migration files the source tree holds (numbers may have gaps
 * while branches are merged, so this is not LEASE_SCHEMA_VERSION). */
static long long migration_files(void)
{
    glob_t g;
    memset(&g, 0, sizeof g);
    assert_int_equal(
        glob(LEASE_TEST_SOURCE_DIR "/migrations/[0-9][0-9][0-9][0-9]_*.sql", 0, NULL, &g), 0);
    long long n = (long long)g.gl_pathc;
    globfree(&g);
    return n;
}

static void concurrent_migrators_apply_each_file_once(void **state)
{
    (void)state;
    char *url = testpg_create_empty_db("migrate_concurrent");
    char out[65536];
    /* four migrators at once on an empty database */
    int rc = run(out, sizeof out,
                 "pids=; for i in 1 2 3 4; do '%s' migrate --database-url '%s' >/dev/null & "
                 "pids=\"$pids $!\"; done; fail=0; for p in $pids; do wait $p || fail=1; done; "
                 "exit $fail",
                 LEASE_TEST_LEASECTL, url);
    assert_int_equal(rc, 0);
    /* one row per migration file (numbers may have gaps between branches) */
    assert_int_equal(testpg_query_int(url, "SELECT count(*) FROM lease.schema_migrations"),
                     migration_files());
    assert_int_equal(testpg_query_int(url, "SELECT count(DISTINCT version) FROM "
                                           "lease.schema_migrations"),
                     migration_files());
    assert_int_equal(testpg_query_int(url, "SELECT max(version) FROM lease.schema_migrations"),
                     LEASE_SCHEMA_VERSION);

    /* a rerun applies nothing and reports the schema current */
    rc = run(out, sizeof out, "'%s' migrate --database-url '%s'", LEASE_TEST_LEASECTL, url);
    assert_int_equal(rc, 0);
    assert_null(strstr(out, "applied 0"));
    assert_non_null(strstr(out, "\"pending\":0"));
    testpg_drop_db(url);
    free(url);
}

static void changed_applied_file_is_refused(void **state)
{
    (void)state;
    char *url = testpg_create_db("migrate_checksum");
    char out[65536];
    char dir[] = "/tmp/leased-migrations.XXXXXX";
    assert_non_null(mkdtemp(dir));
    int rc = run(out, sizeof out,
                 "cp '%s'/migrations/*.sql '%s'/ && printf '\\n-- edited\\n' >> '%s'/0002_tables.sql",
                 LEASE_TEST_SOURCE_DIR, dir, dir);
    assert_int_equal(rc, 0);
    rc = run(out, sizeof out, "LEASE_SQL_DIR=" LEASE_TEST_SOURCE_DIR "/sql LEASE_MIGRATIONS_DIR='%s' '%s' migrate --database-url '%s'", dir,
             LEASE_TEST_LEASECTL, url);
    assert_int_equal(rc, 69);
    assert_non_null(strstr(out, "0002_tables.sql was changed after it was applied"));
    /* --status refuses too: the database no longer matches the files */
    rc = run(out, sizeof out, "LEASE_SQL_DIR=" LEASE_TEST_SOURCE_DIR "/sql LEASE_MIGRATIONS_DIR='%s' '%s' migrate --status --database-url '%s'",
             dir, LEASE_TEST_LEASECTL, url);
    assert_int_equal(rc, 69);
    /* a file the database has never seen is pending, then applied once */
    rc = run(out, sizeof out,
             "cp '%s'/migrations/0002_tables.sql '%s'/ && "
             "printf 'CREATE TABLE lease.migrate_probe (x int);\\n' > '%s'/9999_probe.sql",
             LEASE_TEST_SOURCE_DIR, dir, dir);
    assert_int_equal(rc, 0);
    rc = run(out, sizeof out, "LEASE_SQL_DIR=" LEASE_TEST_SOURCE_DIR "/sql LEASE_MIGRATIONS_DIR='%s' '%s' migrate --status --database-url '%s'",
             dir, LEASE_TEST_LEASECTL, url);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "\"pending\":1"));
    rc = run(out, sizeof out, "LEASE_SQL_DIR=" LEASE_TEST_SOURCE_DIR "/sql LEASE_MIGRATIONS_DIR='%s' '%s' migrate --database-url '%s'", dir,
             LEASE_TEST_LEASECTL, url);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "applied 9999_probe.sql"));
    assert_int_equal(testpg_query_int(url, "SELECT count(*) FROM lease.schema_migrations "
                                           "WHERE version = 9999"),
                     1);
    run(out, sizeof out, "rm -rf '%s'", dir);
    testpg_drop_db(url);
    free(url);
}

/* 0003, 0004 and 0009 were amended in comments only (they cited a document
 * outside the repository): a database that applied the released text keeps
 * migrating; any other recorded checksum of those files is still refused. */
static void comment_amended_files_accept_their_released_checksum(void **state)
{
    (void)state;
    char *url = testpg_create_db("migrate_amended");
    char out[65536];
    assert_true(testpg_exec(url, "UPDATE lease.schema_migrations SET checksum = CASE version "
                                 "WHEN 3 THEN '8ed3c1f3e7134ba9ec5157d4c0c4f6af35c9ea53d8da5ea15326300ea99579b9' "
                                 "WHEN 4 THEN 'cca860cf785cc4a5c8fd18a494a8841ac16cf44e684ff52b040d4299a759e2cf' "
                                 "ELSE 'f8151f88bee1a8404c5b87b91dadc01ec5d651cabfce53ae88a811f6a53559d1' END "
                                 "WHERE version IN (3, 4, 9)"));
    int rc = run(out, sizeof out, "'%s' migrate --status --database-url '%s'", LEASE_TEST_LEASECTL,
                 url);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "\"pending\":0"));
    /* the released checksum of 0003 is not one of 0004's */
    assert_true(testpg_exec(url, "UPDATE lease.schema_migrations SET checksum = "
                                 "'8ed3c1f3e7134ba9ec5157d4c0c4f6af35c9ea53d8da5ea15326300ea99579b9' "
                                 "WHERE version = 4"));
    rc = run(out, sizeof out, "'%s' migrate --status --database-url '%s'", LEASE_TEST_LEASECTL, url);
    assert_int_equal(rc, 69);
    assert_non_null(strstr(out, "0004_lease_operations.sql was changed after it was applied"));
    testpg_drop_db(url);
    free(url);
}

static void verify_finds_and_recover_repairs(void **state)
{
    (void)state;
    char *url = testpg_create_db("migrate_verify");
    char out[65536];
    int rc = run(out, sizeof out, "'%s' verify --database-url '%s'", LEASE_TEST_LEASECTL, url);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "\"consistent\": true"));

    /* a downstream store accepted token 41 but the counter says 3 (an older backup) */
    assert_true(testpg_exec(url,
        "INSERT INTO lease.locks (lock_key, tenant_id, program_id, target_namespace, target_id,"
        " actor_name, workflow_name, operation_class, fencing_counter, created_at, state)"
        " VALUES (lease.lock_key('t', 'p', 'ns', 'x1', 'a', 'w'), 't', 'p', 'ns', 'x1', 'a', 'w',"
        " 'default', 3, now(), 'free');"
        "INSERT INTO lease.fence_marks VALUES (lease.lock_key('t', 'p', 'ns', 'x1', 'a', 'w'),"
        " 41, now());"));
    rc = run(out, sizeof out, "'%s' verify --database-url '%s'", LEASE_TEST_LEASECTL, url);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "counter_below_accepted_token"));

    rc = run(out, sizeof out, "'%s' recover --reason 'restored from backup' --database-url '%s'",
             LEASE_TEST_LEASECTL, url);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "\"epoch\": 1"));
    /* raised by the stride (1e9), never below the accepted token */
    assert_int_equal(testpg_query_int(url, "SELECT fencing_counter FROM lease.locks"),
                     1000000003LL);
    rc = run(out, sizeof out, "'%s' verify --database-url '%s'", LEASE_TEST_LEASECTL, url);
    assert_int_equal(rc, 0);

    /* a reason is mandatory */
    rc = run(out, sizeof out, "'%s' recover --database-url '%s'", LEASE_TEST_LEASECTL, url);
    assert_int_equal(rc, 2);
    assert_int_equal(testpg_query_int(url, "SELECT epoch FROM lease.namespace_state"), 1);
    testpg_drop_db(url);
    free(url);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(concurrent_migrators_apply_each_file_once),
        cmocka_unit_test(changed_applied_file_is_refused),
        cmocka_unit_test(comment_amended_files_accept_their_released_checksum),
        cmocka_unit_test(verify_finds_and_recover_repairs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
