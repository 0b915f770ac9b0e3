/*
 * pg_migrate.c - applies migrations/NNNN_name.sql in order, then the
 * repeatable definitions of sql/ (every function and view, one file each,
 * listed in sql/ORDER; pg_repeatables.c) (lease/store_admin.h), on the
 * one-shot connection of pg_oneshot.c. A database where nothing is applied
 * starts from migrations/baseline/NNNN_baseline.sql instead of the files up
 * to NNNN (find_baseline; docs/schema.md, "How the schema changes").
 *
 * Locking: every numbered file runs in its own transaction that first takes
 * pg_advisory_xact_lock(MIGRATE_LOCK_KEY), then re-reads what is applied, so
 * two concurrent `leasectl migrate` runs apply each file exactly once. The
 * transaction of the last file, under the same lock, then applies every
 * repeatable definition whose checksum changed (all of them when a numbered
 * file was applied in this run: it may have dropped or replaced one), so
 * the definitions commit or roll back with it.
 *
 * No session state: notices are dropped by the connection's notice receiver
 * (pg_oneshot.c), not by a SET, and the advisory lock is transaction-level,
 * so behind PgBouncer in transaction mode nothing leaks to the pool's other
 * clients.
 *
 * Roles: before 0001 runs, a preflight reads whether the project's group
 * roles exist (0001 makes three, 0012 lease_relay) and whether the
 * migrating user may create them and grant lease_operator to lease_admin
 * (0001 does; so does the baseline). When it may not (a managed
 * Postgres owner without CREATEROLE), nothing is applied and the error lists
 * every statement the provider's administrator must run (docs/schema.md).
 */
#include "lease/store_admin.h"

#include <dirent.h>
#include <errno.h>
#include <libpq-fe.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pg_files.h"
#include "pg_oneshot.h"
#include "pg_repeatables.h"

/* Arbitrary constant shared by every migrator ("leasemig" in ASCII). */
#define MIGRATE_LOCK_KEY "7809644177848592743"

static const char bootstrap_sql[] = "CREATE SCHEMA IF NOT EXISTS lease;"
                                    "CREATE TABLE IF NOT EXISTS lease.schema_migrations ("
                                    "  version integer PRIMARY KEY,"
                                    "  name text NOT NULL,"
                                    "  checksum text NOT NULL,"
                                    "  applied_at timestamptz NOT NULL DEFAULT now(),"
                                    "  applied_by text NOT NULL DEFAULT current_user);"
                                    "CREATE TABLE IF NOT EXISTS lease.schema_repeatables ("
                                    "  name text PRIMARY KEY,"
                                    "  checksum text NOT NULL,"
                                    "  applied_at timestamptz NOT NULL DEFAULT now(),"
                                    "  applied_by text NOT NULL DEFAULT current_user)";

/* <folder of the running program>/rel into out; true when it is a folder. */
static bool beside_program(const char *rel, char *out, size_t outsz)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return false;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return false;
    *slash = '\0';
    int len = snprintf(out, outsz, "%s/%s", exe, rel); /* written even when absent */
    struct stat st;
    return len > 0 && (size_t)len < outsz && stat(out, &st) == 0 && S_ISDIR(st.st_mode);
}

/*
 * No absolute path is compiled in, so an installed tree can move (and the
 * binaries carry no path of the machine that built them). Found in order:
 * $LEASE_MIGRATIONS_DIR; beside the program as installed
 * (LEASE_MIGRATIONS_FROM_BINDIR, "../share/leased/migrations" from bin/);
 * beside the program in a build tree ("migrations", a link CMake makes to
 * the source's migrations/). Called from one thread (leasectl's main).
 */
