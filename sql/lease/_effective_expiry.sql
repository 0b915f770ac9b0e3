CREATE OR REPLACE FUNCTION lease._effective_expiry(session_id text, expires_at timestamptz)
RETURNS timestamptz
LANGUAGE sql STABLE
RETURN CASE WHEN session_id IS NULL THEN expires_at
            ELSE least(expires_at, coalesce(lease._session_ends_at(session_id), '-infinity'))
       END;

COMMENT ON FUNCTION lease._effective_expiry(text,timestamp with time zone) IS
    'When a lease ends by time: its own expires_at (its TTL and maximum lifetime), or, for a lease in a session, the earlier of that and the session''s end (lease._session_ends_at: expiry while open, close time once closed; a session that is gone ended long ago). Every path that asks whether a lease is live compares this with now(): acquire, renew, release, the fence, the reads and the sweeper (docs/architecture.md, "Sessions"). A lease without a session costs no read.';

REVOKE ALL ON FUNCTION lease._effective_expiry(text,timestamp with time zone) FROM PUBLIC;
