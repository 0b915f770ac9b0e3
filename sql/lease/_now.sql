CREATE OR REPLACE FUNCTION lease._now() RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE
RETURN date_trunc('milliseconds', now());

COMMENT ON FUNCTION lease._now() IS
    'Backend time as stored: truncated to milliseconds so the wire value equals the stored value.';

REVOKE ALL ON FUNCTION lease._now() FROM PUBLIC;
