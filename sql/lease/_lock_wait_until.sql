CREATE OR REPLACE FUNCTION lease._lock_wait_until(deadline timestamptz) RETURNS boolean
LANGUAGE sql VOLATILE
RETURN clock_timestamp() < deadline
       AND set_config('lock_timeout',
               least(600000, ceil(extract(epoch FROM deadline - clock_timestamp()) * 1000))
                   ::bigint::text || 'ms', true) IS NOT NULL;

COMMENT ON FUNCTION lease._lock_wait_until(timestamp with time zone) IS
    'Bounds how long this transaction may wait for a row lock: never past the caller''s deadline, so no backend lock wait outlives the request. False (and nothing set) when the deadline has already passed: the caller then answers deadline_exceeded before its first write. An expression, used in an IF (PERFORM would run a query).';

REVOKE ALL ON FUNCTION lease._lock_wait_until(timestamp with time zone) FROM PUBLIC;
