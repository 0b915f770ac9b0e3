CREATE OR REPLACE FUNCTION lease._canonical_of(tenant_id text, program_id text, target_namespace text,
                                    target_id text, actor_name text, workflow_name text,
                                    operation_class text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN '["v1","' || tenant_id || '","' || program_id || '","' || target_namespace || '","'
       || target_id || '","' || actor_name || '","' || workflow_name || '","'
       || operation_class || '"]';

COMMENT ON FUNCTION lease._canonical_of(text,text,text,text,text,text,text) IS
    'The canonical identity of stored columns (the tuple check in WHERE clauses: a row whose stored tuple is not the request''s never matches, and the read that follows fails closed).';

REVOKE ALL ON FUNCTION lease._canonical_of(text,text,text,text,text,text,text) FROM PUBLIC;
