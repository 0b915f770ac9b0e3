CREATE OR REPLACE FUNCTION lease.release_many_brief_typed(
    lock_identities lease.identity[], requests lease.release_request[])
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    -- a variable, so that lease._typed_batch_size inlines (its argument is
    -- read three times: an expression there would be a call of its own)
    counts integer[] := ARRAY[cardinality(lock_identities), cardinality(requests)];
    size integer;
BEGIN
    IF current_setting('transaction_isolation') <> 'serializable' THEN
        PERFORM lease._isolation_error();
    END IF;
    size := lease._typed_batch_size(counts);
    IF size IS NULL THEN
        RETURN lease._invalid('releases', 'releases must be 1 to 100 releases: both argument '
                                          || 'arrays one element per release');
    END IF;
    -- As lease.release_many: lease._end_t per item in request order, one
    -- aggregate, one subtransaction for the batch; item by item, each in its
    -- own (lease._end_t's block), only when an item repeats a request id
    -- whose lease still matched. The elements pair up by position (unnest
    -- in the select list, in step).
    BEGIN
        RETURN jsonb_build_object('results',
            (SELECT jsonb_agg(lease._end_t(u.i, u.r, NULL, NULL, 'release', 'released',
                                           'lease_released', true, NULL, false) ORDER BY u.n)
               FROM (SELECT unnest(lock_identities) AS i, unnest(requests) AS r,
                            generate_series(1, size) AS n) u));
    EXCEPTION WHEN unique_violation THEN
        RETURN jsonb_build_object('results',
            (SELECT jsonb_agg(lease.release_brief_typed(lock_identities[g.n], requests[g.n])
                              ORDER BY g.n)
               FROM generate_series(1, size) AS g(n)));
    END;
END
$function$;

COMMENT ON FUNCTION lease.release_many_brief_typed(lease.identity[],lease.release_request[]) IS
    'lease.release_many on composites, answered briefly (what the service calls for POST /v1/leases/release-batch; migration 0030): the two arguments of lease.release_brief_typed, each an array with one element per release (1 to 100; a NULL array is NULL for every release). Each release is decided by lease._end_t as a single one is (its exact ownership check, its own request id, idempotency, history and audit), in order, in one transaction; the answer is {"results": [...]}, one brief answer per release (lease.release_brief_typed''s). Arrays of different lengths refuse the whole batch (invalid_lease_request, field releases).';

REVOKE ALL ON FUNCTION lease.release_many_brief_typed(lease.identity[],lease.release_request[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.release_many_brief_typed(lease.identity[],lease.release_request[]) TO lease_service;
