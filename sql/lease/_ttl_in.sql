CREATE OR REPLACE FUNCTION lease._ttl_in(v jsonb, fallback bigint, minimum bigint, maximum bigint)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN v IS NULL OR jsonb_typeof(v) = 'null' THEN fallback
    WHEN lease._int(v) > minimum AND lease._int(v) <= maximum THEN lease._int(v)
    END;

COMMENT ON FUNCTION lease._ttl_in(jsonb,bigint,bigint,bigint) IS
    'A TTL in ms from a request value: the fallback when absent, NULL when outside minimum < ttl <= maximum.';

REVOKE ALL ON FUNCTION lease._ttl_in(jsonb,bigint,bigint,bigint) FROM PUBLIC;
