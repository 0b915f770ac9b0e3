CREATE OR REPLACE FUNCTION lease.release_many_brief(p jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RETURN lease._release_many(p, true);
END
$function$;

COMMENT ON FUNCTION lease.release_many_brief(jsonb) IS
    'lease.release_many''s decisions (lease._release_many: the same items, the same evidence), each answered briefly as lease.release_brief answers. The service calls its typed form, lease.release_many_brief_typed.';

REVOKE ALL ON FUNCTION lease.release_many_brief(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.release_many_brief(jsonb) TO lease_service;
