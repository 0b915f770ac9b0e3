/*
 * race_schema_paths.c - the function and view definitions of sql/ as
 * `leasectl migrate` applies them (src/store/pg_repeatables.c):
 *   - a database migrated by the numbered files only (schema 16 as released
 *     before sql/ existed, and schema 14) and then upgraded, a fresh
 *     install, and the test fixture's template all end in the same
 *     catalogue: every function
 *     (definition, owner, SECURITY DEFINER, settings, privileges, comment),
 *     view, relation, column, trigger, type and grant of schema lease, and
 *     what is recorded as applied;
 *   - pgTAP files (operations, role calls, the definitions' rules) pass on
 *     the upgraded database as on the template;
 *   - a changed file is applied again, alone, and --status reports it first;
 *   - a file ORDER does not list changes nothing; a definition that fails
 *     rolls back with the last numbered file, whose transaction it shares;
 *   - a removed file's function is dropped, and only functions of schema
 *     lease that no file defines are;
 *   - several databases of one cluster migrate at once (the roles 0001
 *     makes are the cluster's);
 *   - a new database starts from migrations/baseline and ends where the
 *     numbered files applied one by one end (pg_dump and the catalogue),
 *     and every released schema (the files up to N alone, each N: schema
 *     N-1 advanced by file N alone, as a release did) upgrades to the
 *     catalogue of a new install; the files applied one run at a time end
 *     where one run of them all ends.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <libpq-fe.h>

#include "testpg.h"

/* One line per catalogue object of schema lease (functions and views with
 * their full text), sorted: equal text means the same catalogue. */
static const char catalogue_sql[] =
    "SELECT string_agg(line, E'\\n' ORDER BY line) FROM ("
    " SELECT 'function ' || p.oid::regprocedure || ' owner=' || pg_get_userbyid(p.proowner)"
    "        || ' secdef=' || p.prosecdef || ' config=' || coalesce(p.proconfig::text, '-')"
    "        || ' acl=' || coalesce((SELECT string_agg(CASE WHEN a.grantee = 0 THEN 'PUBLIC'"
    "             ELSE a.grantee::regrole::text END || ':' || a.privilege_type || ':'"
    "             || a.grantor::regrole, ',' ORDER BY 1) FROM aclexplode(p.proacl) a), 'default')"
    "        || ' comment=' || coalesce(obj_description(p.oid, 'pg_proc'), '-')"
    "        || E'\\n' || pg_get_functiondef(p.oid) AS line"
    "   FROM pg_proc p WHERE p.pronamespace = 'lease'::regnamespace"
    " UNION ALL"
    " SELECT 'relation ' || c.oid::regclass || ' kind=' || c.relkind::text"
    "        || ' owner=' || pg_get_userbyid(c.relowner)"
    "        || ' options=' || coalesce(c.reloptions::text, '-')"
    "        || ' acl=' || coalesce((SELECT string_agg(CASE WHEN a.grantee = 0 THEN 'PUBLIC'"
    "             ELSE a.grantee::regrole::text END || ':' || a.privilege_type || ':'"
    "             || a.grantor::regrole, ',' ORDER BY 1) FROM aclexplode(c.relacl) a), 'default')"
    "        || ' comment=' || coalesce(obj_description(c.oid, 'pg_class'), '-')"
    "        || CASE WHEN c.relkind = 'v' THEN E'\\n' || pg_get_viewdef(c.oid) ELSE '' END"
    "   FROM pg_class c WHERE c.relnamespace = 'lease'::regnamespace"
    " UNION ALL"
    " SELECT 'column ' || a.attrelid::regclass || '.' || a.attname || ' '"
    "        || format_type(a.atttypid, a.atttypmod) || ' notnull=' || a.attnotnull"
    "        || ' default=' || coalesce(pg_get_expr(d.adbin, d.adrelid), '-')"
    "        || ' acl=' || coalesce(a.attacl::text, '-')"
    "        || ' comment=' || coalesce(col_description(a.attrelid, a.attnum), '-')"
    "   FROM pg_attribute a"
    "   JOIN pg_class c ON c.oid = a.attrelid AND c.relnamespace = 'lease'::regnamespace"
    "   LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum"
    "  WHERE a.attnum > 0 AND NOT a.attisdropped"
    " UNION ALL"
    " SELECT 'trigger ' || pg_get_triggerdef(t.oid) FROM pg_trigger t"
    "   JOIN pg_class c ON c.oid = t.tgrelid"
    "  WHERE c.relnamespace = 'lease'::regnamespace AND NOT t.tgisinternal"
    " UNION ALL"
    " SELECT 'type ' || t.oid::regtype || ' owner=' || pg_get_userbyid(t.typowner)"
    "        || ' acl=' || coalesce(t.typacl::text, 'default')"
    "   FROM pg_type t WHERE t.typnamespace = 'lease'::regnamespace"
    " UNION ALL"
    " SELECT 'schema lease owner=' || pg_get_userbyid(n.nspowner)"
    "        || ' acl=' || coalesce(n.nspacl::text, 'default')"
    "   FROM pg_namespace n WHERE n.nspname = 'lease'"
    " UNION ALL"
    " SELECT 'migration ' || version || ' ' || name || ' ' || checksum"
    "   FROM lease.schema_migrations"
    " UNION ALL"
    " SELECT 'definition ' || name || ' ' || checksum FROM lease.schema_repeatables"
    ") s";

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

