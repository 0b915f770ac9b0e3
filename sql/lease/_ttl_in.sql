CREATE OR REPLACE FUNCTION lease._ttl_in(v jsonb, fallback bigint, minimum bigint, maximum bigint)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN v IS NULL OR jsonb_typeof(v) = 'null' THEN fallback
    -- lease._int's checks (a regular expression) once: it inlines, and each
    -- use would run them again. Past them the cast is the one _int makes.
    WHEN lease._int(v) IS NULL THEN NULL
    WHEN (v #>> '{}')::bigint > minimum AND (v #>> '{}')::bigint <= maximum
        THEN (v #>> '{}')::bigint
    END;

COMMENT ON FUNCTION lease._ttl_in(jsonb,bigint,bigint,bigint) IS
    'A TTL in ms from a request value: the fallback when absent, NULL when outside minimum < ttl <= maximum.';

REVOKE ALL ON FUNCTION lease._ttl_in(jsonb,bigint,bigint,bigint) FROM PUBLIC;
