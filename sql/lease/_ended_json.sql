CREATE OR REPLACE FUNCTION lease._ended_json(l lease.locks, terminal_state text, ended_at timestamptz)
RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
RETURN jsonb_build_object(
    'acquired_at', lease._ts(l.acquired_at), 'renewed_at', lease._ts(l.renewed_at),
    'expires_at', lease._ts(l.expires_at), 'ended_at', lease._ts(ended_at), 'ttl_ms', l.ttl_ms,
    'maximum_lifetime_ms', l.maximum_lifetime_ms, 'owner_principal_id', l.owner_principal_id,
    'owner_client_id', l.owner_client_id, 'service_instance_id', l.service_instance_id,
    'execution_id', l.execution_id, 'job_id', l.job_id, 'trace_id', l.trace_id,
    'metadata', l.metadata, 'state', terminal_state);

COMMENT ON FUNCTION lease._ended_json(lease.locks,text,timestamp with time zone) IS
    'An ended lease (release, force-release, revoke): as a renewal, plus its terminal state and when it ended (the reason and incident are the request''s).';

REVOKE ALL ON FUNCTION lease._ended_json(lease.locks,text,timestamp with time zone) FROM PUBLIC;
