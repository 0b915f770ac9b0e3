CREATE OR REPLACE FUNCTION lease.release_many(p jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    items jsonb := CASE WHEN jsonb_typeof(p) = 'object' THEN p -> 'releases' END;
BEGIN
    IF current_setting('transaction_isolation') <> 'serializable' THEN
        PERFORM lease._isolation_error();
    END IF;
    IF jsonb_typeof(items) IS DISTINCT FROM 'array' THEN
        RETURN lease._invalid('releases', 'releases must be an array of 1 to 100 releases');
    END IF;
    IF jsonb_array_length(items) NOT BETWEEN 1 AND 100 THEN
        RETURN lease._invalid('releases', 'releases must be an array of 1 to 100 releases');
    END IF;
    -- lease._end decides each item as it decides a single release:
    -- the exact ownership tuple, its own request id, idempotency row,
    -- terminal evidence and typed answer. One aggregate, not an array
    -- grown item by item (quadratic copying); the items are decided in
    -- request order, as in lease.renew_many.
    -- One subtransaction for the whole batch, as in lease.renew_many.
    BEGIN
        RETURN jsonb_build_object('results',
            (SELECT jsonb_agg(lease._end(e.value, 'release', 'released', 'lease_released', false,
                                         false)
                              ORDER BY e.n)
               FROM jsonb_array_elements(items) WITH ORDINALITY AS e(value, n)));
    EXCEPTION WHEN unique_violation THEN
        RETURN jsonb_build_object('results',
            (SELECT jsonb_agg(lease._end(e.value, 'release', 'released', 'lease_released',
                                         false, true) ORDER BY e.n)
               FROM jsonb_array_elements(items) WITH ORDINALITY AS e(value, n)));
    END;
END
$function$;

COMMENT ON FUNCTION lease.release_many(jsonb) IS
    'Many releases in one transaction: {"releases": [r1, ...]}, 1 to 100 requests of lease.release, each decided as lease.release decides it (lease._end) (its exact ownership check, its own request id, idempotency and audit), answered {"results": [a1, ...]} in request order; one item''s lease_lost or invalid_lease_request does not touch the others. A repeated request id gets its stored answer, as from lease.release. Only what ends the transaction (a serialization failure, a deadline of the whole call) ends them all. Whole answers, as lease.release gives them.';

REVOKE ALL ON FUNCTION lease.release_many(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.release_many(jsonb) TO lease_service;
