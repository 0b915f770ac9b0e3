CREATE OR REPLACE FUNCTION lease.list_by_target(p jsonb) RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
RETURN lease._list(p, 'target');

COMMENT ON FUNCTION lease.list_by_target(jsonb) IS
    'Active leases of one target inside the caller''s scope, keyset-paginated (lease._list).';

REVOKE ALL ON FUNCTION lease.list_by_target(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.list_by_target(jsonb) TO lease_service;
