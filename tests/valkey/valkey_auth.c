/*
 * valkey_auth.c - AUTH to Valkey/Redis from the store URL
 * (redis://USER:PASSWORD@HOST:PORT, docs/backends.md), against a real
 * redis-server with requirepass and an ACL user. leased and leasectl
 * without credentials, or with a wrong password, are refused with the
 * server's reason and never the password; with an ACL user (in
 * LEASE_STORE_URL) and with the default user's password (in
 * LEASE_STORE_URL_FILE) they work: migrate, credentials, leases over HTTP.
 * The password is in no log line, no answer, no audit event and not in
 * leased's command line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "child_proc.h"
#include "http_client.h"
#include "leased_proc.h"
#include "lease/result.h"
#include "valkey_service.h"

#define ACL_PASSWORD "acl-Pw-7391"
#define DEFAULT_PASSWORD "def@ult:Pw/4410" /* percent-encoded in the URL */
#define DEFAULT_PASSWORD_URL "def%40ult%3APw%2F4410"

static void no_password_in(const char *text)
{
    assert_non_null(text);
    assert_null(strstr(text, ACL_PASSWORD));
    assert_null(strstr(text, "def@ult"));
    assert_null(strstr(text, DEFAULT_PASSWORD_URL));
}

static void auth_from_the_url(void **state)
{
    (void)state;
    vk_server_t s;
    memset(&s, 0, sizeof s);
    assert_true(vk_start(&s));
    /* an ACL user for leased; the default user needs a password too (the
     * fixture's own connection stays authenticated) */
    freeReplyObject(vk_cmd(&s, "ACL SETUSER leasesvc on >%s ~* &* +@all", ACL_PASSWORD));
    freeReplyObject(vk_cmd(&s, "CONFIG SET requirepass %s", DEFAULT_PASSWORD));
    char plain[128], wrong[160], acl[200], dflt[200];
    snprintf(plain, sizeof plain, "LEASE_STORE_URL=redis://127.0.0.1:%d", s.port);
    snprintf(wrong, sizeof wrong, "LEASE_STORE_URL=redis://leasesvc:not-it-55@127.0.0.1:%d",
             s.port);
    snprintf(acl, sizeof acl, "LEASE_STORE_URL=redis://leasesvc:" ACL_PASSWORD "@127.0.0.1:%d",
             s.port);
    snprintf(dflt, sizeof dflt, "redis://:%s@127.0.0.1:%d\n", DEFAULT_PASSWORD_URL, s.port);

    /* no credentials, a wrong password: refused, said why, nothing quoted */
    const char *migrate[] = {"migrate", NULL};
    const char *env_plain[] = {plain, NULL};
    const char *args_none[] = {NULL};
    char *out = NULL;
    assert_int_equal(vk_leasectl(migrate, env_plain, &out), LEASE_EXIT_UNAVAILABLE);
    assert_non_null(strstr(out, "NOAUTH"));
    /* says it is the credentials, not a durability setting it could not read */
    assert_non_null(strstr(out, "user and password"));
    assert_null(strstr(out, "must run with"));
    free(out);
    assert_int_equal(leased_proc_run_cli(args_none, env_plain, &out), LEASE_EXIT_FAILURE);
    assert_non_null(strstr(out, "NOAUTH"));
    assert_non_null(strstr(out, "user and password"));
    assert_null(strstr(out, "must run with"));
    free(out);
    const char *env_wrong[] = {wrong, NULL};
    assert_int_equal(vk_leasectl(migrate, env_wrong, &out), LEASE_EXIT_UNAVAILABLE);
    assert_non_null(strstr(out, "refused the store URL's credentials"));
    assert_non_null(strstr(out, "WRONGPASS"));
    assert_null(strstr(out, "not-it-55"));
    free(out);
    const char *args[] = {NULL};
    assert_int_equal(leased_proc_run_cli(args, env_wrong, &out), LEASE_EXIT_FAILURE);
    assert_non_null(strstr(out, "WRONGPASS"));
    assert_null(strstr(out, "not-it-55"));
    free(out);

    /* the default user's password from LEASE_STORE_URL_FILE: migrate */
    char path[400];
    snprintf(path, sizeof path, "%s/store_url", s.dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(dflt, f);
    fclose(f);
    assert_int_equal(chmod(path, 0600), 0); /* a secret file: the owner's only */
    char file_env[440];
    snprintf(file_env, sizeof file_env, "LEASE_STORE_URL_FILE=%s", path);
    const char *env_file[] = {file_env, NULL};
    assert_int_equal(vk_leasectl(migrate, env_file, &out), LEASE_EXIT_OK);
    assert_non_null(strstr(out, "\"bound\":true"));
    no_password_in(out);
    free(out);

    /* the ACL user: a credential by leasectl, then leases over HTTP */
    const char *env_acl[] = {acl, NULL};
    const char *create[] = {"credential", "create",   "--principal",  "alice",         "--client",
                            "cl_alice",   "--tenant", "tenant-main",  "--program",     "program-a",
                            "--actor",    "*",        "--capability", "targets:lease", NULL};
    assert_int_equal(vk_leasectl(create, env_acl, &out), LEASE_EXIT_OK);
    no_password_in(out);
    const char *tok = strstr(out, "lsk_");
    assert_non_null(tok);
    char token[256];
    size_t tl = strcspn(tok, "\"");
    assert_true(tl < sizeof token);
    memcpy(token, tok, tl);
    token[tl] = '\0';
    free(out);

    const char *lenv[] = {acl, "LEASE_DB_POOL_SIZE=3", NULL};
    leased_proc_t *srv = leased_proc_start(NULL, lenv);
    const char *base = leased_proc_url(srv);
    const char *body = "{\"request_id\":\"a1\",\"lock_identity\":{\"tenant_id\":\"tenant-main\","
                       "\"program_id\":\"program-a\",\"target_namespace\":\"ns\",\"target_id\":"
                       "\"t1\",\"actor_name\":\"usernamegen\",\"workflow_name\":\"default\"},"
                       "\"service_instance_id\":\"inst_a\",\"execution_id\":\"e\",\"job_id\":\"j\","
                       "\"ttl_ms\":30000}";
    http_resp_t *r = http_call(base, "POST", "/v1/leases/acquire", token, body);
    assert_non_null(r);
    if (r->status != 200)
        fail_msg("acquire: %ld %s", r->status, r->body);
    no_password_in(r->body);
    http_resp_free(r);
    /* the connections of the pool are the ACL user's */
    redisReply *cl = vk_cmd(&s, "CLIENT LIST");
    assert_int_equal(cl->type, REDIS_REPLY_STRING);
    assert_non_null(strstr(cl->str, "user=leasesvc"));
    freeReplyObject(cl);

    /* the password is nowhere leased shows it: its log, its command line,
     * the audit Stream */
    char *log = leased_proc_log(srv);
    no_password_in(log);
    free(log);
    char cmdline_path[64];
    snprintf(cmdline_path, sizeof cmdline_path, "/proc/%d/cmdline", (int)leased_proc_pid(srv));
    char *cmdline = child_proc_read_file(cmdline_path);
    if (cmdline)
        no_password_in(cmdline);
    free(cmdline);
    redisReply *x = vk_audit(&s, "lease:{leased}:audit", false);
    assert_true(x->elements >= 1);
    for (size_t i = 0; i < x->elements; i++) {
        const redisReply *fields = x->element[i]->element[1];
        for (size_t j = 0; j < fields->elements; j++)
            if (fields->element[j]->type == REDIS_REPLY_STRING)
                no_password_in(fields->element[j]->str);
    }
    freeReplyObject(x);
    assert_int_equal(leased_proc_stop(srv), 0);
    vk_stop(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(auth_from_the_url),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
