CREATE OR REPLACE FUNCTION lease.outbox_discard(outbox_id bigint, reason text)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_variable
DECLARE
    n integer;
BEGIN
    PERFORM lease._relay_text(reason, 'reason', 400);
    UPDATE lease.outbox o
       SET published_at = lease._now(), published_by = left('operator:' || session_user, 128),
           last_error = 'discarded: ' || reason
     WHERE o.outbox_id = outbox_id AND o.published_at IS NULL;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        PERFORM lease._outbox_audit(outbox_id, lease._sql_principal(), 'outbox_discarded', 'allow',
                                    reason);
    END IF;
    RETURN n;
END
$function$;

COMMENT ON FUNCTION lease.outbox_discard(bigint,text) IS
    'Operators: drop an unpublished row (quarantined or not), audited: the only way a row leaves without being delivered.';

REVOKE ALL ON FUNCTION lease.outbox_discard(bigint,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.outbox_discard(bigint,text) TO lease_admin;
