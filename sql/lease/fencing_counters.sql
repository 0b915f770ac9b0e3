CREATE OR REPLACE VIEW lease.fencing_counters AS
SELECT l.lock_key, l.tenant_id, l.program_id, l.target_namespace, l.target_id, l.actor_name,
       l.workflow_name, l.operation_class, l.fencing_counter,
       m.high_water_token,
       CASE WHEN l.state = 'active' AND l.expires_at > now() THEN 'active'
            WHEN l.state = 'active' THEN 'expired' ELSE 'free' END AS state,
       l.created_at
  FROM lease.locks l LEFT JOIN lease.fence_marks m ON m.lock_key = l.lock_key;

COMMENT ON VIEW lease.fencing_counters IS
    'Operators: per identity, the fencing counter (next token) and the high-water mark of accepted tokens. Read-only (lease_operator).';
REVOKE ALL ON TABLE lease.fencing_counters FROM PUBLIC;
GRANT SELECT ON TABLE lease.fencing_counters TO lease_operator;
