/*
 * ctl_migrate.c - `leasectl migrate [--status] [--database-url URL]`.
 *
 * On Valkey/Redis (a redis:// URL, or LEASE_STORE_URL) it loads or checks
 * the function library and binds the namespace instead (ctl_valkey.c).
 *
 * Prints one JSON object on stdout: {"schema_version":N,"migrations":[...],
 * "definitions":N,"definitions_pending":N} (definitions: the files of sql/).
 * Exit 0 when the database is (or, with --status, was found) current; 69
 * when the database is unreachable or a migration fails; 1 when --status
 * finds pending migrations or definitions.
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "ctl_valkey.h"
#include "lease/schema.h"
#include "lease/store_admin.h"

const char *ctl_store_url(const char *flag_value)
{
    if (flag_value && *flag_value)
        return flag_value;
    const char *url = ctl_secret("LEASE_DATABASE_URL"); /* or LEASE_DATABASE_URL_FILE's */
    const char *store = ctl_secret("LEASE_STORE_URL");  /* or LEASE_STORE_URL_FILE's */
    if (url && store) {
        fprintf(stderr, "leasectl: LEASE_STORE_URL and LEASE_DATABASE_URL are both set; set one\n");
        return NULL;
    }
    if (url || store)
        return url ? url : store;
    fprintf(stderr, "leasectl: set LEASE_DATABASE_URL (or LEASE_STORE_URL) or pass "
                    "--database-url\n");
    return NULL;
}

const char *ctl_database_url(const char *flag_value)
{
    const char *url = ctl_store_url(flag_value);
    if (url && ctl_valkey_url(url)) {
        fprintf(stderr, "leasectl: this command needs the PostgreSQL backend; on Valkey/Redis "
                        "only migrate, recover and credential are built (docs/backends.md)\n");
        return NULL;
    }
    return url;
}

static void print_plan(const lease_migration_plan_t *plan)
{
    json_t *list = json_array();
    int current = 0;
    size_t pending = 0;
    for (size_t i = 0; i < plan->count; i++) {
        const lease_migration_t *m = &plan->items[i];
        json_t *o = json_pack("{s:i, s:s, s:s, s:b}", "version", m->version, "name", m->name,
                              "checksum", m->checksum, "applied", m->applied);
        if (m->applied) {
            json_object_set_new(o, "applied_at", json_string(m->applied_at));
            current = m->version;
        } else {
            pending++;
        }
        json_array_append_new(list, o);
    }
    json_t *out =
        json_pack("{s:i, s:i, s:I, s:o, s:I, s:I}", "schema_version", current,
                  "expected_schema_version", LEASE_SCHEMA_VERSION, "pending", (json_int_t)pending,
                  "migrations", list, "definitions", (json_int_t)plan->repeatables,
                  "definitions_pending", (json_int_t)plan->repeatables_pending);
    char *text = json_dumps(out, JSON_COMPACT);
    puts(text);
    free(text);
    json_decref(out);
}

int ctl_migrate_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"status", no_argument, NULL, 's'},
        {"database-url", required_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool status_only = false;
    const char *url_flag = NULL;
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "sd:h", opts, NULL)) != -1) {
        switch (ch) {
        case 's':
            status_only = true;
            break;
        case 'd':
            url_flag = optarg;
            break;
        case 'h':
            printf("usage: leasectl migrate [--status] [--database-url URL]\n"
                   "Applies pending migrations from %s in order, then the function and\n"
                   "view definitions of %s whose checksum changed, each file in one\n"
                   "transaction under an advisory lock; --status only reports.\n"
                   "With a redis:// or valkey:// URL (or LEASE_STORE_URL): loads the\n"
                   "function library leased_v1 and binds the namespace (--status: checks).\n",
                   lease_migrations_dir(), lease_repeatables_dir(lease_migrations_dir()));
            return LEASE_EXIT_OK;
        default:
            return LEASE_EXIT_USAGE;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "leasectl migrate: unexpected argument '%s'\n", argv[optind]);
        return LEASE_EXIT_USAGE;
    }
    const char *url = ctl_store_url(url_flag);
    if (!url)
        return LEASE_EXIT_USAGE;
    if (ctl_valkey_url(url))
        return ctl_valkey_migrate(url, status_only);

    char err[1024] = "";
    lease_migration_plan_t plan = {0};
    int rc = status_only
                 ? lease_migrate_status(url, lease_migrations_dir(), &plan, err, sizeof err)
                 : lease_migrate_apply(url, lease_migrations_dir(), stderr, &plan, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "leasectl migrate: %s\n", err);
        return LEASE_EXIT_UNAVAILABLE;
    }
    print_plan(&plan);
    bool pending = plan.repeatables_pending > 0;
    for (size_t i = 0; i < plan.count; i++)
        pending |= !plan.items[i].applied;
    lease_migration_plan_free(&plan);
    return pending ? LEASE_EXIT_FAILURE : LEASE_EXIT_OK;
}
