CREATE OR REPLACE FUNCTION lease.verify()
RETURNS TABLE (problem text, lock_key text, detail text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT 'lock_key_mismatch', l.lock_key, 'stored tuple derives ' || lease._key(ROW(
               l.tenant_id, l.program_id, l.target_namespace, l.target_id, l.actor_name,
               l.workflow_name, l.operation_class, NULL)::lease.identity)
      FROM lease.locks l
     WHERE l.lock_key <> lease._key(ROW(l.tenant_id, l.program_id, l.target_namespace,
               l.target_id, l.actor_name, l.workflow_name, l.operation_class,
               NULL)::lease.identity)
    UNION ALL
    SELECT 'token_above_counter', l.lock_key,
           'active token ' || l.fencing_token || ' > counter ' || l.fencing_counter
      FROM lease.locks l WHERE l.state = 'active' AND l.fencing_token > l.fencing_counter
    UNION ALL
    -- the shape an active row must have (0009 keeps only the fencing CHECK:
    -- every CHECK costs each write statement a parse)
    SELECT 'active_row_malformed', l.lock_key,
           'an active lease misses a column, or its times or token are out of order'
      FROM lease.locks l
     WHERE l.state = 'active'
       AND NOT coalesce(l.lease_id IS NOT NULL AND l.owner_principal_id IS NOT NULL
                        AND l.owner_client_id IS NOT NULL AND l.owner_credential_id IS NOT NULL
                        AND l.service_instance_id IS NOT NULL AND l.execution_id IS NOT NULL
                        AND l.job_id IS NOT NULL AND l.request_id IS NOT NULL
                        AND l.metadata IS NOT NULL AND l.ttl_ms IS NOT NULL
                        AND l.fencing_token >= 1 AND l.renewed_at >= l.acquired_at
                        AND l.expires_at <= l.acquired_at
                                           + l.maximum_lifetime_ms * interval '1 millisecond',
                        false)
    UNION ALL
    SELECT 'history_malformed', h.lock_key, 'history lease ' || h.lease_id
           || ' has a token below 1 or an administrative end without its administrator'
      FROM lease.history h
     WHERE h.fencing_token < 1 OR (h.state <> 'expired' AND h.ended_by_principal_id IS NULL)
    UNION ALL
    SELECT 'counter_below_accepted_token', m.lock_key,
           'accepted token ' || m.high_water_token || ' > counter '
           || coalesce(l.fencing_counter::text, 'missing')
      FROM lease.fence_marks m LEFT JOIN lease.locks l ON l.lock_key = m.lock_key
     WHERE l.lock_key IS NULL OR m.high_water_token > l.fencing_counter
    UNION ALL
    SELECT 'history_without_counter', h.lock_key,
           'history token ' || max(h.fencing_token) || ' > counter '
           || coalesce(max(l.fencing_counter)::text, 'missing')
      FROM lease.history h LEFT JOIN lease.locks l ON l.lock_key = h.lock_key
     GROUP BY h.lock_key
    HAVING max(l.fencing_counter) IS NULL OR max(h.fencing_token) > max(l.fencing_counter)
    UNION ALL
    SELECT 'document_token_above_counter', d.lock_key,
           'document ' || d.document_key || ' accepted token ' || d.fencing_token
      FROM lease.fenced_documents d LEFT JOIN lease.locks l ON l.lock_key = d.lock_key
     WHERE l.lock_key IS NULL OR d.fencing_token > l.fencing_counter
    UNION ALL
    SELECT 'quarantined', q.lock_key, q.operation || ': ' || q.detail
      FROM lease.quarantine q WHERE q.resolved_at IS NULL
    UNION ALL
    SELECT 'namespace_sealed', NULL, ns.sealed_reason
      FROM lease.namespace_state ns WHERE ns.sealed;
END;

COMMENT ON FUNCTION lease.verify() IS
    'Operators: every inconsistency a reader can find without writing (lock key not derived from the stored tuple, tokens above counters, malformed rows, counters below accepted tokens, a sealed namespace). leasectl verify prints it; leasectl recover repairs what it may.';

REVOKE ALL ON FUNCTION lease.verify() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.verify() TO lease_operator;
