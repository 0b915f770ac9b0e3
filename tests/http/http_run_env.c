/*
 * http_run_env.c - what the command `leasectl run` starts receives in its
 * environment: the lease's variables that docs/executor.md lists ("Environment
 * of the command") and nothing of leasectl's own secrets. The real leased,
 * the real leasectl binary, and `sh -c env` as the real child process whose
 * output is the evidence.
 *
 *  (a) leasectl given LEASE_DATABASE_URL_FILE and LEASE_TOKEN_PEPPER_FILE
 *      (owner-only files): the command sees neither the values nor any of
 *      the four names. leasectl used to read the files, setenv the values
 *      and unset the *_FILE names, so `env` printed LEASE_DATABASE_URL and
 *      LEASE_TOKEN_PEPPER with their secret values.
 *  (b) leasectl given LEASE_DATABASE_URL and LEASE_TOKEN_PEPPER directly:
 *      neither reaches the command (they used to pass through, like any
 *      variable of run's own environment).
 *  Both also give the Valkey backend's URL with its password,
 *  LEASE_STORE_URL_FILE in (a) and LEASE_STORE_URL in (b): neither the
 *  value, the file's path nor the name reaches the command.
 * In both, every LEASE_* variable the command sees is one docs/executor.md
 * lists, every one it lists is there (LEASE_CA_FILE is set for the purpose),
 * with the lease's values, and a variable of the caller's own (PATH, and
 * RUN_ENV_APP_SETTING standing for the command's own configuration) still
 * passes through.
 * On Valkey (http_run_env_valkey) the same: leased and the lease on the
 * Valkey store, whose first token of an identity is 1 too (epoch 0:
 * 0 * 2^32 + 1, docs/backends.md "Token layout").
 */
#include <sys/stat.h>

#include "exec_common.h"
#include "http_common.h"

#define TARGET_A "run-env-a"
#define TARGET_B "run-env-b"
#define CA_FILE "/etc/ssl/certs/ca-certificates.crt"

static http_fx_t fx;
static const char *worker_token; /* owned by fx */

/* A file of mode 0600 holding value; returns its path (heap). */
static char *secret_file(const char *name, const char *value)
{
    char *path = NULL;
    assert_true(asprintf(&path, "/tmp/http_run_env.%d.%s", (int)getpid(), name) > 0);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%s\n", value);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(path, 0600), 0);
    return path;
}

/* The LEASE_* names the first column of docs/executor.md's table
 * "Environment of the command" lists (NULL-terminated, heap). */
static char **documented_names(void)
{
    char *doc = slurp(LEASE_TEST_SOURCE_DIR "/docs/executor.md");
    assert_non_null(doc);
    char *section = strstr(doc, "### Environment of the command");
    assert_non_null(section);
    char *end = strstr(section + 4, "\n#");
    if (end)
        *end = '\0';
    char **names = calloc(64, sizeof *names);
    size_t n = 0;
    for (char *line = strtok(section, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] != '|' || strncmp(line, "|---", 4) == 0)
            continue;
        char *cell_end = strchr(line + 1, '|');
        if (!cell_end)
            continue;
        *cell_end = '\0';
        for (char *p = strstr(line, "`LEASE_"); p; p = strstr(p, "`LEASE_")) {
            p++;
            size_t len = strspn(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_");
            if (p[len] == '`' && n < 63)
                names[n++] = strndup(p, len);
            p += len;
        }
    }
    free(doc);
    assert_true(n >= 10); /* the table was found and read */
    return names;
}

static bool listed(char **names, const char *name, size_t len)
{
    for (char **n = names; *n; n++)
        if (strlen(*n) == len && strncmp(*n, name, len) == 0)
            return true;
    return false;
}

/* The value of NAME in env's output (heap), or NULL. */
static char *value_of(const char *env_text, const char *name)
{
    size_t len = strlen(name);
    for (const char *line = env_text; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t llen = nl ? (size_t)(nl - line) : strlen(line);
        if (llen > len && strncmp(line, name, len) == 0 && line[len] == '=')
            return strndup(line + len + 1, llen - len - 1);
        line = nl ? nl + 1 : NULL;
    }
    return NULL;
}

/* Runs `sh -c env` under `leasectl run` on target with extra_env; returns
 * what env printed (heap). */
static char *env_under_run(const char *target, const char *const *extra_env)
{
    const char *args[] = {"run",         "--tenant",   TENANT,     "--program", PROGRAM,
                          "--namespace", NAMESPACE,    "--target", target,      "--actor",
                          ACTOR,         "--workflow", "default",  "--ttl-ms",  "30000",
                          "--",          "sh",         "-c",       "env",       NULL};
    proc_t p = ctl_start(args, fx.base, worker_token, extra_env);
    int status = proc_wait(&p, 30000);
    char *out = proc_file(&p, "out");
    char *err = proc_file(&p, "err");
    if (status != 0)
        fail_msg("leasectl run exited %d; stderr:\n%s", status, err ? err : "");
    assert_non_null(out);
    free(err);
    proc_cleanup(&p);
    return out;
}

