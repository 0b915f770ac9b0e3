CREATE OR REPLACE FUNCTION lease._remember(k text, op text, p jsonb, result jsonb)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
    -- the answer is kept whole (a commit's revisions and outbox ids are
    -- nowhere else), linked to the audit event the caller wrote just before
    -- (currval: this session's last event id)
    INSERT INTO lease.idempotency_keys (request_key, expires_at, event_id, brief, request_digest,
                                        answer)
    SELECT lease._request_key(k, op, p #>> '{principal,principal_id}', p ->> 'request_id'),
           lease._now() + lease._ms(pol.idempotency_retention_ms),
           currval(pg_get_serial_sequence('lease.audit_events', 'event_id')), true,
           decode(p ->> 'request_digest', 'hex'), result
      FROM lease.policy pol;
END
$function$;

COMMENT ON FUNCTION lease._remember(text,text,jsonb,jsonb) IS
    'Stores the answer of a state-changing request whose answer the audit event cannot rebuild (fenced_commit: its revisions and outbox ids), linked to the audit event the caller wrote just before it in the same transaction. The lease operations use lease._evidence.';

REVOKE ALL ON FUNCTION lease._remember(text,text,jsonb,jsonb) FROM PUBLIC;
