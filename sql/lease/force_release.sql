CREATE OR REPLACE FUNCTION lease.force_release(p jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RETURN lease._end(p, 'force_release', 'released', 'lease_released', false, true);
END
$function$;

COMMENT ON FUNCTION lease.force_release(jsonb) IS
    'The service''s administrative release: ends the observed lease (id and token, never an unseen successor) as released, with a high-priority audit event in the same transaction (lease._end).';

REVOKE ALL ON FUNCTION lease.force_release(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.force_release(jsonb) TO lease_service;