const char *lease_migrations_dir(void)
{
    const char *env = getenv("LEASE_MIGRATIONS_DIR");
    if (env && *env)
        return env;
    static char installed[PATH_MAX + 64], build_tree[PATH_MAX + 64];
    if (beside_program(LEASE_MIGRATIONS_FROM_BINDIR, installed, sizeof installed))
        return installed;
    if (beside_program("migrations", build_tree, sizeof build_tree))
        return build_tree;
    /* neither: the error that follows names the installed location */
    if (!installed[0])
        snprintf(installed, sizeof installed, "%s", LEASE_MIGRATIONS_FROM_BINDIR);
    return installed;
}

void lease_migration_plan_free(lease_migration_plan_t *plan)
{
    if (!plan)
        return;
    free(plan->items);
    plan->items = NULL;
    plan->count = 0;
}

static int by_version(const void *a, const void *b)
{
    const lease_migration_t *x = a, *y = b;
    return (x->version > y->version) - (x->version < y->version);
}

/* Files named NNNN_name.sql, sorted; checksums computed. */
static int scan_dir(const char *dir, lease_migration_plan_t *plan, char *err, size_t errsz)
{
    DIR *d = opendir(dir);
    if (!d) {
        store_pg_set_err(err, errsz, "cannot open migrations folder %s: %s", dir, strerror(errno));
        return -1;
    }
    size_t cap = 16;
    plan->items = calloc(cap, sizeof *plan->items);
    plan->count = 0;
    if (!plan->items) {
        closedir(d);
        store_pg_set_err(err, errsz, "out of memory");
        return -1;
    }
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        size_t len = strlen(n);
        if (len < 10 || strcmp(n + len - 4, ".sql") != 0)
            continue;
        char *end;
        long v = strtol(n, &end, 10);
        if (end != n + 4 || *end != '_' || v <= 0) {
            store_pg_set_err(err, errsz, "migration file %s is not named NNNN_name.sql", n);
            rc = -1;
            break;
        }
        char path[4096];
        if (len >= sizeof plan->items[0].name ||
            snprintf(path, sizeof path, "%s/%s", dir, n) >= (int)sizeof path) {
            store_pg_set_err(err, errsz, "migration file name %.40s... is too long", n);
            rc = -1;
            break;
        }
        if (plan->count == cap) {
            lease_migration_t *grown = realloc(plan->items, 2 * cap * sizeof *plan->items);
            if (!grown) {
                store_pg_set_err(err, errsz, "out of memory");
                rc = -1;
                break;
            }
            plan->items = grown;
            cap *= 2;
        }
        lease_migration_t *m = &plan->items[plan->count++];
        memset(m, 0, sizeof *m);
        m->version = (int)v;
        memcpy(m->name, n, len + 1);
        size_t flen;
        char *body = store_pg_read_file(path, &flen);
        if (!body) {
            store_pg_set_err(err, errsz, "cannot read %s: %s", path, strerror(errno));
            rc = -1;
            break;
        }
        store_pg_sha256_hex(body, flen, m->checksum);
        free(body);
    }
    closedir(d);
    if (rc == 0) {
        qsort(plan->items, plan->count, sizeof *plan->items, by_version);
        for (size_t i = 1; i < plan->count; i++)
            if (plan->items[i].version == plan->items[i - 1].version) {
                store_pg_set_err(err, errsz, "two migrations share version %04d",
                                 plan->items[i].version);
                rc = -1;
            }
    }
    if (rc != 0)
        lease_migration_plan_free(plan);
    return rc;
}

/*
 * Released migrations whose text was later amended in comments only: they
 * cited a design document that is not part of this repository, and the
 * repository must stand alone. A database that applied the original text
 * has exactly the schema the amended text makes, so the original checksum
 * recorded there is accepted for that version and no other. Any other
 * change to a released file is still refused (append-only).
 */
static const struct {
    int version;
    const char *checksum;
} amended_comments[] = {
    {3, "8ed3c1f3e7134ba9ec5157d4c0c4f6af35c9ea53d8da5ea15326300ea99579b9"},
    {4, "cca860cf785cc4a5c8fd18a494a8841ac16cf44e684ff52b040d4299a759e2cf"},
    {9, "f8151f88bee1a8404c5b87b91dadc01ec5d651cabfce53ae88a811f6a53559d1"},
};

