CREATE OR REPLACE FUNCTION lease.renew_many(p jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    items jsonb := CASE WHEN jsonb_typeof(p) = 'object' THEN p -> 'renewals' END;
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
    -- lease.renew decides each item as it decides a single renewal: no
    -- request-id read before the write (which would tie concurrent
    -- batches together under SERIALIZABLE), a repeated request id
    -- answered from its stored result after the conflict. One aggregate,
    -- not an array grown item by item (each || copies the whole answer so
    -- far: quadratic). The function scan yields the items in request
    -- order and each row's lease.renew runs as its row arrives, before
    -- the ORDER BY sorts the (already ordered) answers: the items are
    -- decided in request order, as a loop would decide them.
    -- Each item reads the settings as a single renewal does (lease.renew):
    -- an item that seals the namespace is seen by the items after it.
    -- One subtransaction for the whole batch, not one per item: a
    -- subtransaction that writes takes a transaction id of its own, and past
    -- 64 in one transaction every other session's snapshot overflows into
    -- pg_subtrans (docs/operators.md, "Batches and subtransactions"). Only
    -- an item that repeats a request id whose lease still matched raises
    -- here; then the batch's writes are undone and the batch decided again
    -- item by item, each in its own subtransaction, where that item gets its
    -- stored answer. Same snapshot, same decisions.
    BEGIN
        RETURN jsonb_build_object('results',
            (SELECT jsonb_agg(lease.renew(e.value, false) ORDER BY e.n)
               FROM jsonb_array_elements(items) WITH ORDINALITY AS e(value, n)));
    EXCEPTION WHEN unique_violation THEN
        RETURN jsonb_build_object('results',
            (SELECT jsonb_agg(lease.renew(e.value) ORDER BY e.n)
               FROM jsonb_array_elements(items) WITH ORDINALITY AS e(value, n)));
    END;
END
$function$;

COMMENT ON FUNCTION lease.renew_many(jsonb) IS
    'Many renewals in one transaction: {"renewals": [r1, ...]}, 1 to 100 requests of lease.renew, each decided as lease.renew decides it (lease._renew_t) (its exact ownership check, its own request id, idempotency and audit), answered {"results": [a1, ...]} in request order; one item''s lease_lost or invalid_lease_request does not touch the others. A repeated request id gets its stored answer, as from lease.renew. Only what ends the transaction (a serialization failure, a deadline of the whole call) ends them all. Whole answers, as lease.renew gives them.';

REVOKE ALL ON FUNCTION lease.renew_many(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.renew_many(jsonb) TO lease_service;
