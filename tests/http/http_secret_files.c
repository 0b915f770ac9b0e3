/*
 * http_secret_files.c - leased started with LEASE_DATABASE_URL_FILE (no
 * LEASE_DATABASE_URL at all): it reads the owner-only file once at start,
 * connects with it and becomes ready; with the file readable by others it
 * does not start (exit 2) and says why without printing the URL. And
 * leasectl given its database URL and token pepper as owner-only files
 * (LEASE_DATABASE_URL_FILE, LEASE_TOKEN_PEPPER_FILE, no variable of either):
 * `leasectl credential create` connects with the one and digests the new
 * token with the other, which it keeps in memory (docs/executor.md,
 * "Environment of the command": never in its environment); a leased with
 * that pepper accepts the token, one without it refuses it.
 *
 * On Valkey (LEASE_TEST_STORE=valkey) the same with the Valkey backend's
 * setting, LEASE_STORE_URL_FILE, holding redis://USER:PASSWORD@HOST:PORT of
 * a redis-server of the case's own whose only way in is that ACL user (the
 * default user is switched off): leased connects with it (its connections
 * are the user's, CLIENT LIST) and the password is in no log, no output and
 * no message of leased or leasectl.
 */
#include "exec_common.h"
#include "http_common.h"

#include <sys/stat.h>

#define VK_USER "leasefiles"

/* A case's own store: a database (Postgres) or a redis-server (Valkey)
 * whose only way in is VK_USER with password; url is what a secret file
 * holds for the case. */
typedef struct secret_store {
    bool valkey;
    char *db; /* Postgres: the superuser URL */
    test_store_valkey_t vk;
    char password[64];
    char url[256]; /* Valkey: redis://VK_USER:password@127.0.0.1:PORT */
} secret_store_t;

static void secret_store_open(secret_store_t *st, const char *prefix)
{
    *st = (secret_store_t){.valkey = test_store_is_valkey()};
    if (!st->valkey) {
        st->db = testpg_create_db(prefix);
        return;
    }
    test_store_valkey_start(&st->vk);
    snprintf(st->password, sizeof st->password, "files-Pw-%d-%s", (int)getpid(), prefix);
    char acl_pass[80];
    snprintf(acl_pass, sizeof acl_pass, ">%s", st->password);
    const char *setuser[] = {"ACL", "SETUSER", VK_USER, "on", acl_pass, "~*", "&*", "+@all", NULL};
    free(test_store_valkey_cli(&st->vk, setuser));
    const char *off[] = {"ACL", "SETUSER", "default", "off", NULL};
    free(test_store_valkey_cli(&st->vk, off));
    snprintf(st->url, sizeof st->url, "redis://" VK_USER ":%s@127.0.0.1:%s", st->password,
             strrchr(st->vk.url, ':') + 1);
}

/* redis-cli on the Valkey store as VK_USER (the default user is off). */
static char *secret_store_cli(secret_store_t *st, const char *cmd, const char *arg)
{
    const char *args[] = {"--user", VK_USER, "--pass", st->password, "--no-auth-warning",
                          cmd,      arg,     NULL};
    return test_store_valkey_cli(&st->vk, args);
}

static void secret_store_close(secret_store_t *st)
{
    if (st->valkey) {
        test_store_valkey_stop(&st->vk);
    } else {
        testpg_drop_db(st->db);
        free(st->db);
    }
}

/* The secret of the store's URL (the Valkey password) is not in text. */
static void no_password_in(const secret_store_t *st, const char *what, const char *text)
{
    assert_non_null(text);
    if (st->valkey && strstr(text, st->password))
        fail_msg("the store's password is in %s: %s", what, text);
}

static char *write_url_file(const char *url, mode_t mode)
{
    char *path = NULL;
    assert_true(asprintf(&path, "/tmp/http_secret_files.%d.%o", (int)getpid(), (unsigned)mode) > 0);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%s\n", url);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(path, mode), 0);
    return path;
}

static void test_database_url_from_a_file(void **state)
{
    (void)state;
    secret_store_t st;
    secret_store_open(&st, "http_secret_files");
    /* the service's URL (Postgres), the ACL user's with its password (Valkey) */
    char *url = st.valkey ? strdup(st.url) : testpg_service_url(st.db);
    const char *var = st.valkey ? "LEASE_STORE_URL_FILE" : "LEASE_DATABASE_URL_FILE";
    char *path = write_url_file(url, 0600);
    char setting[256];
    snprintf(setting, sizeof setting, "%s=%s", var, path);

    /* "LEASE_DATABASE_URL" alone: leave out the harness's default */
    leased_proc_t *srv =
        st.valkey ? leased_proc_start(NULL, (const char *[]){setting, NULL})
                  : leased_proc_start(st.db, (const char *[]){"LEASE_DATABASE_URL", setting, NULL});
    char reason[64];
    assert_int_equal(http_wait_ready(leased_proc_url(srv), 200, reason, sizeof reason, 1, 0), 200);
    if (st.valkey) {
        /* it connected with the file's URL: as its user (nothing else gets in) */
        char *clients = secret_store_cli(&st, "CLIENT", "LIST");
        assert_non_null(clients);
        int theirs = 0; /* the user's connections but this CLIENT LIST's own */
        for (char *line = strtok(clients, "\n"); line; line = strtok(NULL, "\n"))
            if (strstr(line, " user=" VK_USER " ") && !strstr(line, " cmd=client|list "))
                theirs++;
        printf("leased's connections as " VK_USER ": %d\n", theirs);
        assert_true(theirs >= 1);
        free(clients);
    }
    /* the file is read once: leased keeps working after it is gone */
    assert_int_equal(unlink(path), 0);
    http_resp_t *r = http_call(leased_proc_url(srv), "GET", "/readyz", NULL, NULL);
    assert_non_null(r);
    assert_int_equal(r->status, 200);
    http_resp_free(r);
    char *log = leased_proc_log(srv);
    assert_null(strstr(log, url));
    no_password_in(&st, "leased's log", log);
    free(log);
    assert_int_equal(leased_proc_stop(srv), 0);
    free(path);

    /* readable by others: refused at start, the URL never printed */
    path = write_url_file(url, 0644);
    snprintf(setting, sizeof setting, "%s=%s", var, path);
    char *out = NULL;
    int status = leased_proc_run_cli((const char *[]){NULL}, (const char *[]){setting, NULL}, &out);
    assert_int_equal(status, 2);
    if (!strstr(out, var) || !strstr(out, "accessible by group or others"))
        fail_msg("leased said: %s", out);
    assert_null(strstr(out, url));
    no_password_in(&st, "leased's message", out);
    free(out);
    unlink(path);
    free(path);
    free(url);
    secret_store_close(&st);
}

