CREATE OR REPLACE FUNCTION lease.normalize_component(field text, v text)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN (field = 'target_id'::text) THEN CASE WHEN ((length(v) <= 128) AND (v ~ '^[A-Za-z0-9][A-Za-z0-9._:-]*$'::text) AND (strpos(v, '..'::text) = 0)) THEN v ELSE NULL::text END WHEN (field = ANY (ARRAY['tenant_id'::text, 'program_id'::text, 'actor_name'::text, 'workflow_name'::text])) THEN CASE WHEN ((length(v) <= 64) AND (lower((v COLLATE "C")) ~ '^[a-z0-9][a-z0-9_-]*$'::text)) THEN lower((v COLLATE "C")) ELSE NULL::text END WHEN (field = 'target_namespace'::text) THEN CASE WHEN ((length(v) <= 64) AND (lower((v COLLATE "C")) ~ '^[a-z0-9][a-z0-9._-]*$'::text) AND (strpos(lower((v COLLATE "C")), '..'::text) = 0)) THEN lower((v COLLATE "C")) ELSE NULL::text END WHEN (field = 'operation_class'::text) THEN CASE WHEN (v IS NULL) THEN 'default'::text WHEN (lower((v COLLATE "C")) = ANY (ARRAY['default'::text, 'collect'::text, 'enrich'::text, 'publish'::text, 'maintenance'::text])) THEN lower((v COLLATE "C")) ELSE NULL::text END ELSE NULL::text END;

COMMENT ON FUNCTION lease.normalize_component(text,text) IS
    'One identity component normalised by its rule (ASCII case folding where the rule folds). SECURITY INVOKER and IMMUTABLE so the planner inlines it into lease._component on the hot path; it folds inline (lower() under the C collation) rather than through lease._fold, which its grantees may not call.';

REVOKE ALL ON FUNCTION lease.normalize_component(text,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.normalize_component(text,text) TO lease_service;
GRANT EXECUTE ON FUNCTION lease.normalize_component(text,text) TO lease_operator;
