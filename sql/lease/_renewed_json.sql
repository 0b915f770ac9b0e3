CREATE OR REPLACE FUNCTION lease._renewed_json(l lease.locks) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
RETURN jsonb_build_object(
    'acquired_at', lease._ts(l.acquired_at), 'renewed_at', lease._ts(l.renewed_at),
    'expires_at', lease._ts(lease._effective_expiry(l.session_id, l.expires_at)), 'ttl_ms', l.ttl_ms,
    'maximum_lifetime_ms', l.maximum_lifetime_ms, 'owner_principal_id', l.owner_principal_id,
    'owner_client_id', l.owner_client_id, 'service_instance_id', l.service_instance_id,
    'execution_id', l.execution_id, 'job_id', l.job_id, 'trace_id', l.trace_id,
    'metadata', l.metadata, 'state', 'active');

COMMENT ON FUNCTION lease._renewed_json(lease.locks) IS
    'A renewal: the lease''s times and TTLs, and what the renewing request did not name (execution, job, trace, metadata, owner).';

REVOKE ALL ON FUNCTION lease._renewed_json(lease.locks) FROM PUBLIC;
