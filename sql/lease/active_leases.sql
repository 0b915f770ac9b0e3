CREATE OR REPLACE VIEW lease.active_leases AS
SELECT l.lock_key, l.tenant_id, l.program_id, l.target_namespace, l.target_id, l.actor_name,
       l.workflow_name, l.operation_class, l.lease_id, l.fencing_token, l.owner_principal_id,
       l.owner_client_id, l.owner_credential_id, l.service_instance_id, l.acquired_at,
       l.renewed_at, l.expires_at, l.expires_at - now() AS remaining, l.ttl_ms,
       l.maximum_lifetime_ms, l.execution_id, l.job_id, l.trace_id, l.request_id, l.metadata
  FROM lease.locks l
 WHERE l.state = 'active' AND l.expires_at > now();

COMMENT ON VIEW lease.active_leases IS
    'Operators: every lease active at backend time (state active, expires_at in the future), with its identity, owner and times. Read-only (lease_operator); no secret column.';
REVOKE ALL ON TABLE lease.active_leases FROM PUBLIC;
GRANT SELECT ON TABLE lease.active_leases TO lease_operator;
