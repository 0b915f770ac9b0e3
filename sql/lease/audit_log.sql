CREATE OR REPLACE VIEW lease.audit_log AS
 SELECT audit_events.event_id,
    audit_events.occurred_at,
    audit_events.latency_ms,
    audit_events.event_type,
    audit_events.priority,
    audit_events.decision,
    audit_events.result_code,
    audit_events.retryable,
    audit_events.backend_health,
    audit_events.request_id,
    audit_events.correlation_id,
    audit_events.trace_id,
    audit_events.execution_id,
    audit_events.job_id,
    audit_events.principal_class,
    audit_events.principal_id,
    audit_events.credential_id,
    audit_events.service_instance_id,
    audit_events.tenant_id,
    audit_events.program_id,
    audit_events.target_namespace,
    audit_events.target_id,
    audit_events.actor_name,
    audit_events.workflow_name,
    audit_events.operation_class,
    audit_events.lease_id,
    audit_events.fencing_token,
    audit_events.requested_ttl_ms,
    audit_events.effective_ttl_ms,
    audit_events.deadline_class,
    audit_events.previous_state,
    audit_events.resulting_state,
    audit_events.reason,
    audit_events.incident_id,
    audit_events.event_count,
    audit_events.source_address,
    audit_events.lease_acquired_at
   FROM lease.audit_events;

COMMENT ON VIEW lease.audit_log IS
    'Operators: the audit events (append-only lease.audit_events), including event_count (refusals an aggregated event stands for) source_address and lease_acquired_at (a renewal''s: when its lease was acquired). Read-only (lease_operator).';
REVOKE ALL ON TABLE lease.audit_log FROM PUBLIC;
GRANT SELECT ON TABLE lease.audit_log TO lease_operator;
