CREATE OR REPLACE FUNCTION lease.fence_check(lock_identity jsonb, lease_id text, fencing_token bigint, owner_principal_id text DEFAULT NULL::text)
 RETURNS timestamp with time zone
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    i lease.identity;
    k text;
    l lease.locks;
    hw bigint;
BEGIN
    PERFORM lease._require_serializable();
    i := lease._identity(lock_identity);
    IF i.bad_field IS NOT NULL THEN
        RAISE EXCEPTION 'invalid %', i.bad_field USING ERRCODE = '22023';
    END IF;
    IF lease_id IS NULL OR length(lease_id) > 128 OR lease_id !~ '^[A-Za-z0-9._:-]+$'
       OR coalesce(fencing_token, 0) <= 0 THEN
        RAISE EXCEPTION 'invalid lease_id or fencing_token' USING ERRCODE = '22023';
    END IF;
    -- the guard may seal, but this raise rolls that back with the caller's
    -- transaction: the refusal does not depend on it (the sweeper records it)
    IF lease._guard() IS NOT NULL THEN
        RAISE EXCEPTION 'lease namespace is sealed until recovery' USING ERRCODE = 'LS010';
    END IF;
    k := lease._key(i);
    l := lease._fence(k, i, lease_id, fencing_token, owner_principal_id, NULL);
    IF l.lock_key IS NULL THEN
        SELECT m.high_water_token INTO hw FROM lease.fence_marks m WHERE m.lock_key = k;
        IF hw IS NOT NULL AND fencing_token < hw THEN
            RAISE EXCEPTION 'fencing token % is below the accepted high-water mark %',
                fencing_token, hw USING ERRCODE = 'LS011';
        END IF;
        RAISE EXCEPTION 'lease % is not the active lease of this identity', lease_id
            USING ERRCODE = 'LS010';
    END IF;
    PERFORM lease._accept_token(k, fencing_token);
    RETURN l.expires_at;
END
$function$;

COMMENT ON FUNCTION lease.fence_check(jsonb,text,bigint,text) IS
    'Whether a fencing token is still the active, unexpired, exact lease of its identity (for applications'' own transactions), behind the namespace guard. A token below the high-water mark of accepted tokens is refused.';

REVOKE ALL ON FUNCTION lease.fence_check(jsonb,text,bigint,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.fence_check(jsonb,text,bigint,text) TO lease_service;
