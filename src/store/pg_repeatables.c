/*
 * pg_repeatables.c - the repeatable definitions of sql/ (pg_repeatables.h).
 *
 * Order: sql/ORDER lists the files one per line, in the order they are
 * applied. An explicit list rather than a naming scheme keeps each file
 * named after what it defines (sql/lease/acquire.sql for lease.acquire), and
 * the order matters for what PostgreSQL checks at creation: an SQL-language
 * function's body and a view's query must find what they name, so a file is
 * listed after the functions and views it uses (PL/pgSQL bodies are only
 * checked when called). Every .sql file in the folder must be listed, so a
 * new file cannot be silently left out.
 */
#include "pg_repeatables.h"

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lease/store_admin.h"
#include "pg_files.h"
#include "pg_oneshot.h"

const char *lease_repeatables_dir(const char *migrations_dir)
{
    const char *env = getenv("LEASE_SQL_DIR");
    if (env && *env)
        return env;
    static char dir[PATH_MAX + 64];
    size_t len = strlen(migrations_dir);
    while (len > 1 && migrations_dir[len - 1] == '/') /* "migrations/" names the same folder */
        len--;
    size_t parent = len;
    while (parent > 0 && migrations_dir[parent - 1] != '/')
        parent--;
    if (parent == 0)
        snprintf(dir, sizeof dir, "sql");
    else
        snprintf(dir, sizeof dir, "%.*ssql", (int)parent, migrations_dir);
    return dir;
}

void lease_repeatables_free(lease_repeatables_t *reps)
{
    if (!reps)
        return;
    for (size_t i = 0; i < reps->count; i++)
        free(reps->items[i].body);
    free(reps->items);
    reps->items = NULL;
    reps->count = 0;
}

/* A name ORDER may hold: a relative path of [A-Za-z0-9_./-] ending in .sql
 * that never leaves the folder. */
