CREATE OR REPLACE FUNCTION lease._credential_expiry_check()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    IF NEW.expires_at >= lease._credential_expiry_limit() THEN
        RAISE EXCEPTION 'expires_at out of range: it must be before 10000-01-01T00:00:00Z'
            USING ERRCODE = '22023';
    END IF;
    RETURN NEW;
END
$function$;

COMMENT ON FUNCTION lease._credential_expiry_check() IS
    'Trigger on lease.credentials: refuses (22023) an expiry at or past 10000-01-01, which leased''s four-digit-year RFC 3339 times could not show.';

REVOKE ALL ON FUNCTION lease._credential_expiry_check() FROM PUBLIC;
