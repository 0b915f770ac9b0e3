CREATE OR REPLACE FUNCTION lease.recover_epoch(reason text, floor bigint DEFAULT NULL::bigint)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    pol lease.policy;
    ns lease.namespace_state;
    p jsonb := jsonb_build_object('principal', lease._sql_principal());
    l lease.locks;
    revoked bigint := 0;
    raised bigint;
    why text;
BEGIN
    PERFORM lease._require_serializable();
    IF reason IS NULL OR btrim(reason) = '' OR char_length(reason) > 512
       OR reason ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'a reason (1..512 characters) is required' USING ERRCODE = '22023';
    END IF;
    IF floor IS NOT NULL AND floor < 0 THEN
        RAISE EXCEPTION 'floor must not be negative' USING ERRCODE = '22023';
    END IF;
    SELECT * INTO pol FROM lease.policy;
    SELECT * INTO ns FROM lease.namespace_state FOR UPDATE;
    why := 'epoch recovery: ' || reason;

    IF EXISTS (SELECT 1 FROM lease.locks x LEFT JOIN lease.fence_marks m USING (lock_key)
                WHERE greatest(x.fencing_counter + pol.epoch_stride, coalesce(floor, 0),
                               coalesce(m.high_water_token, 0)) > pol.token_limit) THEN
        RAISE EXCEPTION 'raising counters would pass the policy token limit'
            USING ERRCODE = 'LS005', HINT = 'lower epoch_stride or floor; tokens never wrap';
    END IF;

    FOR l IN SELECT * FROM lease.locks WHERE state = 'active' LOOP
        IF lease._effective_expiry(l.session_id, l.expires_at) <= now() THEN
            PERFORM lease._to_history(l, 'expired', lease._effective_expiry(l.session_id, l.expires_at), NULL, NULL, NULL);
        ELSE
            PERFORM lease._to_history(l, 'revoked', lease._now(), p, why, NULL);
            revoked := revoked + 1;
        END IF;
    END LOOP;

    UPDATE lease.locks x
       SET fencing_counter = greatest(x.fencing_counter + pol.epoch_stride, coalesce(floor, 0),
                                      coalesce((SELECT m.high_water_token FROM lease.fence_marks m
                                                 WHERE m.lock_key = x.lock_key), 0)),
           state = 'free', lease_id = NULL, fencing_token = NULL, owner_principal_id = NULL,
           owner_client_id = NULL, owner_credential_id = NULL, service_instance_id = NULL,
           acquired_at = NULL, renewed_at = NULL, expires_at = NULL, ttl_ms = NULL,
           maximum_lifetime_ms = NULL, execution_id = NULL, job_id = NULL, trace_id = NULL,
           request_id = NULL, metadata = NULL;
    GET DIAGNOSTICS raised = ROW_COUNT;

    UPDATE lease.namespace_state
       SET epoch = epoch + 1, sealed = false, sealed_reason = NULL, sealed_at = NULL;
    PERFORM lease._record_namespace();
    INSERT INTO lease.recoveries (epoch, reason, floor_token, counters_raised, leases_revoked,
                                  performed_by, performed_at)
    VALUES (ns.epoch + 1, reason, floor, raised, revoked, p #>> '{principal,principal_id}',
            lease._now());
    PERFORM lease._audit(p, 'target_lease_recover', 'lease_revoked',
                         jsonb_build_object('priority', 'high', 'reason', why,
                                            'resulting_state', 'revoked'));
    RETURN jsonb_build_object('epoch', ns.epoch + 1, 'counters_raised', raised,
                              'leases_revoked', revoked);
END
$function$;

COMMENT ON FUNCTION lease.recover_epoch(text,bigint) IS
    'Disaster recovery (docs/operators.md): raises every fencing counter by the policy''s epoch stride (and, through the epoch, the outbox ids) past anything a lost database may have handed out, ends the leases it held, unseals the namespace and records this database (timeline, system identifier, schema object id, WAL position) as the namespace''s.';

REVOKE ALL ON FUNCTION lease.recover_epoch(text,bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.recover_epoch(text,bigint) TO lease_admin;
