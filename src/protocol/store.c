/*
 * store.c - dispatch of the backend-neutral store protocol to its adapter.
 */
#include "lease/store.h"

#include <stdio.h>
#include <string.h>

/* A session on a backend that keeps none: refused as the caller's request,
 * before the backend sees it, so that no lease is held outside the
 * session it names. */
static lease_code_t sessions_refused(lease_result_t *res)
{
    memset(res, 0, sizeof *res);
    res->code = LEASE_INVALID_LEASE_REQUEST;
    snprintf(res->field, sizeof res->field, "session_id");
    snprintf(res->detail, sizeof res->detail, "sessions need the PostgreSQL backend");
    return res->code;
}

lease_code_t lease_store_acquire(lease_store_t *s, const lease_acquire_req_t *req,
                                 lease_result_t *res)
{
    if (req->session_id[0] && !s->ops->session_open)
        return sessions_refused(res);
    return s->ops->acquire(s, req, res);
}

lease_code_t lease_store_session_open(lease_store_t *s, const lease_session_req_t *req,
                                      lease_result_t *res)
{
    return s->ops->session_open ? s->ops->session_open(s, req, res) : sessions_refused(res);
}

lease_code_t lease_store_session_keepalive(lease_store_t *s, const lease_session_req_t *req,
                                           lease_result_t *res)
{
    return s->ops->session_keepalive ? s->ops->session_keepalive(s, req, res)
                                     : sessions_refused(res);
}

lease_code_t lease_store_session_close(lease_store_t *s, const lease_session_req_t *req,
                                       lease_result_t *res)
{
    return s->ops->session_close ? s->ops->session_close(s, req, res) : sessions_refused(res);
}

lease_code_t lease_store_renew(lease_store_t *s, const lease_owner_req_t *req, lease_result_t *res)
{
    return s->ops->renew(s, req, res);
}

lease_code_t lease_store_renew_many(lease_store_t *s, const lease_owner_req_t *reqs, size_t n,
                                   const lease_deadline_t *deadline, lease_result_t *results)
{
    return s->ops->renew_many(s, reqs, n, deadline, results);
}

lease_code_t lease_store_release_many(lease_store_t *s, const lease_owner_req_t *reqs, size_t n,
                                     const lease_deadline_t *deadline, lease_result_t *results)
{
    return s->ops->release_many(s, reqs, n, deadline, results);
}

lease_code_t lease_store_release(lease_store_t *s, const lease_owner_req_t *req,
                                 lease_result_t *res)
{
    return s->ops->release(s, req, res);
}

lease_code_t lease_store_force_release(lease_store_t *s, const lease_admin_req_t *req,
                                       lease_result_t *res)
{
    return s->ops->force_release(s, req, res);
}

lease_code_t lease_store_revoke(lease_store_t *s, const lease_admin_req_t *req, lease_result_t *res)
{
    return s->ops->revoke(s, req, res);
}

lease_code_t lease_store_inspect(lease_store_t *s, const lease_inspect_req_t *req,
                                 lease_result_t *res)
{
    return s->ops->inspect(s, req, res);
}

lease_code_t lease_store_list(lease_store_t *s, const lease_list_req_t *req,
                              lease_list_result_t *res)
{
    return s->ops->list(s, req, res);
}

lease_code_t lease_store_fenced_commit(lease_store_t *s, const lease_commit_req_t *req,
                                       lease_commit_result_t *res)
{
    return s->ops->fenced_commit(s, req, res);
}

lease_code_t lease_store_sweep(lease_store_t *s, int batch, const lease_deadline_t *deadline,
                               lease_sweep_result_t *res)
{
    return s->ops->sweep(s, batch, deadline, res);
}

lease_code_t lease_store_housekeep(lease_store_t *s, lease_housekeeping_step_t step, int batch,
                                   int64_t grace_ms, const lease_deadline_t *deadline,
                                   lease_housekeeping_result_t *res)
{
    return s->ops->housekeep(s, step, batch, grace_ms, deadline, res);
}

lease_code_t lease_store_record_audit(lease_store_t *s, const lease_audit_event_t *events,
                                      size_t n, const lease_deadline_t *deadline)
{
    return s->ops->record_audit(s, events, n, deadline);
}

lease_code_t lease_store_credential_lookup(lease_store_t *s, const char *credential_id,
                                           const lease_deadline_t *deadline,
                                           lease_credential_t *out, bool *found)
{
    return s->ops->credential_lookup(s, credential_id, deadline, out, found);
}

lease_code_t lease_store_health(lease_store_t *s, const lease_deadline_t *deadline,
                                lease_health_t *out)
{
    return s->ops->health(s, deadline, out);
}

void lease_store_stats(lease_store_t *s, lease_store_stats_t *out)
{
    s->ops->stats(s, out);
}

void lease_store_close(lease_store_t *s)
{
    if (s)
        s->ops->close(s);
}
