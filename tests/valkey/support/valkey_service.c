/*
 * valkey_service.c - see valkey_service.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "valkey_service.h"

#include "child_proc.h"
#include "lease/clock.h"
#include "lease/hex.h"

lease_valkey_t *vk_open_config(const lease_valkey_config_t *cfg)
{
    lease_valkey_t *v = NULL;
    char err[256] = "";
    if (lease_valkey_open(cfg, &v, err, sizeof err) != LEASE_INSPECTED) {
        fprintf(stderr, "valkey: open: %s\n", err);
        return NULL;
    }
    return v;
}

lease_valkey_t *vk_open(const vk_server_t *s, const char *ns)
{
    lease_valkey_config_t cfg = {.host = "127.0.0.1", .port = s->port, .ns = ns};
    return vk_open_config(&cfg);
}

void vk_fill_race_acquire(lease_acquire_req_t *r, const char *target)
{
    snprintf(r->identity.tenant_id, sizeof r->identity.tenant_id, "tenant-main");
    snprintf(r->identity.program_id, sizeof r->identity.program_id, "program-a");
    snprintf(r->identity.target_namespace, sizeof r->identity.target_namespace, "ns");
    snprintf(r->identity.target_id, sizeof r->identity.target_id, "%s", target);
    snprintf(r->identity.actor_name, sizeof r->identity.actor_name, "actor");
    snprintf(r->identity.workflow_name, sizeof r->identity.workflow_name, "wf");
    snprintf(r->identity.operation_class, sizeof r->identity.operation_class, "default");
    snprintf(r->service_instance_id, sizeof r->service_instance_id, "inst");
    snprintf(r->execution_id, sizeof r->execution_id, "exec");
    snprintf(r->job_id, sizeof r->job_id, "job");
}

lease_valkey_t *vk_open_bound(const vk_server_t *s, const char *ns)
{
    lease_valkey_t *v = vk_open(s, ns);
    if (v == NULL)
        return NULL;
    int64_t epoch = -1;
    char err[256] = "";
    if (lease_valkey_bind(v, 0, &epoch, err, sizeof err) != LEASE_INSPECTED || epoch != 0) {
        fprintf(stderr, "valkey: bind: %s (epoch %lld)\n", err, (long long)epoch);
        lease_valkey_close(v);
        return NULL;
    }
    return v;
}

char *vk_make_credential(lease_valkey_t *v, const char *principal,
                         char id_out[LEASE_CREDENTIAL_ID_LEN + 1])
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
             "\"tenant_id\":\"" VK_TENANT "\",\"program_id\":\"" VK_PROGRAM "\","
             "\"actor_names\":[\"*\"],\"capabilities\":[\"targets:lease\",\"targets:read\"],"
             "\"secret_digest\":\"%s\"}",
             id, principal, principal, hex);
    char *row = NULL;
    char err[256] = "";
    if (lease_valkey_credential_create(v, req, &row, err, sizeof err) != LEASE_INSPECTED)
        fail_msg("credential: %s", err);
    free(row);
    if (id_out != NULL)
        memcpy(id_out, id, sizeof id);
    return strdup(token);
}

char *vk_worker(const vk_server_t *s, const char *principal)
{
    lease_valkey_t *v = vk_open_bound(s, "leased");
    assert_non_null(v);
    char *token = vk_make_credential(v, principal, NULL);
    lease_valkey_close(v);
    return token;
}

leased_proc_t *vk_leased_start(const vk_server_t *s, const char *const *extra)
{
    char url[128];
    snprintf(url, sizeof url, "LEASE_STORE_URL=redis://127.0.0.1:%d", s->port);
    const char *env[16] = {url};
    size_t n = 1;
    for (const char *const *e = extra; e && *e && n < 15; e++)
        env[n++] = *e;
    env[n] = NULL;
    return leased_proc_start(NULL, env);
}

void vk_fill_call(lease_call_t *c, const char *principal, const char *rid, char dg,
                  int64_t deadline_ms)
{
    memset(c, 0, sizeof *c);
    snprintf(c->request_id, sizeof c->request_id, "%s", rid);
    memset(c->request_digest, dg, 64);
    c->request_digest[64] = '\0';
    c->deadline = lease_deadline_in(deadline_ms);
    snprintf(c->principal.principal_id, sizeof c->principal.principal_id, "%s", principal);
    snprintf(c->principal.client_id, sizeof c->principal.client_id, "client-1");
    snprintf(c->principal.credential_id, sizeof c->principal.credential_id, "key_1");
    snprintf(c->principal.principal_class, sizeof c->principal.principal_class, "worker");
}

http_resp_t *vk_post(const char *base, const char *path, const char *token, json_t *obj)
{
    char *body = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    http_resp_t *r = http_call(base, "POST", path, token, body);
    free(body);
    if (r == NULL)
        fail_msg("POST %s: no answer", path);
    return r;
}

http_resp_t *vk_post_within(const char *base, const char *path, const char *token, json_t *obj,
                            int deadline_ms)
{
    json_object_set_new(obj, "deadline_ms", json_integer(deadline_ms));
    return vk_post(base, path, token, obj);
}

/* what: the call, for the message */
static void expect_answer(const http_resp_t *r, long status, const char *code, const char *what)
{
    const char *got = http_resp_str(r, "code");
    if (r->status != status || !got || strcmp(got, code) != 0)
        fail_msg("%s: expected %ld %s, got %ld %s", what, status, code, r->status, r->body);
}

