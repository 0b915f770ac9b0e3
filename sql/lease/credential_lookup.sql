CREATE OR REPLACE FUNCTION lease.credential_lookup(credential_id text)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    c lease.credentials;
BEGIN
    PERFORM lease._require_serializable();
    SELECT * INTO c FROM lease.credentials x WHERE x.credential_id = credential_lookup.credential_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN lease._credential_json(c, true)
        || jsonb_build_object('revoked', c.revoked_at IS NOT NULL,
                              'expires_in_ms', lease._credential_expires_in_ms(c.expires_at));
END
$function$;

COMMENT ON FUNCTION lease.credential_lookup(text) IS
    'The service''s authentication lookup by secret digest: the credential with "revoked" and "expires_in_ms" at backend time; the service decides from these, not from rendered timestamps or its own clock.';

REVOKE ALL ON FUNCTION lease.credential_lookup(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.credential_lookup(text) TO lease_service;
