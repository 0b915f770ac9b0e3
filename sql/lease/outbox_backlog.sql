CREATE OR REPLACE VIEW lease.outbox_backlog AS
SELECT o.outbox_id, o.topic, o.fencing_token, o.lease_id, o.execution_id, o.trace_id,
       jsonb_build_object('tenant_id', l.tenant_id, 'program_id', l.program_id,
                          'target_namespace', l.target_namespace, 'target_id', l.target_id,
                          'actor_name', l.actor_name, 'workflow_name', l.workflow_name,
                          'operation_class', l.operation_class) AS lock_identity,
       o.created_at, o.attempts, o.next_attempt_at, o.last_error, o.quarantined_at,
       o.quarantine_reason
  FROM lease.outbox o
  JOIN lease.locks l ON l.lock_key = o.lock_key
 WHERE o.published_at IS NULL;

COMMENT ON VIEW lease.outbox_backlog IS
    'Operators: per destination, what the relay still has to deliver and how old it is, with the quarantined rows counted apart (they wait for an operator, not for a relay). Read-only (lease_operator).';
REVOKE ALL ON TABLE lease.outbox_backlog FROM PUBLIC;
GRANT SELECT ON TABLE lease.outbox_backlog TO lease_operator;
