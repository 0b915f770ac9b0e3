CREATE OR REPLACE FUNCTION lease.release_many(p jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RETURN lease._release_many(p, false);
END
$function$;

COMMENT ON FUNCTION lease.release_many(jsonb) IS
    'Many releases in one transaction: {"releases": [r1, ...]}, 1 to 100 requests of lease.release, each decided as lease.release decides it (lease._end) (its exact ownership check, its own request id, idempotency and audit), answered {"results": [a1, ...]} in request order; one item''s lease_lost or invalid_lease_request does not touch the others. A repeated request id gets its stored answer, as from lease.release. Only what ends the transaction (a serialization failure, a deadline of the whole call) ends them all. Whole answers, as lease.release gives them (lease._release_many).';

REVOKE ALL ON FUNCTION lease.release_many(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.release_many(jsonb) TO lease_service;
