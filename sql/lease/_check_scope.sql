CREATE OR REPLACE FUNCTION lease._check_scope(scope jsonb)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF jsonb_typeof(scope) IS DISTINCT FROM 'object'
       OR jsonb_typeof(scope -> 'tenant_id') IS DISTINCT FROM 'string'
       OR jsonb_typeof(scope -> 'program_id') IS DISTINCT FROM 'string'
       OR jsonb_typeof(scope -> 'actor_names') IS DISTINCT FROM 'array' THEN
        PERFORM lease._malformed('scope missing');
    END IF;
END
$function$;

COMMENT ON FUNCTION lease._check_scope(jsonb) IS
    'Refuses (LS003, a call the service never sends) a list request whose scope is not {tenant_id, program_id, actor_names}: without a scope a list could read outside the caller''s tenant.';

REVOKE ALL ON FUNCTION lease._check_scope(jsonb) FROM PUBLIC;
