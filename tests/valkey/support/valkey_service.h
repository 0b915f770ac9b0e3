/*
 * valkey_service.h - what the Valkey tests that run the real binaries
 * share: the adapter opened (and the namespace bound) on a test's server,
 * worker credentials made through it, HTTP calls to leased with their
 * expected answers, leasectl runs and what they print, the audit Stream
 * counted. Written once here so that every test asks the same questions the
 * same way (tests/valkey/support/valkey_fixture.h starts the servers).
 * Failures fail the calling cmocka test.
 */
#ifndef LEASE_VALKEY_SERVICE_H
#define LEASE_VALKEY_SERVICE_H

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>

#include "http_client.h"
#include "leased_proc.h"
#include "lease/store_valkey.h"
#include "lease/token.h"
#include "valkey_fixture.h"

/* The tenant and program of every test credential and identity. */
#define VK_TENANT "tenant-main"
#define VK_PROGRAM "program-a"

/* cmocka fixtures: a server of its own (a vk_server_t in *state) with the
 * function library loaded and namespace VK_NS_KEY bound at epoch 0
 * (minimum_ttl_ms 10, so tests can wait out short TTLs); and its stop. */
int vk_fixture_library_bound(void **state);
/* A server of its own with namespace "t" bound through the adapter
 * (vk_open_bound: the adapter's bind, its defaults), for the race tests. */
int vk_fixture_adapter_bound(void **state);
int vk_fixture_stop(void **state);
/* r's "code" is code, or the test fails naming both. */
void vk_assert_code(const redisReply *r, const char *code);

/* The adapter (one connection) on s's namespace ns; NULL with the reason on
 * stderr when it cannot open. */
lease_valkey_t *vk_open(const vk_server_t *s, const char *ns);
/* The adapter opened with cfg (its host, port and namespace the caller's);
 * NULL, the reason on stderr, when it cannot be. */
lease_valkey_t *vk_open_config(const lease_valkey_config_t *cfg);
/* The race tests' acquire: target_id target in the fixed test identity,
 * the owner's instance, execution and job ids (the call is the caller's). */
void vk_fill_race_acquire(lease_acquire_req_t *r, const char *target);
/* vk_open, then the namespace bound at epoch 0; NULL (and the adapter
 * closed) with the reason on stderr when either fails. */
lease_valkey_t *vk_open_bound(const vk_server_t *s, const char *ns);

/* A worker credential of principal on VK_TENANT/VK_PROGRAM, every actor,
 * targets:lease and targets:read, created through the adapter (only its
 * digest is stored). Its bearer token (heap); id_out (may be NULL) its id. */
char *vk_make_credential(lease_valkey_t *v, const char *principal,
                         char id_out[LEASE_CREDENTIAL_ID_LEN + 1]);

/* vk_open_bound on the namespace "leased" (leased's default), then
 * vk_make_credential of principal; its token (heap). Binding again is a
 * no-op, so a test calls it once per worker it needs. */
char *vk_worker(const vk_server_t *s, const char *principal);

/* leased started on s (LEASE_STORE_URL=redis://127.0.0.1:PORT, namespace
 * "leased") with extra "NAME=value" settings (NULL-terminated, or NULL),
 * once /readyz answers 200. */
leased_proc_t *vk_leased_start(const vk_server_t *s, const char *const *extra);

/* A store call's members: request id rid, a digest of 64 copies of dg, a
 * deadline deadline_ms ahead, principal (client-1, key_1, worker). */
void vk_fill_call(lease_call_t *c, const char *principal, const char *rid, char dg,
                  int64_t deadline_ms);

/* POSTs obj (consumed) to base + path with token; the answer (never NULL:
 * a transport failure fails the test). */
http_resp_t *vk_post(const char *base, const char *path, const char *token, json_t *obj);
/* vk_post with "deadline_ms" set in obj. */
http_resp_t *vk_post_within(const char *base, const char *path, const char *token, json_t *obj,
                            int deadline_ms);
/* Fails the test unless r has this status and code. */
void vk_expect_code(const http_resp_t *r, long status, const char *code);
/* vk_post, then vk_expect_code. */
http_resp_t *vk_post_expect(const char *base, const char *path, const char *token, json_t *obj,
                            long status, const char *code);

/* The body of POST /v1/leases/acquire of target (vk_identity). */
json_t *vk_http_acquire(const char *rid, const char *target, const char *instance, int ttl_ms);
/* The body of a renew or release of the lease held (an acquire's answer). */
json_t *vk_http_owner(const char *rid, const char *target, const http_resp_t *held,
                      const char *instance);
/* The fencing token of an answer's lease (fails the test when absent). */
long long vk_token_of(const http_resp_t *r);
/* A counter or gauge of leased's /metrics, or -1 when absent. */
long long vk_metric(const char *base, const char *name);

/* Runs the real leasectl with args (NULL-terminated, without argv[0]) and
 * extra "NAME=value" environment (or NULL); its exit status; *out what it
 * wrote to stdout and stderr (heap). */
int vk_leasectl(const char *const *args, const char *const *env, char **out);
/* The JSON object leasectl printed (its first line starting with '{' that
 * parses), or NULL. */
json_t *vk_printed(const char *out);

/* The entries of the audit Stream key with field = value (and, when f2 is
 * not NULL, f2 = v2). */
int vk_audit_count(vk_server_t *s, const char *key, const char *field, const char *value,
                   const char *f2, const char *v2);

/* A watch over HTTP on a thread of its own: vk_watch_start sends
 * GET /v1/leases/{lease_id}/watch?wait_ms=WAIT_MS as token; vk_watch_state
 * joins it, checks it answered 200 lease_inspected and returns the lease's
 * state in it (the caller frees it). */
typedef struct vk_watcher {
    char base[64], token[256], path[256];
    http_resp_t *resp;
    pthread_t thread;
} vk_watcher_t;
void vk_watch_start(vk_watcher_t *w, const char *base, const char *token, const char *lease_id,
                    long wait_ms);
char *vk_watch_state(vk_watcher_t *w);

/* Waits (at most 10 s) until leased's gauge name is want; fails otherwise. */
void vk_wait_metric(const char *base, const char *name, long long want);

#endif
