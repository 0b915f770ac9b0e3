/*
 * valkey_replicas.c - LEASE_VALKEY_MIN_REPLICAS against a real primary and
 * a real replica (redis-server --replicaof, tests/harness/valkeyserver):
 * with the replica in sync an acquire is answered once WAIT confirms it (the
 * replica already has it); with the replica frozen (SIGSTOP) or stopped no
 * replica acknowledges, so writes answer 503 lease_outcome_unknown within
 * their deadline while the write is applied on the primary (inspect, a
 * read, shows it without waiting); repeating the request id after the
 * replica is back answers the stored result. And the setting is refused on
 * PostgreSQL.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http_client.h"
#include "leased_proc.h"
#include "lease/clock.h"
#include "lease/hex.h"
#include "lease/store_valkey.h"
#include "lease/token.h"
#include "valkey_fixture.h"

#define TENANT "tenant-main"
#define PROGRAM "program-a"

static char *make_credential(lease_valkey_t *v, const char *principal)
{
    char id[LEASE_CREDENTIAL_ID_LEN + 1];
    unsigned char secret[LEASE_SECRET_BYTES], digest[32];
    char token[LEASE_TOKEN_MAX + 1], hex[65];
    assert_true(lease_token_generate(id, secret, token));
    lease_token_digest(secret, NULL, digest);
    lease_hex_encode(digest, sizeof digest, hex);
    char req[1024];
    snprintf(req, sizeof req,
             "{\"credential_id\":\"%s\",\"principal_id\":\"%s\",\"client_id\":\"cl_%s\","
             "\"tenant_id\":\"" TENANT "\",\"program_id\":\"" PROGRAM "\",\"actor_names\":[\"*\"],"
             "\"capabilities\":[\"targets:lease\",\"targets:read\"],\"secret_digest\":\"%s\"}",
             id, principal, principal, hex);
    char *row = NULL;
    char err[256] = "";
    if (lease_valkey_credential_create(v, req, &row, err, sizeof err) != LEASE_INSPECTED)
        fail_msg("credential: %s", err);
    free(row);
    return strdup(token);
}

static json_t *identity(const char *target)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "tenant_id", TENANT, "program_id", PROGRAM,
                     "target_namespace", "starintel-target", "target_id", target, "actor_name",
                     "usernamegen", "workflow_name", "default");
}

/* POST body (consumed) with deadline_ms; the answer (caller frees). */
static http_resp_t *post(const char *base, const char *path, const char *token, json_t *obj,
                         int deadline_ms)
{
    json_object_set_new(obj, "deadline_ms", json_integer(deadline_ms));
    char *body = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    http_resp_t *r = http_call(base, "POST", path, token, body);
    free(body);
    assert_non_null(r);
    return r;
}

static json_t *acquire_req(const char *rid, const char *target)
{
    return json_pack("{s:s, s:o, s:s, s:s, s:s, s:i}", "request_id", rid, "lock_identity",
                     identity(target), "service_instance_id", "inst_a", "execution_id", "exec_1",
                     "job_id", "job_1", "ttl_ms", 60000);
}

static void expect_code(const http_resp_t *r, long status, const char *code)
{
    const char *got = http_resp_str(r, "code");
    if (r->status != status || !got || strcmp(got, code) != 0)
        fail_msg("expected %ld %s, got %ld %s", status, code, r->status, r->body);
}

/* Whether the server holds key (EXISTS). */
static bool has_key(vk_server_t *s, const char *key)
{
    redisReply *r = vk_cmd(s, "EXISTS %s", key);
    bool yes = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    return yes;
}

