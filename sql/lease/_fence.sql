CREATE OR REPLACE FUNCTION lease._fence(k text, i lease.identity, lease_id text, token bigint, owner text, execution text)
 RETURNS lease.locks
 LANGUAGE plpgsql
AS $function$
DECLARE
    l lease.locks;
    hw bigint;
BEGIN
    SELECT * INTO l FROM lease.locks WHERE lock_key = k FOR SHARE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF NOT lease._same_identity(l, i) OR l.record_version <> 1 THEN
        PERFORM lease._corrupt(k, 'stored identity tuple or record version does not match');
    END IF;
    IF l.state <> 'active' OR lease._effective_expiry(l.session_id, l.expires_at) <= now() OR l.lease_id <> lease_id
       OR l.fencing_token <> token
       OR (owner IS NOT NULL AND l.owner_principal_id <> owner)
       OR (execution IS NOT NULL AND l.execution_id <> execution) THEN
        RETURN NULL;
    END IF;
    SELECT m.high_water_token INTO hw FROM lease.fence_marks m WHERE m.lock_key = k;
    IF hw IS NOT NULL AND token < hw THEN
        RETURN NULL;
    END IF;
    RETURN l;
END
$function$;

COMMENT ON FUNCTION lease._fence(text,lease.identity,text,bigint,text,text) IS
    'The identity''s row locked FOR SHARE for a fenced write. The share lock orders the write against renewals and administrative invalidation in real time: a revoke waits for an in-flight commit, and a commit that starts after a revoke committed fails with 40001 or sees the revoke. Returns NULL when the lease is not the active, unexpired, exact lease (or the token is below the high-water mark); raises LS001 on corruption.';

REVOKE ALL ON FUNCTION lease._fence(text,lease.identity,text,bigint,text,text) FROM PUBLIC;
