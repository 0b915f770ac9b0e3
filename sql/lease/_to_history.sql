CREATE OR REPLACE FUNCTION lease._to_history(l lease.locks, terminal_state text, ended_at timestamp with time zone, p jsonb, reason text, incident text)
 RETURNS lease.history
 LANGUAGE sql
 VOLATILE
RETURN lease._to_history_t(l, terminal_state, ended_at, p #>> '{principal,principal_id}',
                           p #>> '{principal,credential_id}', reason, incident);

COMMENT ON FUNCTION lease._to_history(lease.locks,text,timestamp with time zone,jsonb,text,text) IS
    'lease._to_history_t with a jsonb request''s principal as who ended the lease (p NULL: nobody, an expiry). A SQL function, inlined where it is called.';

REVOKE ALL ON FUNCTION lease._to_history(lease.locks,text,timestamp with time zone,jsonb,text,text) FROM PUBLIC;