static void writes_wait_for_a_replica(void **state)
{
    (void)state;
    vk_server_t primary, replica;
    memset(&primary, 0, sizeof primary);
    memset(&replica, 0, sizeof replica);
    assert_true(vk_start(&primary));
    assert_true(vk_start_replica(&replica, &primary));
    char err[256] = "";
    lease_valkey_config_t cfg = {.host = "127.0.0.1", .port = primary.port, .ns = "leased"};
    lease_valkey_t *v = NULL;
    assert_int_equal(lease_valkey_open(&cfg, &v, err, sizeof err), LEASE_INSPECTED);
    int64_t epoch = -1;
    assert_int_equal(lease_valkey_bind(v, 0, &epoch, err, sizeof err), LEASE_INSPECTED);
    char *alice = make_credential(v, "alice");
    lease_valkey_close(v);

    char url[128];
    snprintf(url, sizeof url, "LEASE_STORE_URL=redis://127.0.0.1:%d", primary.port);
    const char *env[] = {url, "LEASE_VALKEY_MIN_REPLICAS=1", NULL};
    leased_proc_t *srv = leased_proc_start(NULL, env);
    const char *base = leased_proc_url(srv);

    /* in sync: answered after WAIT, so the replica has it already */
    http_resp_t *a = post(base, "/v1/leases/acquire", alice, acquire_req("r1", "t1"), 3000);
    expect_code(a, 200, "lease_acquired");
    char key[200];
    snprintf(key, sizeof key, "lease:{leased}:l:%s",
             json_string_value(http_resp_get(a, "lease.lease_id")));
    assert_true(has_key(&replica, key));

    /* the replica frozen: no acknowledgement within the deadline */
    pid_t rpid = vk_pid(&replica);
    assert_true(rpid > 0);
    assert_int_equal(kill(rpid, SIGSTOP), 0);
    int64_t began = lease_mono_now_ns();
    http_resp_t *r = post(base, "/v1/leases/acquire", alice, acquire_req("r2", "t2"), 800);
    int64_t took_ms = (lease_mono_now_ns() - began) / 1000000;
    expect_code(r, 503, "lease_outcome_unknown");
    assert_true(json_is_true(http_resp_get(r, "retryable")));
    /* it waited for the replica, and not past the request's deadline */
    if (took_ms < 500 || took_ms > 800 + 1500)
        fail_msg("the unconfirmed acquire took %lld ms (deadline 800)", (long long)took_ms);
    http_resp_free(r);
    /* ... but the write is on the primary: a read shows it, without waiting */
    began = lease_mono_now_ns();
    r = post(base, "/v1/leases/inspect", alice, json_pack("{s:o}", "lock_identity", identity("t2")),
             3000);
    expect_code(r, 200, "lease_inspected");
    assert_string_equal(json_string_value(http_resp_get(r, "lease.state")), "active");
    assert_true((lease_mono_now_ns() - began) / 1000000 < 500);
    char *pending_id = strdup(json_string_value(http_resp_get(r, "lease.lease_id")));
    long long pending_token = json_integer_value(http_resp_get(r, "lease.fencing_token"));
    http_resp_free(r);
    /* the same request id again: still unconfirmed */
    r = post(base, "/v1/leases/acquire", alice, acquire_req("r2", "t2"), 600);
    expect_code(r, 503, "lease_outcome_unknown");
    http_resp_free(r);
    /* a renew of the confirmed lease: unconfirmed too */
    json_t *renew =
        json_pack("{s:s, s:o, s:O, s:O, s:s}", "request_id", "r3", "lock_identity", identity("t1"),
                  "lease_id", http_resp_get(a, "lease.lease_id"), "fencing_token",
                  http_resp_get(a, "lease.fencing_token"), "service_instance_id", "inst_a");
    r = post(base, "/v1/leases/renew", alice, renew, 600);
    expect_code(r, 503, "lease_outcome_unknown");
    http_resp_free(r);

    /* the replica back: repeating the request id answers the stored result */
    assert_int_equal(kill(rpid, SIGCONT), 0);
    r = post(base, "/v1/leases/acquire", alice, acquire_req("r2", "t2"), 5000);
    expect_code(r, 200, "lease_acquired");
    assert_true(json_is_true(http_resp_get(r, "replayed")));
    assert_string_equal(json_string_value(http_resp_get(r, "lease.lease_id")), pending_id);
    assert_int_equal(json_integer_value(http_resp_get(r, "lease.fencing_token")), pending_token);
    http_resp_free(r);
    snprintf(key, sizeof key, "lease:{leased}:l:%s", pending_id);
    assert_true(has_key(&replica, key));
    free(pending_id);

    /* the replica stopped for good: releases are unconfirmed, and applied */
    vk_stop(&replica);
    json_t *release =
        json_pack("{s:s, s:o, s:O, s:O, s:s}", "request_id", "r4", "lock_identity", identity("t1"),
                  "lease_id", http_resp_get(a, "lease.lease_id"), "fencing_token",
                  http_resp_get(a, "lease.fencing_token"), "service_instance_id", "inst_a");
    r = post(base, "/v1/leases/release", alice, release, 600);
    expect_code(r, 503, "lease_outcome_unknown");
    http_resp_free(r);
    char path[128];
    snprintf(path, sizeof path, "/v1/leases/%s",
             json_string_value(http_resp_get(a, "lease.lease_id")));
    r = http_call(base, "GET", path, alice, NULL);
    assert_non_null(r);
    expect_code(r, 200, "lease_inspected");
    assert_string_equal(json_string_value(http_resp_get(r, "lease.state")), "released");
    http_resp_free(r);

    http_resp_free(a);
    assert_int_equal(leased_proc_stop(srv), 0);
    free(alice);
    vk_stop(&primary);
}

