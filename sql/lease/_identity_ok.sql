CREATE OR REPLACE FUNCTION lease._identity_ok(li jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN coalesce(CASE WHEN jsonb_typeof(li) = 'object' THEN
    -- only an object: "li - text[]" raises on a scalar (a string or null lock_identity)
    jsonb_typeof(li -> 'tenant_id') = 'string' AND jsonb_typeof(li -> 'program_id') = 'string'
    AND jsonb_typeof(li -> 'target_namespace') = 'string'
    AND jsonb_typeof(li -> 'target_id') = 'string' AND jsonb_typeof(li -> 'actor_name') = 'string'
    AND jsonb_typeof(li -> 'workflow_name') = 'string'
    AND coalesce(jsonb_typeof(li -> 'operation_class'), 'null') IN ('string', 'null')
    AND length(li ->> 'tenant_id') <= 64
    AND lower(li ->> 'tenant_id' COLLATE "C") ~ '^[a-z0-9][a-z0-9_-]*$'
    AND length(li ->> 'program_id') <= 64
    AND lower(li ->> 'program_id' COLLATE "C") ~ '^[a-z0-9][a-z0-9_-]*$'
    AND length(li ->> 'target_namespace') <= 64
    AND lower(li ->> 'target_namespace' COLLATE "C") ~ '^[a-z0-9][a-z0-9._-]*$'
    AND strpos(li ->> 'target_namespace', '..') = 0
    AND length(li ->> 'target_id') <= 128
    AND (li ->> 'target_id') ~ '^[A-Za-z0-9][A-Za-z0-9._:-]*$'
    AND strpos(li ->> 'target_id', '..') = 0
    AND length(li ->> 'actor_name') <= 64
    AND lower(li ->> 'actor_name' COLLATE "C") ~ '^[a-z0-9][a-z0-9_-]*$'
    AND length(li ->> 'workflow_name') <= 64
    AND lower(li ->> 'workflow_name' COLLATE "C") ~ '^[a-z0-9][a-z0-9_-]*$'
    AND lower(coalesce(li ->> 'operation_class', 'default') COLLATE "C")
        IN ('default', 'collect', 'enrich', 'publish', 'maintenance')
    AND (li - ARRAY['tenant_id', 'program_id', 'target_namespace', 'target_id', 'actor_name',
                    'workflow_name', 'operation_class']) = '{}'::jsonb
    END, false);

COMMENT ON FUNCTION lease._identity_ok(jsonb) IS
    'Whether a lock_identity object is valid (docs/contract.md, "Identity and lock keys"): each component a string matching its rule after ASCII case folding where the rule folds, bounded, no "..", operation_class absent, null or one of the enum, and no other key. lease._identity names the offending field. One small regular expression per component: PostgreSQL runs one long pattern over the whole identity several times slower.';

REVOKE ALL ON FUNCTION lease._identity_ok(jsonb) FROM PUBLIC;
