CREATE OR REPLACE FUNCTION lease._in_scope(tenant_id text, program_id text, actor_name text, scope jsonb)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN coalesce(tenant_id = scope ->> 'tenant_id'
                AND (scope ->> 'program_id' = '*' OR program_id = scope ->> 'program_id')
                AND (scope -> 'actor_names' ? '*' OR scope -> 'actor_names' ? actor_name),
                false);

COMMENT ON FUNCTION lease._in_scope(text,text,text,jsonb) IS
    'Whether an identity lies in a caller''s scope: {"tenant_id": T, "program_id": P or "*", "actor_names": [..] or ["*"]}.';

REVOKE ALL ON FUNCTION lease._in_scope(text,text,text,jsonb) FROM PUBLIC;