/* Without the setting nothing waits: the same frozen replica does not
 * delay an answer. */
static void no_wait_without_the_setting(void **state)
{
    (void)state;
    vk_server_t primary, replica;
    memset(&primary, 0, sizeof primary);
    memset(&replica, 0, sizeof replica);
    assert_true(vk_start(&primary));
    assert_true(vk_start_replica(&replica, &primary));
    char err[256] = "";
    lease_valkey_config_t cfg = {.host = "127.0.0.1", .port = primary.port, .ns = "leased"};
    lease_valkey_t *v = NULL;
    assert_int_equal(lease_valkey_open(&cfg, &v, err, sizeof err), LEASE_INSPECTED);
    int64_t epoch = -1;
    assert_int_equal(lease_valkey_bind(v, 0, &epoch, err, sizeof err), LEASE_INSPECTED);
    char *alice = make_credential(v, "alice");
    lease_valkey_close(v);
    char url[128];
    snprintf(url, sizeof url, "LEASE_STORE_URL=redis://127.0.0.1:%d", primary.port);
    const char *env[] = {url, NULL};
    leased_proc_t *srv = leased_proc_start(NULL, env);
    pid_t rpid = vk_pid(&replica);
    assert_int_equal(kill(rpid, SIGSTOP), 0);
    int64_t began = lease_mono_now_ns();
    http_resp_t *r =
        post(leased_proc_url(srv), "/v1/leases/acquire", alice, acquire_req("n1", "t1"), 800);
    expect_code(r, 200, "lease_acquired");
    assert_true((lease_mono_now_ns() - began) / 1000000 < 500);
    http_resp_free(r);
    assert_int_equal(kill(rpid, SIGCONT), 0);
    assert_int_equal(leased_proc_stop(srv), 0);
    free(alice);
    vk_stop(&replica);
    vk_stop(&primary);

    /* the setting is the Valkey backend's: refused on PostgreSQL */
    const char *args[] = {NULL};
    const char *pg[] = {"LEASE_DATABASE_URL=postgresql:///x", "LEASE_VALKEY_MIN_REPLICAS=1", NULL};
    char *out = NULL;
    assert_int_equal(leased_proc_run_cli(args, pg, &out), LEASE_EXIT_USAGE);
    assert_non_null(strstr(out, "LEASE_VALKEY_MIN_REPLICAS"));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(writes_wait_for_a_replica),
        cmocka_unit_test(no_wait_without_the_setting),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
