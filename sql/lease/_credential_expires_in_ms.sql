CREATE OR REPLACE FUNCTION lease._credential_expires_in_ms(expires_at timestamp with time zone)
 RETURNS bigint
 LANGUAGE sql
 STABLE PARALLEL SAFE
RETURN CASE WHEN (expires_at IS NULL) THEN NULL::bigint WHEN (expires_at <= now()) THEN (0)::bigint WHEN (NOT isfinite(expires_at)) THEN '9007199254740991'::bigint ELSE (LEAST(ceil((EXTRACT(epoch FROM (expires_at - now())) * (1000)::numeric)), ('9007199254740991'::bigint)::numeric))::bigint END;

COMMENT ON FUNCTION lease._credential_expires_in_ms(timestamp with time zone) IS
    'Milliseconds of validity left at backend time: NULL without expiry, 0 once expired (every past instant, -infinity included), at most 2^53-1.';

REVOKE ALL ON FUNCTION lease._credential_expires_in_ms(timestamp with time zone) FROM PUBLIC;
