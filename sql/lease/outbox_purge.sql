CREATE OR REPLACE FUNCTION lease.outbox_purge(retention_ms bigint, batch integer)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    n integer;
BEGIN
    IF retention_ms IS NULL OR retention_ms < 0 THEN
        RAISE EXCEPTION 'retention_ms must be >= 0' USING ERRCODE = '22023';
    END IF;
    IF batch IS NULL OR batch NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION 'batch must be between 1 and 100000' USING ERRCODE = '22023';
    END IF;
    DELETE FROM lease.outbox o
     WHERE o.outbox_id IN (SELECT p.outbox_id FROM lease.outbox p
                            WHERE p.published_at < now() - lease._ms(retention_ms)
                            ORDER BY p.published_at LIMIT batch
                              FOR UPDATE SKIP LOCKED);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$function$;

COMMENT ON FUNCTION lease.outbox_purge(bigint,integer) IS
    'Deletes published rows older than retention_ms, at most batch of them.';

REVOKE ALL ON FUNCTION lease.outbox_purge(bigint,integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.outbox_purge(bigint,integer) TO lease_relay;
GRANT EXECUTE ON FUNCTION lease.outbox_purge(bigint,integer) TO lease_admin;
