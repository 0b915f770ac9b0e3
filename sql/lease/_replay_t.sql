CREATE OR REPLACE FUNCTION lease._replay_t(k text, op text, principal_id text, request_id text,
                                           request_digest text)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE
AS $function$
DECLARE
    idem lease.idempotency;
    cur text;
BEGIN
    SELECT * INTO idem FROM lease.idempotency i
     WHERE i.lock_key = k AND i.operation = op AND i.owner_principal_id = _replay_t.principal_id
       AND i.request_id = _replay_t.request_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF idem.request_digest <> decode(_replay_t.request_digest, 'hex') THEN
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

COMMENT ON FUNCTION lease._replay_t(text,text,text,text,text) IS
    'Looks up a stored idempotent result by its key (lock key, operation, owner principal, request id). Returns NULL when the request is new, the replayed result (with "replayed" and the lease''s current state) when the digest (hex) matches, or idempotency_conflict when it does not. Called with typed values (lease.renew_brief_typed) and through lease._replay for a jsonb request.';

REVOKE ALL ON FUNCTION lease._replay_t(text,text,text,text,text) FROM PUBLIC;
