CREATE OR REPLACE FUNCTION lease._acquire(p jsonb, brief boolean)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
DECLARE
    deadline timestamptz := lease._call_deadline(p, true);
    t timestamptz := lease._now();
    -- the identity once: lease._canonical inlines, and an argument that is
    -- an expression would be evaluated again at each of its ~40 uses
    li jsonb := p -> 'lock_identity';
    c text := lease._canonical(li);
    -- a TTL member once, for the same reason: lease._ttl_in and lease._int
    -- inline and use their argument several times
    ttl_v jsonb := p -> 'ttl_ms';
    life_v jsonb := p -> 'maximum_lifetime_ms';
    k text;
    s lease._settings;
    why text;
    field text;
    ttl bigint;
    maxlife bigint;
    lid text;
    l lease.locks;
    cn text;
    prev text := 'none';
    replay jsonb;
    result jsonb;
BEGIN
    IF now() >= deadline THEN
        RETURN lease._result('deadline_exceeded');
    END IF;
    SELECT * INTO s FROM lease._settings;
    ttl := lease._ttl_in(ttl_v, s.default_ttl_ms, s.minimum_ttl_ms, s.maximum_ttl_ms);
    maxlife := lease._ttl_in(life_v, s.maximum_lifetime_ms, s.minimum_ttl_ms,
                             s.maximum_lifetime_ms);
    field := CASE
        WHEN c IS NULL THEN (lease._identity(p -> 'lock_identity')).bad_field
        WHEN NOT lease._id_ok(p -> 'service_instance_id') THEN 'service_instance_id'
        WHEN NOT lease._id_ok(p -> 'execution_id') THEN 'execution_id'
        WHEN NOT lease._id_ok(p -> 'job_id') THEN 'job_id'
        WHEN p ? 'trace_id' AND jsonb_typeof(p -> 'trace_id') <> 'null'
             AND NOT lease._id_ok(p -> 'trace_id') THEN 'trace_id'
        WHEN ttl IS NULL THEN 'ttl_ms'
        WHEN maxlife IS NULL THEN 'maximum_lifetime_ms'
        WHEN p ? 'metadata' THEN lease._bad_metadata(p -> 'metadata') END;
    IF field IS NOT NULL THEN
        RETURN lease._invalid(field, CASE field
            WHEN 'ttl_ms' THEN 'ttl_ms must be greater than ' || s.minimum_ttl_ms
                               || ' and at most ' || s.maximum_ttl_ms
            WHEN 'maximum_lifetime_ms' THEN 'maximum_lifetime_ms must be greater than '
                               || s.minimum_ttl_ms || ' and at most ' || s.maximum_lifetime_ms
            END);
    END IF;
    IF s.guard_needed THEN
        why := lease._guard();
        IF why IS NOT NULL THEN
            RETURN lease._sealed_result(why);
        END IF;
    END IF;
    k := lease._key_of(c);
    lid := lease._new_lease_id(t);

    -- One decision for every caller, whatever flags the request carries
    -- (docs/architecture.md, "SERIALIZABLE layout"): nothing reads before
    -- the first write, so no predicate lock ties this transaction to others
    -- on other identities. A repeated request id is looked up only after a
    -- conflict says it may be one: the row is held (below), or the
    -- idempotency record's primary key refuses the evidence (the handler at
    -- the end: the block's writes roll back and the stored answer is given).
    BEGIN
    -- A new identity: its row is created holding the lease, before anything
    -- reads it (the unique indexes decide). An existing row (or a tuple
    -- another key claims) makes the insert a no-op; a concurrent first
    -- acquisition of the same identity makes it a serialization failure, and
    -- the retry finds the row.
    INSERT INTO lease.locks (
        lock_key, tenant_id, program_id, target_namespace, target_id, actor_name,
        workflow_name, operation_class, fencing_counter, created_at, state, lease_id,
        fencing_token, owner_principal_id, owner_client_id, owner_credential_id,
        service_instance_id, acquired_at, renewed_at, expires_at, ttl_ms, maximum_lifetime_ms,
        execution_id, job_id, trace_id, request_id, metadata)
    VALUES (k, split_part(c, '"', 4), split_part(c, '"', 6), split_part(c, '"', 8),
            split_part(c, '"', 10), split_part(c, '"', 12), split_part(c, '"', 14),
            split_part(c, '"', 16), 1, t, 'active', lid, 1,
            p #>> '{principal,principal_id}', coalesce(p #>> '{principal,client_id}', ''),
            coalesce(p #>> '{principal,credential_id}', ''), p ->> 'service_instance_id', t, t,
            t + lease._ms(least(ttl, maxlife)), ttl, maxlife, p ->> 'execution_id',
            p ->> 'job_id', p ->> 'trace_id', p ->> 'request_id', lease._metadata(p))
    ON CONFLICT DO NOTHING
    RETURNING * INTO l;
    -- An existing identity: a free row of exactly this tuple, below the
    -- token limit, takes the lease in one update.
    IF NOT FOUND THEN LOOP
        IF NOT lease._lock_wait_until(deadline) THEN
            RETURN lease._result('deadline_exceeded');
        END IF;
        UPDATE lease.locks
           SET fencing_counter = fencing_counter + 1, state = 'active', lease_id = lid,
               fencing_token = fencing_counter + 1,
               owner_principal_id = p #>> '{principal,principal_id}',
               owner_client_id = coalesce(p #>> '{principal,client_id}', ''),
               owner_credential_id = coalesce(p #>> '{principal,credential_id}', ''),
               service_instance_id = p ->> 'service_instance_id', acquired_at = t,
               renewed_at = t, expires_at = t + lease._ms(least(ttl, maxlife)), ttl_ms = ttl,
               maximum_lifetime_ms = maxlife, execution_id = p ->> 'execution_id',
               job_id = p ->> 'job_id', trace_id = p ->> 'trace_id',
               request_id = p ->> 'request_id', metadata = lease._metadata(p)
         WHERE lock_key = k AND state = 'free' AND fencing_counter < s.token_limit
           AND record_version = 1
           AND lease._canonical_of(tenant_id, program_id, target_namespace, target_id,
                                   actor_name, workflow_name, operation_class) = c
        RETURNING * INTO l;
        EXIT WHEN FOUND;

        -- Nothing matched: read the row to say why.
        l := lease._row(k, lease._identity_of(c));  -- LS001 when the stored tuple differs
        IF l.lock_key IS NULL THEN
            -- the insert skipped, yet no row has this key: another row
            -- claims this identity tuple
            PERFORM lease._corrupt(k, 'another row claims this identity tuple');
        END IF;
        IF l.state = 'active' AND l.expires_at > now() THEN
            -- held: perhaps by this very request, committed before
            replay := lease._replay(k, 'acquire', p);
            IF replay IS NOT NULL THEN
                RETURN replay;
            END IF;
            RETURN jsonb_build_object('code', 'lease_conflict',
                                      'retry_after_ms', lease._retry_after(l.expires_at));
        END IF;
        IF l.fencing_counter >= s.token_limit THEN
            -- refuse before touching the row: a refusal leaves it as it was
            PERFORM lease._audit(p, 'target_lease_alert', 'lease_backend_unavailable',
                jsonb_build_object('priority', 'high', 'decision', 'error',
                                   'lock_identity', lease._identity_json(l.tenant_id,
                                       l.program_id, l.target_namespace, l.target_id,
                                       l.actor_name, l.workflow_name, l.operation_class),
                                   'reason', 'fencing counter reached the policy token limit',
                                   'previous_state', lease._state_now(l)));
            RETURN jsonb_build_object('code', 'lease_backend_unavailable',
                                      'reason', 'token_limit');
        END IF;
        -- an expired lease nobody swept yet: its terminal evidence first;
        -- the row is then free and the update above takes it
        PERFORM lease._expire(k, l.lease_id, l.fencing_token);
        prev := 'expired';
    END LOOP; END IF;

    INSERT INTO lease.lease_index (lease_id, lock_key, created_at) VALUES (lid, k, t);
    -- (separate assignments: PL/pgSQL compiles only the expression it runs)
    IF brief THEN
        result := jsonb_build_object('code', 'lease_acquired', 'lease', lease._acquired_json(l));
    ELSE
        result := jsonb_build_object('code', 'lease_acquired', 'lease', lease._lease_json(l));
    END IF;
    -- the requested TTL: NULL when ttl_ms was absent or null (ttl is then
    -- the default); a number got here only as a valid ttl (no second
    -- lease._int, whose regular expression runs again)
    RETURN CASE WHEN lease._evidence(p, 'acquire', l, result, s.idempotency_retention_ms, prev,
                                     'active', CASE WHEN jsonb_typeof(ttl_v) = 'number'
                                                    THEN ttl END, NULL, NULL)
                THEN result || '{"replayed": false, "current_state": "active"}'::jsonb END;
    EXCEPTION WHEN unique_violation THEN
        -- this request id committed before (its lease since ended, so the
        -- row was free): the stored answer, and nothing of this attempt
        GET STACKED DIAGNOSTICS cn = CONSTRAINT_NAME;
        replay := CASE WHEN cn = 'idempotency_pkey' THEN lease._replay(k, 'acquire', p) END;
        IF replay IS NULL THEN
            RAISE;
        END IF;
        RETURN replay;
    END;
END
$function$;

COMMENT ON FUNCTION lease._acquire(jsonb,boolean) IS
    'The one acquire-if-free decision behind lease.acquire (whole answer) and lease.acquire_brief (brief: what the database decided; the only difference is the JSON built for the answer, and stored as the idempotency record). A new identity is one INSERT ... ON CONFLICT DO NOTHING before anything reads it (the unique indexes decide, not a predicate-locking read: concurrent first acquisitions do not fail each other under SERIALIZABLE); an existing free or expired one is one UPDATE with the exact condition; anything else is decided after reading the row (conflict, corrupt: fails closed LS001). The request id is looked up only after a conflict (the row held, or idempotency''s primary key refusing the evidence: the attempt rolls back to its savepoint and the stored answer is given), the same for every caller: no request flag changes the decision. Runs the namespace guard first; the idempotency record and audit event commit with the change.';

REVOKE ALL ON FUNCTION lease._acquire(jsonb,boolean) FROM PUBLIC;
