CREATE OR REPLACE FUNCTION lease.admin_force_release(lease_id text, reason text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    p jsonb := lease._admin_request(lease_id, reason, NULL, 'force_release');
BEGIN
    IF p ->> 'code' IS NOT NULL THEN
        RETURN p;
    END IF;
    RETURN lease.force_release(p);
END
$function$;

COMMENT ON FUNCTION lease.admin_force_release(text,text) IS
    'psql: force-release the lease active under lease_id as the session user, with the same checks, idempotency and high-priority audit as the service''s force_release (lease._admin_request builds the request).';

REVOKE ALL ON FUNCTION lease.admin_force_release(text,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.admin_force_release(text,text) TO lease_admin;
