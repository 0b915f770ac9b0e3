CREATE OR REPLACE FUNCTION lease._identity(p jsonb)
 RETURNS lease.identity
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE
AS $function$
DECLARE
    r lease.identity;
    extra jsonb;
BEGIN
    IF p IS NULL OR jsonb_typeof(p) <> 'object' THEN
        r.bad_field := 'lock_identity';
        RETURN r;
    END IF;
    extra := p - ARRAY['tenant_id', 'program_id', 'target_namespace', 'target_id', 'actor_name',
                       'workflow_name', 'operation_class'];
    IF extra <> '{}'::jsonb THEN
        r.bad_field := 'lock_identity.' || (SELECT min(k) FROM jsonb_object_keys(extra) k);
        RETURN r;
    END IF;
    r.tenant_id := lease._component(p, 'tenant_id');
    r.program_id := lease._component(p, 'program_id');
    r.target_namespace := lease._component(p, 'target_namespace');
    r.target_id := lease._component(p, 'target_id');
    r.actor_name := lease._component(p, 'actor_name');
    r.workflow_name := lease._component(p, 'workflow_name');
    r.operation_class := lease._component(p, 'operation_class');
    r.bad_field := lease._identity_fault(r);
    RETURN r;
END
$function$;

COMMENT ON FUNCTION lease._identity(jsonb) IS
    'Normalises the lock_identity object of a request. Unknown keys, non-string values and invalid components set bad_field ("lock_identity.target_id"), the first in tuple order.';

REVOKE ALL ON FUNCTION lease._identity(jsonb) FROM PUBLIC;
