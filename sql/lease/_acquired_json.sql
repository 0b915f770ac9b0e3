CREATE OR REPLACE FUNCTION lease._acquired_json(l lease.locks) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
RETURN jsonb_build_object(
    'lease_id', l.lease_id, 'fencing_token', l.fencing_token,
    'acquired_at', lease._ts(l.acquired_at), 'renewed_at', lease._ts(l.acquired_at),
    'expires_at', lease._ts(l.expires_at), 'ttl_ms', l.ttl_ms,
    'maximum_lifetime_ms', l.maximum_lifetime_ms, 'owner_client_id', l.owner_client_id,
    'owner_credential_id', l.owner_credential_id, 'state', 'active');

COMMENT ON FUNCTION lease._acquired_json(lease.locks) IS
    'An acquisition: the new lease''s id, token, times, TTLs and client.';

REVOKE ALL ON FUNCTION lease._acquired_json(lease.locks) FROM PUBLIC;