static char *catalogue(const char *url)
{
    char *text = testpg_query_value(url, catalogue_sql);
    assert_non_null(text);
    return text;
}

/* Equal catalogues, or the lines that differ printed and the test failed. */
static void assert_same_catalogue(const char *what, const char *a, const char *b)
{
    if (strcmp(a, b) == 0)
        return;
    char pa[] = "/tmp/leased-catalogue-a.XXXXXX", pb[] = "/tmp/leased-catalogue-b.XXXXXX";
    int fa = mkstemp(pa), fb = mkstemp(pb);
    assert_true(fa >= 0 && fb >= 0);
    assert_true(write(fa, a, strlen(a)) == (ssize_t)strlen(a));
    assert_true(write(fb, b, strlen(b)) == (ssize_t)strlen(b));
    close(fa);
    close(fb);
    char out[16384];
    run(out, sizeof out, "diff '%s' '%s' | head -n 80", pa, pb);
    printf("%s: the catalogues differ:\n%s\n", what, out);
    unlink(pa);
    unlink(pb);
    fail_msg("%s: the catalogues differ", what);
}

/* Copies file src to dst, with no process (a shell loop of cp took a
 * process per file). */
static void copy_file(const char *src, const char *dst)
{
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        assert_int_equal(fwrite(buf, 1, n, out), n);
    assert_false(ferror(in));
    fclose(in);
    assert_int_equal(fclose(out), 0);
}

/* Copies the numbered files up to version last into folder to. */
static void copy_numbered_up_to(const char *to, int last)
{
    char from[4200];
    snprintf(from, sizeof from, "%s/migrations", LEASE_TEST_SOURCE_DIR);
    DIR *d = opendir(from);
    assert_non_null(d);
    struct dirent *e;
    int copied = 0;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 9 || strspn(e->d_name, "0123456789") != 4 || e->d_name[4] != '_' ||
            strcmp(e->d_name + n - 4, ".sql") != 0 || atoi(e->d_name) > last)
            continue;
        char src[4500], dst[4500];
        snprintf(src, sizeof src, "%s/%s", from, e->d_name);
        snprintf(dst, sizeof dst, "%s/%s", to, e->d_name);
        copy_file(src, dst);
        copied++;
    }
    closedir(d);
    assert_true(copied > 0);
}

