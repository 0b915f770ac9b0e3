CREATE OR REPLACE FUNCTION lease._existing(p jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN coalesce(p -> 'existing' = 'true'::jsonb, false);

COMMENT ON FUNCTION lease._existing(jsonb) IS
    'Unused: lease.acquire no longer reads the "existing" request flag (the insert probe always comes first: the unique indexes decide for every caller). Kept until a numbered migration drops it.';

REVOKE ALL ON FUNCTION lease._existing(jsonb) FROM PUBLIC;
