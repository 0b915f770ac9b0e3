CREATE OR REPLACE FUNCTION lease._retry_after(expires_at timestamp with time zone)
 RETURNS bigint
 LANGUAGE sql
 STABLE PARALLEL SAFE
RETURN (LEAST((1000)::numeric, GREATEST((50)::numeric, ceil((EXTRACT(epoch FROM (expires_at - now())) * (1000)::numeric)))))::bigint;

COMMENT ON FUNCTION lease._retry_after(timestamp with time zone) IS
    'The retry hint for a conflict: until the holder''s expiry, 50..1000 ms.';

REVOKE ALL ON FUNCTION lease._retry_after(timestamp with time zone) FROM PUBLIC;