static void upgraded_fresh_and_template_end_in_the_same_catalogue(void **state)
{
    (void)state;
    char out[65536];
    char empty[] = "/tmp/leased-nosql.XXXXXX";
    assert_non_null(mkdtemp(empty));
    assert_int_equal(run(out, sizeof out, "touch '%s/ORDER'", empty), 0);

    /* schema 16 as the numbered files alone make it (what leasectl did
     * before sql/ existed): no definition applied, no function comment */
    char *upgraded = testpg_create_empty_db("schema_upgraded");
    int rc = run(out, sizeof out, "LEASE_SQL_DIR='%s' '%s' migrate --database-url '%s'", empty,
                 LEASE_TEST_LEASECTL, upgraded);
    assert_int_equal(rc, 0);
    assert_int_equal(testpg_query_int(upgraded, "SELECT count(*) FROM lease.schema_repeatables"),
                     0);
    assert_int_equal(testpg_query_int(upgraded, "SELECT count(*) FROM pg_proc WHERE pronamespace = "
                                                "'lease'::regnamespace AND obj_description(oid, "
                                                "'pg_proc') IS NOT NULL"),
                     0);
    char *before = catalogue(upgraded);

    char *fresh = testpg_create_empty_db("schema_fresh");
    rc = run(out, sizeof out, "'%s' migrate --database-url '%s'", LEASE_TEST_LEASECTL, fresh);
    assert_int_equal(rc, 0);
    char *fresh_cat = catalogue(fresh);
    /* the comparison sees what the definitions change */
    assert_string_not_equal(before, fresh_cat);

    /* the upgrade: the numbered files are current, every definition applies */
    rc = run(out, sizeof out, "'%s' migrate --database-url '%s'", LEASE_TEST_LEASECTL, upgraded);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "\"definitions_pending\":0"));
    assert_non_null(strstr(out, "definitions from"));
    char *upgraded_cat = catalogue(upgraded);
    assert_same_catalogue("upgraded vs fresh", upgraded_cat, fresh_cat);

    /* from further back: schema 14 by the numbered files alone (0015 and
     * 0016 then replace functions before the definitions do) */
    char *from14 = testpg_create_empty_db("schema_from14");
    char m14[64];
    snprintf(m14, sizeof m14, "%s-m14", empty);
    assert_int_equal(mkdir(m14, 0700), 0);
    copy_numbered_up_to(m14, 14);
    rc = run(out, sizeof out,
             "LEASE_SQL_DIR='%s' LEASE_MIGRATIONS_DIR='%s' '%s' migrate "
             "--database-url '%s' && '%s' migrate --database-url '%s'",
             empty, m14, LEASE_TEST_LEASECTL, from14, LEASE_TEST_LEASECTL, from14);
    if (rc != 0)
        printf("%s\n", out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "applied 0016_"));
    char *from14_cat = catalogue(from14);
    assert_same_catalogue("upgraded from 14 vs fresh", from14_cat, fresh_cat);
    free(from14_cat);
    testpg_drop_db(from14);
    free(from14);

    /* the template pgTAP and every other test copy: the fresh path too */
    char *copy = testpg_create_db("schema_template");
    char *template_cat = catalogue(copy);
    assert_same_catalogue("template vs fresh", template_cat, fresh_cat);

    /* pgTAP on the upgraded path too (the template is the fresh path every
     * pgTAP file runs on): the operations, every granted function called as
     * every role, and the definitions' own rules */
    assert_true(testpg_exec(upgraded, "CREATE EXTENSION IF NOT EXISTS pgtap"));
    char *upgraded_name = testpg_query_value(upgraded, "SELECT current_database()");
    assert_non_null(upgraded_name);
    rc = run(out, sizeof out,
             "state=$(mktemp /tmp/leased-upgraded-state.XXXXXX) && "
             "sed \"s/^PG_TEMPLATE=.*/PG_TEMPLATE='%s'/\" '%s' > \"$state\" && "
             "cd '%s' && for f in 03_acquire 05_release 16_role_calls 22_definitions; do "
             "tests/harness/run_pgtap \"$state\" pgtap/$f.sql || { rm -f \"$state\"; exit 1; }; "
             "done; rm -f \"$state\"",
             upgraded_name, LEASE_TEST_STATE_FILE, LEASE_TEST_SOURCE_DIR);
    if (rc != 0)
        printf("%s\n", out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "All tests successful"));
    free(upgraded_name);

    /* a rerun applies nothing */
    rc = run(out, sizeof out, "'%s' migrate --database-url '%s'", LEASE_TEST_LEASECTL, fresh);
    assert_int_equal(rc, 0);
    assert_null(strstr(out, "applied "));

    free(template_cat);
    free(upgraded_cat);
    free(fresh_cat);
    free(before);
    testpg_drop_db(copy);
    testpg_drop_db(fresh);
    testpg_drop_db(upgraded);
    free(copy);
    free(fresh);
    free(upgraded);
    run(out, sizeof out, "rm -rf '%s' '%s-m14'", empty, empty);
}

/* pg_dump of the whole database's schema into path (every function, view,
 * table, column, constraint, index, statistics target, trigger, grant and
 * comment); 0, or what failed. */
static int dump_schema(const char *url, const char *path)
{
    char out[4096];
    return run(out, sizeof out,
               "pg_dump --schema-only -d '%s' | grep -v '^\\\\\\(un\\)\\{0,1\\}restrict ' > '%s'",
               url, path);
}

/* 0 when the two dumps are equal, else the diff's status (its first lines
 * printed). */
static int diff_dumps(const char *a, const char *b)
{
    char out[16384];
    int rc = run(out, sizeof out,
                 "diff '%s' '%s' > '%s.diff'; rc=$?; head -n 40 '%s.diff'; exit $rc", a, b, a, a);
    if (rc != 0)
        printf("the schema dumps differ:\n%s\n", out);
    return rc;
}

/* A new database starts from migrations/baseline (scripts/schema-baseline):
 * it must end where the numbered files one by one end, to the byte of
 * pg_dump and of the catalogue above, with the same rows recorded; and the
 * comparison must see a baseline that drifted (a statistics target gone). */
