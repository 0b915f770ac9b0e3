CREATE OR REPLACE FUNCTION lease._expire_sessions(batch integer, grace_ms bigint,
                                                  OUT seen integer, OUT expired integer,
                                                  OUT oldest timestamptz)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
DECLARE
    r record;
    seqscan text;
BEGIN
    seen := 0;
    expired := 0;
    -- Sessions past their expiry are recorded expired, each with its
    -- session_expire event (at most batch of them a step; their leases were
    -- expired for every path already: lease._effective_expiry).
    WITH due AS (
        SELECT s.session_id FROM lease.sessions s
         WHERE s.state = 'open' AND s.expires_at <= now() - lease._ms(grace_ms)
         ORDER BY s.expires_at LIMIT batch FOR UPDATE SKIP LOCKED),
    ended AS (
        UPDATE lease.sessions s SET state = 'expired', closed_at = s.expires_at
          FROM due WHERE s.session_id = due.session_id
        RETURNING s.*)
    INSERT INTO lease.audit_events (event_type, decision, result_code, principal_id,
                                    credential_id, service_instance_id, tenant_id,
                                    effective_ttl_ms, previous_state, resulting_state, reason,
                                    session_id)
    SELECT 'session_expire', 'allow', 'lease_lost', e.principal_id, e.credential_id,
           e.service_instance_id, e.tenant_id, e.ttl_ms, 'open', 'expired',
           'not kept alive', e.session_id
      FROM ended e;
    -- Then the leases of ended sessions (expired or closed) into history,
    -- oldest session first, at most batch of them: the sweeper's bound.
    -- By the index locks_session, never a scan of lease.locks from its
    -- first page: the planner, counting a big session's leases as spread
    -- over the table, would stop such a scan early, but the leases moved
    -- by earlier batches fill its first pages, so each batch read them all
    -- again (issue 37). The setting lasts until the loop ends (restored
    -- below; the loop's plan is made once, with it).
    seqscan := current_setting('enable_seqscan');
    PERFORM set_config('enable_seqscan', 'off', true);
    FOR r IN SELECT l.lock_key, l.lease_id, l.fencing_token, s.closed_at
               FROM lease.sessions s
               JOIN lease.locks l ON l.session_id = s.session_id AND l.state = 'active'
              WHERE s.state <> 'open' AND s.closed_at <= now() - lease._ms(grace_ms)
              ORDER BY s.closed_at LIMIT batch FOR UPDATE OF l SKIP LOCKED LOOP
        seen := seen + 1;
        oldest := coalesce(oldest, r.closed_at);
        IF lease._expire(r.lock_key, r.lease_id, r.fencing_token) THEN
            expired := expired + 1;
            -- The freed row leaves the session: a row kept pointing at it
            -- stays a match of l.session_id = s.session_id that the next
            -- batch reads again and filters out by state, so each batch cost
            -- as much as the leases swept before it (issue 37: 1,121 buffers
            -- for the first of 40 batches of 500, 3,496 for the last).
            UPDATE lease.locks SET session_id = NULL
             WHERE lock_key = r.lock_key AND state = 'free' AND session_id IS NOT NULL;
        END IF;
    END LOOP;
    PERFORM set_config('enable_seqscan', seqscan, true);
END
$function$;

COMMENT ON FUNCTION lease._expire_sessions(integer,bigint) IS
    'The sweeper''s share of sessions (issue 37): records up to batch open sessions past expires_at (by grace_ms) as expired, each with one session_expire audit event, then moves up to batch leases of ended sessions (expired or closed, by grace_ms) into history (lease._expire: expired at the session''s end). seen: leases found, expired: leases moved, oldest: the end of the oldest session they belonged to. Called by lease.expire_due and lease.sweep_expired.';

REVOKE ALL ON FUNCTION lease._expire_sessions(integer,bigint) FROM PUBLIC;
