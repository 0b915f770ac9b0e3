/*
 * http_secret_files.c - leased started with LEASE_DATABASE_URL_FILE (no
 * LEASE_DATABASE_URL at all): it reads the owner-only file once at start,
 * connects with it and becomes ready; with the file readable by others it
 * does not start (exit 2) and says why without printing the URL.
 */
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
    leased_proc_t *srv = leased_proc_start(db, (const char *[]){"LEASE_DATABASE_URL", setting, NULL});
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

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_database_url_from_a_file)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
