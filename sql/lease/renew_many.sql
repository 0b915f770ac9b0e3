CREATE OR REPLACE FUNCTION lease.renew_many(p jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RETURN lease._renew_many(p, false);
END
$function$;

COMMENT ON FUNCTION lease.renew_many(jsonb) IS
    'Many renewals in one transaction: {"renewals": [r1, ...]}, 1 to 100 requests of lease.renew, each decided as lease.renew decides it (lease._renew) (its exact ownership check, its own request id, idempotency and audit), answered {"results": [a1, ...]} in request order; one item''s lease_lost or invalid_lease_request does not touch the others. A repeated request id gets its stored answer, as from lease.renew. Only what ends the transaction (a serialization failure, a deadline of the whole call) ends them all. Whole answers, as lease.renew gives them (lease._renew_many).';

REVOKE ALL ON FUNCTION lease.renew_many(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.renew_many(jsonb) TO lease_service;
