CREATE OR REPLACE FUNCTION lease._canonical_text(li jsonb)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
RETURN (((((((((((((('["v1","'::text || lower((li ->> ('tenant_id'::text COLLATE "C")))) || '","'::text) || lower((li ->> ('program_id'::text COLLATE "C")))) || '","'::text) || lower((li ->> ('target_namespace'::text COLLATE "C")))) || '","'::text) || (li ->> 'target_id'::text)) || '","'::text) || lower((li ->> ('actor_name'::text COLLATE "C")))) || '","'::text) || lower((li ->> ('workflow_name'::text COLLATE "C")))) || '","'::text) || lower((COALESCE((li ->> 'operation_class'::text), 'default'::text) COLLATE "C"))) || '"]'::text);

COMMENT ON FUNCTION lease._canonical_text(jsonb) IS
    'The canonical identity of a valid lock_identity object: the versioned JSON array the lock key hashes (its components need no escaping).';

REVOKE ALL ON FUNCTION lease._canonical_text(jsonb) FROM PUBLIC;
