CREATE OR REPLACE FUNCTION lease._session_ends_at(sid text) RETURNS timestamptz
LANGUAGE sql STABLE
RETURN (SELECT CASE WHEN s.state = 'open' THEN s.expires_at ELSE s.closed_at END
          FROM lease.sessions s WHERE s.session_id = sid);

COMMENT ON FUNCTION lease._session_ends_at(text) IS
    'When a session ends: its expires_at while open (a keep-alive moves it), its closed_at once closed or recorded expired; NULL for no such session. Read with now() by lease._effective_expiry, the one place a lease in a session learns it.';

REVOKE ALL ON FUNCTION lease._session_ends_at(text) FROM PUBLIC;
