CREATE OR REPLACE FUNCTION lease._history_json(h lease.history) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
RETURN jsonb_build_object(
    'lock_identity', lease._identity_json(h.tenant_id, h.program_id, h.target_namespace,
                                          h.target_id, h.actor_name, h.workflow_name,
                                          h.operation_class),
    'lease_id', h.lease_id, 'fencing_token', h.fencing_token, 'state', h.state,
    'acquired_at', lease._ts(h.acquired_at), 'renewed_at', lease._ts(h.renewed_at),
    'expires_at', lease._ts(h.expires_at), 'ended_at', lease._ts(h.ended_at),
    'ttl_ms', h.ttl_ms, 'maximum_lifetime_ms', h.maximum_lifetime_ms,
    'owner_principal_id', h.owner_principal_id, 'owner_client_id', h.owner_client_id,
    'owner_credential_id', h.owner_credential_id, 'service_instance_id', h.service_instance_id,
    'execution_id', h.execution_id, 'job_id', h.job_id, 'trace_id', h.trace_id,
    'request_id', h.request_id, 'metadata', h.metadata,
    'end_reason', h.end_reason, 'incident_id', h.incident_id);

COMMENT ON FUNCTION lease._history_json(lease.history) IS
    'The wire form of a history row (an ended lease), as inspect answers for a lease id no longer active.';

REVOKE ALL ON FUNCTION lease._history_json(lease.history) FROM PUBLIC;
