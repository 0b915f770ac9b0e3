CREATE OR REPLACE FUNCTION lease.renew_many(p jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    items jsonb := CASE WHEN jsonb_typeof(p) = 'object' THEN p -> 'renewals' END;
    item jsonb;
    optimistic boolean := lease._optimistic(p);
    results jsonb := '[]'::jsonb;
BEGIN
    IF current_setting('transaction_isolation') <> 'serializable' THEN
        PERFORM lease._isolation_error();
    END IF;
    IF jsonb_typeof(items) IS DISTINCT FROM 'array' THEN
        RETURN lease._invalid('renewals', 'renewals must be an array of 1 to 100 renewals');
    END IF;
    IF jsonb_array_length(items) NOT BETWEEN 1 AND 100 THEN
        RETURN lease._invalid('renewals', 'renewals must be an array of 1 to 100 renewals');
    END IF;
    FOR item IN SELECT value FROM jsonb_array_elements(items) LOOP
        -- The batch's flag, not the item's: optimistic, a repeated request
        -- id raises 23505 and ends the whole call (the caller repeats it
        -- without the flag); without it each renewal looks its request id up
        -- first, a predicate-locking read per item that ties concurrent
        -- batches together under SERIALIZABLE.
        results := results || jsonb_build_array(lease.renew(
            CASE WHEN optimistic THEN item || '{"optimistic": true}' ELSE item - 'optimistic' END));
    END LOOP;
    RETURN jsonb_build_object('results', results);
END
$function$;

COMMENT ON FUNCTION lease.renew_many(jsonb) IS
    'Many renewals in one transaction: {"renewals": [r1, ...]}, 1 to 100 requests of lease.renew, each decided by lease.renew itself (its exact ownership check, its own request id, idempotency and audit), answered {"results": [a1, ...]} in request order; one item''s lease_lost or invalid_lease_request does not touch the others. "optimistic": true (the batch''s, as for lease.renew) skips each request-id lookup: a repeated request id then fails the whole call with 23505, to be repeated without the flag. Only what ends the transaction (a serialization failure, a deadline of the whole call) ends them all.';

REVOKE ALL ON FUNCTION lease.renew_many(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.renew_many(jsonb) TO lease_service;
