CREATE OR REPLACE FUNCTION lease._credential_expires_in_ms(expires_at timestamptz) RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE
RETURN CASE WHEN expires_at IS NULL THEN NULL
            WHEN expires_at <= now() THEN 0
            WHEN NOT isfinite(expires_at) THEN 9007199254740991
            ELSE least(ceil(extract(epoch FROM expires_at - now()) * 1000),
                       9007199254740991)::bigint END;

COMMENT ON FUNCTION lease._credential_expires_in_ms(timestamp with time zone) IS
    'Milliseconds of validity left at backend time: NULL without expiry, 0 once expired (every past instant, -infinity included), at most 2^53-1.';

REVOKE ALL ON FUNCTION lease._credential_expires_in_ms(timestamp with time zone) FROM PUBLIC;
