CREATE OR REPLACE FUNCTION lease._replay(k text, op text, p jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE
AS $function$
DECLARE
    idem lease.idempotency;
    cur text;
BEGIN
    SELECT * INTO idem FROM lease.idempotency
     WHERE lock_key = k AND operation = op
       AND owner_principal_id = p #>> '{principal,principal_id}'
       AND request_id = p ->> 'request_id';
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF idem.request_digest <> decode(p ->> 'request_digest', 'hex') THEN
        RETURN lease._result('idempotency_conflict');
    END IF;
    IF idem.lease_id IS NOT NULL THEN
        SELECT CASE WHEN l.state = 'active' AND l.expires_at > now() THEN 'active'
                    WHEN l.state = 'active' THEN 'expired' END
          INTO cur FROM lease.locks l WHERE l.lock_key = k AND l.lease_id = idem.lease_id;
        IF cur IS NULL THEN
            SELECT h.state INTO cur FROM lease.history h WHERE h.lease_id = idem.lease_id;
        END IF;
    END IF;
    RETURN idem.result || jsonb_build_object('replayed', true,
                                             'current_state', coalesce(cur, 'expired'));
END
$function$;

COMMENT ON FUNCTION lease._replay(text,text,jsonb) IS
    'Looks up a stored idempotent result. Returns NULL when the request is new, the replayed result (with "replayed" and the lease''s current state) when the digest matches, or idempotency_conflict when it does not.';

REVOKE ALL ON FUNCTION lease._replay(text,text,jsonb) FROM PUBLIC;
