CREATE OR REPLACE FUNCTION lease.list_by_owner(p jsonb) RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
RETURN lease._list(p, 'owner');

COMMENT ON FUNCTION lease.list_by_owner(jsonb) IS
    'Active leases of one owner inside the caller''s scope, keyset-paginated (lease._list).';

REVOKE ALL ON FUNCTION lease.list_by_owner(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.list_by_owner(jsonb) TO lease_service;
