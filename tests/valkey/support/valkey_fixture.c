/*
 * valkey_fixture.c - see valkey_fixture.h.
 */
#include "valkey_fixture.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "test_store.h"
#include "valkey_library.h"

static bool harness(const char *cmd, const char *state, const char *extra)
{
    char line[1024];
    snprintf(line, sizeof line, "'%s' %s '%s' %s%s%s", LEASE_TEST_VALKEYSERVER, cmd, state,
             extra ? "'" : "", extra ? extra : "", extra ? "'" : "");
    int rc = system(line);
    if (rc != 0)
        fprintf(stderr, "valkey fixture: `%s` failed (%d)\n", line, rc);
    return rc == 0;
}

static bool connect_to(vk_server_t *s)
{
    FILE *f = fopen(s->state, "r");
    if (f == NULL)
        return false;
    char line[512];
    s->port = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "port=", 5) == 0)
            s->port = atoi(line + 5);
        if (strncmp(line, "tls=", 4) == 0)
            snprintf(s->tls, sizeof s->tls, "%.*s", (int)sizeof s->tls - 1, line + 4);
    }
    fclose(f);
    if (s->tls[0])
        return s->port > 0; /* the fixture's hiredis speaks no TLS */
    if (s->c)
        redisFree(s->c);
    struct timeval tv = {5, 0};
    s->c = redisConnectWithTimeout("127.0.0.1", s->port, tv);
    if (s->c == NULL || s->c->err) {
        fprintf(stderr, "valkey fixture: cannot connect to port %d\n", s->port);
        return false;
    }
    redisSetTimeout(s->c, tv);
    return true;
}

