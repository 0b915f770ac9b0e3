CREATE OR REPLACE FUNCTION lease.renew_brief(p jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    s lease._settings;
BEGIN
    SELECT * INTO s FROM lease._settings;
    RETURN lease._renew_or_replay(p, true, s);
END
$function$;

COMMENT ON FUNCTION lease.renew_brief(jsonb) IS
    'lease.renew''s decision (lease._renew, the same request and the same evidence), answered briefly: the lease''s times and TTLs and what the renewing request did not name, without the identity, lease id and token the request named. What the service calls. A repeated request id gets the stored answer as it was first given.';

REVOKE ALL ON FUNCTION lease.renew_brief(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.renew_brief(jsonb) TO lease_service;
