CREATE OR REPLACE FUNCTION lease.release(p jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RETURN lease._end(p, 'release', 'released', 'lease_released', false, true);
END
$function$;

COMMENT ON FUNCTION lease.release(jsonb) IS
    'release-if-owner: compare-and-delete on the exact ownership tuple (identity, lease id, owner principal, service instance, token) of the active, unexpired lease, with its terminal evidence in the same transaction (lease._end), answered with the whole history record (the service''s lease.release_brief_typed answers briefly; a "brief" member of the request is ignored). PL/pgSQL, not SQL: a SECURITY DEFINER SQL function is never inlined and would be planned again on every call.';

REVOKE ALL ON FUNCTION lease.release(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.release(jsonb) TO lease_service;
