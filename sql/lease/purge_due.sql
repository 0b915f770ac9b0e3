CREATE OR REPLACE FUNCTION lease.purge_due(batch integer)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    pol lease.policy;
    idem record;
    hist record;
    idx record;
    aud record;
    ses bigint;
BEGIN
    PERFORM lease._housekeeping_read_committed();
    IF batch IS NULL OR batch NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION 'batch must be between 1 and 100000' USING ERRCODE = '22023';
    END IF;
    IF NOT lease._sweep_lock() THEN
        RETURN jsonb_build_object('ran', false, 'more', false);
    END IF;
    SELECT * INTO pol FROM lease.policy;
    idem := lease._purge_batch('lease.idempotency_keys', 'expires_at', 'expires_at', now(), batch);
    hist := lease._purge_batch('lease.history', 'ended_at', 'ended_at',
                               now() - lease._ms(pol.history_retention_ms), batch);
    -- a lease id outlives its history row only while the lease could live
    idx := lease._purge_batch('lease.lease_index', 'created_at', 'created_at',
                              now() - lease._ms(pol.history_retention_ms + pol.maximum_lifetime_ms),
                              batch);
    -- Ended sessions (closed, or recorded expired) once a repeat of their
    -- open or close could no longer be answered from them: past the
    -- idempotency retention, oldest first (the sessions_ended index), and
    -- none with a lease still active in it (a session that is gone ended
    -- long ago for lease._effective_expiry; its leases' ends are written
    -- by then). An open session is never purged.
    DELETE FROM lease.sessions WHERE session_id IN (
        SELECT s.session_id FROM lease.sessions s
         WHERE s.state <> 'open'
           AND s.closed_at < now() - lease._ms(pol.idempotency_retention_ms)
           AND NOT EXISTS (SELECT 1 FROM lease.locks l
                            WHERE l.session_id = s.session_id AND l.state = 'active')
         ORDER BY s.closed_at LIMIT batch);
    GET DIAGNOSTICS ses = ROW_COUNT;
    PERFORM set_config('lease.audit_purge', 'on', true);
    -- in event id order (its primary key; ids follow time)
    aud := lease._purge_batch('lease.audit_events', 'occurred_at', 'event_id',
                              now() - lease._ms(pol.audit_retention_ms), batch);
    PERFORM set_config('lease.audit_purge', 'off', true);
    RETURN jsonb_build_object(
        'ran', true,
        'more', idem.lag_ms > 0 OR hist.lag_ms > 0 OR idx.lag_ms > 0 OR aud.lag_ms > 0 OR ses >= batch,
        'idempotency_purged', idem.purged, 'history_purged', hist.purged,
        'lease_index_purged', idx.purged, 'audit_purged', aud.purged, 'sessions_purged', ses,
        'idempotency_lag_ms', idem.lag_ms, 'history_lag_ms', hist.lag_ms,
        'lease_index_lag_ms', idx.lag_ms, 'audit_lag_ms', aud.lag_ms);
END
$function$;

COMMENT ON FUNCTION lease.purge_due(integer) IS
    'The service''s retention step: as lease.purge_retention (at most batch rows of each table, oldest first, one instance at a time), at READ COMMITTED, and ended sessions past the idempotency retention with no active lease in them (sessions_purged): retention deletes rows no lease decision depends on, and takes no predicate locks, so it never takes part in a serialization failure. more: some table still has rows past retention; *_lag_ms: how far past retention the oldest of them is.';

REVOKE ALL ON FUNCTION lease.purge_due(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.purge_due(integer) TO lease_service;
GRANT EXECUTE ON FUNCTION lease.purge_due(integer) TO lease_admin;
