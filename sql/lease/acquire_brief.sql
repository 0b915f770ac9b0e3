CREATE OR REPLACE FUNCTION lease.acquire_brief(p jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RETURN lease._acquire(p, true);
END
$function$;

COMMENT ON FUNCTION lease.acquire_brief(jsonb) IS
    'lease.acquire''s decision (lease._acquire, the same request and the same evidence), answered briefly: the new lease''s id, token, times, TTLs and client, not what the request named (the identity, owner, execution, job, trace, metadata). What the service calls: it completes the record from its request. A repeated request id gets the stored answer as it was first given.';

REVOKE ALL ON FUNCTION lease.acquire_brief(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.acquire_brief(jsonb) TO lease_service;
