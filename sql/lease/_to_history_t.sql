CREATE OR REPLACE FUNCTION lease._to_history_t(l lease.locks, terminal_state text,
                                               ended_at timestamptz, ended_by_principal_id text,
                                               ended_by_credential_id text, reason text,
                                               incident text)
 RETURNS lease.history
 LANGUAGE plpgsql
AS $function$
DECLARE
    h lease.history;
BEGIN
    INSERT INTO lease.history (
        lease_id, lock_key, tenant_id, program_id, target_namespace, target_id, actor_name,
        workflow_name, operation_class, record_version, fencing_token, owner_principal_id,
        owner_client_id, owner_credential_id, service_instance_id, acquired_at, renewed_at,
        expires_at, ttl_ms, maximum_lifetime_ms, execution_id, job_id, trace_id, request_id,
        metadata, state, ended_at, ended_by_principal_id, ended_by_credential_id, end_reason,
        incident_id, session_id)
    VALUES (
        l.lease_id, l.lock_key, l.tenant_id, l.program_id, l.target_namespace, l.target_id,
        l.actor_name, l.workflow_name, l.operation_class, l.record_version, l.fencing_token,
        l.owner_principal_id, l.owner_client_id, l.owner_credential_id, l.service_instance_id,
        l.acquired_at, l.renewed_at, l.expires_at, l.ttl_ms, l.maximum_lifetime_ms,
        l.execution_id, l.job_id, l.trace_id, l.request_id, l.metadata, terminal_state,
        ended_at, ended_by_principal_id, ended_by_credential_id, reason, incident, l.session_id)
    RETURNING * INTO h;
    RETURN h;
END
$function$;

COMMENT ON FUNCTION lease._to_history_t(lease.locks,text,timestamp with time zone,text,text,text,text) IS
    'The terminal history row of a lease that ended (released, revoked, expired), copied from its live row, with who ended it (NULL for an expiry), the reason and the incident. The one writer of history rows: lease._to_history passes a jsonb request''s principal.';

REVOKE ALL ON FUNCTION lease._to_history_t(lease.locks,text,timestamp with time zone,text,text,text,text) FROM PUBLIC;
