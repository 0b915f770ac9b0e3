CREATE OR REPLACE FUNCTION lease.outbox_requeue(outbox_id bigint, reason text)
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
       SET quarantined_at = NULL, next_attempt_at = NULL, last_error = 'requeued: ' || reason
     WHERE o.outbox_id = outbox_id AND o.published_at IS NULL AND o.quarantined_at IS NOT NULL;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        PERFORM lease._outbox_audit(outbox_id, lease._sql_principal(), 'outbox_requeued', 'allow',
                                    reason);
    END IF;
    RETURN n;
END
$function$;

COMMENT ON FUNCTION lease.outbox_requeue(bigint,text) IS
    'Operators: deliver a quarantined row again (after fixing the broker''s limit, the route or the CouchDB database). It is claimed like a new row, after the later rows of its identity that went out meanwhile.';

REVOKE ALL ON FUNCTION lease.outbox_requeue(bigint,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.outbox_requeue(bigint,text) TO lease_admin;
