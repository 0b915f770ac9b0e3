CREATE OR REPLACE FUNCTION lease._renew(p jsonb, brief boolean, s lease._settings)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
DECLARE
    deadline timestamptz := lease._call_deadline(p, true);
    -- the identity once: lease._canonical inlines, and an argument that is
    -- an expression would be evaluated again at each of its ~40 uses
    li jsonb := p -> 'lock_identity';
    c text := lease._canonical(li);
    -- a TTL member once, for the same reason: lease._ttl_in and lease._int
    -- inline and use their argument several times
    ttl_v jsonb := p -> 'ttl_ms';
    k text;
    why text;
    ttl bigint;
    l lease.locks;
    result jsonb;
BEGIN
    IF now() >= deadline THEN
        RETURN lease._result('deadline_exceeded');
    END IF;
    -- one expression on the path that succeeds (each PL/pgSQL expression
    -- is set up again in every transaction); a refusal computes it twice
    IF lease._bad_reference(p, c, true) IS NOT NULL THEN
        RETURN lease._invalid(lease._bad_reference(p, c, true));
    END IF;
    ttl := lease._ttl_in(ttl_v, NULL, s.minimum_ttl_ms, s.maximum_ttl_ms);
    IF ttl IS NULL AND coalesce(jsonb_typeof(ttl_v), 'null') <> 'null' THEN
        RETURN lease._invalid('ttl_ms', 'ttl_ms must be greater than ' || s.minimum_ttl_ms
                                        || ' and at most ' || s.maximum_ttl_ms);
    END IF;
    IF s.guard_needed THEN
        why := lease._guard();
        IF why IS NOT NULL THEN
            RETURN lease._sealed_result(why);
        END IF;
    END IF;
    k := lease._key_of(c);
    -- The same decision for every caller: no read before the write; a
    -- repeated request id is looked up only after a conflict says it may be
    -- one (lease._unmatched, or idempotency's primary key in lease._evidence,
    -- whose unique_violation the caller's block answers: lease._renew_or_replay).
    IF NOT lease._lock_wait_until(deadline) THEN
        RETURN lease._result('deadline_exceeded');
    END IF;
    -- lease._now() in the statement, not a variable: the same backend time
    -- (now() is the transaction's), one PL/pgSQL expression fewer
    UPDATE lease.locks
       SET renewed_at = lease._now(),
           expires_at = least(lease._now() + lease._ms(coalesce(ttl, ttl_ms)),
                              acquired_at + lease._ms(maximum_lifetime_ms)),
           ttl_ms = coalesce(ttl, ttl_ms)
     WHERE lock_key = k AND state = 'active' AND expires_at > now() AND record_version = 1
       -- the token passed lease._bad_reference (a positive JSON integer in
       -- bigint range): its text casts as lease._int would, without its checks
       AND lease_id = p ->> 'lease_id' AND fencing_token = (p ->> 'fencing_token')::bigint
       AND owner_principal_id = p #>> '{principal,principal_id}'
       AND service_instance_id = p ->> 'service_instance_id'
       AND lease._canonical_of(tenant_id, program_id, target_namespace, target_id, actor_name,
                               workflow_name, operation_class) = c
    RETURNING * INTO l;
    IF NOT FOUND THEN
        RETURN lease._unmatched(k, 'renew', p, c, lease._result('lease_lost'));
    END IF;

    IF brief THEN
        result := jsonb_build_object('code', 'lease_renewed', 'lease', lease._renewed_json(l));
    ELSE
        result := jsonb_build_object('code', 'lease_renewed', 'lease', lease._lease_json(l));
    END IF;
    -- the requested TTL is ttl here: an absent or null ttl_ms left it NULL,
    -- any other value is either a valid integer or refused above
    RETURN CASE WHEN lease._evidence(p, 'renew', l, result, s.idempotency_retention_ms, 'active',
                                     'active', ttl, NULL, NULL)
                THEN result || '{"replayed": false, "current_state": "active"}'::jsonb END;
END
$function$;

COMMENT ON FUNCTION lease._renew(jsonb,boolean,lease._settings) IS
    'The one renew-if-owner decision behind lease.renew (whole answer) and lease.renew_brief (brief: only the JSON of the answer differs): the exact identity, lease id, owner principal, service instance and token of the active, unexpired lease. renewed_at becomes backend time, expires_at min(now + ttl, acquired_at + lifetime); the token never changes. `s` is lease._settings as the caller read it in this transaction (the policy and whether the namespace guard must look closer): read once per call by lease.renew and renew_brief, once per batch by lease._renew_many, whose items would otherwise each read it again (about 0.09 M instructions an item). It has no exception block of its own: a repeated request id whose lease still matched raises unique_violation at idempotency''s primary key, answered by the caller''s block (lease._renew_or_replay for one renewal or a batch''s item, lease._renew_many''s for a whole batch).';

REVOKE ALL ON FUNCTION lease._renew(jsonb,boolean,lease._settings) FROM PUBLIC;
