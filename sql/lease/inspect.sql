CREATE OR REPLACE FUNCTION lease.inspect(p jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    deadline timestamptz := lease._call_deadline(p, false);
    scope jsonb := p -> 'scope';
    i lease.identity;
    l lease.locks;
    h lease.history;
BEGIN
    IF now() >= deadline THEN
        RETURN lease._result('deadline_exceeded');
    END IF;
    PERFORM lease._check_scope(scope);
    IF coalesce(jsonb_typeof(p -> 'lock_identity'), 'null') <> 'null' THEN
        i := lease._identity(p -> 'lock_identity');
        IF i.bad_field IS NOT NULL THEN
            RETURN lease._invalid(i.bad_field);
        END IF;
        l := lease._row(lease._key(i), i);
    ELSIF lease._id_ok(p -> 'lease_id') THEN
        SELECT l2.* INTO l FROM lease.lease_index x JOIN lease.locks l2 USING (lock_key)
         WHERE x.lease_id = p ->> 'lease_id' AND l2.lease_id = x.lease_id
           AND l2.state = 'active';
        IF l.lock_key IS NULL THEN
            SELECT * INTO h FROM lease.history WHERE lease_id = p ->> 'lease_id';
            IF h.lease_id IS NOT NULL
               AND lease._in_scope(h.tenant_id, h.program_id, h.actor_name, scope) THEN
                RETURN jsonb_build_object('code', 'lease_inspected', 'lease', lease._history_json(h));
            END IF;
            RETURN lease._result('lease_not_found');
        END IF;
        IF l.lock_key <> lease._key_of(lease._canonical_of(l.tenant_id, l.program_id,
                              l.target_namespace, l.target_id, l.actor_name, l.workflow_name,
                              l.operation_class)) THEN
            PERFORM lease._corrupt(l.lock_key, 'lock key does not match the stored tuple');
        END IF;
    ELSIF p ? 'lease_id' THEN
        RETURN lease._invalid('lease_id');
    ELSE
        RETURN lease._invalid('lock_identity');
    END IF;
    IF l.lock_key IS NULL OR l.state <> 'active'
       OR NOT lease._in_scope(l.tenant_id, l.program_id, l.actor_name, scope) THEN
        RETURN lease._result('lease_not_found');
    END IF;
    RETURN jsonb_build_object('code', 'lease_inspected', 'lease', lease._lease_json(l));
END
$function$;

COMMENT ON FUNCTION lease.inspect(jsonb) IS
    'The state of a lease by id or of an identity: a freed row keeps its last lease''s columns, so only an active row answers for its lease id; otherwise history does. Read-only.';

REVOKE ALL ON FUNCTION lease.inspect(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.inspect(jsonb) TO lease_service;
