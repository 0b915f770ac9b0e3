CREATE OR REPLACE FUNCTION lease._sql_principal() RETURNS jsonb
LANGUAGE sql STABLE
RETURN jsonb_build_object(
    'principal_id', 'sql:' || regexp_replace(session_user, '[^A-Za-z0-9._:-]', '_', 'g'),
    'client_id', 'psql', 'credential_id', '', 'principal_class', 'sql');

COMMENT ON FUNCTION lease._sql_principal() IS
    'The principal of a psql session, as audit and history record it.';

REVOKE ALL ON FUNCTION lease._sql_principal() FROM PUBLIC;
