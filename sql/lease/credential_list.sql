CREATE OR REPLACE FUNCTION lease.credential_list() RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
RETURN (SELECT coalesce(jsonb_agg(lease._credential_json(c, false)
                                  ORDER BY c.created_at, c.credential_id), '[]'::jsonb)
          FROM lease.credentials c);

COMMENT ON FUNCTION lease.credential_list() IS
    'Administrators: every credential, oldest first, without digests.';

REVOKE ALL ON FUNCTION lease.credential_list() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.credential_list() TO lease_admin;
