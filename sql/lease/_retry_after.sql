CREATE OR REPLACE FUNCTION lease._retry_after(expires_at timestamptz) RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE
RETURN least(1000, greatest(50, ceil(extract(epoch FROM expires_at - now()) * 1000)))::bigint;

COMMENT ON FUNCTION lease._retry_after(timestamp with time zone) IS
    'The retry hint for a conflict: until the holder''s expiry, 50..1000 ms.';

REVOKE ALL ON FUNCTION lease._retry_after(timestamp with time zone) FROM PUBLIC;
