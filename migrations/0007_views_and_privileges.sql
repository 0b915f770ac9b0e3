-- 0007: operator views, the append-only audit guard, and privileges.

-- Live, unexpired leases. An active-shaped row past expires_at is not here.
CREATE VIEW lease.active_leases AS
SELECT l.lock_key, l.tenant_id, l.program_id, l.target_namespace, l.target_id, l.actor_name,
       l.workflow_name, l.operation_class, l.lease_id, l.fencing_token, l.owner_principal_id,
       l.owner_client_id, l.owner_credential_id, l.service_instance_id, l.acquired_at,
       l.renewed_at, l.expires_at, l.expires_at - now() AS remaining, l.ttl_ms,
       l.maximum_lifetime_ms, l.execution_id, l.job_id, l.trace_id, l.request_id, l.metadata
  FROM lease.locks l
 WHERE l.state = 'active' AND l.expires_at > now();

-- Terminal leases, including expired ones the sweeper has not moved yet.
CREATE VIEW lease.lease_history AS
SELECT h.lease_id, h.lock_key, h.tenant_id, h.program_id, h.target_namespace, h.target_id,
       h.actor_name, h.workflow_name, h.operation_class, h.fencing_token, h.state,
       h.acquired_at, h.renewed_at, h.expires_at, h.ended_at, h.ended_by_principal_id,
       h.ended_by_credential_id, h.end_reason, h.incident_id, h.owner_principal_id,
       h.owner_client_id, h.owner_credential_id, h.service_instance_id, h.ttl_ms,
       h.maximum_lifetime_ms, h.execution_id, h.job_id, h.trace_id, h.request_id
  FROM lease.history h
UNION ALL
SELECT l.lease_id, l.lock_key, l.tenant_id, l.program_id, l.target_namespace, l.target_id,
       l.actor_name, l.workflow_name, l.operation_class, l.fencing_token, 'expired',
       l.acquired_at, l.renewed_at, l.expires_at, l.expires_at, NULL, NULL, NULL, NULL,
       l.owner_principal_id, l.owner_client_id, l.owner_credential_id, l.service_instance_id,
       l.ttl_ms, l.maximum_lifetime_ms, l.execution_id, l.job_id, l.trace_id, l.request_id
  FROM lease.locks l
 WHERE l.state = 'active' AND l.expires_at <= now();

CREATE VIEW lease.audit_log AS
SELECT * FROM lease.audit_events;

-- Every identity's durable counter and accepted high-water mark.
CREATE VIEW lease.fencing_counters AS
SELECT l.lock_key, l.tenant_id, l.program_id, l.target_namespace, l.target_id, l.actor_name,
       l.workflow_name, l.operation_class, l.fencing_counter, m.high_water_token,
       CASE WHEN l.state = 'active' AND l.expires_at > now() THEN 'active'
            WHEN l.state = 'active' THEN 'expired' ELSE 'free' END AS state,
       l.created_at
  FROM lease.locks l LEFT JOIN lease.fence_marks m ON m.lock_key = l.lock_key;

CREATE VIEW lease.quarantined_records AS
SELECT q.quarantine_id, q.lock_key, q.operation, q.detail, q.stored_record, q.detected_at
  FROM lease.quarantine q
 WHERE q.resolved_at IS NULL;

-- Audit events are append-only: no UPDATE or TRUNCATE for anyone, DELETE
-- only inside lease.purge_retention (which sets lease.audit_purge).
CREATE FUNCTION lease._audit_append_only() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('lease.audit_purge', true) = 'on' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'lease.audit_events is append-only (% refused)', TG_OP USING ERRCODE = 'LS004';
END
$$;

CREATE TRIGGER audit_events_append_only
    BEFORE UPDATE OR DELETE ON lease.audit_events
    FOR EACH ROW EXECUTE FUNCTION lease._audit_append_only();
CREATE TRIGGER audit_events_no_truncate
    BEFORE TRUNCATE ON lease.audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION lease._audit_append_only();

-- Privileges. Nothing for PUBLIC; no role writes a table directly except
-- lease_admin's UPDATE of the policy row.
REVOKE ALL ON ALL TABLES IN SCHEMA lease FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA lease FROM PUBLIC;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA lease FROM PUBLIC;

GRANT EXECUTE ON FUNCTION
    lease.acquire(jsonb), lease.renew(jsonb), lease.release(jsonb),
    lease.force_release(jsonb), lease.revoke(jsonb), lease.inspect(jsonb),
    lease.list_by_owner(jsonb), lease.list_by_target(jsonb), lease.list_by_program(jsonb),
    lease.fenced_commit(jsonb), lease.fence_check(jsonb, text, bigint, text),
    lease.sweep_expired(integer), lease.purge_retention(integer), lease.record_audit(jsonb),
    lease.credential_lookup(text), lease.quarantine(text, text, text), lease.health(),
    lease.check_namespace(), lease.lock_key(text, text, text, text, text, text, text),
    lease.normalize_component(text, text)
TO lease_service;

GRANT EXECUTE ON FUNCTION
    lease.lock_key(text, text, text, text, text, text, text),
    lease.normalize_component(text, text), lease.health(), lease.verify()
TO lease_operator;

GRANT EXECUTE ON FUNCTION
    lease.recover_epoch(text, bigint), lease.admin_force_release(text, text),
    lease.admin_revoke(text, text, text), lease.credential_create(jsonb),
    lease.credential_revoke(text), lease.credential_list(), lease.check_namespace(),
    lease.sweep_expired(integer), lease.purge_retention(integer)
TO lease_admin;

GRANT SELECT ON lease.active_leases, lease.lease_history, lease.audit_log,
    lease.fencing_counters, lease.quarantined_records, lease.policy, lease.namespace_state,
    lease.schema_migrations, lease.recoveries
TO lease_operator;

GRANT UPDATE ON lease.policy TO lease_admin;
