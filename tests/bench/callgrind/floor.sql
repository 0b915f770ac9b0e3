-- The floor under issue 20's instruction target: only the writes the
-- contract asks of an acquire and its release, in PL/pgSQL, measured with
--   tests/bench/callgrind/pair --typed --sql tests/bench/callgrind/floor.sql
-- (docs/benchmarks.md, "Issues 19 and 20: the floors under the open targets").
--
-- It replaces lease.acquire_brief_typed and lease.release_brief_typed in the
-- throwaway cluster `pair` makes with bodies that write what the real ones
-- write (the lock row, the lease index, the history row, an idempotency
-- record and an audit event each, the same columns) and nothing else: no
-- check of any argument, no deadline or lock_timeout, no namespace guard,
-- no policy read (the TTLs are constants), no first-acquisition INSERT, no
-- replay of a repeated request id, no nested function but the answer's
-- own. It is a measurement, not a lease service: it decides nothing.
-- The table guards stay (the locks_fencing CHECK, the audit and history
-- triggers); the figure without them is in docs/benchmarks.md.
CREATE OR REPLACE FUNCTION lease.acquire_brief_typed(
    tenant_id text, program_id text, target_namespace text, target_id text, actor_name text,
    workflow_name text, operation_class text, service_instance_id text, execution_id text,
    job_id text, trace_id text, ttl_ms bigint, maximum_lifetime_ms bigint, metadata jsonb,
    principal_id text, client_id text, credential_id text, principal_class text, request_id text,
    request_digest text, deadline_at timestamptz, correlation_id text, deadline_class text,
    latency_ms integer, brief boolean DEFAULT true)
 RETURNS jsonb LANGUAGE plpgsql SECURITY DEFINER SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    t timestamptz := now();
    k text := lease._key(ROW(tenant_id, program_id, target_namespace, target_id, actor_name,
                             workflow_name, coalesce(operation_class, 'default'), NULL)::lease.identity);
    lid text := lease._new_lease_id(t);
    l lease.locks;
    result jsonb;
BEGIN
    UPDATE lease.locks AS x
       SET fencing_counter = fencing_counter + 1, state = 'active', lease_id = lid,
           fencing_token = fencing_counter + 1, owner_principal_id = principal_id,
           owner_client_id = coalesce(client_id, ''), owner_credential_id = coalesce(credential_id, ''),
           service_instance_id = acquire_brief_typed.service_instance_id, acquired_at = t,
           renewed_at = t, expires_at = t + interval '30 s', ttl_ms = 30000,
           maximum_lifetime_ms = 3600000, execution_id = acquire_brief_typed.execution_id,
           job_id = acquire_brief_typed.job_id, trace_id = acquire_brief_typed.trace_id,
           request_id = acquire_brief_typed.request_id, metadata = '{}'
     WHERE lock_key = k AND state = 'free'
    RETURNING * INTO l;
    INSERT INTO lease.lease_index (lease_id, lock_key, created_at) VALUES (lid, k, t);
    -- the brief record: the new lease's id, token, times, TTLs and client
    result := jsonb_build_object('code', 'lease_acquired', 'lease', jsonb_build_object(
        'lease_id', l.lease_id, 'fencing_token', l.fencing_token,
        'acquired_at', lease._ts(l.acquired_at), 'renewed_at', lease._ts(l.acquired_at),
        'expires_at', lease._ts(l.expires_at), 'ttl_ms', l.ttl_ms,
        'maximum_lifetime_ms', l.maximum_lifetime_ms, 'owner_client_id', l.owner_client_id,
        'owner_credential_id', l.owner_credential_id, 'state', 'active'));
    WITH remembered AS (
        INSERT INTO lease.idempotency (lock_key, operation, owner_principal_id, request_id,
                                       request_digest, result, lease_id, created_at, expires_at)
        VALUES (k, 'acquire', principal_id, request_id, decode(request_digest, 'hex'), result,
                lid, t, t + interval '1 day'))
    INSERT INTO lease.audit_events (
        latency_ms, event_type, priority, decision, result_code, request_id, correlation_id,
        trace_id, execution_id, job_id, principal_class, principal_id, credential_id,
        service_instance_id, tenant_id, program_id, target_namespace, target_id, actor_name,
        workflow_name, operation_class, lease_id, fencing_token, requested_ttl_ms,
        effective_ttl_ms, deadline_class, previous_state, resulting_state, reason, incident_id)
    VALUES (
        latency_ms, 'target_lease_acquire', 'normal', 'allow', 'lease_acquired', request_id,
        correlation_id, trace_id, l.execution_id, l.job_id, principal_class, principal_id,
        credential_id, l.service_instance_id, l.tenant_id, l.program_id,
        l.target_namespace, l.target_id, l.actor_name, l.workflow_name, l.operation_class,
        l.lease_id, l.fencing_token, ttl_ms, l.ttl_ms, deadline_class, 'none', 'active', NULL, NULL);
    RETURN result;
