CREATE OR REPLACE FUNCTION lease._audit(p jsonb, event_type text, result_code text, extra jsonb)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
    INSERT INTO lease.audit_events (
        latency_ms, event_type, priority, decision, result_code, retryable, request_id,
        correlation_id, trace_id, execution_id, job_id, principal_class, principal_id,
        credential_id, service_instance_id, tenant_id, program_id, target_namespace, target_id,
        actor_name, workflow_name, operation_class, lease_id, fencing_token, requested_ttl_ms,
        effective_ttl_ms, deadline_class, previous_state, resulting_state, reason, incident_id)
    VALUES (
        lease._int(p -> 'latency_ms')::integer, event_type,
        coalesce(extra ->> 'priority', 'normal'),
        coalesce(extra ->> 'decision', 'allow'), result_code,
        coalesce((extra ->> 'retryable')::boolean, false),
        left(p ->> 'request_id', 128), left(p ->> 'correlation_id', 64),
        left(coalesce(extra ->> 'trace_id', p ->> 'trace_id'), 128),
        extra ->> 'execution_id', extra ->> 'job_id',
        left(p #>> '{principal,principal_class}', 16), left(p #>> '{principal,principal_id}', 128),
        left(p #>> '{principal,credential_id}', 128), extra ->> 'service_instance_id',
        extra #>> '{lock_identity,tenant_id}', extra #>> '{lock_identity,program_id}',
        extra #>> '{lock_identity,target_namespace}', extra #>> '{lock_identity,target_id}',
        extra #>> '{lock_identity,actor_name}', extra #>> '{lock_identity,workflow_name}',
        extra #>> '{lock_identity,operation_class}', extra ->> 'lease_id',
        (extra ->> 'fencing_token')::bigint, (extra ->> 'requested_ttl_ms')::bigint,
        (extra ->> 'effective_ttl_ms')::bigint, left(p ->> 'deadline_class', 16),
        extra ->> 'previous_state', extra ->> 'resulting_state', extra ->> 'reason',
        extra ->> 'incident_id');
END
$function$;

COMMENT ON FUNCTION lease._audit(jsonb,text,text,jsonb) IS
    'Inserts one audit event of a mutation, inside its transaction. `p` is the request (for request/correlation/trace ids, principal, deadline class, latency); `extra` supplies the event''s own columns. Only named, non-secret columns are copied: metadata, bodies and lock keys never reach audit.';

REVOKE ALL ON FUNCTION lease._audit(jsonb,text,text,jsonb) FROM PUBLIC;
