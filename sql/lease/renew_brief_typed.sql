CREATE OR REPLACE FUNCTION lease.renew_brief_typed(
    tenant_id text, program_id text, target_namespace text, target_id text, actor_name text,
    workflow_name text, operation_class text, lease_id text, fencing_token bigint, ttl_ms bigint,
    service_instance_id text, principal_id text, principal_class text, credential_id text,
    request_id text, request_digest text, deadline_at timestamptz, correlation_id text,
    trace_id text, deadline_class text, latency_ms integer, brief boolean DEFAULT true)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    s lease._settings;
    cn text;
    replay jsonb;
BEGIN
    SELECT * INTO s FROM lease._settings;
    RETURN lease._renew_t(tenant_id, program_id, target_namespace, target_id, actor_name,
                          workflow_name, operation_class, lease_id, fencing_token, ttl_ms,
                          service_instance_id, principal_id, principal_class, credential_id,
                          request_id, request_digest, deadline_at, correlation_id, trace_id,
                          deadline_class, latency_ms, brief, s);
EXCEPTION WHEN unique_violation THEN
    -- The one replay path of a renewal, whatever form the request came in
    -- (lease.renew calls this function; a batch falls back to it item by
    -- item): this request id committed before and the lease still
    -- matched, so idempotency's primary key refused the evidence. The
    -- stored answer, nothing of this attempt (the block's subtransaction
    -- undoes it).
    GET STACKED DIAGNOSTICS cn = CONSTRAINT_NAME;
    replay := lease._replay_of_typed_conflict(cn, 'renew', tenant_id, program_id,
                                              target_namespace, target_id, actor_name,
                                              workflow_name, operation_class, principal_id,
                                              request_id, request_digest);
    IF replay IS NULL THEN
        RAISE;
    END IF;
    RETURN replay;
END
$function$;

COMMENT ON FUNCTION lease.renew_brief_typed(text,text,text,text,text,text,text,text,bigint,bigint,text,text,text,text,text,text,timestamp with time zone,text,text,text,integer,boolean) IS
    'One renewal on typed arguments (what the service calls for one renewal, and lease.renew with a jsonb request''s values): lease._renew_t decides, in this function''s subtransaction, and a repeated request id whose lease still matched is answered here from its stored result (the one replay path of a renewal). brief (the default): {"code": ...} with the brief lease record; false (lease.renew): the whole record. operation_class NULL is the default; ttl_ms NULL keeps the lease''s TTL; request_digest is the 64 hex digits of the request''s SHA-256.';

REVOKE ALL ON FUNCTION lease.renew_brief_typed(text,text,text,text,text,text,text,text,bigint,bigint,text,text,text,text,text,text,timestamp with time zone,text,text,text,integer,boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.renew_brief_typed(text,text,text,text,text,text,text,text,bigint,bigint,text,text,text,text,text,text,timestamp with time zone,text,text,text,integer,boolean) TO lease_service;
