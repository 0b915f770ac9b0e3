CREATE OR REPLACE FUNCTION lease._lease_json(l lease.locks) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
RETURN jsonb_build_object(
    'lock_identity', lease._identity_json(l.tenant_id, l.program_id, l.target_namespace,
                                          l.target_id, l.actor_name, l.workflow_name,
                                          l.operation_class),
    'lease_id', l.lease_id, 'fencing_token', l.fencing_token,
    'state', CASE WHEN lease._effective_expiry(l.session_id, l.expires_at) > now() THEN 'active' ELSE 'expired' END,
    'acquired_at', lease._ts(l.acquired_at), 'renewed_at', lease._ts(l.renewed_at),
    'expires_at', lease._ts(lease._effective_expiry(l.session_id, l.expires_at)), 'ended_at', NULL,
    'ttl_ms', l.ttl_ms, 'maximum_lifetime_ms', l.maximum_lifetime_ms,
    'owner_principal_id', l.owner_principal_id, 'owner_client_id', l.owner_client_id,
    'owner_credential_id', l.owner_credential_id, 'service_instance_id', l.service_instance_id,
    'execution_id', l.execution_id, 'job_id', l.job_id, 'trace_id', l.trace_id,
    'request_id', l.request_id, 'metadata', l.metadata,
    'end_reason', NULL, 'incident_id', NULL);

COMMENT ON FUNCTION lease._lease_json(lease.locks) IS
    'The wire form of a live lease row, with the state it has at backend time.';

REVOKE ALL ON FUNCTION lease._lease_json(lease.locks) FROM PUBLIC;
