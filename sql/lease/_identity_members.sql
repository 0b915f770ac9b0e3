CREATE OR REPLACE FUNCTION lease._identity_members(li jsonb) RETURNS lease.identity
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN ROW(CASE WHEN jsonb_typeof(li -> 'tenant_id') = 'string' THEN li ->> 'tenant_id' END,
           CASE WHEN jsonb_typeof(li -> 'program_id') = 'string' THEN li ->> 'program_id' END,
           CASE WHEN jsonb_typeof(li -> 'target_namespace') = 'string'
                THEN li ->> 'target_namespace' END,
           CASE WHEN jsonb_typeof(li -> 'target_id') = 'string' THEN li ->> 'target_id' END,
           CASE WHEN jsonb_typeof(li -> 'actor_name') = 'string' THEN li ->> 'actor_name' END,
           CASE WHEN jsonb_typeof(li -> 'workflow_name') = 'string'
                THEN li ->> 'workflow_name' END,
           CASE WHEN coalesce(jsonb_typeof(li -> 'operation_class'), 'null') = 'null' THEN NULL
                WHEN jsonb_typeof(li -> 'operation_class') = 'string'
                    THEN li ->> 'operation_class'
                ELSE chr(1) END,
           -- the identity's shape: an object of the seven members, else its fault
           CASE WHEN jsonb_typeof(li) IS DISTINCT FROM 'object'
                     OR li - ARRAY['tenant_id', 'program_id', 'target_namespace', 'target_id',
                                   'actor_name', 'workflow_name', 'operation_class'] <> '{}'
                THEN (lease._identity(li)).bad_field END)::lease.identity;

COMMENT ON FUNCTION lease._identity_members(jsonb) IS
    'A jsonb lock_identity''s members as a typed call takes them (not yet normalised): a string member''s text, NULL for an absent or non-string one (which lease.normalize_component then refuses), operation_class NULL when absent or null and chr(1) when not a string (refused). bad_field is the identity''s structural fault (not an object, or a member outside the seven: lease._identity names it), NULL otherwise. For lease.acquire, lease._renew and lease._end.';

REVOKE ALL ON FUNCTION lease._identity_members(jsonb) FROM PUBLIC;
