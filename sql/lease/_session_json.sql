CREATE OR REPLACE FUNCTION lease._session_json(s lease.sessions) RETURNS jsonb
LANGUAGE sql STABLE
RETURN jsonb_build_object(
    'session_id', s.session_id, 'tenant_id', s.tenant_id, 'owner_principal_id', s.principal_id,
    'owner_credential_id', s.credential_id, 'service_instance_id', s.service_instance_id,
    'ttl_ms', s.ttl_ms, 'created_at', lease._ts(s.created_at),
    'renewed_at', lease._ts(s.renewed_at),
    'expires_at', lease._ts(CASE WHEN s.state = 'open' THEN s.expires_at ELSE s.closed_at END),
    'state', CASE WHEN s.state <> 'open' THEN s.state
                  WHEN s.expires_at > now() THEN 'open' ELSE 'expired' END);

COMMENT ON FUNCTION lease._session_json(lease.sessions) IS
    'A session as the session functions answer it: ids, owner, TTL, backend times, and its state at backend time (open, expired: open but past expires_at, or closed; expires_at is the close time once closed).';

REVOKE ALL ON FUNCTION lease._session_json(lease.sessions) FROM PUBLIC;