static void baseline_install_matches_the_numbered_files(void **state)
{
    (void)state;
    char out[65536];
    char dir[] = "/tmp/leased-baseline.XXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_int_equal(run(out, sizeof out,
                         "mkdir '%s/files' '%s/drifted' && cp '%s'/migrations/*.sql '%s/files/' && "
                         "cp -r '%s'/migrations/. '%s/drifted/' && "
                         "ls '%s'/drifted/baseline/*_baseline.sql",
                         dir, dir, LEASE_TEST_SOURCE_DIR, dir, LEASE_TEST_SOURCE_DIR, dir, dir),
                     0);

    char *via_baseline = testpg_create_empty_db("schema_via_baseline");
    int rc =
        run(out, sizeof out, "'%s' migrate --database-url '%s'", LEASE_TEST_LEASECTL, via_baseline);
    if (rc != 0)
        printf("%s\n", out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "_baseline.sql (the schema of every migration up to"));
    assert_null(strstr(out, "applied 0001_"));

    char *via_files = testpg_create_empty_db("schema_via_files");
    rc = run(out, sizeof out,
             "LEASE_MIGRATIONS_DIR='%s/files' LEASE_SQL_DIR='%s/sql' '%s' migrate "
             "--database-url '%s'",
             dir, LEASE_TEST_SOURCE_DIR, LEASE_TEST_LEASECTL, via_files);
    if (rc != 0)
        printf("%s\n", out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "applied 0001_roles_and_schema.sql"));

    char a[4200], b[4200];
    snprintf(a, sizeof a, "%s/via_baseline.sql", dir);
    snprintf(b, sizeof b, "%s/via_files.sql", dir);
    assert_int_equal(dump_schema(via_baseline, a), 0);
    assert_int_equal(dump_schema(via_files, b), 0);
    assert_int_equal(diff_dumps(a, b), 0);
    char *cat_baseline = catalogue(via_baseline), *cat_files = catalogue(via_files);
    assert_same_catalogue("baseline vs numbered files", cat_baseline, cat_files);
    /* what lease.schema_migrations records is part of the catalogue above;
     * status reads the same */
    char st_a[65536], st_b[65536];
    assert_int_equal(
        run(st_a, sizeof st_a,
            "'%s' migrate --status --database-url '%s' | sed 's/\"applied_at\":\"[^\"]*\"//g'",
            LEASE_TEST_LEASECTL, via_baseline),
        0);
    assert_int_equal(run(st_b, sizeof st_b,
                         "LEASE_MIGRATIONS_DIR='%s/files' LEASE_SQL_DIR='%s/sql' '%s' migrate "
                         "--status --database-url '%s' | sed 's/\"applied_at\":\"[^\"]*\"//g'",
                         dir, LEASE_TEST_SOURCE_DIR, LEASE_TEST_LEASECTL, via_files),
                     0);
    assert_string_equal(st_a, st_b);
    /* the same rows (policy, namespace, secret key): values a database
     * makes its own (times, the random key, an oid) only present alike */
    char rows_a[65536], rows_b[65536];
    static const char rows_cmd[] =
        "pg_dump --data-only --column-inserts -n lease -T lease.schema_migrations "
        "-T lease.schema_repeatables -d '%s' | grep '^INSERT' | "
        "sed -E \"s/'[0-9]{4}-[0-9]{2}-[0-9]{2} [^']*'/TIME/g; s/'.x[0-9a-f]{64}'/BYTES/g; "
        "s/, [0-9]+\\);$/, OID);/\"";
    assert_int_equal(run(rows_a, sizeof rows_a, rows_cmd, via_baseline), 0);
    assert_int_equal(run(rows_b, sizeof rows_b, rows_cmd, via_files), 0);
    assert_non_null(strstr(rows_a, "INSERT INTO lease.secrets"));
    assert_string_equal(rows_a, rows_b);

    /* a drifted baseline: the comparison fails */
    char *drifted = testpg_create_empty_db("schema_drifted");
    rc = run(out, sizeof out,
             "f=$(ls '%s'/drifted/baseline/*_baseline.sql) && "
             "grep -q 'audit_events ALTER COLUMN event_id SET STATISTICS' \"$f\" && "
             "sed -i '/audit_events ALTER COLUMN event_id SET STATISTICS/d' \"$f\" && "
             "LEASE_MIGRATIONS_DIR='%s/drifted' LEASE_SQL_DIR='%s/sql' '%s' migrate "
             "--database-url '%s'",
             dir, dir, LEASE_TEST_SOURCE_DIR, LEASE_TEST_LEASECTL, drifted);
    assert_int_equal(rc, 0);
    char c[4200];
    snprintf(c, sizeof c, "%s/drifted.sql", dir);
    assert_int_equal(dump_schema(drifted, c), 0);
    assert_int_not_equal(diff_dumps(c, b), 0);

    free(cat_baseline);
    free(cat_files);
    testpg_drop_db(via_baseline);
    testpg_drop_db(via_files);
    testpg_drop_db(drifted);
    free(via_baseline);
    free(via_files);
    free(drifted);
    run(out, sizeof out, "rm -rf '%s'", dir);
}

/* The database name of one of testpg's URLs (postgresql:///NAME?...). */
static char *db_name(const char *url)
{
    const char *p = strstr(url, ":///");
    assert_non_null(p);
    p += 4;
    return strndup(p, strcspn(p, "?"));
}

