CREATE OR REPLACE FUNCTION lease._accept_token(k text, token bigint)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
    INSERT INTO lease.fence_marks AS m (lock_key, high_water_token, updated_at)
    VALUES (k, token, lease._now())
    ON CONFLICT (lock_key) DO UPDATE
       SET high_water_token = EXCLUDED.high_water_token, updated_at = EXCLUDED.updated_at
     WHERE m.high_water_token < EXCLUDED.high_water_token;
END
$function$;

COMMENT ON FUNCTION lease._accept_token(text,bigint) IS
    'Raises the high-water mark of accepted tokens (never lowers it).';

REVOKE ALL ON FUNCTION lease._accept_token(text,bigint) FROM PUBLIC;
