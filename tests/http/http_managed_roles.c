/*
 * http_managed_roles.c - managed PostgreSQL without a superuser, both ways
 * docs/schema.md ("Managed PostgreSQL") documents, on a cluster of the
 * test's own (roles are cluster-wide) where "postgres" plays the provider's
 * administrator and nothing else runs as a superuser:
 *
 * - an owner with CREATEROLE migrates (creating the three roles), creates
 *   the service's login role, a credential, and leased serves leases;
 * - an owner without CREATEROLE: migrate refuses before applying anything
 *   and names every statement the administrator must run; the administrator
 *   runs the SQL block of docs/schema.md exactly as written (with the names
 *   filled in); then migrate applies everything and leased serves leases.
 *
 * In both, leased's start line reports the schema the database has.
 */
#include "exec_common.h"
#include "lease/schema.h"
#include "pgprivate.h"

static pg_private_t *pg;
static char *admin_url; /* "postgres": the provider's administrator */

static int group_setup(void **state)
{
    (void)state;
    if (!pg_private_available()) {
        fprintf(stderr, "http_managed_roles: needs a cluster the tests own\n");
        exit(77);
    }
    pg = pg_private_start(NULL);
    admin_url = pg_private_url(pg, "postgres", "postgres");
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    free(admin_url);
    pg_private_stop(pg);
    return 0;
}

static int migrate_as(const char *db, const char *user, char **err_out)
{
    char *url = pg_private_url(pg, db, user);
    const char *args[] = {"migrate", "--database-url", url, NULL};
    proc_t p = ctl_start(args, "http://127.0.0.1:1", NULL, NULL);
    int status = proc_wait(&p, 120000);
    *err_out = proc_file(&p, "err");
    proc_cleanup(&p);
    free(url);
    return status;
}

/* The owner makes a credential; leased (as service_role) starts, reports
 * the database's schema, and grants a lease. */
static void serve_a_lease(const char *db, const char *owner, const char *service_role)
{
    char *owner_url = pg_private_url(pg, db, owner);
    char *service_url = pg_private_url(pg, db, service_role);
    char *token = leased_proc_credential(owner_url,
                                         &(leased_cred_spec_t){.principal = "prn_managed",
                                                               .tenant = TENANT,
                                                               .program = PROGRAM,
                                                               .capabilities = WORKER_CAPS},
                                         NULL);
    char setting[600];
    snprintf(setting, sizeof setting, "LEASE_DATABASE_URL=%s", service_url);
    const char *env[] = {setting, NULL};
    leased_proc_t *srv = leased_proc_start(owner_url, env);
    char *log = leased_proc_log(srv);
    char want[64];
    snprintf(want, sizeof want, "schema %d; build expects schema %d", LEASE_SCHEMA_VERSION,
             LEASE_SCHEMA_VERSION);
    if (!strstr(log, want))
        fail_msg("start line without '%s':\n%s", want, log);
    free(log);
    json_t *lease = acquire_lease(leased_proc_url(srv), token, "managed-1", "managed-target");
    assert_int_equal(json_integer_value(json_object_get(lease, "fencing_token")), 1);
    json_decref(lease);
    assert_int_equal(leased_proc_stop(srv), 0);
    /* none of this ran as a superuser */
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM pg_roles WHERE rolname IN ('%s', '%s') AND rolsuper", owner,
             service_role);
    assert_int_equal(testpg_query_int(admin_url, sql), 0);
    free(token);
    free(service_url);
    free(owner_url);
}

