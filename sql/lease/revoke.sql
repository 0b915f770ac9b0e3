CREATE OR REPLACE FUNCTION lease.revoke(p jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RETURN lease._end(p, 'revoke', 'revoked', 'lease_revoked', false, true);
END
$function$;

COMMENT ON FUNCTION lease.revoke(jsonb) IS
    'The service''s administrative revoke: ends the observed lease (id and token, never an unseen successor) as revoked, with the incident id and a high-priority audit event in the same transaction (lease._end).';

REVOKE ALL ON FUNCTION lease.revoke(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.revoke(jsonb) TO lease_service;
