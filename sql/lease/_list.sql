CREATE OR REPLACE FUNCTION lease._list(p jsonb, kind text)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE
AS $function$
DECLARE
    deadline timestamptz := lease._call_deadline(p, false);
    scope jsonb := p -> 'scope';
    pol lease.policy;
    tenant text;
    program text;
    ns text := '';
    target text := '';
    owner text := '';
    size bigint;
    cursor text[] := ARRAY['', '', '', '', ''];
    print text;
    leases jsonb;
    n integer;
BEGIN
    IF now() >= deadline THEN
        RETURN lease._result('deadline_exceeded');
    END IF;
    PERFORM lease._check_scope(scope);
    SELECT * INTO pol FROM lease.policy;
    tenant := lease.normalize_component('tenant_id', p ->> 'tenant_id');
    IF tenant IS NULL OR jsonb_typeof(p -> 'tenant_id') <> 'string' THEN
        RETURN lease._invalid('tenant_id');
    END IF;
    program := lease.normalize_component('program_id', p ->> 'program_id');
    IF program IS NULL OR jsonb_typeof(p -> 'program_id') <> 'string' THEN
        RETURN lease._invalid('program_id');
    END IF;
    IF kind = 'target' THEN
        ns := lease.normalize_component('target_namespace', p ->> 'target_namespace');
        IF ns IS NULL OR jsonb_typeof(p -> 'target_namespace') <> 'string' THEN
            RETURN lease._invalid('target_namespace');
        END IF;
        target := lease.normalize_component('target_id', p ->> 'target_id');
        IF target IS NULL OR jsonb_typeof(p -> 'target_id') <> 'string' THEN
            RETURN lease._invalid('target_id');
        END IF;
    ELSIF kind = 'owner' THEN
        IF NOT lease._id_ok(p -> 'owner_principal_id') THEN
            RETURN lease._invalid('owner_principal_id');
        END IF;
        owner := p ->> 'owner_principal_id';
    END IF;
    IF coalesce(jsonb_typeof(p -> 'page_size'), 'null') = 'null' THEN
        size := pol.default_page_size;
    ELSE
        size := lease._int(p -> 'page_size');
        IF size IS NULL OR size < 1 OR size > pol.max_page_size THEN
            RETURN lease._invalid('page_size');
        END IF;
    END IF;
    print := md5(concat_ws(E'\x1f', kind, tenant, program, ns, target, owner));
    IF coalesce(p ->> 'page_token', '') <> '' THEN
        cursor := lease._page_cursor(p ->> 'page_token', print);
        IF cursor IS NULL THEN
            RETURN lease._invalid('page_token');
        END IF;
    END IF;

    WITH page AS (
        SELECT l AS r
          FROM lease.locks l
         WHERE l.tenant_id = tenant AND l.program_id = program
           AND (kind <> 'target' OR (l.target_namespace = ns AND l.target_id = target))
           AND (kind <> 'owner' OR l.owner_principal_id = owner)
           AND (l.target_namespace, l.target_id, l.actor_name, l.workflow_name, l.operation_class)
               > (cursor[1], cursor[2], cursor[3], cursor[4], cursor[5])
           AND l.state = 'active' AND lease._effective_expiry(l.session_id, l.expires_at) > now()
           AND lease._in_scope(l.tenant_id, l.program_id, l.actor_name, scope)
         ORDER BY l.target_namespace, l.target_id, l.actor_name, l.workflow_name,
                  l.operation_class
         LIMIT size + 1)
    SELECT coalesce(jsonb_agg(lease._lease_json(r) ORDER BY (r).target_namespace,
                              (r).target_id, (r).actor_name, (r).workflow_name,
                              (r).operation_class), '[]'::jsonb),
           count(*)
      INTO leases, n
      FROM page;

    IF n <= size THEN
        RETURN jsonb_build_object('code', 'lease_listed', 'leases', leases,
                                  'next_page_token', NULL);
    END IF;
    leases := leases - (n - 1)::integer;
    RETURN jsonb_build_object('code', 'lease_listed', 'leases', leases,
        'next_page_token', lease._page_token(print, ARRAY[
            leases -> -1 #>> '{lock_identity,target_namespace}',
            leases -> -1 #>> '{lock_identity,target_id}',
            leases -> -1 #>> '{lock_identity,actor_name}',
            leases -> -1 #>> '{lock_identity,workflow_name}',
            leases -> -1 #>> '{lock_identity,operation_class}']));
END
$function$;

COMMENT ON FUNCTION lease._list(jsonb,text) IS
    'The three lists share one implementation: active, unexpired leases of one tenant/program (and target, or owner), inside the caller''s scope, in identity order, keyset-paginated on the unique identity index.';

REVOKE ALL ON FUNCTION lease._list(jsonb,text) FROM PUBLIC;
