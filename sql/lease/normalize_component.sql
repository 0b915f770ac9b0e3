CREATE OR REPLACE FUNCTION lease.normalize_component(field text, v text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN field = 'target_id' THEN
        CASE WHEN length(v) <= 128 AND v ~ '^[A-Za-z0-9][A-Za-z0-9._:-]*$'
                  AND strpos(v, '..') = 0 THEN v END
    WHEN field IN ('tenant_id', 'program_id', 'actor_name', 'workflow_name') THEN
        CASE WHEN length(v) <= 64 AND lower(v COLLATE "C") ~ '^[a-z0-9][a-z0-9_-]*$'
             THEN lower(v COLLATE "C") END
    WHEN field = 'target_namespace' THEN
        CASE WHEN length(v) <= 64 AND lower(v COLLATE "C") ~ '^[a-z0-9][a-z0-9._-]*$'
                  AND strpos(lower(v COLLATE "C"), '..') = 0 THEN lower(v COLLATE "C") END
    WHEN field = 'operation_class' THEN
        CASE WHEN v IS NULL THEN 'default'
             WHEN lower(v COLLATE "C") IN ('default', 'collect', 'enrich', 'publish', 'maintenance')
                 THEN lower(v COLLATE "C") END
    END;

COMMENT ON FUNCTION lease.normalize_component(text,text) IS
    'One identity component normalised by its rule (ASCII case folding where the rule folds). SECURITY INVOKER and IMMUTABLE so the planner inlines it into lease._component on the hot path; it folds inline (lower() under the C collation) rather than through lease._fold, which its grantees may not call.';

REVOKE ALL ON FUNCTION lease.normalize_component(text,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.normalize_component(text,text) TO lease_service;
GRANT EXECUTE ON FUNCTION lease.normalize_component(text,text) TO lease_operator;
