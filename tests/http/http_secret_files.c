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
 */
#include "exec_common.h"
#include "http_common.h"

#include <sys/stat.h>

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
    char *db = testpg_create_db("http_secret_files");
    char *url = testpg_service_url(db);
    char *path = write_url_file(url, 0600);
    char setting[256];
    snprintf(setting, sizeof setting, "LEASE_DATABASE_URL_FILE=%s", path);

    /* "LEASE_DATABASE_URL" alone: leave out the harness's default */
    leased_proc_t *srv =
        leased_proc_start(db, (const char *[]){"LEASE_DATABASE_URL", setting, NULL});
    char reason[64];
    assert_int_equal(http_wait_ready(leased_proc_url(srv), 200, reason, sizeof reason, 1, 0), 200);
    /* the file is read once: leased keeps working after it is gone */
    assert_int_equal(unlink(path), 0);
    http_resp_t *r = http_call(leased_proc_url(srv), "GET", "/readyz", NULL, NULL);
    assert_non_null(r);
    assert_int_equal(r->status, 200);
    http_resp_free(r);
    char *log = leased_proc_log(srv);
    assert_null(strstr(log, url));
    free(log);
    assert_int_equal(leased_proc_stop(srv), 0);
    free(path);

    /* readable by others: refused at start, the URL never printed */
    path = write_url_file(url, 0644);
    snprintf(setting, sizeof setting, "LEASE_DATABASE_URL_FILE=%s", path);
    char *out = NULL;
    int status = leased_proc_run_cli((const char *[]){NULL}, (const char *[]){setting, NULL}, &out);
    assert_int_equal(status, 2);
    if (!strstr(out, "LEASE_DATABASE_URL_FILE") || !strstr(out, "accessible by group or others"))
        fail_msg("leased said: %s", out);
    assert_null(strstr(out, url));
    free(out);
    unlink(path);
    free(path);
    free(url);
    testpg_drop_db(db);
    free(db);
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
    char *db = testpg_create_db("http_ctl_secret_files");
    char *db_path = write_url_file(db, 0600);
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
    snprintf(db_var, sizeof db_var, "LEASE_DATABASE_URL_FILE=%s", db_path);
    snprintf(pepper_var, sizeof pepper_var, "LEASE_TOKEN_PEPPER_FILE=%s", pepper_path);

    const char *args[] = {"credential", "create",   "--principal",  "prn_file_secrets", "--client",
                          "cl_files",   "--tenant", TENANT,         "--program",        PROGRAM,
                          "--actor",    "*",        "--capability", "targets:lease",    NULL};
    json_t *made = NULL;
    assert_int_equal(
        ctl(args, "http://127.0.0.1:1", NULL, (const char *[]){db_var, pepper_var, NULL}, &made),
        0);
    assert_non_null(made);
    const char *token = json_string_value(json_object_get(made, "token"));
    assert_non_null(token);

    char pepper_setting[128];
    snprintf(pepper_setting, sizeof pepper_setting, "LEASE_TOKEN_PEPPER=%s", pepper);
    leased_proc_t *peppered = leased_proc_start(db, (const char *[]){pepper_setting, NULL});
    assert_int_equal(acquire_with(leased_proc_url(peppered), token, "file-secrets-a"), 0);
    assert_int_equal(leased_proc_stop(peppered), 0);
    /* the digest was made with the pepper: without it the token is refused */
    leased_proc_t *plain = leased_proc_start(db, NULL);
    assert_int_equal(acquire_with(leased_proc_url(plain), token, "file-secrets-b"), 77);
    assert_int_equal(leased_proc_stop(plain), 0);

    json_decref(made);
    unlink(db_path);
    unlink(pepper_path);
    free(db_path);
    free(pepper_path);
    testpg_drop_db(db);
    free(db);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_database_url_from_a_file),
                                       cmocka_unit_test(test_leasectl_secrets_from_files)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
