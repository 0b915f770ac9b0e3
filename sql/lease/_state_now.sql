CREATE OR REPLACE FUNCTION lease._state_now(l lease.locks) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
RETURN CASE WHEN l.state = 'active' AND lease._effective_expiry(l.session_id, l.expires_at) > now() THEN 'active'
            WHEN l.state = 'active' THEN 'expired'
            ELSE 'none' END;

COMMENT ON FUNCTION lease._state_now(lease.locks) IS
    'The state a lease row has at backend time: active, expired (active but past expires_at, not yet swept) or free; expiry is decided by now(), never by a client clock.';

REVOKE ALL ON FUNCTION lease._state_now(lease.locks) FROM PUBLIC;
