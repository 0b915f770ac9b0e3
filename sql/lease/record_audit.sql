CREATE OR REPLACE FUNCTION lease.record_audit(events jsonb)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    n integer;
    forged text;
BEGIN
    PERFORM lease._require_serializable();
    IF jsonb_typeof(events) IS DISTINCT FROM 'array' THEN
        PERFORM lease._malformed('events is not an array');
    END IF;
    SELECT e.event_type INTO forged
      FROM jsonb_to_recordset(events) AS e(event_type text, decision text, principal_id text,
                                           lease_id text)
     WHERE e.event_type IN ('target_lease_recover', 'target_lease_quarantine',
                            'target_lease_alert', 'credential_create', 'credential_revoke')
        OR (e.event_type IN ('target_lease_force_release', 'target_lease_revoke')
            AND e.decision IS DISTINCT FROM 'deny' AND e.decision IS DISTINCT FROM 'error'
            AND NOT EXISTS (
                SELECT 1 FROM lease.history h
                 WHERE h.lease_id = e.lease_id AND h.ended_by_principal_id = e.principal_id
                   AND h.state = CASE e.event_type WHEN 'target_lease_revoke' THEN 'revoked'
                                                   ELSE 'released' END))
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'the service may not record % events it cannot back', forged
            USING ERRCODE = '42501',
                  HINT = 'administrator events are written by the operations themselves';
    END IF;
    INSERT INTO lease.audit_events (
        occurred_at, latency_ms, event_type, priority, decision, result_code, retryable,
        backend_health, request_id, correlation_id, trace_id, execution_id, job_id,
        principal_class, principal_id, credential_id, service_instance_id, tenant_id, program_id,
        target_namespace, target_id, actor_name, workflow_name, operation_class, lease_id,
        fencing_token, requested_ttl_ms, effective_ttl_ms, deadline_class, previous_state,
        resulting_state, reason, incident_id, event_count, source_address)
    SELECT now(), e.latency_ms, e.event_type,
           coalesce(e.priority, 'normal'), e.decision, left(e.result_code, 64),
           coalesce(e.retryable, false), coalesce(e.backend_health, 'ok'),
           left(e.request_id, 128), left(e.correlation_id, 64), left(e.trace_id, 128),
           left(e.execution_id, 128), left(e.job_id, 128),
           (SELECT CASE WHEN c.admin THEN 'admin' ELSE 'worker' END
              FROM lease.credentials c
             WHERE c.credential_id = e.credential_id AND c.principal_id = e.principal_id),
           left(e.principal_id, 128), left(e.credential_id, 128), left(e.service_instance_id, 128),
           left(e.tenant_id, 64), left(e.program_id, 64), left(e.target_namespace, 64),
           left(e.target_id, 128), left(e.actor_name, 64), left(e.workflow_name, 64),
           left(e.operation_class, 16), left(e.lease_id, 128), e.fencing_token,
           e.requested_ttl_ms, e.effective_ttl_ms, left(e.deadline_class, 16),
           left(e.previous_state, 16), left(e.resulting_state, 16), left(e.reason, 512),
           left(e.incident_id, 128), greatest(coalesce(e.event_count, 1), 1),
           left(e.source_address, 64)
      FROM jsonb_to_recordset(events) AS e(
        latency_ms integer, event_type text, priority text,
        decision text, result_code text, retryable boolean, backend_health text,
        request_id text, correlation_id text, trace_id text, execution_id text, job_id text,
        principal_id text, credential_id text, service_instance_id text,
        tenant_id text, program_id text, target_namespace text, target_id text,
        actor_name text, workflow_name text, operation_class text, lease_id text,
        fencing_token bigint, requested_ttl_ms bigint, effective_ttl_ms bigint,
        deadline_class text, previous_state text, resulting_state text, reason text,
        incident_id text, event_count integer, source_address text);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$function$;

COMMENT ON FUNCTION lease.record_audit(jsonb) IS
    'The service''s audit batches (refusals and reads decided outside a lease transaction). The service may not claim: occurred_at is the backend''s now(); principal_class is the credential''s when credential_id and principal_id name one credential, else NULL; administrator event types come only from SQL, except force_release and revoke refusals or an allow naming a lease this principal really ended that way.';

REVOKE ALL ON FUNCTION lease.record_audit(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.record_audit(jsonb) TO lease_service;