END
$function$;

CREATE OR REPLACE FUNCTION lease.release_brief_typed(
    tenant_id text, program_id text, target_namespace text, target_id text, actor_name text,
    workflow_name text, operation_class text, lease_id text, fencing_token bigint,
    service_instance_id text, principal_id text, principal_class text, credential_id text,
    request_id text, request_digest text, deadline_at timestamptz, correlation_id text,
    trace_id text, deadline_class text, latency_ms integer)
 RETURNS jsonb LANGUAGE plpgsql SECURITY DEFINER SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    t timestamptz := now();
    k text := lease._key(ROW(tenant_id, program_id, target_namespace, target_id, actor_name,
                             workflow_name, coalesce(operation_class, 'default'), NULL)::lease.identity);
    l lease.locks;
    result jsonb;
BEGIN
    UPDATE lease.locks AS x SET state = 'free'
     WHERE x.lock_key = k AND x.state = 'active' AND x.lease_id = release_brief_typed.lease_id
       AND x.fencing_token = release_brief_typed.fencing_token
    RETURNING * INTO l;
    INSERT INTO lease.history (
        lease_id, lock_key, tenant_id, program_id, target_namespace, target_id, actor_name,
        workflow_name, operation_class, record_version, fencing_token, owner_principal_id,
        owner_client_id, owner_credential_id, service_instance_id, acquired_at, renewed_at,
        expires_at, ttl_ms, maximum_lifetime_ms, execution_id, job_id, trace_id, request_id,
        metadata, state, ended_at, ended_by_principal_id, ended_by_credential_id, end_reason,
        incident_id)
    VALUES (
        l.lease_id, l.lock_key, l.tenant_id, l.program_id, l.target_namespace, l.target_id,
        l.actor_name, l.workflow_name, l.operation_class, l.record_version, l.fencing_token,
        l.owner_principal_id, l.owner_client_id, l.owner_credential_id, l.service_instance_id,
        l.acquired_at, l.renewed_at, l.expires_at, l.ttl_ms, l.maximum_lifetime_ms,
        l.execution_id, l.job_id, l.trace_id, l.request_id, l.metadata, 'released',
        t, principal_id, credential_id, NULL, NULL);
    result := jsonb_build_object('code', 'lease_released', 'lease',
                                 lease._ended_json(l, 'released', t));
    WITH remembered AS (
        INSERT INTO lease.idempotency (lock_key, operation, owner_principal_id, request_id,
                                       request_digest, result, lease_id, created_at, expires_at)
        VALUES (k, 'release', principal_id, request_id, decode(request_digest, 'hex'), result,
                l.lease_id, t, t + interval '1 day'))
    INSERT INTO lease.audit_events (
        latency_ms, event_type, priority, decision, result_code, request_id, correlation_id,
        trace_id, execution_id, job_id, principal_class, principal_id, credential_id,
        service_instance_id, tenant_id, program_id, target_namespace, target_id, actor_name,
        workflow_name, operation_class, lease_id, fencing_token, requested_ttl_ms,
        effective_ttl_ms, deadline_class, previous_state, resulting_state, reason, incident_id)
    VALUES (
        latency_ms, 'target_lease_release', 'normal', 'allow', 'lease_released', request_id,
        correlation_id, trace_id, l.execution_id, l.job_id, principal_class, principal_id,
        credential_id, l.service_instance_id, l.tenant_id, l.program_id,
        l.target_namespace, l.target_id, l.actor_name, l.workflow_name, l.operation_class,
        l.lease_id, l.fencing_token, NULL, l.ttl_ms, deadline_class, 'active', 'released', NULL, NULL);
    RETURN result;
END
$function$;
