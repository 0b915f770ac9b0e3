CREATE OR REPLACE FUNCTION lease._ttl(v jsonb, fallback bigint, pol lease.policy) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN v IS NULL OR jsonb_typeof(v) = 'null' THEN fallback
    WHEN lease._int(v) > pol.minimum_ttl_ms AND lease._int(v) <= pol.maximum_ttl_ms
        THEN lease._int(v)
    END;

COMMENT ON FUNCTION lease._ttl(jsonb,bigint,lease.policy) IS
    'The effective TTL: the request''s, else the default; NULL when outside minimum_ttl_ms < ttl <= maximum_ttl_ms.';

REVOKE ALL ON FUNCTION lease._ttl(jsonb,bigint,lease.policy) FROM PUBLIC;
