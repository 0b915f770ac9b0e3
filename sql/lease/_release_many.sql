CREATE OR REPLACE FUNCTION lease._release_many(p jsonb, brief boolean)
 RETURNS jsonb
 LANGUAGE plpgsql
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
    -- One subtransaction for the whole batch, as in lease._renew_many.
    BEGIN
        RETURN jsonb_build_object('results',
            (SELECT jsonb_agg(lease._end(e.value, 'release', 'released', 'lease_released', brief)
                              ORDER BY e.n)
               FROM jsonb_array_elements(items) WITH ORDINALITY AS e(value, n)));
    EXCEPTION WHEN unique_violation THEN
        RETURN jsonb_build_object('results',
            (SELECT jsonb_agg(lease._end_or_replay(e.value, 'release', 'released',
                                                   'lease_released', brief) ORDER BY e.n)
               FROM jsonb_array_elements(items) WITH ORDINALITY AS e(value, n)));
    END;
END
$function$;

COMMENT ON FUNCTION lease._release_many(jsonb,boolean) IS
    'Many releases in one transaction, each decided by lease._end as a single release is (the exact ownership tuple, its own request id, idempotency row, terminal evidence), answered in request order, whole or brief as the single functions answer. Called by lease.release_many (whole answers) and lease.release_many_brief (what the service calls). One subtransaction for the batch; item by item (lease._end_or_replay) only when an item repeats a request id whose lease still matched.';

REVOKE ALL ON FUNCTION lease._release_many(jsonb,boolean) FROM PUBLIC;
