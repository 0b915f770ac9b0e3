/*
 * valkey_held_fallback.c - the C client's holds on a leased without
 * sessions (the Valkey backend answers POST /v1/sessions with 400
 * invalid_lease_request naming session_id, "sessions need the PostgreSQL
 * backend"): the first hold asks for the client's session once, is told
 * no, acquires without one and is renewed per lease; the client remembers,
 * so the next hold does not ask again. A redis-server of the test's own
 * and leased on it (as valkey_http), the real client over loopback.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <poll.h>

#include "http_client.h"
#include "lease/client.h"
#include "lease/clock.h"
#include "lease/held.h"
#include "lease/hex.h"
#include "lease/store_valkey.h"
#include "lease/token.h"
#include "leased_proc.h"
#include "valkey_fixture.h"

#define TENANT "tenant-main"
#define PROGRAM "program-a"
#define TTL_MS 1500

/* A worker credential of principal in the namespace "leased"; its token. */
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

/* leased_http_requests_total of a route, summed over its codes. */
static long long requests_of(const char *base, const char *route)
{
    http_resp_t *r = http_call(base, "GET", "/metrics", NULL, NULL);
    assert_non_null(r);
    assert_int_equal(r->status, 200);
    char prefix[128];
    int len = snprintf(prefix, sizeof prefix, "leased_http_requests_total{route=\"%s\",", route);
    long long sum = 0;
    for (const char *p = r->body; (p = strstr(p, prefix)) != NULL; p += len) {
        const char *value = strchr(p, ' ');
        if (value)
            sum += atoll(value + 1);
    }
    http_resp_free(r);
    return sum;
}

static lease_held_t *hold(lease_client_t *c, const char *target, lease_record_t *lease)
{
    lease_client_acquire_t req = {
        .identity = {TENANT, PROGRAM, "starintel-target", target, "usernamegen", "default", NULL},
        .service_instance_id = "inst_vk",
        .execution_id = "exec_vk",
        .job_id = "job_vk",
        .ttl_ms = TTL_MS,
    };
    lease_client_call_t call = {0};
    lease_result_t a;
    lease_code_t code;
    lease_held_t *h = lease_held_acquire(c, &req, &call, &a, NULL, &code);
    if (!h)
        fail_msg("hold of %s: %s (field %s)", target, lease_code_name(code), a.field);
    *lease = a.lease;
    return h;
}

static void holds_fall_back_to_renewals_and_remember(void **state)
{
    (void)state;
    vk_server_t s;
    memset(&s, 0, sizeof s);
    assert_true(vk_start(&s));
    char err[256] = "";
    lease_valkey_config_t cfg = {.host = "127.0.0.1", .port = s.port, .ns = "leased"};
    lease_valkey_t *v = NULL;
    assert_int_equal(lease_valkey_open(&cfg, &v, err, sizeof err), LEASE_INSPECTED);
    int64_t epoch = -1;
    assert_int_equal(lease_valkey_bind(v, 0, &epoch, err, sizeof err), LEASE_INSPECTED);
    char *token = make_credential(v, "alice");
    char url[128];
    snprintf(url, sizeof url, "LEASE_STORE_URL=redis://127.0.0.1:%d", s.port);
    const char *env[] = {url, NULL};
    leased_proc_t *srv = leased_proc_start(NULL, env);
    assert_non_null(srv);
    const char *base = leased_proc_url(srv);

    lease_client_t *c = lease_client_new(base, token);
    assert_non_null(c);
    lease_record_t l1, l2;
    lease_held_t *h1 = hold(c, "t-vk-1", &l1);
    lease_held_t *h2 = hold(c, "t-vk-2", &l2);
    /* acquired without a session; asked once (400), not again */
    assert_string_equal(l1.session_id, "");
    assert_string_equal(l2.session_id, "");
    assert_int_equal(requests_of(base, "session_open"), 1);
    char sid[LEASE_ID_MAX + 1];
    assert_int_equal(lease_held_session(c, "inst_vk", TTL_MS, NULL, sid, sizeof sid),
                     LEASE_INVALID_LEASE_REQUEST);
    assert_string_equal(sid, "");
    assert_int_equal(requests_of(base, "session_open"), 1);

    /* renewed per lease past two TTLs */
    long long renewals = requests_of(base, "renew") + requests_of(base, "renew_batch");
    struct pollfd p = {.fd = lease_held_cancel_fd(h1), .events = POLLIN};
    assert_int_equal(poll(&p, 1, 2 * TTL_MS), 0);
    assert_true(requests_of(base, "renew") + requests_of(base, "renew_batch") > renewals);
    assert_int_equal(requests_of(base, "session_keepalive"), 0);
    assert_int_equal(lease_held_state(h1, NULL), LEASE_HELD_ACTIVE);
    assert_int_equal(lease_held_state(h2, NULL), LEASE_HELD_ACTIVE);

    assert_int_equal(lease_held_release(h1, 5000, NULL), LEASE_RELEASED);
    assert_int_equal(lease_held_release(h2, 5000, NULL), LEASE_RELEASED);
    lease_held_free(h1);
    lease_held_free(h2);
    lease_client_free(c);
    assert_int_equal(leased_proc_stop(srv), 0);
    free(token);
    lease_valkey_close(v);
    vk_stop(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(holds_fall_back_to_renewals_and_remember),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