static bool good_name(const char *n, size_t len)
{
    if (len < 5 || len >= sizeof((lease_repeatable_t *)0)->name || n[0] == '/' ||
        strcmp(n + len - 4, ".sql") != 0 || strstr(n, ".."))
        return false;
    for (size_t i = 0; i < len; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./-", n[i]))
            return false;
    return true;
}

static const lease_repeatable_t *find(const lease_repeatables_t *reps, const char *name)
{
    for (size_t i = 0; i < reps->count; i++)
        if (strcmp(reps->items[i].name, name) == 0)
            return &reps->items[i];
    return NULL;
}

/* nftw has no user pointer: the walk below runs on leasectl's one thread. */
static const lease_repeatables_t *walk_reps;
static size_t walk_prefix;
static char walk_unlisted[PATH_MAX];

static int check_listed(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    size_t len = strlen(path);
    if (type != FTW_F || len < 4 || strcmp(path + len - 4, ".sql") != 0)
        return 0;
    if (find(walk_reps, path + walk_prefix))
        return 0;
    snprintf(walk_unlisted, sizeof walk_unlisted, "%s", path + walk_prefix);
    return 1;
}

static int add(lease_repeatables_t *reps, size_t *cap, const char *dir, const char *name, char *err,
               size_t errsz)
{
    if (find(reps, name)) {
        store_pg_set_err(err, errsz, "%s/ORDER lists %s twice", dir, name);
        return -1;
    }
    if (reps->count == *cap) {
        size_t grown_cap = *cap ? 2 * *cap : 64;
        lease_repeatable_t *grown = realloc(reps->items, grown_cap * sizeof *grown);
        if (!grown) {
            store_pg_set_err(err, errsz, "out of memory");
            return -1;
        }
        reps->items = grown;
        *cap = grown_cap;
    }
    char path[PATH_MAX + 300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t len;
    char *body = store_pg_read_file(path, &len);
    if (!body) {
        store_pg_set_err(err, errsz, "cannot read %s (listed in %s/ORDER): %s", path, dir,
                         strerror(errno));
        return -1;
    }
    lease_repeatable_t *r = &reps->items[reps->count++];
    snprintf(r->name, sizeof r->name, "%s", name);
    store_pg_sha256_hex(body, len, r->checksum);
    r->body = body;
    return 0;
}

int lease_repeatables_read(const char *dir, lease_repeatables_t *reps, char *err, size_t errsz)
{
    memset(reps, 0, sizeof *reps);
    reps->dir = dir;
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/ORDER", dir);
    size_t len;
    char *order = store_pg_read_file(path, &len);
    if (!order) {
        store_pg_set_err(err, errsz,
                         "cannot read %s: %s (the function and view definitions; "
                         "LEASE_SQL_DIR names another folder)",
                         path, strerror(errno));
        return -1;
    }
    size_t cap = 0;
    int rc = 0;
    for (char *line = order; *line && rc == 0;) {
        size_t n = strcspn(line, "\n");
        char *next = line + n + (line[n] == '\n');
        line[n] = '\0';
        while (n && (line[n - 1] == ' ' || line[n - 1] == '\r' || line[n - 1] == '\t'))
            line[--n] = '\0';
        if (n && line[0] != '#') {
            if (!good_name(line, n)) {
                store_pg_set_err(err, errsz,
                                 "%s: '%.80s' is not a relative path to a .sql file in the folder",
                                 path, line);
                rc = -1;
            } else {
                rc = add(reps, &cap, dir, line, err, errsz);
            }
        }
        line = next;
    }
    free(order);
    if (rc == 0) {
        walk_reps = reps;
        walk_prefix = strlen(dir) + 1;
        walk_unlisted[0] = '\0';
        int w = nftw(dir, check_listed, 16, FTW_PHYS);
        if (w == 1) {
            store_pg_set_err(err, errsz,
                             "%s/%s is not listed in %s/ORDER: list it after what it uses", dir,
                             walk_unlisted, dir);
            rc = -1;
        } else if (w != 0) {
            store_pg_set_err(err, errsz, "cannot read the folder %s: %s", dir, strerror(errno));
            rc = -1;
        }
    }
    if (rc != 0)
        lease_repeatables_free(reps);
    return rc;
}

/* Recorded checksum of name in res (name, checksum rows), or NULL. */
static const char *recorded(PGresult *res, const char *name)
{
    for (int i = 0; i < PQntuples(res); i++)
        if (strcmp(PQgetvalue(res, i, 0), name) == 0)
            return PQgetvalue(res, i, 1);
    return NULL;
}

static PGresult *read_recorded(PGconn *c, char *err, size_t errsz)
{
    PGresult *res = PQexec(c, "SELECT name, checksum FROM lease.schema_repeatables");
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        store_pg_set_err(err, errsz, "reading lease.schema_repeatables: %s",
                         PQresultErrorMessage(res));
        PQclear(res);
        return NULL;
    }
    return res;
}

/* Recorded definitions ORDER no longer lists (their files were removed). */
static size_t count_unlisted(PGresult *res, const lease_repeatables_t *reps)
{
    size_t n = 0;
    for (int i = 0; i < PQntuples(res); i++)
        if (!find(reps, PQgetvalue(res, i, 0)))
            n++;
    return n;
}

/*
 * After every file ran in this transaction: a function of schema lease whose
 * catalogue row this transaction did not write (CREATE OR REPLACE rewrites
 * the row even when nothing changed, so its xmin is this transaction's) is
 * one no file defines any more: dropped, so removing a file removes its
 * function (supabase's declarative schema). Only schema lease, never an
 * extension's member, and without CASCADE: a stale function a trigger, view
 * or other definition still uses fails the run, which rolls back whole.
 * Aggregates go first (their state functions may be stale too). The
 * records of removed files go with them.
 */
static int sweep_stale(PGconn *c, const lease_repeatables_t *reps, size_t *dropped, char *err,
                       size_t errsz)
{
    *dropped = 0;
    PGresult *res =
        PQexec(c, "SELECT CASE p.prokind WHEN 'a' THEN 'AGGREGATE' WHEN 'p' THEN 'PROCEDURE' "
                  "ELSE 'FUNCTION' END, "
                  "string_agg(p.oid::regprocedure::text, ', ' ORDER BY p.oid::regprocedure::text), "
                  "count(*) "
                  "FROM pg_proc p WHERE p.pronamespace = 'lease'::regnamespace "
                  "AND p.xmin <> pg_current_xact_id()::xid "
                  "AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass "
                  "AND d.objid = p.oid AND d.deptype = 'e') "
                  "GROUP BY 1 ORDER BY 1");
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        store_pg_set_err(err, errsz, "reading the functions no definition wrote: %s",
                         PQresultErrorMessage(res));
        PQclear(res);
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < PQntuples(res) && rc == 0; i++) {
        const char *kind = PQgetvalue(res, i, 0), *list = PQgetvalue(res, i, 1);
        size_t len = strlen(kind) + strlen(list) + 16;
        char *sql = malloc(len);
        if (!sql) {
            store_pg_set_err(err, errsz, "out of memory");
            rc = -1;
            break;
        }
        snprintf(sql, len, "DROP %s %s", kind, list);
        PGresult *x = PQexec(c, sql);
        if (PQresultStatus(x) != PGRES_COMMAND_OK) {
            store_pg_set_err(err, errsz, "dropping what no file in %s defines (%s): %s", reps->dir,
                             list, PQresultErrorMessage(x));
            rc = -1;
        } else {
            *dropped += strtoul(PQgetvalue(res, i, 2), NULL, 10);
        }
        PQclear(x);
        free(sql);
    }
    PQclear(res);
    if (rc != 0)
        return -1;
    /* the records of removed files: what ORDER lists, nothing more */
    size_t cap = 2;
    for (size_t i = 0; i < reps->count; i++)
        cap += 2 * strlen(reps->items[i].name) + 4;
    char *names = malloc(cap);
    if (!names) {
        store_pg_set_err(err, errsz, "out of memory");
        return -1;
    }
    size_t n = 0;
    names[n++] = '{';
    for (size_t i = 0; i < reps->count; i++) /* good_name: no quote, comma or brace */
        n += (size_t)snprintf(names + n, cap - n, "%s\"%s\"", i ? "," : "", reps->items[i].name);
    names[n++] = '}';
    names[n] = '\0';
    const char *params[1] = {names};
    PGresult *x =
        PQexecParams(c, "DELETE FROM lease.schema_repeatables WHERE name <> ALL ($1::text[])", 1,
                     NULL, params, NULL, NULL, 0);
    if (PQresultStatus(x) != PGRES_COMMAND_OK) {
        store_pg_set_err(err, errsz, "forgetting removed definitions: %s", PQresultErrorMessage(x));
        rc = -1;
    }
    PQclear(x);
    free(names);
    return rc;
}

