CREATE OR REPLACE FUNCTION lease.list_by_program(p jsonb) RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
RETURN lease._list(p, 'program');

COMMENT ON FUNCTION lease.list_by_program(jsonb) IS
    'Active leases of one tenant/program inside the caller''s scope, keyset-paginated (lease._list).';

REVOKE ALL ON FUNCTION lease.list_by_program(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.list_by_program(jsonb) TO lease_service;