/* What every case asserts of the command's environment. */
static void check_environment(const char *out, const char *target, const char *const *secrets,
                              const char *const *absent_names)
{
    for (size_t i = 0; secrets[i]; i++)
        if (strstr(out, secrets[i]))
            fail_msg("the command saw the secret %s:\n%s", secrets[i], out);
    for (size_t i = 0; absent_names[i]; i++)
        if (strstr(out, absent_names[i]))
            fail_msg("the command saw %s:\n%s", absent_names[i], out);

    /* every LEASE_* it sees is documented, every documented one is there */
    char **names = documented_names();
    for (const char *line = out; line && *line;) {
        const char *nl = strchr(line, '\n');
        if (strncmp(line, "LEASE_", 6) == 0) {
            size_t len = strcspn(line, "=\n");
            if (!listed(names, line, len))
                fail_msg("the command saw %.*s, which docs/executor.md does not list:\n%s",
                         (int)len, line, out);
        }
        line = nl ? nl + 1 : NULL;
    }
    for (char **n = names; *n; n++) {
        char *v = value_of(out, *n);
        if (!v)
            fail_msg("docs/executor.md lists %s; the command did not see it:\n%s", *n, out);
        free(v);
        free(*n);
    }
    free(names);

    /* with the lease's values */
    const struct {
        const char *name, *value;
    } expected[] = {
        {"LEASE_URL", fx.base},
        {"LEASE_TOKEN", worker_token},
        {"LEASE_TENANT_ID", TENANT},
        {"LEASE_PROGRAM_ID", PROGRAM},
        {"LEASE_TARGET_NAMESPACE", NAMESPACE},
        {"LEASE_TARGET_ID", target},
        {"LEASE_ACTOR_NAME", ACTOR},
        {"LEASE_WORKFLOW_NAME", "default"},
        {"LEASE_FENCING_TOKEN", "1"},
        {"LEASE_CA_FILE", CA_FILE},
        {"RUN_ENV_APP_SETTING", "kept"},
    };
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
        char *v = value_of(out, expected[i].name);
        if (!v || strcmp(v, expected[i].value) != 0)
            fail_msg("%s is %s, expected %s", expected[i].name, v ? v : "(absent)",
                     expected[i].value);
        free(v);
    }
    char *id = value_of(out, "LEASE_ID");
    assert_non_null(id);
    assert_int_equal(strncmp(id, "lease_", 6), 0);
    free(id);
    char *path = value_of(out, "PATH");
    assert_non_null(path);
    free(path);
}

static void test_secret_files_do_not_reach_the_command(void **state)
{
    (void)state;
    char db_url[160], pepper[64];
    snprintf(db_url, sizeof db_url, "postgresql://runenv_user:db-secret-%d@127.0.0.1:1/runenv_db",
             (int)getpid());
    snprintf(pepper, sizeof pepper, "pepper-secret-%d", (int)getpid());
    char store_url[160];
    snprintf(store_url, sizeof store_url, "redis://runenv:store-secret-%d@127.0.0.1:1/0",
             (int)getpid());
    char *db_path = secret_file("dburl", db_url);
    char *pepper_path = secret_file("pepper", pepper);
    char *store_path = secret_file("storeurl", store_url);
    char db_var[256], pepper_var[256], store_var[256];
    snprintf(db_var, sizeof db_var, "LEASE_DATABASE_URL_FILE=%s", db_path);
    snprintf(pepper_var, sizeof pepper_var, "LEASE_TOKEN_PEPPER_FILE=%s", pepper_path);
    /* the Valkey backend's URL, with its password (docs/backends.md) */
    snprintf(store_var, sizeof store_var, "LEASE_STORE_URL_FILE=%s", store_path);
    const char *env[] = {
        db_var, pepper_var, store_var, "LEASE_CA_FILE=" CA_FILE, "RUN_ENV_APP_SETTING=kept", NULL};

    char *out = env_under_run(TARGET_A, env);
    check_environment(
        out, TARGET_A,
        (const char *[]){db_url, pepper, store_url, db_path, pepper_path, store_path, NULL},
        (const char *[]){"LEASE_DATABASE_URL", "LEASE_TOKEN_PEPPER", "LEASE_STORE_URL",
                         "_FILE=/tmp", NULL});
    free(out);
    unlink(db_path);
    unlink(pepper_path);
    unlink(store_path);
    free(db_path);
    free(pepper_path);
    free(store_path);
}

static void test_secret_variables_do_not_reach_the_command(void **state)
{
    (void)state;
    char db_var[192], pepper_var[96];
    snprintf(db_var, sizeof db_var,
             "LEASE_DATABASE_URL=postgresql://runenv_user:db-direct-%d@127.0.0.1:1/runenv_db",
             (int)getpid());
    snprintf(pepper_var, sizeof pepper_var, "LEASE_TOKEN_PEPPER=pepper-direct-%d", (int)getpid());
    char store_var[192];
    snprintf(store_var, sizeof store_var,
             "LEASE_STORE_URL=rediss://runenv:store-direct-%d@127.0.0.1:1/0", (int)getpid());
    const char *env[] = {
        db_var, pepper_var, store_var, "LEASE_CA_FILE=" CA_FILE, "RUN_ENV_APP_SETTING=kept", NULL};

    char *out = env_under_run(TARGET_B, env);
    check_environment(
        out, TARGET_B,
        (const char *[]){strchr(db_var, '=') + 1, strchr(pepper_var, '=') + 1,
                         strchr(store_var, '=') + 1, NULL},
        (const char *[]){"LEASE_DATABASE_URL", "LEASE_TOKEN_PEPPER", "LEASE_STORE_URL", NULL});
    free(out);
}

static int group_setup(void **state)
{
    http_fx_open(&fx, state, "run_env");
    http_fx_serve(&fx, NULL);
    worker_token = http_fx_worker(&fx, "prn_run_env");
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_secret_files_do_not_reach_the_command),
        cmocka_unit_test(test_secret_variables_do_not_reach_the_command),
    };
    return cmocka_run_group_tests(tests, group_setup, http_fx_teardown);
}
