CREATE OR REPLACE FUNCTION lease.sweep_expired(batch integer)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    r record;
    n bigint := 0;
    seen integer := 0;
    x record;
BEGIN
    PERFORM lease._require_serializable();
    IF batch IS NULL OR batch NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'batch must be between 1 and 10000' USING ERRCODE = '22023';
    END IF;
    IF NOT lease._sweep_lock() THEN
        RETURN jsonb_build_object('ran', false, 'expired', 0);
    END IF;
    FOR r IN SELECT l.lock_key, l.lease_id, l.fencing_token FROM lease.locks l
              WHERE l.state = 'active' AND l.expires_at <= now() LIMIT batch LOOP
        seen := seen + 1;
        IF lease._expire(r.lock_key, r.lease_id, r.fencing_token) THEN
            n := n + 1;
        END IF;
    END LOOP;
    -- leases of sessions that expired or closed, in what is left of the batch
    IF seen < batch THEN
        x := lease._expire_sessions(batch - seen, 0);
        n := n + x.expired;
    END IF;
    RETURN jsonb_build_object('ran', true, 'expired', n);
END
$function$;

COMMENT ON FUNCTION lease.sweep_expired(integer) IS
    'Moves up to batch leases expired at backend time into history (then, in what is left of the batch, sessions past their expiry and the leases of ended sessions: lease._expire_sessions) (lease._expire, conditional on id and token), one sweeper at a time across instances; an expired lease is already free to acquire, sweeping only records its end.';

REVOKE ALL ON FUNCTION lease.sweep_expired(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.sweep_expired(integer) TO lease_service;
GRANT EXECUTE ON FUNCTION lease.sweep_expired(integer) TO lease_admin;