static void test_owner_with_createrole(void **state)
{
    (void)state;
    assert_true(testpg_exec(admin_url, "CREATE ROLE owner_cr LOGIN CREATEROLE"));
    assert_true(testpg_exec(admin_url, "CREATE DATABASE managed_cr OWNER owner_cr"));
    char *err = NULL;
    if (migrate_as("managed_cr", "owner_cr", &err) != 0)
        fail_msg("migrate as an owner with CREATEROLE failed: %s", err);
    free(err);
    char *owner = pg_private_url(pg, "managed_cr", "owner_cr");
    assert_true(testpg_exec(owner, "CREATE ROLE leased_cr LOGIN IN ROLE lease_service"));
    assert_int_equal(testpg_query_int(owner, "SELECT count(*) FROM pg_roles WHERE rolname IN "
                                             "('lease_service','lease_operator','lease_admin',"
                                             "'lease_relay')"),
                     4);
    free(owner);
    serve_a_lease("managed_cr", "owner_cr", "leased_cr");

    /* leave the cluster without the roles for the next case */
    assert_true(testpg_exec(admin_url, "DROP DATABASE managed_cr WITH (FORCE)"));
    assert_true(testpg_exec(admin_url, "DROP ROLE leased_cr, lease_admin, lease_operator, "
                                       "lease_service, lease_relay, owner_cr"));
}

/* The SQL block of docs/schema.md after the managed-admin-sql marker. */
static char *documented_admin_sql(void)
{
    char *doc = slurp(LEASE_TEST_SOURCE_DIR "/docs/schema.md");
    assert_non_null(doc);
    const char *marker = strstr(doc, "<!-- managed-admin-sql");
    assert_non_null(marker);
    const char *open = strstr(marker, "```sql\n");
    assert_non_null(open);
    open += strlen("```sql\n");
    const char *close = strstr(open, "```");
    assert_non_null(close);
    char *sql = strndup(open, (size_t)(close - open));
    free(doc);
    return sql;
}

/* text with every `from` replaced by `to` (heap). */
static char *replace_all(const char *text, const char *from, const char *to)
{
    size_t n = 0, fl = strlen(from), tl = strlen(to);
    for (const char *p = strstr(text, from); p; p = strstr(p + fl, from))
        n++;
    char *out = malloc(strlen(text) + n * tl + 1);
    char *w = out;
    for (const char *p = text;;) {
        const char *hit = strstr(p, from);
        if (!hit) {
            strcpy(w, p);
            break;
        }
        memcpy(w, p, (size_t)(hit - p));
        w += hit - p;
        memcpy(w, to, tl);
        w += tl;
        p = hit + fl;
    }
    return out;
}

static void test_owner_without_createrole(void **state)
{
    (void)state;
    assert_true(testpg_exec(admin_url, "CREATE ROLE owner_plain LOGIN"));
    assert_true(testpg_exec(admin_url, "CREATE DATABASE managed_plain OWNER owner_plain"));
    char *err = NULL;
    assert_int_equal(migrate_as("managed_plain", "owner_plain", &err), 69);
    /* every statement named at once, and nothing applied */
    static const char *const named[] = {
        "CREATE ROLE lease_service NOLOGIN;", "CREATE ROLE lease_operator NOLOGIN;",
        "CREATE ROLE lease_admin NOLOGIN;", "CREATE ROLE lease_relay NOLOGIN;",
        "GRANT lease_operator TO lease_admin;",
        "GRANT lease_operator TO owner_plain WITH ADMIN OPTION;", "nothing was applied"};
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        if (!strstr(err, named[i]))
            fail_msg("migrate's refusal does not name '%s':\n%s", named[i], err);
    free(err);
    char *owner = pg_private_url(pg, "managed_plain", "owner_plain");
    assert_int_equal(
        testpg_query_int(owner, "SELECT count(*) FROM pg_namespace WHERE nspname = 'lease'"), 0);

    /* the administrator runs docs/schema.md's block as written */
    char *doc_sql = documented_admin_sql();
    char *a = replace_all(doc_sql, "leased_owner", "owner_plain");
    char *sql = replace_all(a, "leased_app", "leased_plain");
    assert_true(testpg_exec(admin_url, sql));
    free(sql);
    free(a);
    free(doc_sql);

    if (migrate_as("managed_plain", "owner_plain", &err) != 0)
        fail_msg("migrate after the documented statements failed: %s", err);
    free(err);
    assert_int_equal(testpg_query_int(owner, "SELECT max(version) FROM lease.schema_migrations"),
                     LEASE_SCHEMA_VERSION);
    free(owner);
    serve_a_lease("managed_plain", "owner_plain", "leased_plain");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_owner_with_createrole),
        cmocka_unit_test(test_owner_without_createrole),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
