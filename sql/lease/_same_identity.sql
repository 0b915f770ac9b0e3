CREATE OR REPLACE FUNCTION lease._same_identity(l lease.locks, i lease.identity) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN l.tenant_id = i.tenant_id AND l.program_id = i.program_id
   AND l.target_namespace = i.target_namespace AND l.target_id = i.target_id
   AND l.actor_name = i.actor_name AND l.workflow_name = i.workflow_name
   AND l.operation_class = i.operation_class;

COMMENT ON FUNCTION lease._same_identity(lease.locks,lease.identity) IS
    'Whether a stored row''s seven fields are exactly the identity''s.';

REVOKE ALL ON FUNCTION lease._same_identity(lease.locks,lease.identity) FROM PUBLIC;
