CREATE OR REPLACE FUNCTION lease._credential_json(c lease.credentials, with_digest boolean) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
RETURN jsonb_build_object('credential_id', c.credential_id, 'principal_id', c.principal_id,
    'client_id', c.client_id, 'tenant_id', c.tenant_id, 'program_id', c.program_id,
    'actor_names', to_jsonb(c.actor_names), 'capabilities', to_jsonb(c.capabilities),
    'admin', c.admin, 'description', c.description,
    'created_at', lease._ts(c.created_at), 'expires_at', lease._ts(c.expires_at),
    'revoked_at', lease._ts(c.revoked_at))
    || CASE WHEN with_digest
            THEN jsonb_build_object('secret_digest', encode(c.secret_digest, 'hex'))
            ELSE '{}'::jsonb END;

COMMENT ON FUNCTION lease._credential_json(lease.credentials,boolean) IS
    'The wire form of a credential; the secret''s digest only for the service''s lookup (with_digest), never in listings.';

REVOKE ALL ON FUNCTION lease._credential_json(lease.credentials,boolean) FROM PUBLIC;
