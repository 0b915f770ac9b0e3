CREATE OR REPLACE FUNCTION lease._existing(p jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN coalesce(p -> 'existing' = 'true'::jsonb, false);

COMMENT ON FUNCTION lease._existing(jsonb) IS
    'Whether an acquire''s caller knows the identity''s row exists (the service remembers identities it has seen): the update comes first and the insert probe is skipped. A wrong hint costs time, never correctness.';

REVOKE ALL ON FUNCTION lease._existing(jsonb) FROM PUBLIC;
