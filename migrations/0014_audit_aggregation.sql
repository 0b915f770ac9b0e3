-- 0014: aggregated audit events and the client address of every event.
--
-- A flood of requests with bad credentials from one address is audited as
-- one event per address and window with a count (leased's
-- LEASE_AUTH_AUDIT_WINDOW_MS), not one row per request: the audit log of a
-- flood must not cost the database as much as the flood itself. Such an
-- event has event_count > 1; every event carries the client address
-- leased saw (NULL for events from SQL). Queryable as before, e.g.
--
--   SELECT source_address, sum(event_count) FROM lease.audit_log
--    WHERE event_type = 'target_lease_authenticate'
--      AND occurred_at > now() - interval '1 hour'
--    GROUP BY 1 ORDER BY 2 DESC;

-- Domains, not table CHECKs: PostgreSQL re-reads a table's CHECK expressions
-- for every INSERT statement (0009), and every lease operation inserts an
-- audit event.
CREATE DOMAIN lease.event_count AS integer CHECK (VALUE >= 1);
CREATE DOMAIN lease.source_address AS text CHECK (length(VALUE) <= 64);

ALTER TABLE lease.audit_events
    ADD COLUMN event_count lease.event_count NOT NULL DEFAULT 1,
    ADD COLUMN source_address lease.source_address;

COMMENT ON COLUMN lease.audit_events.event_count IS
    'how many requests this event stands for (aggregated refusals before authentication)';
COMMENT ON COLUMN lease.audit_events.source_address IS
    'the client address leased saw (its per-source limits key)';

-- As 0006, plus event_count and source_address.
CREATE OR REPLACE FUNCTION lease.record_audit(events jsonb) RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n integer;
BEGIN
    PERFORM lease._require_serializable();
    IF jsonb_typeof(events) IS DISTINCT FROM 'array' THEN
        PERFORM lease._malformed('events is not an array');
    END IF;
    INSERT INTO lease.audit_events (
        occurred_at, latency_ms, event_type, priority, decision, result_code, retryable,
        backend_health, request_id, correlation_id, trace_id, execution_id, job_id,
        principal_class, principal_id, credential_id, service_instance_id, tenant_id, program_id,
        target_namespace, target_id, actor_name, workflow_name, operation_class, lease_id,
        fencing_token, requested_ttl_ms, effective_ttl_ms, deadline_class, previous_state,
        resulting_state, reason, incident_id, event_count, source_address)
    -- the service's clock, but never in the future nor older than an hour,
    -- so no batch can place events inside the purge window
    SELECT greatest(least(coalesce(e.occurred_at, now()), now()), now() - interval '1 hour'),
           e.latency_ms, e.event_type,
           coalesce(e.priority, 'normal'), e.decision, left(e.result_code, 64),
           coalesce(e.retryable, false), coalesce(e.backend_health, 'ok'),
           left(e.request_id, 128), left(e.correlation_id, 64), left(e.trace_id, 128),
           left(e.execution_id, 128), left(e.job_id, 128), left(e.principal_class, 16),
           left(e.principal_id, 128), left(e.credential_id, 128), left(e.service_instance_id, 128),
           left(e.tenant_id, 64), left(e.program_id, 64), left(e.target_namespace, 64),
           left(e.target_id, 128), left(e.actor_name, 64), left(e.workflow_name, 64),
           left(e.operation_class, 16), left(e.lease_id, 128), e.fencing_token,
           e.requested_ttl_ms, e.effective_ttl_ms, left(e.deadline_class, 16),
           left(e.previous_state, 16), left(e.resulting_state, 16), left(e.reason, 512),
           left(e.incident_id, 128), greatest(coalesce(e.event_count, 1), 1),
           left(e.source_address, 64)
      FROM jsonb_to_recordset(events) AS e(
        occurred_at timestamptz, latency_ms integer, event_type text, priority text,
        decision text, result_code text, retryable boolean, backend_health text,
        request_id text, correlation_id text, trace_id text, execution_id text, job_id text,
        principal_class text, principal_id text, credential_id text, service_instance_id text,
        tenant_id text, program_id text, target_namespace text, target_id text,
        actor_name text, workflow_name text, operation_class text, lease_id text,
        fencing_token bigint, requested_ttl_ms bigint, effective_ttl_ms bigint,
        deadline_class text, previous_state text, resulting_state text, reason text,
        incident_id text, event_count integer, source_address text);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- The view gains the two columns (appended; existing columns unchanged).
CREATE OR REPLACE VIEW lease.audit_log AS
SELECT * FROM lease.audit_events;
