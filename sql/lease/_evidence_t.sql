CREATE OR REPLACE FUNCTION lease._evidence_t(op text, l lease.locks, result jsonb, retention_ms bigint,
                                             previous_state text, resulting_state text,
                                             requested_ttl_ms bigint, reason text, incident_id text,
                                             principal_id text, principal_class text,
                                             credential_id text, request_id text,
                                             request_digest text, correlation_id text,
                                             trace_id text, deadline_class text, latency_ms integer)
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
DECLARE
    eid bigint;
BEGIN
    -- One statement writes both (a second statement costs more to start):
    -- the event's id is drawn first, so the idempotency record can name the
    -- audit event of its request (its answer is rebuilt from that event and
    -- the lease: lease._replay_answer).
    eid := nextval('lease.audit_events_event_id_seq');
    WITH remembered AS (
        INSERT INTO lease.idempotency_keys (request_key, expires_at, event_id, brief,
                                            request_digest)
        VALUES (lease._request_key(l.lock_key, op, principal_id, request_id),
                lease._now() + lease._ms(retention_ms), eid,
                -- the whole record names the identity, the brief one does not
                NOT (result -> 'lease' ? 'lock_identity'), decode(request_digest, 'hex')))
    INSERT INTO lease.audit_events (
        event_id, latency_ms, event_type, priority, decision, result_code, request_id,
        correlation_id, trace_id, execution_id, job_id, principal_class, principal_id,
        credential_id, service_instance_id, tenant_id, program_id, target_namespace, target_id,
        actor_name, workflow_name, operation_class, lease_id, fencing_token, requested_ttl_ms,
        effective_ttl_ms, deadline_class, previous_state, resulting_state, reason, incident_id,
        lease_acquired_at, session_id)
    OVERRIDING SYSTEM VALUE
    VALUES (
        eid, latency_ms, 'target_lease_' || op,
        CASE WHEN op IN ('force_release', 'revoke') THEN 'high' ELSE 'normal' END, 'allow',
        result ->> 'code', request_id, left(correlation_id, 64), coalesce(trace_id, l.trace_id),
        l.execution_id, l.job_id, left(principal_class, 16), principal_id,
        left(credential_id, 128), l.service_instance_id, l.tenant_id, l.program_id,
        l.target_namespace, l.target_id, l.actor_name, l.workflow_name, l.operation_class,
        l.lease_id, l.fencing_token, requested_ttl_ms, l.ttl_ms, left(deadline_class, 16),
        previous_state, resulting_state, reason, incident_id,
        -- what a renewal's replay answer needs and the event lacks
        CASE WHEN op = 'renew' THEN l.acquired_at END,
        -- a lease held in a session: every event of it names the session
        l.session_id);
    RETURN true;
END
$function$;

COMMENT ON FUNCTION lease._evidence_t(text,lease.locks,jsonb,bigint,text,text,bigint,text,text,text,text,text,text,text,text,text,text,integer) IS
    'The evidence of a state-changing lease operation, in one statement, inside its transaction: the audit event and the idempotency record that links to it (a narrow row, migration 0027: the answer is rebuilt from the event and the lease, lease._replay_answer; only whether it was brief is kept) (the lease index entry and the history row are the operations'' own: one statement holding both, most of it idle, costs more to start). The audit event is built from the lease row itself and the caller''s typed values: only named, non-secret columns (metadata, bodies and lock keys never reach audit). A repeated request whose lease still matched fails here on idempotency''s primary key (23505, idempotency_pkey of lease.idempotency_keys): the callers catch it in their block and answer the stored result. The one writer of this evidence: lease._evidence passes a jsonb request''s values. Returns true; an expression (assigned, not PERFORMed: PERFORM would run a query).';

REVOKE ALL ON FUNCTION lease._evidence_t(text,lease.locks,jsonb,bigint,text,text,bigint,text,text,text,text,text,text,text,text,text,text,integer) FROM PUBLIC;
