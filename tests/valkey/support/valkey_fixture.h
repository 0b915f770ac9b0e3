/*
 * valkey_fixture.h - a throwaway redis-server per test
 * (tests/harness/valkeyserver) and raw FCALLs of the leased_v1 library,
 * for the Valkey backend's tests. Real server, real AOF, real restarts.
 */
#ifndef LEASE_VALKEY_FIXTURE_H
#define LEASE_VALKEY_FIXTURE_H

#include <hiredis/hiredis.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define VK_NS_KEY "lease:{t}:ns" /* the tests' namespace "t" */

typedef struct vk_server {
    char dir[256];   /* a temporary directory of the test's own */
    char state[300]; /* the harness's state file */
    int port;
    redisContext *c; /* NULL for a TLS server (hiredis 0.14 has no TLS) */
    char tls[300];   /* a TLS server's certificates (ca.crt, other-ca.crt,
                      * client.crt/.key; the server's name is localhost) */
} vk_server_t;

/* Starts a server and connects; false (with a message) on failure. */
bool vk_start(vk_server_t *s);
/* Starts a server that speaks TLS only (tests/harness/valkeyserver
 * start-tls), tls-auth-clients auth_clients ("no", "yes", "optional"); no
 * connection of the fixture's (s->c NULL). */
bool vk_start_tls(vk_server_t *s, const char *auth_clients);
/* Starts a server as a replica of primary and waits until it is in sync. */
bool vk_start_replica(vk_server_t *s, const vk_server_t *primary);
/* kill -9 and start again (from_copy: from that copy of the AOF, or NULL). */
bool vk_restart(vk_server_t *s, const char *from_copy);
/* Copies the AOF directory to <dir>/<name>; returns that path (static). */
const char *vk_copy_aof(vk_server_t *s, const char *name);
void vk_stop(vk_server_t *s);
/* The server's pid (to freeze it with SIGSTOP), or -1. */
int vk_pid(vk_server_t *s);

/* A command; the reply (never NULL: aborts the test on a lost connection). */
redisReply *vk_cmd(vk_server_t *s, const char *fmt, ...);
/* The audit Stream at key as XRANGE answers it (newest_only: its last
 * entry, as XREVRANGE + - COUNT 1), each entry's fields as name/value
 * pairs whether stored packed or not (TEST_STORE_AUDIT_FIELDS_LUA). */
redisReply *vk_audit(vk_server_t *s, const char *key, bool newest_only);
/* FUNCTION LOAD REPLACE of this build's library. */
bool vk_load_library(vk_server_t *s);
/* FCALL leased_v1_<fn> 1 VK_NS_KEY <json text of req> (req is consumed). */
redisReply *vk_fcall(vk_server_t *s, const char *fn, json_t *req);

/* A name/value answer's members. */
const char *vk_str(const redisReply *pairs, const char *name); /* NULL: absent/null */
long long vk_int(const redisReply *pairs, const char *name);   /* -1: absent */
const redisReply *vk_lease(const redisReply *pairs);           /* the "lease" pairs */

/* Requests: the call members every operation shares (deadline 10 s ahead,
 * principal p, request id rid, a digest of 64 copies of digest_char). */
json_t *vk_call(const char *principal, const char *rid, char digest_char);
/* The test identity with target_id target. */
json_t *vk_identity(const char *target);
json_t *vk_acquire_req(const char *principal, const char *rid, char digest_char, const char *target,
                       const char *instance, int64_t ttl_ms);
json_t *vk_owner_req(const char *principal, const char *rid, char digest_char, const char *target,
                     const char *lease_id, long long token, const char *instance);

#endif
