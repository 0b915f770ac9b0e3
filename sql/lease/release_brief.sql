CREATE OR REPLACE FUNCTION lease.release_brief(p jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RETURN lease._end_or_replay(p, 'release', 'released', 'lease_released', true);
END
$function$;

COMMENT ON FUNCTION lease.release_brief(jsonb) IS
    'lease.release''s decision (lease._end, the same request and the same evidence), answered briefly: the ended lease''s times, TTLs, owner and state, without the identity, lease id and token the request named. What the service calls. A repeated request id gets the stored answer as it was first given.';

REVOKE ALL ON FUNCTION lease.release_brief(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.release_brief(jsonb) TO lease_service;
