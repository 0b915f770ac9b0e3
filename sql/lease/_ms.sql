CREATE OR REPLACE FUNCTION lease._ms(ms bigint) RETURNS interval
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN ms * interval '1 millisecond';

COMMENT ON FUNCTION lease._ms(bigint) IS
    'Milliseconds as an interval: every TTL and delay on the wire is in ms.';

REVOKE ALL ON FUNCTION lease._ms(bigint) FROM PUBLIC;
