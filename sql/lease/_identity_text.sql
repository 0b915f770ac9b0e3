CREATE OR REPLACE FUNCTION lease._identity_text(tenant_id text, program_id text,
                                                target_namespace text, target_id text,
                                                actor_name text, workflow_name text,
                                                operation_class text)
RETURNS lease.identity
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN ROW(lease.normalize_component('tenant_id', tenant_id),
           lease.normalize_component('program_id', program_id),
           lease.normalize_component('target_namespace', target_namespace),
           lease.normalize_component('target_id', target_id),
           lease.normalize_component('actor_name', actor_name),
           lease.normalize_component('workflow_name', workflow_name),
           lease.normalize_component('operation_class', operation_class), NULL)::lease.identity;

COMMENT ON FUNCTION lease._identity_text(text,text,text,text,text,text,text) IS
    'A typed call''s identity, each component normalised by lease.normalize_component (the rule a jsonb identity is held to): NULL where a component is refused (lease._identity_fault names the first), operation_class NULL the default. bad_field is left NULL.';

REVOKE ALL ON FUNCTION lease._identity_text(text,text,text,text,text,text,text) FROM PUBLIC;
