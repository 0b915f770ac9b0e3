CREATE OR REPLACE FUNCTION lease._expire(k text, expected_lease_id text, expected_token bigint)
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
DECLARE
    l lease.locks;
BEGIN
    UPDATE lease.locks SET state = 'free'
     WHERE lock_key = k AND state = 'active' AND lease_id = expected_lease_id
       AND fencing_token = expected_token
       AND lease._effective_expiry(session_id, expires_at) <= now()
    RETURNING * INTO l;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    -- ended when it expired: for a lease in a session, perhaps when the
    -- session did (expired or closed)
    PERFORM lease._to_history(l, 'expired', lease._effective_expiry(l.session_id, l.expires_at),
                              NULL, NULL, NULL);
    RETURN true;
END
$function$;

COMMENT ON FUNCTION lease._expire(text,text,bigint) IS
    'Moves an expired lease still in its row into history and frees the row, conditional on its lease id and token (a delayed cleanup that finds a successor or a renewal changes nothing). Returns whether it did.';

REVOKE ALL ON FUNCTION lease._expire(text,text,bigint) FROM PUBLIC;