/* The same URL for database name. */
static char *url_of(const char *url, const char *name)
{
    const char *p = strstr(url, ":///");
    assert_non_null(p);
    p += 4;
    size_t len = strlen(url) + strlen(name) + 1;
    char *out = malloc(len);
    assert_non_null(out);
    snprintf(out, len, "%.*s%s%s", (int)(p - url), url, name, p + strcspn(p, "?"));
    return out;
}

/* A statement on the session that makes and drops the copies (one session
 * for all of them: a connection per statement started a server process
 * per statement). */
static void admin_exec(PGconn *admin, const char *sql)
{
    PGresult *r = PQexec(admin, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        printf("%s: %s\n", sql, PQresultErrorMessage(r));
    assert_int_equal(PQresultStatus(r), PGRES_COMMAND_OK);
    PQclear(r);
}

/* The upgrade of released schema version, database name (a copy, dropped
 * after): one leasectl run ends in the catalogue of a new install. */
static void upgrade_released(PGconn *admin, const char *url_like, const char *name,
                             const char *version, const char *fresh_cat)
{
    char out[65536];
    char *url = url_of(url_like, name);
    int rc = run(out, sizeof out, "'%s' migrate --database-url '%s'", LEASE_TEST_LEASECTL, url);
    if (rc != 0)
        printf("from %s: %s\n", version, out);
    assert_int_equal(rc, 0);
    char *cat = catalogue(url);
    char what[64];
    snprintf(what, sizeof what, "upgraded from %s vs fresh", version);
    assert_same_catalogue(what, cat, fresh_cat);
    free(cat);
    free(url);
    char sql[128];
    snprintf(sql, sizeof sql, "DROP DATABASE %s WITH (FORCE)", name);
    admin_exec(admin, sql);
}

/*
 * Every released schema (the numbered files up to N alone, for each N),
 * upgraded, ends in the catalogue of a new install (the baseline).
 * Schema N is made as releases made it: one database, never upgraded,
 * advanced by file N alone in a leasectl run of its own (the run must apply
 * that file and nothing else: the database was at N-1); the upgrade runs on
 * a copy of it (CREATE DATABASE ... TEMPLATE, which copies everything the
 * files make: none of them sets anything on the database itself). Building
 * each N from nothing instead applied 1+2+...+N files, with a shell process
 * per file copied, which took most of this test's time. Schema N's copy is
 * upgraded after file N+1 is applied, so that the copy of N+1 is made once
 * the session that applied it has long ended (a copy waits for every
 * session of its template to end). Applied one run at a time, the files
 * must end where one run of them all ends (the catalogue of both), so no
 * file depends on what an earlier one left in its session.
 */
static void every_released_schema_upgrades_to_the_fresh_catalogue(void **state)
{
    (void)state;
    char out[65536];
    char dir[] = "/tmp/leased-released.XXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_int_equal(
        run(out, sizeof out, "mkdir '%s/sql' '%s/m' && touch '%s/sql/ORDER'", dir, dir, dir), 0);
    char *fresh = testpg_create_empty_db("schema_released_fresh");
    assert_int_equal(
        run(out, sizeof out, "'%s' migrate --database-url '%s'", LEASE_TEST_LEASECTL, fresh), 0);
    char *fresh_cat = catalogue(fresh);
    char files[8192];
    assert_int_equal(run(files, sizeof files, "ls '%s'/migrations | grep -E '^[0-9]{4}_.*\\.sql$'",
                         LEASE_TEST_SOURCE_DIR),
                     0);
    char *released = testpg_create_empty_db("schema_released");
    char *released_name = db_name(released);
    PGconn *admin = PQconnectdb(fresh);
    assert_int_equal(PQstatus(admin), CONNECTION_OK);
    char pending[64] = "", pending_version[8] = "";
    int upgraded = 0, rc;
    for (char *f = strtok(files, "\n"); f; f = strtok(NULL, "\n")) {
        char src[4200], dst[4200], applied[300];
        snprintf(src, sizeof src, "%s/migrations/%s", LEASE_TEST_SOURCE_DIR, f);
        snprintf(dst, sizeof dst, "%s/m/%s", dir, f);
        copy_file(src, dst);
        rc = run(out, sizeof out,
                 "LEASE_SQL_DIR='%s/sql' LEASE_MIGRATIONS_DIR='%s/m' '%s' migrate "
                 "--database-url '%s'",
                 dir, dir, LEASE_TEST_LEASECTL, released);
        if (rc != 0)
            printf("to %s: %s\n", f, out);
        assert_int_equal(rc, 0);
        /* this file alone: the database was at the schema before it */
        snprintf(applied, sizeof applied, "applied %s\n", f);
        char *first = strstr(out, "applied ");
        assert_non_null(first);
        assert_ptr_equal(first, strstr(out, applied));
        assert_null(strstr(first + 1, "applied "));

        if (pending[0]) {
            upgrade_released(admin, released, pending, pending_version, fresh_cat);
            upgraded++;
        }
        char sql[256];
        snprintf(pending, sizeof pending, "t_schema_released_up_%d_%.4s", (int)getpid(), f);
        snprintf(pending_version, sizeof pending_version, "%.4s", f);
        snprintf(sql, sizeof sql, "CREATE DATABASE %s TEMPLATE %s", pending, released_name);
        admin_exec(admin, sql);
    }
    assert_true(pending[0]);
    upgrade_released(admin, released, pending, pending_version, fresh_cat);
    upgraded++;
    PQfinish(admin);
    assert_true(upgraded >= 26);

    /* every numbered file in one run (what a new install did before the
     * baseline) */
    char *whole = testpg_create_empty_db("schema_released_whole");
    rc = run(out, sizeof out,
             "LEASE_SQL_DIR='%s/sql' LEASE_MIGRATIONS_DIR='%s/m' '%s' migrate "
             "--database-url '%s'",
             dir, dir, LEASE_TEST_LEASECTL, whole);
    if (rc != 0)
        printf("%s\n", out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "applied 0001_"));
    char *released_cat = catalogue(released), *whole_cat = catalogue(whole);
    assert_same_catalogue("the files run by run vs in one run", released_cat, whole_cat);
    free(released_cat);
    free(whole_cat);
    free(released_name);
    free(fresh_cat);
    testpg_drop_db(released);
    testpg_drop_db(whole);
    testpg_drop_db(fresh);
    free(released);
    free(whole);
    free(fresh);
    run(out, sizeof out, "rm -rf '%s'", dir);
}

