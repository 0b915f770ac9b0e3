CREATE OR REPLACE FUNCTION lease.admin_revoke(lease_id text, reason text, incident_id text DEFAULT NULL::text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    p jsonb := lease._admin_request(lease_id, reason, incident_id, 'revoke');
BEGIN
    IF p ->> 'code' IS NOT NULL THEN
        RETURN p;
    END IF;
    RETURN lease.revoke(p);
END
$function$;

COMMENT ON FUNCTION lease.admin_revoke(text,text,text) IS
    'psql: revoke the lease active under lease_id (with an optional incident id) as the session user, with the same checks, idempotency and high-priority audit as the service''s revoke.';

REVOKE ALL ON FUNCTION lease.admin_revoke(text,text,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.admin_revoke(text,text,text) TO lease_admin;
