CREATE OR REPLACE FUNCTION lease.verify()
 RETURNS TABLE(problem text, lock_key text, detail text)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
BEGIN ATOMIC
 SELECT 'lock_key_mismatch'::text AS text,
     l.lock_key,
     ('stored tuple derives '::text || lease._key(ROW(l.tenant_id, l.program_id, l.target_namespace, l.target_id, l.actor_name, l.workflow_name, l.operation_class, NULL::text)::lease.identity))
    FROM lease.locks l
   WHERE (l.lock_key <> lease._key(ROW(l.tenant_id, l.program_id, l.target_namespace, l.target_id, l.actor_name, l.workflow_name, l.operation_class, NULL::text)::lease.identity))
 UNION ALL
  SELECT 'token_above_counter'::text AS text,
     l.lock_key,
     ((('active token '::text || l.fencing_token) || ' > counter '::text) || l.fencing_counter)
    FROM lease.locks l
   WHERE (((l.state)::text = 'active'::text) AND (l.fencing_token > l.fencing_counter))
 UNION ALL
  SELECT 'active_row_malformed'::text AS text,
     l.lock_key,
     'an active lease misses a column, or its times or token are out of order'::text AS text
    FROM lease.locks l
   WHERE (((l.state)::text = 'active'::text) AND (NOT COALESCE(((l.lease_id IS NOT NULL) AND (l.owner_principal_id IS NOT NULL) AND (l.owner_client_id IS NOT NULL) AND (l.owner_credential_id IS NOT NULL) AND (l.service_instance_id IS NOT NULL) AND (l.execution_id IS NOT NULL) AND (l.job_id IS NOT NULL) AND (l.request_id IS NOT NULL) AND (l.metadata IS NOT NULL) AND (l.ttl_ms IS NOT NULL) AND (l.fencing_token >= 1) AND (l.renewed_at >= l.acquired_at) AND (l.expires_at <= (l.acquired_at + ((l.maximum_lifetime_ms)::double precision * '00:00:00.001'::interval)))), false)))
 UNION ALL
  SELECT 'history_malformed'::text AS text,
     h.lock_key,
     (('history lease '::text || h.lease_id) || ' has a token below 1 or an administrative end without its administrator'::text)
    FROM lease.history h
   WHERE ((h.fencing_token < 1) OR (((h.state)::text <> 'expired'::text) AND (h.ended_by_principal_id IS NULL)))
 UNION ALL
  SELECT 'counter_below_accepted_token'::text AS text,
     m.lock_key,
     ((('accepted token '::text || m.high_water_token) || ' > counter '::text) || COALESCE((l.fencing_counter)::text, 'missing'::text))
    FROM (lease.fence_marks m
      LEFT JOIN lease.locks l ON ((l.lock_key = m.lock_key)))
   WHERE ((l.lock_key IS NULL) OR (m.high_water_token > l.fencing_counter))
 UNION ALL
  SELECT 'history_without_counter'::text AS text,
     h.lock_key,
     ((('history token '::text || max(h.fencing_token)) || ' > counter '::text) || COALESCE((max(l.fencing_counter))::text, 'missing'::text))
    FROM (lease.history h
      LEFT JOIN lease.locks l ON ((l.lock_key = h.lock_key)))
   GROUP BY h.lock_key
  HAVING ((max(l.fencing_counter) IS NULL) OR (max(h.fencing_token) > max(l.fencing_counter)))
 UNION ALL
  SELECT 'document_token_above_counter'::text AS text,
     d.lock_key,
     ((('document '::text || d.document_key) || ' accepted token '::text) || d.fencing_token)
    FROM (lease.fenced_documents d
      LEFT JOIN lease.locks l ON ((l.lock_key = d.lock_key)))
   WHERE ((l.lock_key IS NULL) OR (d.fencing_token > l.fencing_counter))
 UNION ALL
  SELECT 'quarantined'::text AS text,
     q.lock_key,
     ((q.operation || ': '::text) || q.detail)
    FROM lease.quarantine q
   WHERE (q.resolved_at IS NULL)
 UNION ALL
  SELECT 'namespace_sealed'::text AS text,
     NULL::text AS text,
     ns.sealed_reason
    FROM lease.namespace_state ns
   WHERE ns.sealed;
END;

COMMENT ON FUNCTION lease.verify() IS
    'Operators: every inconsistency a reader can find without writing (lock key not derived from the stored tuple, tokens above counters, malformed rows, counters below accepted tokens, a sealed namespace). leasectl verify prints it; leasectl recover repairs what it may.';

REVOKE ALL ON FUNCTION lease.verify() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.verify() TO lease_operator;
