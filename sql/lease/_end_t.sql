CREATE OR REPLACE FUNCTION lease._end_t(
    lock_identity lease.identity, request lease.release_request, reason text, incident_id text,
    op text, terminal_state text, success_code text, brief boolean, identity_error text,
    own_subtransaction boolean)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
DECLARE
    as_owner boolean := op = 'release';
    i lease.identity;
    k text;
    c text;
    field text;
    l lease.locks;
    h lease.history;
    cn text;
    replay jsonb;
    result jsonb;
BEGIN
    -- The one replay path of an ending: the decision below in a
    -- subtransaction of its own, so that a repeated request id whose lease
    -- still matched (idempotency's primary key refuses the evidence) is
    -- undone and answered from its stored result. A batch passes false for
    -- its first pass: one subtransaction for the whole batch, not one per
    -- item (lease.release_many_brief_typed, docs/operators.md "Batches and
    -- subtransactions").
    IF own_subtransaction THEN
        BEGIN
            RETURN lease._end_t(lock_identity, request, reason, incident_id, op, terminal_state,
                                success_code, brief, identity_error, false);
        EXCEPTION WHEN unique_violation THEN
            GET STACKED DIAGNOSTICS cn = CONSTRAINT_NAME;
            replay := lease._replay_of_typed_conflict(cn, op, lock_identity.tenant_id,
                                                      lock_identity.program_id,
                                                      lock_identity.target_namespace,
                                                      lock_identity.target_id,
                                                      lock_identity.actor_name,
                                                      lock_identity.workflow_name,
                                                      lock_identity.operation_class,
                                                      request.principal_id, request.request_id,
                                                      request.request_digest);
            IF replay IS NULL THEN
                RAISE;
            END IF;
            RETURN replay;
        END;
    END IF;
    -- the checks every call shares (LS002, LS003), then the deadline
    IF now() >= lease._call_deadline_t(request.deadline_at, request.principal_id,
                                       request.request_id, request.request_digest) THEN
        RETURN lease._result('deadline_exceeded');
    END IF;
    -- the identity by lease.normalize_component (the rule a jsonb identity
    -- is held to), then the references, then an administrator's reason and
    -- incident: the order the jsonb request follows (lease._bad_lease_ref)
    i := lease._identity_text(lock_identity.tenant_id, lock_identity.program_id,
                              lock_identity.target_namespace, lock_identity.target_id,
                              lock_identity.actor_name, lock_identity.workflow_name,
                              lock_identity.operation_class);
    field := coalesce(identity_error, lease._identity_fault(i), CASE
        WHEN NOT lease._id_text_ok(request.lease_id) THEN 'lease_id'
        WHEN coalesce(request.fencing_token, 0) <= 0 THEN 'fencing_token'
        WHEN as_owner AND NOT lease._id_text_ok(request.service_instance_id)
            THEN 'service_instance_id'
        END);
    IF as_owner THEN
        -- an owner's release names neither: what it sent is not recorded
        reason := NULL;
        incident_id := NULL;
    ELSIF field IS NULL THEN
        IF reason IS NULL OR char_length(reason) NOT BETWEEN 1 AND 512
           OR reason ~ '[[:cntrl:]]' OR btrim(reason) = '' THEN
            field := 'reason';
        ELSIF incident_id IS NOT NULL AND (op <> 'revoke' OR NOT lease._id_text_ok(incident_id)) THEN
            field := 'incident_id';
        END IF;
    END IF;
    IF field IS NOT NULL THEN
        RETURN lease._invalid(field);
    END IF;
    k := lease._key(i);
    c := lease._canonical_of(i.tenant_id, i.program_id, i.target_namespace, i.target_id,
                             i.actor_name, i.workflow_name, i.operation_class);
    -- The same decision for every caller: no read before the write; a
    -- repeated request id is looked up only after a conflict says it may be
    -- one (lease._unmatched_t, or idempotency's primary key in
    -- lease._evidence_t, whose unique_violation the block above answers).
    IF NOT lease._lock_wait_until(request.deadline_at) THEN
        RETURN lease._result('deadline_exceeded');
    END IF;
    UPDATE lease.locks AS x SET state = 'free'
     WHERE x.lock_key = k AND x.state = 'active' AND lease._effective_expiry(x.session_id, x.expires_at) > now()
       AND x.record_version = 1 AND x.lease_id = request.lease_id
       AND x.fencing_token = request.fencing_token
       AND (NOT as_owner OR x.owner_principal_id = request.principal_id
                            AND x.service_instance_id = request.service_instance_id)
       -- the tuple compared as one text, as the canonical form: seven equalities
       -- would match the unique index on the tuple, and a plan through it
       -- would take its predicate locks where neighbouring identities sit
       -- (lock_key is a hash: the primary key spreads them)
       AND lease._canonical_of(x.tenant_id, x.program_id, x.target_namespace, x.target_id,
                               x.actor_name, x.workflow_name, x.operation_class) = c
    RETURNING * INTO l;
    IF NOT FOUND THEN
        RETURN lease._unmatched_t(k, op, request.principal_id, request.request_id,
                                  request.request_digest, c,
                                  lease._result('lease_lost'));
    END IF;
    h := lease._to_history_t(l, terminal_state, lease._now(), request.principal_id,
                             request.credential_id, reason, incident_id);
    IF brief THEN
        result := jsonb_build_object('code', success_code,
                                     'lease', lease._ended_json(l, terminal_state, h.ended_at));
    ELSE
        result := jsonb_build_object('code', success_code, 'lease', lease._history_json(h));
    END IF;
    RETURN CASE WHEN lease._evidence_t(op, l, result,
                                       (SELECT x.idempotency_retention_ms FROM lease.policy x),
                                       'active', terminal_state, NULL, reason, incident_id,
                                       request.principal_id, request.principal_class,
                                       request.credential_id, request.request_id,
                                       request.request_digest, request.correlation_id,
                                       request.trace_id, request.deadline_class,
                                       request.latency_ms)
                THEN result || jsonb_build_object('replayed', false,
                                                  'current_state', terminal_state) END;
END
$function$;

COMMENT ON FUNCTION lease._end_t(lease.identity,lease.release_request,text,text,text,text,text,boolean,text,boolean) IS
    'The one end-if-matching decision, on the composites of lease.release_brief_typed (lock_identity, its bad_field not read, and request; migration 0030; an administrator''s request has no service_instance_id) and an ending''s own values: release by the owner (op release: the exact identity, lease id, token, owner principal and service instance of the active, unexpired lease), force_release and revoke by an administrator (identity, lease id and token; a reason of 1 to 512 characters without control characters; an incident id for revoke only). The row becomes free, its lease moves to history, the idempotency record and audit event are written. Behind lease.release_brief_typed (what the service calls for a release; each item of lease.release_many_brief_typed) and lease._end (a jsonb request: release, force_release, revoke and each item of lease.release_many). Checks, in order: the shared call checks (LS002/LS003), the deadline, identity_error (a jsonb identity''s structural fault, NULL for typed callers), each identity component, lease_id, fencing_token, service_instance_id (release), reason and incident_id (the administrator''s). A repeated request id whose lease still matched is answered from its stored result, in this function''s own subtransaction (the one replay path of an ending); own_subtransaction false (a batch''s first pass) leaves that unique_violation to the caller''s block.';

REVOKE ALL ON FUNCTION lease._end_t(lease.identity,lease.release_request,text,text,text,text,text,boolean,text,boolean) FROM PUBLIC;
