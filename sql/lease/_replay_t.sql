CREATE OR REPLACE FUNCTION lease._replay_t(k text, op text, principal_id text, request_id text,
                                           request_digest text)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE
AS $function$
DECLARE
    x lease.idempotency_keys;
    a lease.audit_events;
BEGIN
    SELECT * INTO x FROM lease.idempotency_keys i
     WHERE i.request_key = lease._request_key(k, op, _replay_t.principal_id, _replay_t.request_id);
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF x.request_digest <> decode(_replay_t.request_digest, 'hex') THEN
        RETURN lease._result('idempotency_conflict');
    END IF;
    SELECT * INTO a FROM lease.audit_events e WHERE e.event_id = x.event_id;
    RETURN lease._replay_answer(k, x, a) || '{"replayed": true}'::jsonb;
END
$function$;

COMMENT ON FUNCTION lease._replay_t(text,text,text,text,text) IS
    'Looks up an idempotency record by its key (lease._request_key of lock key, operation, owner principal, request id). Returns NULL when the request is new, the replayed answer (lease._replay_answer: the stored answer rebuilt, with "replayed" and the lease''s current state) when the digest (hex) matches, or idempotency_conflict when it does not. Called with typed values (lease.renew_brief_typed) and through lease._replay for a jsonb request.';

REVOKE ALL ON FUNCTION lease._replay_t(text,text,text,text,text) FROM PUBLIC;
