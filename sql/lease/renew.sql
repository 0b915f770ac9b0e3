CREATE OR REPLACE FUNCTION lease.renew(p jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    s lease._settings;
BEGIN
    SELECT * INTO s FROM lease._settings;
    RETURN lease._renew_or_replay(p, false, s);
END
$function$;

COMMENT ON FUNCTION lease.renew(jsonb) IS
    'renew-if-owner (lease._renew decides), answered with the whole lease record: the exact identity, lease id, owner principal, service instance and token of the active, unexpired lease. renewed_at becomes backend time, expires_at min(now + ttl, acquired_at + lifetime); the token never changes. Every member of the request other than the documented ones ("brief" included) is ignored.';

REVOKE ALL ON FUNCTION lease.renew(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.renew(jsonb) TO lease_service;
