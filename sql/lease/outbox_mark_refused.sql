CREATE OR REPLACE FUNCTION lease.outbox_mark_refused(outbox_id bigint, relay_instance text, reason text)
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
       SET published_at = lease._now(), published_by = relay_instance,
           last_error = 'refused: ' || reason
     WHERE o.outbox_id = outbox_id AND o.published_at IS NULL;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$function$;

COMMENT ON FUNCTION lease.outbox_mark_refused(bigint,text,text) IS
    'The relay records that a claimed row''s destination refused it for good (finished, not retried, reason kept): only a row this transaction claimed.';

REVOKE ALL ON FUNCTION lease.outbox_mark_refused(bigint,text,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.outbox_mark_refused(bigint,text,text) TO lease_relay;