static void changed_definition_is_applied_again_alone(void **state)
{
    (void)state;
    char out[65536];
    char dir[] = "/tmp/leased-sql.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *url = testpg_create_db("schema_changed");
    int rc = run(out, sizeof out,
                 "cp -r '%s'/sql/. '%s'/ && "
                 "sed -i \"s/^    'What readiness checks/    'Changed: what readiness checks/\" "
                 "'%s'/lease/health.sql && grep -q Changed '%s'/lease/health.sql",
                 LEASE_TEST_SOURCE_DIR, dir, dir, dir);
    assert_int_equal(rc, 0);
    rc = run(out, sizeof out, "LEASE_SQL_DIR='%s' '%s' migrate --status --database-url '%s'", dir,
             LEASE_TEST_LEASECTL, url);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "\"definitions_pending\":1"));
    rc = run(out, sizeof out, "LEASE_SQL_DIR='%s' '%s' migrate --database-url '%s'", dir,
             LEASE_TEST_LEASECTL, url);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "applied 1 of "));
    char *comment =
        testpg_query_value(url, "SELECT obj_description('lease.health()'::regprocedure, "
                                "'pg_proc')");
    assert_non_null(comment);
    assert_true(strncmp(comment, "Changed: ", 9) == 0);
    free(comment);
    rc = run(out, sizeof out, "LEASE_SQL_DIR='%s' '%s' migrate --database-url '%s'", dir,
             LEASE_TEST_LEASECTL, url);
    assert_int_equal(rc, 0);
    assert_null(strstr(out, "applied "));
    assert_non_null(strstr(out, "\"definitions_pending\":0"));
    testpg_drop_db(url);
    free(url);
    run(out, sizeof out, "rm -rf '%s'", dir);
}

