CREATE OR REPLACE FUNCTION lease._outbox_audit(id bigint, principal jsonb, result_code text, decision text, reason text)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
DECLARE
    o lease.outbox;
    l lease.locks;
BEGIN
    SELECT * INTO o FROM lease.outbox x WHERE x.outbox_id = id;
    SELECT * INTO l FROM lease.locks x WHERE x.lock_key = o.lock_key;
    PERFORM lease._audit(jsonb_build_object('principal', principal), 'target_lease_quarantine',
                         result_code,
                         jsonb_build_object(
                             'decision', decision, 'priority', 'high',
                             'lock_identity', lease._identity_json(
                                 l.tenant_id, l.program_id, l.target_namespace, l.target_id,
                                 l.actor_name, l.workflow_name, l.operation_class),
                             'lease_id', o.lease_id, 'fencing_token', o.fencing_token,
                             'execution_id', o.execution_id, 'trace_id', o.trace_id,
                             'reason', left('outbox row ' || id || ' (topic ' || o.topic || '): '
                                            || reason, 512)));
END
$function$;

COMMENT ON FUNCTION lease._outbox_audit(bigint,jsonb,text,text,text) IS
    'The audit event of a quarantine decision about one outbox row, with the row''s identity, lease and token.';

REVOKE ALL ON FUNCTION lease._outbox_audit(bigint,jsonb,text,text,text) FROM PUBLIC;
