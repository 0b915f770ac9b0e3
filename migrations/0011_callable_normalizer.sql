-- 0011: lease.normalize_component works for the roles it is granted to.
--
-- 0003 defined it as SECURITY INVOKER and let it call lease._fold, which is
-- internal (granted to nobody): every call by lease_service or
-- lease_operator failed with "permission denied for function _fold". The
-- SECURITY DEFINER operations never noticed, because they call it as the
-- schema owner.
--
-- The fix folds case inline instead of through the helper. It stays a
-- one-expression SQL function (SECURITY INVOKER, IMMUTABLE), so the planner
-- still inlines it into lease._component on the hot path; SECURITY DEFINER
-- would have prevented that. The result is unchanged: lower() under the "C"
-- collation folds ASCII letters only, exactly what lease._fold does.
-- CREATE OR REPLACE keeps the function's privileges and its dependants.
-- pgtap/16_role_calls.sql calls every granted function as every role.
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
