CREATE OR REPLACE FUNCTION lease._ts(t timestamptz) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
RETURN to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');

COMMENT ON FUNCTION lease._ts(timestamp with time zone) IS
    'RFC 3339 UTC with exactly three fractional digits.';

REVOKE ALL ON FUNCTION lease._ts(timestamp with time zone) FROM PUBLIC;