static bool checksum_matches(const lease_migration_t *m, const char *recorded)
{
    if (strcmp(m->checksum, recorded) == 0)
        return true;
    for (size_t i = 0; i < sizeof amended_comments / sizeof amended_comments[0]; i++)
        if (amended_comments[i].version == m->version &&
            strcmp(amended_comments[i].checksum, recorded) == 0)
            return true;
    return false;
}

/* Marks plan items applied from lease.schema_migrations and checks that
 * nothing applied has changed or vanished. Returns 0 or -1. */
static int compare_applied(PGconn *c, lease_migration_plan_t *plan, char *err, size_t errsz)
{
    PGresult *r = PQexec(c, "SELECT version, checksum, "
                            "to_char(applied_at AT TIME ZONE 'UTC', "
                            "'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') "
                            "FROM lease.schema_migrations ORDER BY version");
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        store_pg_set_err(err, errsz, "reading lease.schema_migrations: %s",
                         PQresultErrorMessage(r));
        PQclear(r);
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < PQntuples(r) && rc == 0; i++) {
        int version = atoi(PQgetvalue(r, i, 0));
        const char *sum = PQgetvalue(r, i, 1);
        lease_migration_t *m = NULL;
        for (size_t j = 0; j < plan->count; j++)
            if (plan->items[j].version == version)
                m = &plan->items[j];
        if (!m) {
            store_pg_set_err(err, errsz,
                             "database has migration %04d that this build does not know; "
                             "use a newer leasectl",
                             version);
            rc = -1;
        } else if (!checksum_matches(m, sum)) {
            store_pg_set_err(
                err, errsz,
                "migration %s was changed after it was applied (checksum %s, recorded %s); "
                "migrations are append-only: restore the file and add a new one",
                m->name, m->checksum, sum);
            rc = -1;
        } else {
            m->applied = true;
            snprintf(m->applied_at, sizeof m->applied_at, "%s", PQgetvalue(r, i, 2));
        }
    }
    PQclear(r);
    return rc;
}

/*
 * The statements an administrator must run before the migrations can, or ""
 * when none: 0001 and 0012 create missing roles (needs CREATEROLE); 0001 grants lease_operator to
 * lease_admin (needs CREATEROLE before PostgreSQL 16, the ADMIN OPTION on
 * lease_operator from 16 on, or superuser). Returns 0, or -1 when the
 * catalogue could not be read.
 */
static int roles_preflight(PGconn *c, char *todo, size_t todosz, char *err, size_t errsz)
{
    todo[0] = '\0';
    PGresult *r = PQexec(
        c, "SELECT u.rolsuper, u.rolcreaterole, current_setting('server_version_num')::int,"
           "       quote_ident(current_user),"
           "       (SELECT string_agg(n, ',' ORDER BY o) FROM unnest(ARRAY['lease_service',"
           "          'lease_operator', 'lease_admin', 'lease_relay']) WITH ORDINALITY x(n, o)"
           "         WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = x.n)),"
           "       EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lease_operator')"
           "       AND pg_has_role(current_user, 'lease_operator', 'MEMBER WITH ADMIN OPTION')"
           "  FROM pg_roles u WHERE u.rolname = current_user");
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
        store_pg_set_err(err, errsz, "reading roles: %s", PQresultErrorMessage(r));
        PQclear(r);
        return -1;
    }
    bool super = PQgetvalue(r, 0, 0)[0] == 't';
    bool createrole = PQgetvalue(r, 0, 1)[0] == 't';
    int version = atoi(PQgetvalue(r, 0, 2));
    char me[160];
    snprintf(me, sizeof me, "%s", PQgetvalue(r, 0, 3));
    char missing[128];
    snprintf(missing, sizeof missing, "%s", PQgetisnull(r, 0, 4) ? "" : PQgetvalue(r, 0, 4));
    bool admin_option = PQgetvalue(r, 0, 5)[0] == 't';
    PQclear(r);
    if (super)
        return 0;
    /* a CREATEROLE user creates what is missing and, from 16 on, holds the
     * ADMIN OPTION on the roles it created */
    bool creates_operator = createrole && strstr(missing, "lease_operator") != NULL;
    bool can_create = createrole || !*missing;
    bool can_grant = creates_operator || (createrole && version < 160000) || admin_option;
    if (can_create && can_grant)
        return 0;
    size_t n = 0;
    for (char *name = missing; *name;) {
        size_t len = strcspn(name, ",");
        n += (size_t)snprintf(todo + n, n < todosz ? todosz - n : 0, "CREATE ROLE %.*s NOLOGIN; ",
                              (int)len, name);
        name += len + (name[len] == ',');
    }
    snprintf(todo + n, n < todosz ? todosz - n : 0,
             "GRANT lease_operator TO lease_admin; "
             "GRANT lease_operator TO %s WITH ADMIN OPTION;",
             me);
    return 0;
}

