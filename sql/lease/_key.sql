CREATE OR REPLACE FUNCTION lease._key(i lease.identity)
 RETURNS text
 LANGUAGE sql
 STABLE PARALLEL SAFE
RETURN ('starintel:target-lease:v1:'::text || rtrim(translate(encode(sha256(convert_to((((((((((((((('["v1","'::text || (i).tenant_id) || '","'::text) || (i).program_id) || '","'::text) || (i).target_namespace) || '","'::text) || (i).target_id) || '","'::text) || (i).actor_name) || '","'::text) || (i).workflow_name) || '","'::text) || (i).operation_class) || '"]'::text), 'UTF8'::name)), 'base64'::text), '+/'::text, '-_'::text), '='::text));

COMMENT ON FUNCTION lease._key(lease.identity) IS
    'The canonical lock key of a normalised identity (no validation).';

REVOKE ALL ON FUNCTION lease._key(lease.identity) FROM PUBLIC;
