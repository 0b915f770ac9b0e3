CREATE OR REPLACE FUNCTION lease._end(p jsonb, op text, terminal_state text, success_code text,
                                     brief boolean)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
DECLARE
    deadline timestamptz := lease._call_deadline(p, true);
    -- the identity once: lease._canonical inlines, and an argument that is
    -- an expression would be evaluated again at each of its ~40 uses
    li jsonb := p -> 'lock_identity';
    c text := lease._canonical(li);
    as_owner boolean := op = 'release';
    k text;
    field text;
    reason text;
    incident text;
    l lease.locks;
    h lease.history;
    result jsonb;
BEGIN
    IF now() >= deadline THEN
        RETURN lease._result('deadline_exceeded');
    END IF;
    field := lease._bad_reference(p, c, as_owner);
    IF field IS NULL AND NOT as_owner THEN
        reason := p ->> 'reason';
        IF jsonb_typeof(p -> 'reason') IS DISTINCT FROM 'string'
           OR char_length(reason) NOT BETWEEN 1 AND 512
           OR reason ~ '[[:cntrl:]]' OR btrim(reason) = '' THEN
            field := 'reason';
        ELSIF coalesce(jsonb_typeof(p -> 'incident_id'), 'null') <> 'null' THEN
            IF op <> 'revoke' OR NOT lease._id_ok(p -> 'incident_id') THEN
                field := 'incident_id';
            ELSE
                incident := p ->> 'incident_id';
            END IF;
        END IF;
    END IF;
    IF field IS NOT NULL THEN
        RETURN lease._invalid(field);
    END IF;
    k := lease._key_of(c);
    -- The same decision for every caller: no read before the write; a
    -- repeated request id is looked up only after a conflict says it may be
    -- one (lease._unmatched, or idempotency's primary key in lease._evidence,
    -- whose unique_violation the caller's block answers: lease._end_or_replay).
    IF NOT lease._lock_wait_until(deadline) THEN
        RETURN lease._result('deadline_exceeded');
    END IF;
    UPDATE lease.locks SET state = 'free'
     WHERE lock_key = k AND state = 'active' AND expires_at > now() AND record_version = 1
       -- the token passed lease._bad_reference (a positive JSON integer in
       -- bigint range): its text casts as lease._int would, without its checks
       AND lease_id = p ->> 'lease_id' AND fencing_token = (p ->> 'fencing_token')::bigint
       AND (NOT as_owner OR owner_principal_id = p #>> '{principal,principal_id}'
                            AND service_instance_id = p ->> 'service_instance_id')
       AND lease._canonical_of(tenant_id, program_id, target_namespace, target_id, actor_name,
                               workflow_name, operation_class) = c
    RETURNING * INTO l;
    IF NOT FOUND THEN
        RETURN lease._unmatched(k, op, p, c, lease._result('lease_lost'));
    END IF;
    h := lease._to_history(l, terminal_state, lease._now(), p, reason, incident);
    IF brief THEN
        result := jsonb_build_object('code', success_code,
                                     'lease', lease._ended_json(l, terminal_state, h.ended_at));
    ELSE
        result := jsonb_build_object('code', success_code, 'lease', lease._history_json(h));
    END IF;
    RETURN CASE WHEN lease._evidence(p, op, l, result,
                                     (SELECT x.idempotency_retention_ms FROM lease.policy x),
                                     'active', terminal_state, NULL, reason, incident)
                THEN result || jsonb_build_object('replayed', false,
                                                  'current_state', terminal_state) END;
END
$function$;

COMMENT ON FUNCTION lease._end(jsonb,text,text,text,boolean) IS
    'Ends a lease: the exact lease (for its owner: also the owner principal and service instance) active and unexpired, freed in one statement, then its terminal evidence (history, idempotency, audit) in the same transaction. Shared by release, release_brief, force_release and revoke (brief: the short answer, lease._ended_json, instead of the history record; the decision is the same); the privileged two compare against the observed lease (id and token), never an unseen successor, and their high-priority audit commits with the change. No exception block of its own: a repeated request id whose lease still matched raises unique_violation at idempotency''s primary key, answered by the caller''s block (lease._end_or_replay, or lease._release_many''s for a whole batch).';

REVOKE ALL ON FUNCTION lease._end(jsonb,text,text,text,boolean) FROM PUBLIC;