/* `leasectl acquire` of a fresh target against url with token; its exit status. */
static int acquire_with(const char *url, const char *token, const char *target)
{
    const char *args[] = {"acquire", "--tenant", TENANT,  "--program", PROGRAM, "--namespace",
                          NAMESPACE, "--target", target,  "--actor",   ACTOR,   "--workflow",
                          "default", "--ttl-ms", "30000", NULL};
    return ctl(args, url, token, NULL, NULL);
}

static void test_leasectl_secrets_from_files(void **state)
{
    (void)state;
    secret_store_t st;
    secret_store_open(&st, "http_ctl_secret_files");
    char *db_path = write_url_file(st.valkey ? st.url : st.db, 0600);
    char pepper[64];
    snprintf(pepper, sizeof pepper, "pepper-from-a-file-%d", (int)getpid());
    char *pepper_path = NULL;
    assert_true(asprintf(&pepper_path, "/tmp/http_secret_files.%d.pepper", (int)getpid()) > 0);
    FILE *f = fopen(pepper_path, "w");
    assert_non_null(f);
    fprintf(f, "%s\n", pepper);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(pepper_path, 0600), 0);
    char db_var[256], pepper_var[256];
    snprintf(db_var, sizeof db_var, "%s=%s",
             st.valkey ? "LEASE_STORE_URL_FILE" : "LEASE_DATABASE_URL_FILE", db_path);
    snprintf(pepper_var, sizeof pepper_var, "LEASE_TOKEN_PEPPER_FILE=%s", pepper_path);

    const char *args[] = {"credential", "create",   "--principal",  "prn_file_secrets", "--client",
                          "cl_files",   "--tenant", TENANT,         "--program",        PROGRAM,
                          "--actor",    "*",        "--capability", "targets:lease",    NULL};
    proc_t p =
        ctl_start(args, "http://127.0.0.1:1", NULL, (const char *[]){db_var, pepper_var, NULL});
    int status = proc_wait(&p, 30000);
    char *text = proc_file(&p, "out");
    char *err = proc_file(&p, "err");
    if (status != 0)
        fail_msg("leasectl credential create -> %d\n  stdout: %s  stderr: %s", status,
                 text ? text : "", err ? err : "");
    no_password_in(&st, "leasectl's output", text);
    no_password_in(&st, "leasectl's messages", err);
    free(err);
    proc_cleanup(&p);
    json_t *made = json_loads(text, 0, NULL);
    free(text);
    assert_non_null(made);
    const char *token = json_string_value(json_object_get(made, "token"));
    assert_non_null(token);

    char pepper_setting[128], store_setting[300];
    snprintf(pepper_setting, sizeof pepper_setting, "LEASE_TOKEN_PEPPER=%s", pepper);
    snprintf(store_setting, sizeof store_setting, "LEASE_STORE_URL=%s", st.url);
    leased_proc_t *peppered =
        st.valkey ? leased_proc_start(NULL, (const char *[]){store_setting, pepper_setting, NULL})
                  : leased_proc_start(st.db, (const char *[]){pepper_setting, NULL});
    assert_int_equal(acquire_with(leased_proc_url(peppered), token, "file-secrets-a"), 0);
    char *log = leased_proc_log(peppered);
    no_password_in(&st, "leased's log", log);
    free(log);
    assert_int_equal(leased_proc_stop(peppered), 0);
    /* the digest was made with the pepper: without it the token is refused */
    leased_proc_t *plain = st.valkey
                               ? leased_proc_start(NULL, (const char *[]){store_setting, NULL})
                               : leased_proc_start(st.db, NULL);
    assert_int_equal(acquire_with(leased_proc_url(plain), token, "file-secrets-b"), 77);
    assert_int_equal(leased_proc_stop(plain), 0);

    json_decref(made);
    unlink(db_path);
    unlink(pepper_path);
    free(db_path);
    free(pepper_path);
    secret_store_close(&st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_database_url_from_a_file),
                                       cmocka_unit_test(test_leasectl_secrets_from_files)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
