CREATE OR REPLACE FUNCTION lease._canonical_text(li jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN '["v1","' || lower(li ->> 'tenant_id' COLLATE "C")
       || '","' || lower(li ->> 'program_id' COLLATE "C")
       || '","' || lower(li ->> 'target_namespace' COLLATE "C")
       || '","' || (li ->> 'target_id')
       || '","' || lower(li ->> 'actor_name' COLLATE "C")
       || '","' || lower(li ->> 'workflow_name' COLLATE "C")
       || '","' || lower(coalesce(li ->> 'operation_class', 'default') COLLATE "C")
       || '"]';

COMMENT ON FUNCTION lease._canonical_text(jsonb) IS
    'The canonical identity of a valid lock_identity object: the versioned JSON array the lock key hashes (its components need no escaping).';

REVOKE ALL ON FUNCTION lease._canonical_text(jsonb) FROM PUBLIC;
