CREATE OR REPLACE VIEW lease.lease_history AS
SELECT h.lease_id, h.lock_key, h.tenant_id, h.program_id, h.target_namespace, h.target_id,
       h.actor_name, h.workflow_name, h.operation_class, h.fencing_token,
       h.state::text AS state, h.acquired_at, h.renewed_at, h.expires_at, h.ended_at,
       h.ended_by_principal_id, h.ended_by_credential_id, h.end_reason, h.incident_id,
       h.owner_principal_id, h.owner_client_id, h.owner_credential_id, h.service_instance_id,
       h.ttl_ms, h.maximum_lifetime_ms, h.execution_id, h.job_id, h.trace_id, h.request_id
  FROM lease.history h
UNION ALL
SELECT l.lease_id, l.lock_key, l.tenant_id, l.program_id, l.target_namespace, l.target_id,
       l.actor_name, l.workflow_name, l.operation_class, l.fencing_token, 'expired',
       l.acquired_at, l.renewed_at, e.ends_at, e.ends_at, NULL, NULL, NULL, NULL,
       l.owner_principal_id, l.owner_client_id, l.owner_credential_id, l.service_instance_id,
       l.ttl_ms, l.maximum_lifetime_ms, l.execution_id, l.job_id, l.trace_id, l.request_id
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
 WHERE l.state = 'active' AND e.ends_at <= now();

COMMENT ON VIEW lease.lease_history IS
    'Operators: ended leases (expired, released, revoked) with their identity, owner, times and terminal state. Read-only (lease_operator).';
REVOKE ALL ON TABLE lease.lease_history FROM PUBLIC;
GRANT SELECT ON TABLE lease.lease_history TO lease_operator;
