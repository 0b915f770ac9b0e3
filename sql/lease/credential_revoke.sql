CREATE OR REPLACE FUNCTION lease.credential_revoke(credential_id text)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    c lease.credentials;
BEGIN
    PERFORM lease._require_serializable();
    UPDATE lease.credentials x SET revoked_at = lease._now()
     WHERE x.credential_id = credential_revoke.credential_id AND x.revoked_at IS NULL
    RETURNING * INTO c;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM lease._audit(jsonb_build_object('principal', lease._sql_principal()),
                         'credential_revoke', 'credential_revoked',
                         jsonb_build_object('reason', 'credential ' || c.credential_id,
                                            'priority', 'high'));
    RETURN true;
END
$function$;

COMMENT ON FUNCTION lease.credential_revoke(text) IS
    'Administrators: revokes a credential at backend time (once; false when unknown or already revoked), audited in the same transaction.';

REVOKE ALL ON FUNCTION lease.credential_revoke(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.credential_revoke(text) TO lease_admin;
