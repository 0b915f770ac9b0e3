CREATE OR REPLACE FUNCTION lease.lock_key(tenant_id text, program_id text, target_namespace text, target_id text, actor_name text, workflow_name text, operation_class text DEFAULT 'default'::text)
 RETURNS text
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    i lease.identity;
BEGIN
    i := lease._identity(jsonb_build_object(
        'tenant_id', tenant_id, 'program_id', program_id, 'target_namespace', target_namespace,
        'target_id', target_id, 'actor_name', actor_name, 'workflow_name', workflow_name,
        'operation_class', operation_class));
    IF i.bad_field IS NOT NULL THEN
        RAISE EXCEPTION 'invalid %', substr(i.bad_field, length('lock_identity.') + 1)
            USING ERRCODE = '22023';
    END IF;
    RETURN lease._key(i);
END
$function$;

COMMENT ON FUNCTION lease.lock_key(text,text,text,text,text,text,text) IS
    'Operator-facing: validates, normalises and derives the lock key. Raises 22023 naming the component on invalid input.';

REVOKE ALL ON FUNCTION lease.lock_key(text,text,text,text,text,text,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.lock_key(text,text,text,text,text,text,text) TO lease_service;
GRANT EXECUTE ON FUNCTION lease.lock_key(text,text,text,text,text,text,text) TO lease_operator;
