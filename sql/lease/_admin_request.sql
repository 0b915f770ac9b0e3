CREATE OR REPLACE FUNCTION lease._admin_request(lease_id text, reason text, incident_id text, op text)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
DECLARE
    l lease.locks;
BEGIN
    -- refuse before the lookup: even "lease_lost" is a decision
    PERFORM lease._require_serializable();
    SELECT l2.* INTO l FROM lease.lease_index x JOIN lease.locks l2 USING (lock_key)
     WHERE x.lease_id = _admin_request.lease_id AND l2.lease_id = x.lease_id;
    IF NOT FOUND THEN
        RETURN lease._result('lease_lost');
    END IF;
    RETURN jsonb_build_object(
        'deadline_at', lease._ts(now() + interval '30 seconds'),
        'request_id', 'sql-' || replace(gen_random_uuid()::text, '-', ''),
        'request_digest', encode(sha256(convert_to(concat_ws(E'\x1f', op, l.lease_id,
                                  l.fencing_token::text, reason, incident_id), 'UTF8')), 'hex'),
        'principal', lease._sql_principal(),
        'lock_identity', lease._lease_json(l) -> 'lock_identity',
        'lease_id', l.lease_id, 'fencing_token', l.fencing_token,
        'reason', reason, 'incident_id', incident_id);
END
$function$;

COMMENT ON FUNCTION lease._admin_request(text,text,text,text) IS
    'psql conveniences: force-release or revoke the lease active under an id, as the session user, with the same checks and audit as the service.';

REVOKE ALL ON FUNCTION lease._admin_request(text,text,text,text) FROM PUBLIC;
