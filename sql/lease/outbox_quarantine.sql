CREATE OR REPLACE FUNCTION lease.outbox_quarantine(outbox_id bigint, relay_instance text, reason text)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_variable
DECLARE
    n integer;
BEGIN
    PERFORM lease._require_read_committed();
    PERFORM lease._relay_text(relay_instance, 'relay_instance', 128);
    PERFORM lease._relay_text(reason, 'reason', 400);
    PERFORM lease._outbox_require_claimed(ARRAY[outbox_id]);
    UPDATE lease.outbox o
       SET quarantined_at = lease._now(), quarantine_reason = reason,
           last_error = 'quarantined: ' || reason, attempts = o.attempts + 1,
           next_attempt_at = NULL
     WHERE o.outbox_id = outbox_id AND o.published_at IS NULL AND o.quarantined_at IS NULL;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        PERFORM lease._outbox_audit(outbox_id,
                                    jsonb_build_object('principal_id', left('relay:' || relay_instance, 128),
                                                       'principal_class', 'relay',
                                                       'credential_id', ''),
                                    'outbox_quarantined', 'error', reason);
    END IF;
    RETURN n;
END
$function$;

COMMENT ON FUNCTION lease.outbox_quarantine(bigint,text,text) IS
    'The relay sets a claimed row aside: its destination refused it for a reason retrying cannot fix. Returns 1, or 0 for a row already finished.';

REVOKE ALL ON FUNCTION lease.outbox_quarantine(bigint,text,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.outbox_quarantine(bigint,text,text) TO lease_relay;
