CREATE OR REPLACE FUNCTION lease.acquire_brief_typed(
    tenant_id text, program_id text, target_namespace text, target_id text, actor_name text,
    workflow_name text, operation_class text, service_instance_id text, execution_id text,
    job_id text, trace_id text, ttl_ms bigint, maximum_lifetime_ms bigint, metadata jsonb,
    principal_id text, client_id text, credential_id text, principal_class text, request_id text,
    request_digest text, deadline_at timestamptz, correlation_id text, deadline_class text,
    latency_ms integer)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RETURN lease._acquire_t(tenant_id, program_id, target_namespace, target_id, actor_name,
                            workflow_name, operation_class, service_instance_id, execution_id,
                            job_id, trace_id, ttl_ms, maximum_lifetime_ms, metadata, principal_id,
                            client_id, credential_id, principal_class, request_id, request_digest,
                            deadline_at, correlation_id, deadline_class, latency_ms, true, NULL);
END
$function$;

COMMENT ON FUNCTION lease.acquire_brief_typed(text,text,text,text,text,text,text,text,text,text,text,bigint,bigint,jsonb,text,text,text,text,text,text,timestamp with time zone,text,text,integer) IS
    'lease.acquire with typed arguments instead of a jsonb request (what the service calls for an acquisition): the same decision (lease._acquire_t) and evidence, answered briefly: {"code": ...} with the brief lease record. operation_class NULL is the default; trace_id NULL: none; ttl_ms and maximum_lifetime_ms NULL: the policy''s; metadata NULL: none (an object, by the rules of docs/api.md "Metadata"); request_digest is the 64 hex digits of the request''s SHA-256. A repeated request id is answered from its stored result.';

REVOKE ALL ON FUNCTION lease.acquire_brief_typed(text,text,text,text,text,text,text,text,text,text,text,bigint,bigint,jsonb,text,text,text,text,text,text,timestamp with time zone,text,text,integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.acquire_brief_typed(text,text,text,text,text,text,text,text,text,text,text,bigint,bigint,jsonb,text,text,text,text,text,text,timestamp with time zone,text,text,integer) TO lease_service;