static void unlisted_or_failing_definition_changes_nothing(void **state)
{
    (void)state;
    char out[65536];
    char dir[] = "/tmp/leased-schema.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *url = testpg_create_db("schema_failing");
    /* a copy laid out as installed: migrations/ and sql/ side by side, with
     * a new numbered file and a new definition ORDER does not list */
    int rc =
        run(out, sizeof out,
            "mkdir '%s/migrations' '%s/sql' && cp '%s'/migrations/*.sql '%s/migrations/' && "
            "cp -r '%s'/sql/. '%s/sql/' && "
            "printf 'CREATE TABLE lease.migrate_probe (x int);\\n' > "
            "'%s/migrations/9999_probe.sql' && "
            "printf 'CREATE FUNCTION lease.zz_probe() RETURNS int LANGUAGE sql RETURN 1;\\n' > "
            "'%s/sql/lease/zz_probe.sql'",
            dir, dir, LEASE_TEST_SOURCE_DIR, dir, LEASE_TEST_SOURCE_DIR, dir, dir, dir);
    assert_int_equal(rc, 0);
    rc = run(out, sizeof out,
             "LEASE_MIGRATIONS_DIR='%s/migrations' '%s' migrate --database-url '%s'", dir,
             LEASE_TEST_LEASECTL, url);
    assert_int_equal(rc, 69);
    assert_non_null(strstr(out, "lease/zz_probe.sql is not listed in"));
    /* ORDER names files inside the folder, each once, and each must exist */
    static const struct {
        const char *line, *error;
    } bad_order[] = {
        {"../migrations/0001_roles_and_schema.sql", "is not a relative path"},
        {"/etc/passwd.sql", "is not a relative path"},
        {"lease/acquire.sql", "lists lease/acquire.sql twice"},
        {"lease/no_such_file.sql", "cannot read"},
    };
    for (size_t i = 0; i < sizeof bad_order / sizeof bad_order[0]; i++) {
        rc = run(out, sizeof out,
                 "cp '%s/sql/ORDER' '%s/ORDER.bad' && echo '%s' >> '%s/ORDER.bad' && "
                 "mkdir -p '%s/bad' && rm -rf '%s/bad/'* && cp -r '%s/sql/.' '%s/bad/' && "
                 "mv '%s/ORDER.bad' '%s/bad/ORDER' && rm '%s/bad/lease/zz_probe.sql' && "
                 "LEASE_SQL_DIR='%s/bad' LEASE_MIGRATIONS_DIR='%s/migrations' '%s' migrate "
                 "--database-url '%s'",
                 dir, dir, bad_order[i].line, dir, dir, dir, dir, dir, dir, dir, dir, dir, dir,
                 LEASE_TEST_LEASECTL, url);
        assert_int_equal(rc, 69);
        assert_non_null(strstr(out, bad_order[i].error));
    }
    assert_int_equal(testpg_query_int(url, "SELECT count(*) FROM lease.schema_migrations "
                                           "WHERE version = 9999"),
                     0);
    /* listed, but it calls what does not exist: the run fails at it */
    rc = run(out, sizeof out,
             "echo lease/zz_probe.sql >> '%s/sql/ORDER' && "
             "printf 'CREATE FUNCTION lease.zz_probe() RETURNS int LANGUAGE sql "
             "RETURN lease.no_such_function();\\n' > '%s/sql/lease/zz_probe.sql'",
             dir, dir);
    assert_int_equal(rc, 0);
    rc = run(out, sizeof out,
             "LEASE_MIGRATIONS_DIR='%s/migrations' '%s' migrate --database-url '%s'", dir,
             LEASE_TEST_LEASECTL, url);
    assert_int_equal(rc, 69);
    assert_non_null(strstr(out, "lease/zz_probe.sql failed"));
    assert_null(strstr(out, "applied 9999_probe.sql"));
    /* the last numbered file and the definitions share a transaction: the
     * probe rolled back with the failing definition */
    assert_int_equal(testpg_query_int(url, "SELECT count(*) FROM lease.schema_migrations "
                                           "WHERE version = 9999"),
                     0);
    assert_int_equal(testpg_query_int(url, "SELECT count(*) FROM pg_class "
                                           "WHERE oid = to_regclass('lease.migrate_probe')"),
                     0);
    /* fixed: both apply, and every definition with them (a numbered file
     * may have replaced one) */
    rc = run(out, sizeof out,
             "printf 'CREATE OR REPLACE FUNCTION lease.zz_probe() RETURNS int LANGUAGE sql "
             "RETURN 1;\\n' > '%s/sql/lease/zz_probe.sql' && "
             "LEASE_MIGRATIONS_DIR='%s/migrations' '%s' migrate --database-url '%s'",
             dir, dir, LEASE_TEST_LEASECTL, url);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "applied 9999_probe.sql"));
    long long files = testpg_query_int(url, "SELECT count(*) FROM lease.schema_repeatables");
    char expect[64];
    snprintf(expect, sizeof expect, "applied %lld of %lld definitions", files, files);
    assert_non_null(strstr(out, expect));
    assert_int_equal(testpg_query_int(url, "SELECT lease.zz_probe()"), 1);
    testpg_drop_db(url);
    free(url);
    run(out, sizeof out, "rm -rf '%s'", dir);
}

/* Removing a file removes what it defined: the next run applies every
 * definition and drops each function of schema lease that none of them
 * defines, and only that (a function of another schema stays; one a
 * trigger still uses fails the run, which changes nothing). */
