CREATE OR REPLACE FUNCTION lease._identity_fault(i lease.identity) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN i.tenant_id IS NULL THEN 'lock_identity.tenant_id'
    WHEN i.program_id IS NULL THEN 'lock_identity.program_id'
    WHEN i.target_namespace IS NULL THEN 'lock_identity.target_namespace'
    WHEN i.target_id IS NULL THEN 'lock_identity.target_id'
    WHEN i.actor_name IS NULL THEN 'lock_identity.actor_name'
    WHEN i.workflow_name IS NULL THEN 'lock_identity.workflow_name'
    WHEN i.operation_class IS NULL THEN 'lock_identity.operation_class'
    END;

COMMENT ON FUNCTION lease._identity_fault(lease.identity) IS
    'The first component (in tuple order) that lease.normalize_component refused in an identity built from it, as the field a refusal names ("lock_identity.target_id"), or NULL. Shared by lease._identity (a jsonb identity) and lease._renew_t (a typed one).';

REVOKE ALL ON FUNCTION lease._identity_fault(lease.identity) FROM PUBLIC;
