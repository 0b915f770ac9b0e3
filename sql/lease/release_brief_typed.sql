CREATE OR REPLACE FUNCTION lease.release_brief_typed(
    tenant_id text, program_id text, target_namespace text, target_id text, actor_name text,
    workflow_name text, operation_class text, lease_id text, fencing_token bigint,
    service_instance_id text, principal_id text, principal_class text, credential_id text,
    request_id text, request_digest text, deadline_at timestamptz, correlation_id text,
    trace_id text, deadline_class text, latency_ms integer)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    -- lease._end_t decides every ending (release, force_release, revoke)
    -- and answers a repeated request id in its own subtransaction
    RETURN lease._end_t(tenant_id, program_id, target_namespace, target_id, actor_name,
                        workflow_name, operation_class, lease_id, fencing_token,
                        service_instance_id, principal_id, principal_class, credential_id,
                        request_id, request_digest, deadline_at, correlation_id, trace_id,
                        deadline_class, latency_ms, NULL, NULL, 'release', 'released',
                        'lease_released', true, NULL, true);
END
$function$;

COMMENT ON FUNCTION lease.release_brief_typed(text,text,text,text,text,text,text,text,bigint,text,text,text,text,text,text,timestamp with time zone,text,text,text,integer) IS
    'lease.release with typed arguments instead of a jsonb request (what the service calls for one release): the same decision (lease._end_t) and evidence, answered briefly: {"code": ...} with the brief ended record. The arguments are lease.renew_brief_typed''s without ttl_ms. A repeated request id is answered from its stored result, as lease.release answers it.';

REVOKE ALL ON FUNCTION lease.release_brief_typed(text,text,text,text,text,text,text,text,bigint,text,text,text,text,text,text,timestamp with time zone,text,text,text,integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.release_brief_typed(text,text,text,text,text,text,text,text,bigint,text,text,text,text,text,text,timestamp with time zone,text,text,text,integer) TO lease_service;