static void removed_definition_is_dropped(void **state)
{
    (void)state;
    char out[65536];
    char dir[] = "/tmp/leased-removed.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *url = testpg_create_db("schema_removed");
    long long files = testpg_query_int(url, "SELECT count(*) FROM lease.schema_repeatables");
    assert_true(files > 1);
    /* lease.verify: a read nothing in sql/ calls */
    int rc = run(out, sizeof out,
                 "cp -r '%s'/sql/. '%s'/ && rm '%s'/lease/verify.sql && "
                 "grep -v '^lease/verify.sql$' '%s'/ORDER > '%s'/ORDER.new && "
                 "mv '%s'/ORDER.new '%s'/ORDER && ! grep -rq 'lease.verify(' '%s'",
                 LEASE_TEST_SOURCE_DIR, dir, dir, dir, dir, dir, dir, dir);
    assert_int_equal(rc, 0);
    assert_true(testpg_exec(url, "CREATE FUNCTION public.zz_kept() RETURNS int LANGUAGE sql "
                                 "RETURN 1"));
    assert_int_equal(testpg_query_int(url, "SELECT count(*) FROM pg_proc WHERE pronamespace = "
                                           "'lease'::regnamespace AND proname = 'verify'"),
                     1);
    rc = run(out, sizeof out, "LEASE_SQL_DIR='%s' '%s' migrate --status --database-url '%s'", dir,
             LEASE_TEST_LEASECTL, url);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "\"definitions_pending\":1"));

    /* a stale function a trigger uses: refused, nothing changes */
    assert_true(testpg_exec(url, "CREATE FUNCTION lease.zz_stale_trigger() RETURNS trigger "
                                 "LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END'; "
                                 "CREATE TABLE public.zz_probe (x int); "
                                 "CREATE TRIGGER zz_probe BEFORE INSERT ON public.zz_probe "
                                 "FOR EACH ROW EXECUTE FUNCTION lease.zz_stale_trigger()"));
    rc = run(out, sizeof out, "LEASE_SQL_DIR='%s' '%s' migrate --database-url '%s'", dir,
             LEASE_TEST_LEASECTL, url);
    assert_int_equal(rc, 69);
    assert_non_null(strstr(out, "zz_stale_trigger"));
    assert_int_equal(testpg_query_int(url, "SELECT count(*) FROM pg_proc WHERE pronamespace = "
                                           "'lease'::regnamespace AND proname = 'verify'"),
                     1);
    assert_int_equal(testpg_query_int(url, "SELECT count(*) FROM lease.schema_repeatables"), files);
    assert_true(testpg_exec(url, "DROP TABLE public.zz_probe"));

    /* without it: the removed file's function goes, with the trigger's */
    rc = run(out, sizeof out, "LEASE_SQL_DIR='%s' '%s' migrate --database-url '%s'", dir,
             LEASE_TEST_LEASECTL, url);
    if (rc != 0)
        printf("%s\n", out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "dropped 2 functions"));
    assert_int_equal(testpg_query_int(url, "SELECT count(*) FROM pg_proc WHERE pronamespace = "
                                           "'lease'::regnamespace AND proname IN ('verify', "
                                           "'zz_stale_trigger')"),
                     0);
    assert_int_equal(testpg_query_int(url, "SELECT count(*) FROM lease.schema_repeatables"),
                     files - 1);
    assert_int_equal(testpg_query_int(url, "SELECT public.zz_kept()"), 1);
    /* every function that remains is one a file defines, and a rerun
     * applies and drops nothing */
    assert_int_equal(testpg_query_int(url, "SELECT count(*) FROM pg_proc WHERE pronamespace = "
                                           "'lease'::regnamespace AND obj_description(oid, "
                                           "'pg_proc') IS NULL"),
                     0);
    rc = run(out, sizeof out, "LEASE_SQL_DIR='%s' '%s' migrate --database-url '%s'", dir,
             LEASE_TEST_LEASECTL, url);
    assert_int_equal(rc, 0);
    assert_null(strstr(out, "applied "));
    assert_null(strstr(out, "dropped "));
    assert_non_null(strstr(out, "\"definitions_pending\":0"));
    testpg_drop_db(url);
    free(url);
    run(out, sizeof out, "rm -rf '%s'", dir);
}

static void several_databases_migrate_at_once(void **state)
{
    (void)state;
    char out[65536];
    char *urls[4];
    for (int i = 0; i < 4; i++)
        urls[i] = testpg_create_empty_db("schema_parallel");
    int rc = run(out, sizeof out,
                 "pids=; for u in '%s' '%s' '%s' '%s'; do '%s' migrate --database-url \"$u\" "
                 ">/dev/null & pids=\"$pids $!\"; done; fail=0; "
                 "for p in $pids; do wait $p || fail=1; done; exit $fail",
                 urls[0], urls[1], urls[2], urls[3], LEASE_TEST_LEASECTL);
    if (rc != 0)
        printf("%s\n", out);
    assert_int_equal(rc, 0);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(testpg_query_int(urls[i], "SELECT count(*) FROM pg_proc WHERE "
                                                   "pronamespace = 'lease'::regnamespace AND "
                                                   "obj_description(oid, 'pg_proc') IS NULL"),
                         0);
        testpg_drop_db(urls[i]);
        free(urls[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(upgraded_fresh_and_template_end_in_the_same_catalogue),
        cmocka_unit_test(baseline_install_matches_the_numbered_files),
        cmocka_unit_test(every_released_schema_upgrades_to_the_fresh_catalogue),
        cmocka_unit_test(changed_definition_is_applied_again_alone),
        cmocka_unit_test(unlisted_or_failing_definition_changes_nothing),
        cmocka_unit_test(removed_definition_is_dropped),
        cmocka_unit_test(several_databases_migrate_at_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