void vk_expect_code(const http_resp_t *r, long status, const char *code)
{
    expect_answer(r, status, code, "answer");
}

http_resp_t *vk_post_expect(const char *base, const char *path, const char *token, json_t *obj,
                            long status, const char *code)
{
    http_resp_t *r = vk_post(base, path, token, obj);
    expect_answer(r, status, code, path);
    return r;
}

json_t *vk_http_acquire(const char *rid, const char *target, const char *instance, int ttl_ms)
{
    return json_pack("{s:s, s:o, s:s, s:s, s:s, s:i}", "request_id", rid, "lock_identity",
                     vk_identity(target), "service_instance_id", instance, "execution_id", "exec_1",
                     "job_id", "job_1", "ttl_ms", ttl_ms);
}

json_t *vk_http_owner(const char *rid, const char *target, const http_resp_t *held,
                      const char *instance)
{
    return json_pack("{s:s, s:o, s:O, s:O, s:s}", "request_id", rid, "lock_identity",
                     vk_identity(target), "lease_id", http_resp_get(held, "lease.lease_id"),
                     "fencing_token", http_resp_get(held, "lease.fencing_token"),
                     "service_instance_id", instance);
}

long long vk_token_of(const http_resp_t *r)
{
    json_t *t = http_resp_get(r, "lease.fencing_token");
    if (!json_is_integer(t))
        fail_msg("no lease.fencing_token in %ld %s", r->status, r->body);
    return (long long)json_integer_value(t);
}

long long vk_metric(const char *base, const char *name)
{
    http_resp_t *r = http_call(base, "GET", "/metrics", NULL, NULL);
    assert_non_null(r);
    char needle[128];
    snprintf(needle, sizeof needle, "\n%s ", name);
    const char *m = strstr(r->body, needle);
    long long v = m ? atoll(m + strlen(needle)) : -1;
    http_resp_free(r);
    return v;
}

int vk_leasectl(const char *const *args, const char *const *env, char **out)
{
    char *argv[40];
    size_t n = 0;
    argv[n++] = strdup(LEASE_TEST_LEASECTL);
    for (const char *const *a = args; *a && n < 39; a++)
        argv[n++] = strdup(*a);
    argv[n] = NULL;
    child_daemon_t d;
    child_daemon_init(&d, "leasectl", "valkey-leasectl", "out");
    char **e = child_proc_env(env, NULL);
    child_daemon_spawn(&d, argv[0], argv, e);
    child_proc_env_free(e);
    int status = child_daemon_wait(&d, 30000);
    *out = child_proc_read_file(d.log_path);
    child_daemon_release(&d);
    for (size_t i = 0; i < n; i++)
        free(argv[i]);
    return status;
}

