CREATE OR REPLACE FUNCTION lease.outbox_lag()
RETURNS TABLE (unpublished bigint, deferred bigint, oldest_created_at timestamptz,
               lag_seconds double precision)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT count(*), count(*) FILTER (WHERE o.next_attempt_at > now()), min(o.created_at),
           coalesce(extract(epoch FROM clock_timestamp() - min(o.created_at)), 0)::double precision
      FROM lease.outbox o
     WHERE o.published_at IS NULL AND o.quarantined_at IS NULL;
END;

COMMENT ON FUNCTION lease.outbox_lag() IS
    'The relay''s lag: how many rows wait and the age of the oldest, quarantined rows excluded (they wait for an operator).';

REVOKE ALL ON FUNCTION lease.outbox_lag() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.outbox_lag() TO lease_relay;
GRANT EXECUTE ON FUNCTION lease.outbox_lag() TO lease_operator;