/* Runs pending migration idx inside the caller's transaction and records
 * it. 0, or -1 with err set. */
static int apply_one(PGconn *c, const char *dir, lease_migration_t *m, char *err, size_t errsz)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, m->name);
    size_t len;
    char *body = store_pg_read_file(path, &len);
    if (!body) {
        store_pg_set_err(err, errsz, "cannot read %s", path);
        return -1;
    }
    char now_sum[65];
    store_pg_sha256_hex(body, len, now_sum);
    if (strcmp(now_sum, m->checksum) != 0) {
        free(body);
        store_pg_set_err(err, errsz, "%s changed while migrating", m->name);
        return -1;
    }
    PGresult *r = PQexec(c, body);
    free(body);
    if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) {
        store_pg_set_err(err, errsz, "%s failed: %s", m->name, PQresultErrorMessage(r));
        PQclear(r);
        return -1;
    }
    PQclear(r);

    char version[16];
    snprintf(version, sizeof version, "%d", m->version);
    const char *params[3] = {version, m->name, m->checksum};
    r = PQexecParams(c,
                     "INSERT INTO lease.schema_migrations (version, name, checksum) "
                     "VALUES ($1::integer, $2, $3)",
                     3, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        store_pg_set_err(err, errsz, "recording %s: %s", m->name, PQresultErrorMessage(r));
        PQclear(r);
        return -1;
    }
    PQclear(r);
    return 0;
}

/* 0001 needs roles the migrating user may lack: refuse with the statements
 * an administrator must run. 0, or -1 with err set. */
static int check_roles(PGconn *c, const lease_migration_t *m, char *err, size_t errsz)
{
    char todo[1024];
    if (roles_preflight(c, todo, sizeof todo, err, errsz) != 0)
        return -1;
    if (!todo[0])
        return 0;
    store_pg_set_err(err, errsz,
                     "%s needs roles this user cannot create or grant (it lacks CREATEROLE or "
                     "the ADMIN OPTION on lease_operator); nothing was applied. Ask your "
                     "provider's administrator to run, once: %s then run leasectl migrate again "
                     "(docs/schema.md, \"Managed PostgreSQL\")",
                     m->name, todo);
    return -1;
}

/*
 * The baseline (migrations/baseline/NNNN_baseline.sql, made by
 * scripts/schema-baseline): the schema the numbered files up to NNNN make,
 * minus the functions and views sql/ defines, recording the same rows of
 * lease.schema_migrations the files would (docs/schema.md, "How the schema
 * changes"). A database where nothing is applied yet starts from it; any
 * other goes through the numbered files. Absent (a folder of numbered files
 * only): the files, as before.
 */
