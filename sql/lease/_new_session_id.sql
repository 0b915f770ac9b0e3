CREATE OR REPLACE FUNCTION lease._new_session_id(t timestamptz) RETURNS text
LANGUAGE sql VOLATILE
RETURN 'session_' || substr(lease._new_lease_id(t), length('lease_') + 1);

COMMENT ON FUNCTION lease._new_session_id(timestamp with time zone) IS
    'A new session id: ''session_'' and 32 hex digits, time-ordered like a lease id (lease._new_lease_id: the primary key grows at its right edge).';

REVOKE ALL ON FUNCTION lease._new_session_id(timestamp with time zone) FROM PUBLIC;
