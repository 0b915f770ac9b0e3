-- 0028: sessions (issue 37, "A million held leases on one primary").
--
-- A session is one small row a holder keeps alive with one call
-- (lease.session_keepalive) for any number of leases acquired in it
-- (lease.acquire_brief_typed's session_id). A keep-alive writes only this
-- row: it costs the same whatever the session holds.
--   session_id           'session_' and 32 hex digits (time-ordered, as a
--                        lease id: lease._new_session_id);
--   tenant_id, principal_id, credential_id
--                        who opened it: only they may keep it alive, use it
--                        or close it, within this tenant;
--   service_instance_id  the holder's instance;
--   ttl_ms               each keep-alive extends expires_at to now() + ttl_ms;
--   expires_at           when it ends unless kept alive (not indexed: a
--                        keep-alive changes no indexed column, so it is a
--                        HOT update on the row's own page, fillfactor 50);
--   state                open, closed, or expired (an open session past
--                        expires_at is expired already: decided with now(),
--                        lease._session_ends_at; the sweeper records it);
--   created_at, renewed_at, closed_at
--                        backend times of open, the last keep-alive, and the
--                        end (close, or for an expiry its expires_at);
--   open_request_id, open_request_digest, close_request_id,
--   close_request_digest the idempotency of open and close (a keep-alive is
--                        idempotent by value and keeps none);
--   ended_leases         how many leases close and the sweeper ended so far.
CREATE TABLE lease.sessions (
    session_id text PRIMARY KEY,
    tenant_id text NOT NULL,
    principal_id text NOT NULL,
    credential_id text NOT NULL,
    service_instance_id text NOT NULL,
    ttl_ms bigint NOT NULL CHECK (ttl_ms > 0),
    expires_at timestamptz NOT NULL,
    state text NOT NULL CHECK (state IN ('open', 'closed', 'expired')),
    created_at timestamptz NOT NULL,
    renewed_at timestamptz NOT NULL,
    closed_at timestamptz,
    open_request_id text NOT NULL,
    open_request_digest bytea NOT NULL,
    close_request_id text,
    close_request_digest bytea,
    CHECK (state = 'open' AND closed_at IS NULL OR state <> 'open' AND closed_at IS NOT NULL),
    -- a repeated open is found by its request id, per principal and tenant
    CONSTRAINT sessions_open_request UNIQUE (tenant_id, principal_id, open_request_id)
) WITH (fillfactor = 50);
-- the sweeper finds ended sessions here (open ones are not in it: a
-- keep-alive changes neither column, and stays a HOT update)
CREATE INDEX sessions_ended ON lease.sessions (closed_at) WHERE state <> 'open';
REVOKE ALL ON TABLE lease.sessions FROM PUBLIC;

COMMENT ON TABLE lease.sessions IS
    'One small row per session (migration 0028, issue 37): who opened it, its TTL and expiry. A keep-alive updates only expires_at and renewed_at here (a HOT update: no indexed column changes), whatever the session holds; its leases point at it (lease.locks.session_id) and end when it expires or closes.';

-- A lease in a session names it; NULL: a lease without a session, as before.
ALTER TABLE lease.locks ADD COLUMN session_id text;
ALTER TABLE lease.history ADD COLUMN session_id text;
-- close and the sweeper find a session's leases here; NULL rows are not in
-- it, so leases without a session keep their HOT updates
CREATE INDEX locks_session ON lease.locks (session_id) WHERE session_id IS NOT NULL;
COMMENT ON COLUMN lease.locks.session_id IS
    'The session the lease was acquired in (lease.sessions), NULL for none: the lease is expired once the session is (lease._effective_expiry).';
COMMENT ON COLUMN lease.history.session_id IS
    'The session the lease was acquired in, NULL for none.';

-- Session events, and which session an event concerns.
ALTER TABLE lease.audit_events ADD COLUMN session_id text;
COMMENT ON COLUMN lease.audit_events.session_id IS
    'The session an event concerns (session_open, session_close, session_expire, and a lease ended by its session), NULL otherwise.';
ALTER DOMAIN lease.audit_event_type DROP CONSTRAINT audit_event_type_check;
ALTER DOMAIN lease.audit_event_type ADD CONSTRAINT audit_event_type_check CHECK (VALUE IN (
    'target_lease_acquire', 'target_lease_renew', 'target_lease_release',
    'target_lease_force_release', 'target_lease_revoke', 'target_lease_inspect',
    'target_lease_list', 'target_lease_commit', 'target_lease_commit_rejected',
    'target_lease_recover', 'target_lease_quarantine', 'target_lease_alert',
    'target_lease_authenticate', 'credential_create', 'credential_revoke',
    'session_open', 'session_close', 'session_expire'));

-- statistics target 10 on every column, as 0023 set for the write tables
DO $$
DECLARE
    c name;
BEGIN
    FOR c IN SELECT attname FROM pg_attribute
              WHERE attrelid = 'lease.sessions'::regclass AND attnum > 0
                AND NOT attisdropped LOOP
        EXECUTE format('ALTER TABLE lease.sessions ALTER COLUMN %I SET STATISTICS 10', c);
    END LOOP;
END
$$;
ALTER TABLE lease.locks ALTER COLUMN session_id SET STATISTICS 10;
ALTER TABLE lease.history ALTER COLUMN session_id SET STATISTICS 10;
ALTER TABLE lease.audit_events ALTER COLUMN session_id SET STATISTICS 10;