typedef struct baseline {
    int version; /* 0: none */
    char path[4096];
} baseline_t;

static int find_baseline(const char *dir, baseline_t *b, char *err, size_t errsz)
{
    memset(b, 0, sizeof *b);
    char folder[2048];
    if (snprintf(folder, sizeof folder, "%s/baseline", dir) >= (int)sizeof folder)
        return 0;
    DIR *d = opendir(folder);
    if (!d)
        return 0;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        size_t len = strlen(n);
        if (len < 10 || strcmp(n + len - 4, ".sql") != 0)
            continue;
        char *end;
        long v = strtol(n, &end, 10);
        if (end != n + 4 || *end != '_' || v <= 0 || b->version) {
            store_pg_set_err(err, errsz, "%s/%s: the baseline folder holds one NNNN_name.sql",
                             folder, n);
            rc = -1;
            break;
        }
        if (snprintf(b->path, sizeof b->path, "%s/%s", folder, n) >= (int)sizeof b->path) {
            store_pg_set_err(err, errsz, "baseline path %.40s... is too long", folder);
            rc = -1;
            break;
        }
        b->version = (int)v;
    }
    closedir(d);
    return rc;
}

/* Inside the caller's transaction, on a database where nothing is applied:
 * runs the baseline, then checks that it recorded exactly the plan's files
 * up to its version with their checksums (a baseline out of step with the
 * files fails here and rolls back). 0, or -1 with err set. */
static int apply_baseline(PGconn *c, const baseline_t *b, lease_migration_plan_t *plan, char *err,
                          size_t errsz)
{
    size_t len;
    char *body = store_pg_read_file(b->path, &len);
    if (!body) {
        store_pg_set_err(err, errsz, "cannot read %s", b->path);
        return -1;
    }
    PGresult *r = PQexec(c, body);
    free(body);
    if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) {
        store_pg_set_err(err, errsz, "%s failed: %s", b->path, PQresultErrorMessage(r));
        PQclear(r);
        return -1;
    }
    PQclear(r);
    for (size_t j = 0; j < plan->count; j++)
        plan->items[j].applied = false;
    if (compare_applied(c, plan, err, errsz) != 0)
        return -1;
    for (size_t j = 0; j < plan->count; j++)
        if ((plan->items[j].version <= b->version) != plan->items[j].applied) {
            store_pg_set_err(err, errsz,
                             "%s does not record %s as the numbered files would; regenerate it "
                             "(scripts/schema-baseline)",
                             b->path, plan->items[j].name);
            return -1;
        }
    return 0;
}

/*
 * One transaction under the advisory lock: numbered file idx when it is
 * still pending (another migrator may have applied it meanwhile), then,
 * when last_step (or the baseline covers the last file), the repeatable
 * definitions (pg_repeatables.c), and *defined says they ran: all
 * of them when *numbered (a numbered file was applied in this run), else
 * those whose checksum changed. The progress line goes to log only after
 * COMMIT, so it never reports what was rolled back.
 */