json_t *vk_printed(const char *out)
{
    for (const char *line = out; line && *line;) {
        if (*line == '{') {
            const char *nl = strchr(line, '\n');
            json_t *o = json_loadb(line, nl ? (size_t)(nl - line) : strlen(line), 0, NULL);
            if (o)
                return o;
        }
        line = strchr(line, '\n');
        if (line)
            line++;
    }
    return NULL;
}

int vk_audit_count(vk_server_t *s, const char *key, const char *field, const char *value,
                   const char *f2, const char *v2)
{
    redisReply *r = vk_audit(s, key, false);
    int n = 0;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *fields = r->element[i]->element[1];
        const char *v = vk_str(fields, field);
        const char *w = f2 ? vk_str(fields, f2) : NULL;
        if (v && strcmp(v, value) == 0 && (!f2 || (w && strcmp(w, v2) == 0)))
            n++;
    }
    freeReplyObject(r);
    return n;
}

int vk_fixture_library_bound(void **state)
{
    vk_server_t *s = calloc(1, sizeof *s);
    if (!s || !vk_start(s) || !vk_load_library(s))
        return -1;
    redisReply *r = vk_cmd(s, "FCALL leased_v1_bind 1 %s %s", VK_NS_KEY,
                           "{\"minimum_ttl_ms\":10,\"default_ttl_ms\":30000}");
    int ok = vk_int(r, "bound") == 1 && vk_int(r, "epoch") == 0;
    freeReplyObject(r);
    *state = s;
    return ok ? 0 : -1;
}

int vk_fixture_adapter_bound(void **state)
{
    vk_server_t *s = calloc(1, sizeof *s);
    if (!s || !vk_start(s))
        return -1;
    lease_valkey_t *v = vk_open_bound(s, "t");
    bool ok = v != NULL;
    lease_valkey_close(v);
    *state = s;
    return ok ? 0 : -1;
}

int vk_fixture_stop(void **state)
{
    vk_server_t *s = *state;
    vk_stop(s);
    free(s);
    return 0;
}

void vk_assert_code(const redisReply *r, const char *code)
{
    const char *got = vk_str(r, "code");
    if (got == NULL || strcmp(got, code) != 0)
        fail_msg("expected %s, got %s", code, got ? got : "(no code)");
}

static void *vk_watcher_main(void *arg)
{
    vk_watcher_t *w = arg;
    w->resp = http_call(w->base, "GET", w->path, w->token, NULL);
    return NULL;
}

void vk_watch_start(vk_watcher_t *w, const char *base, const char *token, const char *lease_id,
                    long wait_ms)
{
    memset(w, 0, sizeof *w);
    snprintf(w->base, sizeof w->base, "%s", base);
    snprintf(w->token, sizeof w->token, "%s", token);
    snprintf(w->path, sizeof w->path, "/v1/leases/%s/watch?wait_ms=%ld", lease_id, wait_ms);
    assert_int_equal(pthread_create(&w->thread, NULL, vk_watcher_main, w), 0);
}

char *vk_watch_state(vk_watcher_t *w)
{
    pthread_join(w->thread, NULL);
    assert_non_null(w->resp);
    vk_expect_code(w->resp, 200, "lease_inspected");
    char *state = strdup(json_string_value(http_resp_get(w->resp, "lease.state")));
    http_resp_free(w->resp);
    return state;
}

void vk_wait_metric(const char *base, const char *name, long long want)
{
    long long got = -1;
    for (int i = 0; i < 1000 && (got = vk_metric(base, name)) != want; i++)
        lease_sleep_ms(10);
    if (got != want)
        fail_msg("%s is %lld, not %lld", name, got, want);
}
