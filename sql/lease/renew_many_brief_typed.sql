CREATE OR REPLACE FUNCTION lease.renew_many_brief_typed(
    lock_identities lease.identity[], requests lease.renew_request[])
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    s lease._settings;
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
        RETURN lease._invalid('renewals', 'renewals must be 1 to 100 renewals: both argument '
                                          || 'arrays one element per renewal');
    END IF;
    -- As lease.renew_many: the settings once, lease._renew_t per item in
    -- request order, one aggregate, one subtransaction for the batch; item by
    -- item, each in its own (lease.renew_brief_typed's block), only when an
    -- item repeats a request id whose lease still matched. The elements
    -- pair up by position (unnest in the select list, in step).
    SELECT * INTO s FROM lease._settings;
    BEGIN
        RETURN jsonb_build_object('results',
            (SELECT jsonb_agg(lease._renew_t(u.i, u.r, true, s) ORDER BY u.n)
               FROM (SELECT unnest(lock_identities) AS i, unnest(requests) AS r,
                            generate_series(1, size) AS n) u));
    EXCEPTION WHEN unique_violation THEN
        RETURN jsonb_build_object('results',
            (SELECT jsonb_agg(lease.renew_brief_typed(lock_identities[g.n], requests[g.n])
                              ORDER BY g.n)
               FROM generate_series(1, size) AS g(n)));
    END;
END
$function$;

COMMENT ON FUNCTION lease.renew_many_brief_typed(lease.identity[],lease.renew_request[]) IS
    'lease.renew_many on composites, answered briefly (what the service calls for POST /v1/leases/renew-batch; migration 0030): the two arguments of lease.renew_brief_typed, each an array with one element per renewal (1 to 100; a NULL array is NULL for every renewal). Each renewal is decided by lease._renew_t as a single one is (its exact ownership check, its own request id, idempotency and audit), in order, in one transaction; the answer is {"results": [...]}, one brief answer per renewal (lease.renew_brief_typed''s). Arrays of different lengths refuse the whole batch (invalid_lease_request, field renewals).';

REVOKE ALL ON FUNCTION lease.renew_many_brief_typed(lease.identity[],lease.renew_request[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.renew_many_brief_typed(lease.identity[],lease.renew_request[]) TO lease_service;
