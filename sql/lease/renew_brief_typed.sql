CREATE OR REPLACE FUNCTION lease.renew_brief_typed(
    lock_identity lease.identity, request lease.renew_request, brief boolean DEFAULT true)
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
    -- lease._renew_t is the rule this call and each item of a batch's first
    -- pass share (docs/schema.md, "Functions")
    RETURN lease._renew_t(lock_identity, request, brief, s);
EXCEPTION WHEN unique_violation THEN
    -- The one replay path of a renewal, whatever form the request came in
    -- (lease.renew calls this function; a batch falls back to it item by
    -- item): this request id committed before and the lease still
    -- matched, so idempotency's primary key refused the evidence. The
    -- stored answer, nothing of this attempt (the block's subtransaction
    -- undoes it).
    GET STACKED DIAGNOSTICS cn = CONSTRAINT_NAME;
    replay := lease._replay_of_typed_conflict(cn, 'renew', lock_identity.tenant_id,
                                              lock_identity.program_id,
                                              lock_identity.target_namespace,
                                              lock_identity.target_id, lock_identity.actor_name,
                                              lock_identity.workflow_name,
                                              lock_identity.operation_class, request.principal_id,
                                              request.request_id, request.request_digest);
    IF replay IS NULL THEN
        RAISE;
    END IF;
    RETURN replay;
END
$function$;

COMMENT ON FUNCTION lease.renew_brief_typed(lease.identity,lease.renew_request,boolean) IS
    'One renewal on two composites (what the service calls for one renewal, and lease.renew with a jsonb request''s values; migration 0030): lock_identity (its bad_field is not read) and request (lease.renew_request: the rest of the request, a new optional field one more attribute). lease._renew_t decides, in this function''s subtransaction, and a repeated request id whose lease still matched is answered here from its stored result (the one replay path of a renewal). brief (the default): {"code": ...} with the brief lease record; false (lease.renew): the whole record. operation_class NULL is the default; ttl_ms NULL keeps the lease''s TTL; request_digest is the 64 hex digits of the request''s SHA-256.';

REVOKE ALL ON FUNCTION lease.renew_brief_typed(lease.identity,lease.renew_request,boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.renew_brief_typed(lease.identity,lease.renew_request,boolean) TO lease_service;
