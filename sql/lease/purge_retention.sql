CREATE OR REPLACE FUNCTION lease.purge_retention(batch integer)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    pol lease.policy;
    idem bigint;
    hist bigint;
    aud bigint;
BEGIN
    PERFORM lease._require_serializable();
    IF batch IS NULL OR batch NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION 'batch must be between 1 and 100000' USING ERRCODE = '22023';
    END IF;
    IF NOT lease._sweep_lock() THEN
        RETURN jsonb_build_object('ran', false, 'idempotency_purged', 0, 'history_purged', 0,
                                  'audit_purged', 0);
    END IF;
    SELECT * INTO pol FROM lease.policy;
    DELETE FROM lease.idempotency_keys WHERE ctid IN (
        SELECT ctid FROM lease.idempotency_keys WHERE expires_at < now()
         ORDER BY expires_at LIMIT batch);
    GET DIAGNOSTICS idem = ROW_COUNT;
    DELETE FROM lease.history WHERE ctid IN (
        SELECT ctid FROM lease.history
         WHERE ended_at < now() - lease._ms(pol.history_retention_ms)
         ORDER BY ended_at LIMIT batch);
    GET DIAGNOSTICS hist = ROW_COUNT;
    -- a lease id outlives its history row only while the lease could live
    DELETE FROM lease.lease_index WHERE ctid IN (
        SELECT ctid FROM lease.lease_index
         WHERE created_at < now() - lease._ms(pol.history_retention_ms + pol.maximum_lifetime_ms)
         ORDER BY created_at LIMIT batch);
    PERFORM set_config('lease.audit_purge', 'on', true);
    DELETE FROM lease.audit_events WHERE event_id IN (
        SELECT event_id FROM lease.audit_events
         WHERE occurred_at < now() - lease._ms(pol.audit_retention_ms)
         ORDER BY occurred_at LIMIT batch);
    GET DIAGNOSTICS aud = ROW_COUNT;
    PERFORM set_config('lease.audit_purge', 'off', true);
    RETURN jsonb_build_object('ran', true, 'idempotency_purged', idem, 'history_purged', hist,
                              'audit_purged', aud);
END
$function$;

COMMENT ON FUNCTION lease.purge_retention(integer) IS
    'Deletes idempotency rows, history and audit events past retention, in bounded batches, one instance at a time. The only path that may delete audit events.';

REVOKE ALL ON FUNCTION lease.purge_retention(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.purge_retention(integer) TO lease_service;
GRANT EXECUTE ON FUNCTION lease.purge_retention(integer) TO lease_admin;
