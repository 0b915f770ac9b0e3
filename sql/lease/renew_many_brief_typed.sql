CREATE OR REPLACE FUNCTION lease.renew_many_brief_typed(
    tenant_id text[], program_id text[], target_namespace text[], target_id text[],
    actor_name text[], workflow_name text[], operation_class text[], lease_id text[],
    fencing_token bigint[], ttl_ms bigint[], service_instance_id text[], principal_id text[],
    principal_class text[], credential_id text[], request_id text[], request_digest text[],
    deadline_at timestamptz[], correlation_id text[], trace_id text[], deadline_class text[],
    latency_ms integer[])
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    s lease._settings;
    -- a variable, so that lease._typed_batch_size inlines (its argument is
    -- read three times: an expression there would be a call of its own)
    counts integer[] := ARRAY[
        cardinality(tenant_id), cardinality(program_id), cardinality(target_namespace),
        cardinality(target_id), cardinality(actor_name), cardinality(workflow_name),
        cardinality(operation_class), cardinality(lease_id), cardinality(fencing_token),
        cardinality(ttl_ms), cardinality(service_instance_id), cardinality(principal_id),
        cardinality(principal_class), cardinality(credential_id), cardinality(request_id),
        cardinality(request_digest), cardinality(deadline_at), cardinality(correlation_id),
        cardinality(trace_id), cardinality(deadline_class), cardinality(latency_ms)];
BEGIN
    IF current_setting('transaction_isolation') <> 'serializable' THEN
        PERFORM lease._isolation_error();
    END IF;
    IF lease._typed_batch_size(counts) IS NULL THEN
        RETURN lease._invalid('renewals', 'renewals must be 1 to 100 renewals: every argument '
                                          || 'array NULL or one element per renewal');
    END IF;
    -- As lease.renew_many: the settings once, lease._renew_t per item in
    -- request order, one aggregate, one subtransaction for the batch; item by
    -- item, each in its own (lease.renew_brief_typed's block), only when an
    -- item repeats a request id whose lease still matched.
    SELECT * INTO s FROM lease._settings;
    BEGIN
        RETURN jsonb_build_object('results',
            (SELECT jsonb_agg(lease._renew_t(u.t, u.p, u.ns, u.tg, u.a, u.w, u.o, u.l, u.f, u.ttl,
                                             u.si, u.pi, u.pc, u.ci, u.ri, u.rd, u.dl, u.co, u.tr,
                                             u.dc, u.lm, true, s) ORDER BY u.n)
               FROM unnest(tenant_id, program_id, target_namespace, target_id, actor_name,
                           workflow_name, operation_class, lease_id, fencing_token, ttl_ms,
                           service_instance_id, principal_id, principal_class, credential_id,
                           request_id, request_digest, deadline_at, correlation_id, trace_id,
                           deadline_class, latency_ms)
                    WITH ORDINALITY AS u(t, p, ns, tg, a, w, o, l, f, ttl, si, pi, pc, ci, ri,
                                         rd, dl, co, tr, dc, lm, n)));
    EXCEPTION WHEN unique_violation THEN
        RETURN jsonb_build_object('results',
            (SELECT jsonb_agg(lease.renew_brief_typed(u.t, u.p, u.ns, u.tg, u.a, u.w, u.o, u.l,
                                                      u.f, u.ttl, u.si, u.pi, u.pc, u.ci, u.ri,
                                                      u.rd, u.dl, u.co, u.tr, u.dc, u.lm)
                              ORDER BY u.n)
               FROM unnest(tenant_id, program_id, target_namespace, target_id, actor_name,
                           workflow_name, operation_class, lease_id, fencing_token, ttl_ms,
                           service_instance_id, principal_id, principal_class, credential_id,
                           request_id, request_digest, deadline_at, correlation_id, trace_id,
                           deadline_class, latency_ms)
                    WITH ORDINALITY AS u(t, p, ns, tg, a, w, o, l, f, ttl, si, pi, pc, ci, ri,
                                         rd, dl, co, tr, dc, lm, n)));
    END;
END
$function$;

COMMENT ON FUNCTION lease.renew_many_brief_typed(text[],text[],text[],text[],text[],text[],text[],text[],bigint[],bigint[],text[],text[],text[],text[],text[],text[],timestamp with time zone[],text[],text[],text[],integer[]) IS
    'lease.renew_many with typed arguments, answered briefly (what the service calls for POST /v1/leases/renew-batch): the arguments of lease.renew_brief_typed, each an array with one element per renewal (1 to 100; an array may be NULL: NULL for every renewal). Each renewal is decided by lease._renew_t as a single one is (its exact ownership check, its own request id, idempotency and audit), in order, in one transaction; the answer is {"results": [...]}, one brief answer per renewal (lease.renew_brief_typed''s). Arrays of different lengths refuse the whole batch (invalid_lease_request, field renewals).';

REVOKE ALL ON FUNCTION lease.renew_many_brief_typed(text[],text[],text[],text[],text[],text[],text[],text[],bigint[],bigint[],text[],text[],text[],text[],text[],text[],timestamp with time zone[],text[],text[],text[],integer[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.renew_many_brief_typed(text[],text[],text[],text[],text[],text[],text[],text[],bigint[],bigint[],text[],text[],text[],text[],text[],text[],timestamp with time zone[],text[],text[],text[],integer[]) TO lease_service;
