CREATE OR REPLACE FUNCTION lease.outbox_mark_published(outbox_ids bigint[], relay_instance text)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    n integer;
BEGIN
    PERFORM lease._require_read_committed();
    PERFORM lease._relay_text(relay_instance, 'relay_instance', 128);
    PERFORM lease._outbox_require_claimed(outbox_ids);
    UPDATE lease.outbox o
       SET published_at = lease._now(), published_by = relay_instance, last_error = NULL
     WHERE o.outbox_id = ANY (outbox_ids) AND o.published_at IS NULL;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$function$;

COMMENT ON FUNCTION lease.outbox_mark_published(bigint[],text) IS
    'The relay records delivery of rows it claimed (only claimed rows; 42501 otherwise), so a relay can never finish a row another relay holds.';

REVOKE ALL ON FUNCTION lease.outbox_mark_published(bigint[],text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.outbox_mark_published(bigint[],text) TO lease_relay;
