CREATE OR REPLACE FUNCTION lease._renew_t(
    lock_identity lease.identity, request lease.renew_request, brief boolean, s lease._settings)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
DECLARE
    i lease.identity;
    field text;
    k text;
    c text;
    why text;
    l lease.locks;
    result jsonb;
BEGIN
    -- the checks every call shares (lease._call_deadline's, on typed values):
    -- a call the service never sends raises LS002 or LS003
    IF now() >= lease._call_deadline_t(request.deadline_at, request.principal_id,
                                       request.request_id, request.request_digest) THEN
        RETURN lease._result('deadline_exceeded');
    END IF;
    -- the identity by the rule lease._identity applies to a jsonb one
    -- (lease.normalize_component), then the references lease._bad_lease_ref
    -- checks, in the same order
    i := lease._identity_text(lock_identity.tenant_id, lock_identity.program_id,
                              lock_identity.target_namespace, lock_identity.target_id,
                              lock_identity.actor_name, lock_identity.workflow_name,
                              lock_identity.operation_class);
    field := coalesce(lease._identity_fault(i), CASE
        WHEN NOT lease._id_text_ok(request.lease_id) THEN 'lease_id'
        WHEN coalesce(request.fencing_token, 0) <= 0 THEN 'fencing_token'
        WHEN NOT lease._id_text_ok(request.service_instance_id) THEN 'service_instance_id'
        END);
    IF field IS NOT NULL THEN
        RETURN lease._invalid(field);
    END IF;
    IF request.ttl_ms IS NOT NULL
       AND NOT (request.ttl_ms > s.minimum_ttl_ms AND request.ttl_ms <= s.maximum_ttl_ms) THEN
        RETURN lease._invalid('ttl_ms', 'ttl_ms must be greater than ' || s.minimum_ttl_ms
                                        || ' and at most ' || s.maximum_ttl_ms);
    END IF;
    IF s.guard_needed THEN
        why := lease._guard();
        IF why IS NOT NULL THEN
            RETURN lease._sealed_result(why);
        END IF;
    END IF;
    k := lease._key(i);
    c := lease._canonical_of(i.tenant_id, i.program_id, i.target_namespace, i.target_id,
                             i.actor_name, i.workflow_name, i.operation_class);
    -- The same decision for every caller: no read before the write; a
    -- repeated request id is looked up only after a conflict says it may be
    -- one (lease._unmatched_t, or idempotency's primary key in
    -- lease._evidence_t, whose unique_violation lease.renew_brief_typed's block answers).
    IF NOT lease._lock_wait_until(request.deadline_at) THEN
        RETURN lease._result('deadline_exceeded');
    END IF;
    -- lease._now() in the statement, not a variable: the same backend time
    -- (now() is the transaction's), one PL/pgSQL expression fewer
    UPDATE lease.locks AS x
       SET renewed_at = lease._now(),
           expires_at = CASE WHEN x.session_id IS NOT NULL THEN x.expires_at  -- kept alive by its session
                             ELSE least(lease._now() + lease._ms(coalesce(request.ttl_ms, x.ttl_ms)),
                                        x.acquired_at + lease._ms(x.maximum_lifetime_ms)) END,
           ttl_ms = coalesce(request.ttl_ms, x.ttl_ms)
     WHERE x.lock_key = k AND x.state = 'active' AND lease._effective_expiry(x.session_id, x.expires_at) > now()
       AND x.record_version = 1 AND x.lease_id = request.lease_id
       AND x.fencing_token = request.fencing_token
       AND x.owner_principal_id = request.principal_id
       AND x.service_instance_id = request.service_instance_id
       -- the tuple compared as one text, as the canonical form: seven equalities
       -- would match the unique index on the tuple, and a plan through it
       -- would take its predicate locks where neighbouring identities sit
       -- (lock_key is a hash: the primary key spreads them)
       AND lease._canonical_of(x.tenant_id, x.program_id, x.target_namespace, x.target_id,
                               x.actor_name, x.workflow_name, x.operation_class) = c
    RETURNING * INTO l;
    IF NOT FOUND THEN
        RETURN lease._unmatched_t(k, 'renew', request.principal_id, request.request_id,
                                  request.request_digest, c,
                                  lease._result('lease_lost'));
    END IF;

    IF brief THEN
        result := jsonb_build_object('code', 'lease_renewed', 'lease', lease._renewed_json(l));
    ELSE
        result := jsonb_build_object('code', 'lease_renewed', 'lease', lease._lease_json(l));
    END IF;
    RETURN CASE WHEN lease._evidence_t('renew', l, result, s.idempotency_retention_ms, 'active',
                                       'active', request.ttl_ms, NULL, NULL,
                                       request.principal_id, request.principal_class,
                                       request.credential_id, request.request_id,
                                       request.request_digest, request.correlation_id,
                                       request.trace_id, request.deadline_class,
                                       request.latency_ms)
                THEN result || '{"replayed": false, "current_state": "active"}'::jsonb END;
END
$function$;

COMMENT ON FUNCTION lease._renew_t(lease.identity,lease.renew_request,boolean,lease._settings) IS
    'The one renew-if-owner decision, on the composites of lease.renew_brief_typed (lock_identity, its bad_field not read, and request; migration 0030): the exact identity, lease id, owner principal, service instance and token of the active, unexpired lease. renewed_at becomes backend time, expires_at min(now + ttl, acquired_at + lifetime) (ttl_ms NULL: the lease''s own); the token never changes. Behind lease.renew_brief_typed (what the service calls, and lease.renew with a jsonb request''s values), and each item of a batch''s first pass (lease.renew_many_brief_typed, lease.renew_many). Checks, in order: the shared call checks (LS002/LS003), the deadline, each identity component by lease.normalize_component, lease_id, fencing_token, service_instance_id, ttl_ms. `s` is lease._settings as the caller read it. No exception block of its own, so that a batch decides all its items in one subtransaction: a repeated request id whose lease still matched raises unique_violation at idempotency''s primary key, answered by lease.renew_brief_typed''s block (the one replay path of a renewal) or the batch''s.';

REVOKE ALL ON FUNCTION lease._renew_t(lease.identity,lease.renew_request,boolean,lease._settings) FROM PUBLIC;