static int apply_step(PGconn *c, const char *dir, FILE *log, lease_migration_plan_t *plan,
                      size_t idx, const baseline_t *base, const lease_repeatables_t *reps,
                      bool last_step, bool *numbered, bool *defined, char *err, size_t errsz)
{
    lease_migration_t *m = idx < plan->count ? &plan->items[idx] : NULL;
    bool applied_now = false, from_baseline = false;
    size_t reapplied = 0, dropped = 0;
    if (!store_pg_oneshot_exec(c, "BEGIN", err, errsz, "begin") ||
        !store_pg_oneshot_exec(c, "SELECT pg_advisory_xact_lock(" MIGRATE_LOCK_KEY ")", err, errsz,
                               "advisory lock") ||
        !store_pg_oneshot_exec(c, bootstrap_sql, err, errsz, "creating lease.schema_migrations"))
        goto fail;
    /* Re-read under the lock: another migrator may have applied it. */
    for (size_t j = 0; j < plan->count; j++)
        plan->items[j].applied = false;
    if (compare_applied(c, plan, err, errsz) != 0)
        goto fail;
    bool none_applied = true;
    for (size_t j = 0; j < plan->count; j++)
        none_applied = none_applied && !plan->items[j].applied;
    if (m && !m->applied && none_applied && base->version && m->version <= base->version) {
        /* the baseline makes the roles 0001 and 0012 make */
        if (check_roles(c, m, err, errsz) != 0 || apply_baseline(c, base, plan, err, errsz) != 0)
            goto fail;
        applied_now = from_baseline = true;
        /* it covers the last file too: the definitions share its transaction */
        last_step = last_step || plan->items[plan->count - 1].version <= base->version;
    } else if (m && !m->applied) {
        if (m->version == 1 && check_roles(c, m, err, errsz) != 0)
            goto fail;
        if (apply_one(c, dir, m, err, errsz) != 0)
            goto fail;
        applied_now = true;
    }
    if (last_step) {
        /* operators read what is applied, as they read schema_migrations */
        if (!store_pg_oneshot_exec(c,
                                   "DO $$BEGIN IF to_regrole('lease_operator') IS NOT NULL THEN "
                                   "GRANT SELECT ON lease.schema_repeatables TO lease_operator; "
                                   "END IF; END$$",
                                   err, errsz, "granting lease.schema_repeatables") ||
            lease_repeatables_apply(c, reps, *numbered || applied_now, &reapplied, &dropped, err,
                                    errsz) != 0)
            goto fail;
    }
    if (!store_pg_oneshot_exec(c, "COMMIT", err, errsz, "commit"))
        goto fail;
    *defined = last_step;
    if (applied_now) {
        m->applied = true;
        *numbered = true;
        if (log && from_baseline)
            fprintf(log, "applied %s (the schema of every migration up to %04d)\n", base->path,
                     base->version);
        else if (log)
            fprintf(log, "applied %s\n", m->name);
    }
    if (log && reapplied)
        fprintf(log, "applied %zu of %zu definitions from %s\n", reapplied, reps->count, reps->dir);
    if (log && dropped)
        fprintf(log, "dropped %zu functions no file in %s defines\n", dropped, reps->dir);
    return 0;
fail : {
    /* a failed ROLLBACK leaves nothing to undo here: the caller closes the
     * session, which ends the transaction; the first error is the one to
     * report */
    char ignored[256];
    if (!store_pg_oneshot_exec(c, "ROLLBACK", ignored, sizeof ignored, "rollback"))
        ignored[0] = '\0';
    return -1;
}
}

/* What runs on a plan while connected: 0, or -1 with err set. */
typedef int (*plan_step_t)(PGconn *c, const char *dir, FILE *log, lease_migration_plan_t *plan,
                           char *err, size_t errsz);

/* Reads dir into a plan, connects, runs step and disconnects; then hands
 * the plan to plan_out (step returned 0 and plan_out is not NULL) or frees
 * it. Returns step's answer, or -1 (err set) when reading or connecting
 * failed. */
static int on_plan(const char *database_url, const char *dir, FILE *log, plan_step_t step,
                   lease_migration_plan_t *plan_out, char *err, size_t errsz)
{
    lease_migration_plan_t plan = {0};
    if (scan_dir(dir, &plan, err, errsz) != 0)
        return -1;
    PGconn *c = store_pg_oneshot_connect(database_url, err, errsz);
    if (!c) {
        lease_migration_plan_free(&plan);
        return -1;
    }
    int rc = step(c, dir, log, &plan, err, errsz);
    PQfinish(c);
    if (rc == 0 && plan_out)
        *plan_out = plan;
    else
        lease_migration_plan_free(&plan);
    return rc;
}

