CREATE OR REPLACE FUNCTION lease.expire_due(batch integer, grace_ms bigint)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    r record;
    n bigint := 0;
    seen bigint := 0;
    oldest timestamptz;
    x record;
BEGIN
    PERFORM lease._housekeeping_read_committed();
    IF batch IS NULL OR batch NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'batch must be between 1 and 10000' USING ERRCODE = '22023';
    END IF;
    IF grace_ms IS NULL OR grace_ms NOT BETWEEN 0 AND 3600000 THEN
        RAISE EXCEPTION 'grace_ms must be between 0 and 3600000' USING ERRCODE = '22023';
    END IF;
    IF NOT lease._sweep_lock() THEN
        RETURN jsonb_build_object('ran', false, 'expired', 0, 'more', false, 'lag_ms', 0);
    END IF;
    -- SKIP LOCKED: a row an acquisition, renewal or release is writing is
    -- theirs; the next step finds it if it is still due.
    FOR r IN SELECT l.lock_key, l.lease_id, l.fencing_token, l.expires_at FROM lease.locks l
              WHERE l.state = 'active' AND l.expires_at <= now() - lease._ms(grace_ms)
              ORDER BY l.expires_at LIMIT batch FOR UPDATE SKIP LOCKED LOOP
        seen := seen + 1;
        oldest := coalesce(oldest, r.expires_at);
        IF lease._expire(r.lock_key, r.lease_id, r.fencing_token) THEN
            n := n + 1;
        END IF;
    END LOOP;
    -- leases of sessions that expired or closed, in what is left of the batch
    IF seen < batch THEN
        x := lease._expire_sessions(batch - seen::integer, grace_ms);
        seen := seen + x.seen;
        n := n + x.expired;
        oldest := least(oldest, x.oldest);
    END IF;
    RETURN jsonb_build_object('ran', true, 'expired', n, 'more', seen = batch,
                              'lag_ms', CASE WHEN oldest IS NULL THEN 0
                                        ELSE (extract(epoch FROM now() - oldest) * 1000)::bigint END);
END
$function$;

COMMENT ON FUNCTION lease.expire_due(integer,bigint) IS
    'The service''s expiry step: moves up to batch leases expired at least grace_ms ago into history (lease._expire, conditional on id and token), oldest first, then (lease._expire_sessions) sessions past their expiry and the leases of ended sessions in what is left of the batch, one sweeper at a time across instances. READ COMMITTED (no predicate locks: never part of a serialization failure); more: the batch was full; lag_ms: how long ago the oldest of them expired.';

REVOKE ALL ON FUNCTION lease.expire_due(integer,bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.expire_due(integer,bigint) TO lease_service;
GRANT EXECUTE ON FUNCTION lease.expire_due(integer,bigint) TO lease_admin;
