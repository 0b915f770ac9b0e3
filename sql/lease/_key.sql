CREATE OR REPLACE FUNCTION lease._key(i lease.identity) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
RETURN 'starintel:target-lease:v1:'
    || rtrim(translate(encode(sha256(convert_to(
           '["v1","' || i.tenant_id || '","' || i.program_id || '","'
           || i.target_namespace || '","' || i.target_id || '","' || i.actor_name
           || '","' || i.workflow_name || '","' || i.operation_class || '"]',
           'UTF8')), 'base64'), '+/', '-_'), '=');

COMMENT ON FUNCTION lease._key(lease.identity) IS
    'The canonical lock key of a normalised identity (no validation).';

REVOKE ALL ON FUNCTION lease._key(lease.identity) FROM PUBLIC;
