CREATE OR REPLACE FUNCTION lease.release_brief_typed(
    lock_identity lease.identity, request lease.release_request)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    -- lease._end_t decides every ending (release, force_release, revoke)
    -- and answers a repeated request id in its own subtransaction
    RETURN lease._end_t(lock_identity, request, NULL, NULL, 'release', 'released',
                        'lease_released', true, NULL, true);
END
$function$;

COMMENT ON FUNCTION lease.release_brief_typed(lease.identity,lease.release_request) IS
    'lease.release on two composites instead of a jsonb request (what the service calls for one release; migration 0030): lock_identity (its bad_field is not read) and request (lease.release_request: lease.renew_request without ttl_ms, a new optional field one more attribute). The same decision (lease._end_t) and evidence, answered briefly: {"code": ...} with the brief ended record. A repeated request id is answered from its stored result, as lease.release answers it.';

REVOKE ALL ON FUNCTION lease.release_brief_typed(lease.identity,lease.release_request) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.release_brief_typed(lease.identity,lease.release_request) TO lease_service;
