CREATE OR REPLACE VIEW lease.fencing_counters AS
SELECT l.lock_key, l.tenant_id, l.program_id, l.target_namespace, l.target_id, l.actor_name,
       l.workflow_name, l.operation_class, l.fencing_counter,
       m.high_water_token,
       CASE WHEN l.state = 'active' AND e.ends_at > now() THEN 'active'
            WHEN l.state = 'active' THEN 'expired' ELSE 'free' END AS state,
       l.created_at
  FROM lease.locks l LEFT JOIN lease.fence_marks m ON m.lock_key = l.lock_key
       -- when the lease ends by time: lease._effective_expiry's rule, written
       -- out here because a view's readers (lease_operator) may not execute
       -- internal functions nor read lease.sessions (the view may)
       CROSS JOIN LATERAL (
           SELECT CASE WHEN l.session_id IS NULL THEN l.expires_at
                       ELSE least(l.expires_at, coalesce(
                           (SELECT CASE WHEN s.state = 'open' THEN s.expires_at ELSE s.closed_at END
                              FROM lease.sessions s WHERE s.session_id = l.session_id),
                           '-infinity')) END AS ends_at) e;

COMMENT ON VIEW lease.fencing_counters IS
    'Operators: per identity, the fencing counter (next token) and the high-water mark of accepted tokens. Read-only (lease_operator).';
REVOKE ALL ON TABLE lease.fencing_counters FROM PUBLIC;
GRANT SELECT ON TABLE lease.fencing_counters TO lease_operator;
