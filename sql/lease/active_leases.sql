CREATE OR REPLACE VIEW lease.active_leases AS
SELECT l.lock_key, l.tenant_id, l.program_id, l.target_namespace, l.target_id, l.actor_name,
       l.workflow_name, l.operation_class, l.lease_id, l.fencing_token, l.owner_principal_id,
       l.owner_client_id, l.owner_credential_id, l.service_instance_id, l.acquired_at,
       l.renewed_at, e.ends_at AS expires_at,
       e.ends_at - now() AS remaining, l.ttl_ms,
       l.maximum_lifetime_ms, l.execution_id, l.job_id, l.trace_id, l.request_id, l.metadata,
       l.session_id
  FROM lease.locks l
       -- when the lease ends by time: lease._effective_expiry's rule, written
       -- out here because a view's readers (lease_operator) may not execute
       -- internal functions nor read lease.sessions (the view may)
       CROSS JOIN LATERAL (
           SELECT CASE WHEN l.session_id IS NULL THEN l.expires_at
                       ELSE least(l.expires_at, coalesce(
                           (SELECT CASE WHEN s.state = 'open' THEN s.expires_at ELSE s.closed_at END
                              FROM lease.sessions s WHERE s.session_id = l.session_id),
                           '-infinity')) END AS ends_at) e
 WHERE l.state = 'active' AND e.ends_at > now();

COMMENT ON VIEW lease.active_leases IS
    'Operators: every lease active at backend time (state active, expires_at in the future; for a lease in a session, expires_at is the earlier of its own and the session''s end), with its identity, owner and times. Read-only (lease_operator); no secret column.';
REVOKE ALL ON TABLE lease.active_leases FROM PUBLIC;
GRANT SELECT ON TABLE lease.active_leases TO lease_operator;
