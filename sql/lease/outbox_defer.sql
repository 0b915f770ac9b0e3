CREATE OR REPLACE FUNCTION lease.outbox_defer(outbox_id bigint, delay_ms integer, error text)
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
    PERFORM lease._relay_text(error, 'error', 512);
    IF delay_ms IS NULL OR delay_ms NOT BETWEEN 0 AND 86400000 THEN
        RAISE EXCEPTION 'delay_ms must be between 0 and 86400000' USING ERRCODE = '22023';
    END IF;
    PERFORM lease._outbox_require_claimed(ARRAY[outbox_id]);
    UPDATE lease.outbox o
       SET attempts = o.attempts + 1, last_error = error,
           next_attempt_at = clock_timestamp() + lease._ms(delay_ms)
     WHERE o.outbox_id = outbox_id AND o.published_at IS NULL;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$function$;

COMMENT ON FUNCTION lease.outbox_defer(bigint,integer,text) IS
    'The relay retries a claimed row later (delay_ms 0..86400000, the error kept): only a row this transaction claimed (lease._outbox_require_claimed).';

REVOKE ALL ON FUNCTION lease.outbox_defer(bigint,integer,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.outbox_defer(bigint,integer,text) TO lease_relay;