/* harness command cmd (start, start-tls) with its extra argument. */
static bool start_as(vk_server_t *s, const char *cmd, const char *extra)
{
    memset(s, 0, sizeof *s);
    const char *tmp = getenv("TMPDIR");
    snprintf(s->dir, sizeof s->dir, "%s/lease-vktest.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(s->dir) == NULL)
        return false;
    snprintf(s->state, sizeof s->state, "%s/state", s->dir);
    return harness(cmd, s->state, extra) && connect_to(s);
}

bool vk_start(vk_server_t *s)
{
    return start_as(s, "start", NULL);
}

bool vk_start_tls(vk_server_t *s, const char *auth_clients)
{
    return start_as(s, "start-tls", auth_clients);
}

bool vk_start_replica(vk_server_t *s, const vk_server_t *primary)
{
    char port[16];
    snprintf(port, sizeof port, "%d", primary->port);
    if (!start_as(s, "start", port))
        return false;
    for (int i = 0; i < 200; i++) {
        redisReply *r = vk_cmd(s, "INFO replication");
        bool up = r->type == REDIS_REPLY_STRING && strstr(r->str, "master_link_status:up");
        freeReplyObject(r);
        if (up)
            return true;
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "valkey fixture: the replica did not sync\n");
    return false;
}

bool vk_restart(vk_server_t *s, const char *from_copy)
{
    return harness("restart", s->state, from_copy) && connect_to(s);
}

const char *vk_copy_aof(vk_server_t *s, const char *name)
{
    static char path[400];
    snprintf(path, sizeof path, "%s/%s", s->dir, name);
    return harness("copy-aof", s->state, path) ? path : NULL;
}

void vk_stop(vk_server_t *s)
{
    if (s->c)
        redisFree(s->c);
    s->c = NULL;
    harness("stop", s->state, NULL);
    char line[400];
    snprintf(line, sizeof line, "rm -rf '%s'", s->dir);
    if (system(line) != 0)
        fprintf(stderr, "valkey fixture: could not remove %s\n", s->dir);
}

int vk_pid(vk_server_t *s)
{
    redisReply *r = vk_cmd(s, "INFO server");
    const char *p = r->type == REDIS_REPLY_STRING ? strstr(r->str, "process_id:") : NULL;
    int pid = p ? atoi(p + strlen("process_id:")) : -1;
    freeReplyObject(r);
    return pid;
}

redisReply *vk_audit(vk_server_t *s, const char *key, bool newest_only)
{
    static const char lua[] = TEST_STORE_AUDIT_FIELDS_LUA
        "local r "
        "if ARGV[1] == '1' then r = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1) "
        "else r = redis.call('XRANGE', KEYS[1], '-', '+') end "
        "for _, e in ipairs(r) do e[2] = audit_fields(e) end "
        "return r";
    return vk_cmd(s, "EVAL %s 1 %s %s", lua, key, newest_only ? "1" : "0");
}

redisReply *vk_cmd(vk_server_t *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(s->c, fmt, ap);
    va_end(ap);
    if (r == NULL) {
        fprintf(stderr, "valkey fixture: connection lost: %s\n", s->c->errstr);
        abort();
    }
    return r;
}

bool vk_load_library(vk_server_t *s)
{
    redisReply *r = vk_cmd(s, "FUNCTION LOAD REPLACE %s", (const char *)lease_valkey_library);
    bool ok = r->type == REDIS_REPLY_STRING && strcmp(r->str, "leased_v1") == 0;
    if (!ok)
        fprintf(stderr, "valkey fixture: FUNCTION LOAD: %s\n",
                r->type == REDIS_REPLY_ERROR ? r->str : "unexpected answer");
    freeReplyObject(r);
    return ok;
}

redisReply *vk_fcall(vk_server_t *s, const char *fn, json_t *req)
{
    char *text = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    char name[64];
    snprintf(name, sizeof name, "leased_v1_%s", fn);
    redisReply *r = vk_cmd(s, "FCALL %s 1 %s %s", name, VK_NS_KEY, text);
    free(text);
    return r;
}

static const redisReply *field(const redisReply *pairs, const char *name)
{
    if (pairs == NULL || pairs->type != REDIS_REPLY_ARRAY)
        return NULL;
    for (size_t i = 0; i + 1 < pairs->elements; i += 2)
        if (pairs->element[i]->type == REDIS_REPLY_STRING &&
            strcmp(pairs->element[i]->str, name) == 0)
            return pairs->element[i + 1];
    return NULL;
}

const char *vk_str(const redisReply *pairs, const char *name)
{
    const redisReply *v = field(pairs, name);
    return v && v->type == REDIS_REPLY_STRING ? v->str : NULL;
}

long long vk_int(const redisReply *pairs, const char *name)
{
    const redisReply *v = field(pairs, name);
    return v && v->type == REDIS_REPLY_INTEGER ? v->integer : -1;
}

const redisReply *vk_lease(const redisReply *pairs)
{
    return field(pairs, "lease");
}

json_t *vk_call(const char *principal, const char *rid, char digest_char)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    long long now_ms = (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
    char digest[65];
    memset(digest, digest_char, 64);
    digest[64] = '\0';
    return json_pack("{s:I, s:{s:s, s:s, s:s, s:s}, s:s, s:s}", "deadline_at_ms",
                     (json_int_t)(now_ms + 10000), "principal", "principal_id", principal,
                     "client_id", "client-1", "credential_id", "key_1", "principal_class", "worker",
                     "request_id", rid, "request_digest", digest);
}

json_t *vk_identity(const char *target)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "tenant_id", "tenant-main", "program_id",
                     "program-a", "target_namespace", "starintel-target", "target_id", target,
                     "actor_name", "usernamegen", "workflow_name", "default");
}

json_t *vk_acquire_req(const char *principal, const char *rid, char digest_char, const char *target,
                       const char *instance, int64_t ttl_ms)
{
    json_t *o = vk_call(principal, rid, digest_char);
    json_object_set_new(o, "lock_identity", vk_identity(target));
    json_object_set_new(o, "service_instance_id", json_string(instance));
    json_object_set_new(o, "execution_id", json_string("exec-1"));
    json_object_set_new(o, "job_id", json_string("job-1"));
    if (ttl_ms > 0)
        json_object_set_new(o, "ttl_ms", json_integer(ttl_ms));
    return o;
}

json_t *vk_owner_req(const char *principal, const char *rid, char digest_char, const char *target,
                     const char *lease_id, long long token, const char *instance)
{
    json_t *o = vk_call(principal, rid, digest_char);
    json_object_set_new(o, "lock_identity", vk_identity(target));
    json_object_set_new(o, "lease_id", json_string(lease_id));
    json_object_set_new(o, "fencing_token", json_integer(token));
    json_object_set_new(o, "service_instance_id", json_string(instance));
    return o;
}
