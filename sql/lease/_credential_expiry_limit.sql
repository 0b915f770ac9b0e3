CREATE OR REPLACE FUNCTION lease._credential_expiry_limit() RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN timestamptz '10000-01-01 00:00:00+00';

COMMENT ON FUNCTION lease._credential_expiry_limit() IS
    'The first instant that is not a valid expiry: leased''s times are RFC 3339 with a four-digit year.';

REVOKE ALL ON FUNCTION lease._credential_expiry_limit() FROM PUBLIC;