/*
 * Whether a step failed only because a migration of another database of the
 * same cluster changed the same shared catalogue row at the same moment:
 * 0001's ALTER ROLE lease_service SET ... writes the cluster's
 * pg_db_role_setting, and the advisory lock serialises one database only.
 * The step rolled back whole; running it again is safe.
 */
static bool shared_row_collision(const char *err)
{
    return strstr(err, "tuple concurrently updated") != NULL;
}

/*
 * Each numbered file in a transaction of its own (0001's roles are shared by
 * every database of the cluster: a short transaction keeps migrations of
 * several databases at once from colliding on them), the definitions in the
 * transaction of the last file, so that file and the definitions that go
 * with it commit or roll back together.
 */
static int apply_all(PGconn *c, const char *dir, FILE *log, lease_migration_plan_t *plan, char *err,
                     size_t errsz)
{
    baseline_t base;
    if (find_baseline(dir, &base, err, errsz) != 0)
        return -1;
    lease_repeatables_t reps = {0};
    if (lease_repeatables_read(lease_repeatables_dir(dir), &reps, err, errsz) != 0)
        return -1;
    bool numbered = false, defined = false;
    int rc = 0;
    size_t last = plan->count ? plan->count - 1 : 0;
    for (size_t i = 0; i <= last && rc == 0 && !defined; i++) {
        /* applied meanwhile (under the lock of an earlier step: the
         * baseline, or another migrator); the last step still runs, for
         * the definitions */
        if (i != last && plan->items[i].applied)
            continue;
        for (int attempt = 1;; attempt++) {
            rc = apply_step(c, dir, log, plan, plan->count ? i : SIZE_MAX, &base,
                            &reps, i == last, &numbered, &defined, err, errsz);
            if (rc == 0 || attempt == 5 || !shared_row_collision(err))
                break;
            usleep(20000u * (unsigned)attempt);
        }
    }
    if (rc == 0) { /* report what is recorded now, applied_at included */
        for (size_t j = 0; j < plan->count; j++)
            plan->items[j].applied = false;
        rc = compare_applied(c, plan, err, errsz);
    }
    if (rc == 0)
        rc = lease_repeatables_pending(c, &reps, &plan->repeatables, &plan->repeatables_pending,
                                       err, errsz);
    lease_repeatables_free(&reps);
    return rc;
}

/* What is recorded, when anything is (a fresh database has no table). */
static int read_status(PGconn *c, const char *dir, FILE *log, lease_migration_plan_t *plan,
                       char *err, size_t errsz)
{
    (void)log;
    int rc = 0;
    PGresult *r = PQexec(c, "SELECT to_regclass('lease.schema_migrations') IS NOT NULL");
    bool exists = PQresultStatus(r) == PGRES_TUPLES_OK && PQgetvalue(r, 0, 0)[0] == 't';
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        store_pg_set_err(err, errsz, "%s", PQresultErrorMessage(r));
        rc = -1;
    }
    PQclear(r);
    if (rc == 0 && exists)
        rc = compare_applied(c, plan, err, errsz);
    lease_repeatables_t reps = {0};
    if (rc == 0)
        rc = lease_repeatables_read(lease_repeatables_dir(dir), &reps, err, errsz);
    if (rc == 0)
        rc = lease_repeatables_pending(c, &reps, &plan->repeatables, &plan->repeatables_pending,
                                       err, errsz);
    lease_repeatables_free(&reps);
    return rc;
}

int lease_migrate_apply(const char *database_url, const char *dir, FILE *log,
                        lease_migration_plan_t *plan_out, char *err, size_t errsz)
{
    return on_plan(database_url, dir, log, apply_all, plan_out, err, errsz);
}

int lease_migrate_status(const char *database_url, const char *dir,
                         lease_migration_plan_t *plan_out, char *err, size_t errsz)
{
    return on_plan(database_url, dir, NULL, read_status, plan_out, err, errsz);
}
