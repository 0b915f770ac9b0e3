CREATE OR REPLACE FUNCTION lease._bound_lock_wait(deadline timestamp with time zone)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM set_config('lock_timeout',
        least(600000, greatest(1, ceil(extract(epoch FROM deadline - clock_timestamp()) * 1000)))
            ::bigint::text || 'ms', true);
END
$function$;

COMMENT ON FUNCTION lease._bound_lock_wait(timestamp with time zone) IS
    'Bounds how long this transaction may wait for a row lock: never past the caller''s deadline, so no backend lock wait outlives the request.';

REVOKE ALL ON FUNCTION lease._bound_lock_wait(timestamp with time zone) FROM PUBLIC;
