CREATE OR REPLACE FUNCTION lease._system_identifier() RETURNS numeric
LANGUAGE sql STABLE
RETURN CASE WHEN has_function_privilege('pg_catalog.pg_control_system()', 'EXECUTE')
            THEN (pg_control_system()).system_identifier END;

COMMENT ON FUNCTION lease._system_identifier() IS
    'Whether this cluster''s system identifier may be read here (managed Postgres services may revoke pg_control_system from the migration owner).';

REVOKE ALL ON FUNCTION lease._system_identifier() FROM PUBLIC;
