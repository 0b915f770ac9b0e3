/*
 * race_sessions.h - session calls through the store for the session race
 * tests (tests/race/race_session_*.c; docs/sql-api.md, "Sessions"): open,
 * keep-alive and close as the service sends them, an acquire in a session,
 * and SQL probes of a session's row.
 */
#ifndef LEASE_RACE_SESSIONS_H
#define LEASE_RACE_SESSIONS_H

#include "race_util.h"

#define RACE_DIGEST "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static inline void race_session_req(lease_session_req_t *r, const char *request_id,
                                    const char *principal, const char *session_id, int64_t ttl_ms)
{
    memset(r, 0, sizeof *r);
    race_call(&r->call, request_id, principal, 10000);
    strcpy(r->call.request_digest, RACE_DIGEST);
    strcpy(r->tenant_id, "tenant-race");
    strcpy(r->service_instance_id, "inst-sess");
    if (session_id)
        snprintf(r->session_id, sizeof r->session_id, "%s", session_id);
    r->ttl_ms = ttl_ms;
}

/* Opens a session of principal (TTL ttl_ms) that must answer
 * lease_acquired; returns it. */
static inline lease_session_t race_session_open(lease_store_t *s, const char *principal,
                                                int64_t ttl_ms)
{
    char rid[128];
    race_rid(rid, sizeof rid, "sopen", 0, 0);
    lease_session_req_t req;
    race_session_req(&req, rid, principal, NULL, ttl_ms);
    lease_result_t res;
    CHECK(lease_store_session_open(s, &req, &res) == LEASE_ACQUIRED, "session open: %s",
          CODE(res.code));
    return res.session;
}

static inline lease_code_t race_session_keepalive(lease_store_t *s, const char *principal,
                                                  const char *session_id, lease_result_t *res)
{
    lease_session_req_t req;
    race_session_req(&req, "", principal, session_id, 0);
    return lease_store_session_keepalive(s, &req, res);
}

static inline lease_code_t race_session_close(lease_store_t *s, const char *principal,
                                              const char *session_id, lease_result_t *res)
{
    char rid[128];
    race_rid(rid, sizeof rid, "sclose", 0, 0);
    lease_session_req_t req;
    race_session_req(&req, rid, principal, session_id, 0);
    return lease_store_session_close(s, &req, res);
}

/* An acquire of id in session (as principal) that must answer
 * lease_acquired. */
static inline lease_record_t race_acquire_in_session(lease_store_t *s, const lease_identity_t *id,
                                                     const char *principal, const char *session_id)
{
    char rid[128];
    race_rid(rid, sizeof rid, "sacq", 0, 0);
    lease_acquire_req_t req;
    race_acquire_req(&req, id, rid, principal, "inst-sess", 30000, 10000);
    snprintf(req.session_id, sizeof req.session_id, "%s", session_id);
    lease_result_t res;
    CHECK(lease_store_acquire(s, &req, &res) == LEASE_ACQUIRED, "acquire in session: %s",
          CODE(res.code));
    return res.lease;
}

/* The identity as lease.fence_check takes it (a JSON literal, no quotes
 * to escape: the race identities are plain words). */
static inline void race_identity_json(const lease_identity_t *id, char *out, size_t n)
{
    snprintf(out, n,
             "{\"tenant_id\":\"%s\",\"program_id\":\"%s\",\"target_namespace\":\"%s\","
             "\"target_id\":\"%s\",\"actor_name\":\"%s\",\"workflow_name\":\"%s\"}",
             id->tenant_id, id->program_id, id->target_namespace, id->target_id, id->actor_name,
             id->workflow_name);
}

/* A value of the session's row by SQL (heap string, NULL for no row). */
static inline char *race_session_value(const char *db_url, const char *session_id, const char *expr)
{
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT %s FROM lease.sessions WHERE session_id = '%s'", expr,
             session_id);
    return testpg_query_value(db_url, sql);
}

#endif
