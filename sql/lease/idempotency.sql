CREATE OR REPLACE VIEW lease.idempotency AS
 SELECT lease.lock_key(a.tenant_id, a.program_id, a.target_namespace, a.target_id,
                       a.actor_name, a.workflow_name, a.operation_class) AS lock_key,
    substr(a.event_type, length('target_lease_') + 1) AS operation,
    a.principal_id AS owner_principal_id,
    a.request_id,
    x.request_digest,
    lease._replay_answer(lease.lock_key(a.tenant_id, a.program_id, a.target_namespace,
                                        a.target_id, a.actor_name, a.workflow_name,
                                        a.operation_class), x, a) - 'current_state' AS result,
    coalesce(a.lease_id, x.answer #>> '{lease,lease_id}', x.answer ->> 'lease_id') AS lease_id,
    date_trunc('milliseconds', a.occurred_at) AS created_at,
    x.expires_at,
    x.request_key,
    x.event_id,
    x.brief
   FROM lease.idempotency_keys x
     LEFT JOIN lease.audit_events a ON a.event_id = x.event_id;

COMMENT ON VIEW lease.idempotency IS
    'The idempotency records as the table of that name held them before migration 0027: each state-changing request''s key (lock key, operation, owner principal, request id, from its audit event), digest, stored answer (result: lease._replay_answer, rebuilt from the audit event and the lease), lease id and times, beside the narrow row''s own request_key, event_id and brief. Computing result reads the lease: select it for a few rows, not for a count. Owner only.';
REVOKE ALL ON TABLE lease.idempotency FROM PUBLIC;