int lease_repeatables_apply(PGconn *c, const lease_repeatables_t *reps, bool all, size_t *applied,
                            size_t *dropped, char *err, size_t errsz)
{
    *applied = 0;
    *dropped = 0;
    PGresult *res = read_recorded(c, err, errsz);
    if (!res)
        return -1;
    /* A removed file makes this run apply every definition, so that the
     * rest can be dropped below. */
    if (reps->count > 0 && count_unlisted(res, reps) > 0)
        all = true;
    int rc = 0;
    for (size_t i = 0; i < reps->count && rc == 0; i++) {
        const lease_repeatable_t *r = &reps->items[i];
        const char *sum = recorded(res, r->name);
        if (!all && sum && strcmp(sum, r->checksum) == 0)
            continue;
        PGresult *x = PQexec(c, r->body);
        if (PQresultStatus(x) != PGRES_COMMAND_OK && PQresultStatus(x) != PGRES_TUPLES_OK) {
            store_pg_set_err(err, errsz, "%s/%s failed: %s", reps->dir, r->name,
                             PQresultErrorMessage(x));
            rc = -1;
        }
        PQclear(x);
        if (rc != 0)
            break;
        const char *params[2] = {r->name, r->checksum};
        x = PQexecParams(c,
                         "INSERT INTO lease.schema_repeatables (name, checksum) VALUES ($1, $2) "
                         "ON CONFLICT (name) DO UPDATE SET checksum = excluded.checksum, "
                         "applied_at = now(), applied_by = current_user",
                         2, NULL, params, NULL, NULL, 0);
        if (PQresultStatus(x) != PGRES_COMMAND_OK) {
            store_pg_set_err(err, errsz, "recording %s: %s", r->name, PQresultErrorMessage(x));
            rc = -1;
        }
        PQclear(x);
        ++*applied;
    }
    PQclear(res);
    /* Every file ran in this transaction (a first run of the definitions
     * on a database the numbered files alone made included): what none of
     * them wrote is stale. A folder that lists nothing manages nothing (the
     * numbered files alone, as leasectl applied them before sql/ existed). */
    if (rc == 0 && reps->count > 0 && *applied == reps->count)
        rc = sweep_stale(c, reps, dropped, err, errsz);
    return rc;
}

int lease_repeatables_pending(PGconn *c, const lease_repeatables_t *reps, size_t *count,
                              size_t *pending, char *err, size_t errsz)
{
    *count = reps->count;
    *pending = reps->count;
    PGresult *t = PQexec(c, "SELECT to_regclass('lease.schema_repeatables') IS NOT NULL");
    if (PQresultStatus(t) != PGRES_TUPLES_OK) {
        store_pg_set_err(err, errsz, "%s", PQresultErrorMessage(t));
        PQclear(t);
        return -1;
    }
    bool exists = PQgetvalue(t, 0, 0)[0] == 't';
    PQclear(t);
    if (!exists)
        return 0;
    PGresult *res = read_recorded(c, err, errsz);
    if (!res)
        return -1;
    for (size_t i = 0; i < reps->count; i++) {
        const char *sum = recorded(res, reps->items[i].name);
        if (sum && strcmp(sum, reps->items[i].checksum) == 0)
            --*pending;
    }
    if (reps->count > 0) /* a removed file: its function is still to drop */
        *pending += count_unlisted(res, reps);
    PQclear(res);
    return 0;
}
