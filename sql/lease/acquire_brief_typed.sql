CREATE OR REPLACE FUNCTION lease.acquire_brief_typed(
    lock_identity lease.identity, request lease.acquire_request, brief boolean DEFAULT true)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    -- the checks every call shares (LS002, LS003)
    deadline timestamptz := lease._call_deadline_t(request.deadline_at, request.principal_id,
                                                   request.request_id, request.request_digest);
    t timestamptz := lease._now();
    i lease.identity;
    meta jsonb := CASE WHEN jsonb_typeof(request.metadata) = 'object' THEN request.metadata
                       ELSE '{}' END;
    k text;
    c text;
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
    -- NULL: the policy's; out of its bounds: refused below
    ttl := CASE WHEN request.ttl_ms IS NULL THEN s.default_ttl_ms
                WHEN request.ttl_ms > s.minimum_ttl_ms AND request.ttl_ms <= s.maximum_ttl_ms
                    THEN request.ttl_ms END;
    maxlife := CASE WHEN request.maximum_lifetime_ms IS NULL THEN s.maximum_lifetime_ms
                    WHEN request.maximum_lifetime_ms > s.minimum_ttl_ms
                         AND request.maximum_lifetime_ms <= s.maximum_lifetime_ms
                        THEN request.maximum_lifetime_ms END;
    -- the identity by lease.normalize_component (the rule a jsonb identity
    -- is held to), then the other members in the jsonb request's order
    i := lease._identity_text(lock_identity.tenant_id, lock_identity.program_id,
                              lock_identity.target_namespace, lock_identity.target_id,
                              lock_identity.actor_name, lock_identity.workflow_name,
                              lock_identity.operation_class);
    field := coalesce(lease._identity_fault(i), CASE
        WHEN NOT lease._id_text_ok(request.service_instance_id) THEN 'service_instance_id'
        WHEN NOT lease._id_text_ok(request.execution_id) THEN 'execution_id'
        WHEN NOT lease._id_text_ok(request.job_id) THEN 'job_id'
        WHEN request.trace_id IS NOT NULL AND NOT lease._id_text_ok(request.trace_id)
            THEN 'trace_id'
        WHEN ttl IS NULL THEN 'ttl_ms'
        WHEN maxlife IS NULL THEN 'maximum_lifetime_ms'
        WHEN request.metadata IS NOT NULL THEN lease._bad_metadata(request.metadata) END);
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
    IF request.session_id IS NOT NULL THEN
        -- A lease in a session: only in an open, unexpired session of this
        -- principal and credential, within the identity's tenant (one
        -- read by primary key: a keep-alive's write of the row does not
        -- fail this transaction). Its own expiry is its lifetime bound; the
        -- session keeps it alive (lease._effective_expiry).
        SELECT y.ttl_ms INTO ttl FROM lease.sessions y
         WHERE y.session_id = request.session_id AND y.state = 'open'
           AND y.expires_at > now() AND y.tenant_id = i.tenant_id
           AND y.principal_id = request.principal_id
           AND y.credential_id = coalesce(request.credential_id, '');
        IF NOT FOUND THEN
            RETURN lease._result('lease_lost');
        END IF;
    END IF;
    k := lease._key(i);
    c := lease._canonical_of(i.tenant_id, i.program_id, i.target_namespace, i.target_id,
                             i.actor_name, i.workflow_name, i.operation_class);
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
        execution_id, job_id, trace_id, request_id, metadata, session_id)
    VALUES (k, i.tenant_id, i.program_id, i.target_namespace, i.target_id, i.actor_name,
            i.workflow_name, i.operation_class, 1, t, 'active', lid, 1, request.principal_id,
            coalesce(request.client_id, ''), coalesce(request.credential_id, ''),
            request.service_instance_id, t, t,
            t + lease._ms(CASE WHEN request.session_id IS NULL THEN least(ttl, maxlife)
                               ELSE maxlife END),
            ttl, maxlife, request.execution_id, request.job_id, request.trace_id,
            request.request_id, meta, request.session_id)
    ON CONFLICT DO NOTHING
    RETURNING * INTO l;
    -- An existing identity: a free row of exactly this tuple, below the
    -- token limit, takes the lease in one update.
    IF NOT FOUND THEN LOOP
        IF NOT lease._lock_wait_until(deadline) THEN
            RETURN lease._result('deadline_exceeded');
        END IF;
        UPDATE lease.locks AS x
           SET fencing_counter = fencing_counter + 1, state = 'active', lease_id = lid,
               fencing_token = fencing_counter + 1,
               owner_principal_id = request.principal_id,
               owner_client_id = coalesce(request.client_id, ''),
               owner_credential_id = coalesce(request.credential_id, ''),
               service_instance_id = request.service_instance_id, acquired_at = t,
               renewed_at = t,
               expires_at = t + lease._ms(CASE WHEN request.session_id IS NULL
                                               THEN least(ttl, maxlife) ELSE maxlife END),
               ttl_ms = ttl, session_id = request.session_id,
               maximum_lifetime_ms = maxlife, execution_id = request.execution_id,
               job_id = request.job_id, trace_id = request.trace_id,
               request_id = request.request_id, metadata = meta
         WHERE lock_key = k AND state = 'free' AND fencing_counter < s.token_limit
           AND record_version = 1
           -- the tuple compared as one text, as the canonical form: seven equalities
           -- would match the unique index on the tuple, and a plan through it
           -- would take its predicate locks where neighbouring identities sit
           -- (lock_key is a hash: the primary key spreads them)
           AND lease._canonical_of(x.tenant_id, x.program_id, x.target_namespace, x.target_id,
                                   x.actor_name, x.workflow_name, x.operation_class) = c
        RETURNING * INTO l;
        EXIT WHEN FOUND;

        -- Nothing matched: read the row to say why.
        l := lease._row(k, i);  -- LS001 when the stored tuple differs
        IF l.lock_key IS NULL THEN
            -- the insert skipped, yet no row has this key: another row
            -- claims this identity tuple
            PERFORM lease._corrupt(k, 'another row claims this identity tuple');
        END IF;
        IF l.state = 'active' AND lease._effective_expiry(l.session_id, l.expires_at) > now() THEN
            -- held: perhaps by this very request, committed before
            replay := lease._replay_t(k, 'acquire', request.principal_id, request.request_id,
                                      request.request_digest);
            IF replay IS NOT NULL THEN
                RETURN replay;
            END IF;
            RETURN jsonb_build_object('code', 'lease_conflict',
                                      'retry_after_ms', lease._retry_after(l.expires_at));
        END IF;
        IF l.fencing_counter >= s.token_limit THEN
            -- refuse before touching the row: a refusal leaves it as it was
            -- (an alert's writer takes the call as jsonb: the rare path builds it)
            PERFORM lease._audit(jsonb_build_object(
                        'latency_ms', request.latency_ms, 'request_id', request.request_id,
                        'correlation_id', request.correlation_id, 'trace_id', request.trace_id,
                        'deadline_class', request.deadline_class,
                        'principal', jsonb_build_object(
                                              'principal_id', request.principal_id,
                                              'principal_class', request.principal_class,
                                              'credential_id', request.credential_id)),
                    'target_lease_alert', 'lease_backend_unavailable',
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
        IF l.session_id IS NOT NULL THEN
            -- Taken over because its session ended by time: record that end
            -- here, as the sweeper does (lease._expire_sessions, with its one
            -- session_expire event). The takeover then writes the session's
            -- row, as a keep-alive does: a keep-alive that found the session
            -- alive at its start cannot also commit after this takeover
            -- found it ended (one of the two fails serialization and is
            -- retried, and the retry sees the other's answer).
            WITH ended AS (
                UPDATE lease.sessions y SET state = 'expired', closed_at = y.expires_at
                 WHERE y.session_id = l.session_id AND y.state = 'open'
                   AND y.expires_at <= now()
                RETURNING y.*)
            INSERT INTO lease.audit_events (event_type, decision, result_code, principal_id,
                                            credential_id, service_instance_id, tenant_id,
                                            effective_ttl_ms, previous_state, resulting_state,
                                            reason, session_id)
            SELECT 'session_expire', 'allow', 'lease_lost', e.principal_id, e.credential_id,
                   e.service_instance_id, e.tenant_id, e.ttl_ms, 'open', 'expired',
                   'not kept alive', e.session_id
              FROM ended e;
        END IF;
        PERFORM lease._expire(k, l.lease_id, l.fencing_token);
        prev := 'expired';
    END LOOP; END IF;

    INSERT INTO lease.lease_index (lease_id, lock_key, created_at) VALUES (lid, k, t);
    -- (separate assignments: PL/pgSQL compiles only the expression it runs)
    IF brief THEN
        -- the brief record: the new lease's id, token, times, TTLs and client
        result := jsonb_build_object('code', 'lease_acquired', 'lease', jsonb_build_object(
            'lease_id', l.lease_id, 'fencing_token', l.fencing_token,
            'acquired_at', lease._ts(l.acquired_at), 'renewed_at', lease._ts(l.acquired_at),
            'expires_at', lease._ts(lease._effective_expiry(l.session_id, l.expires_at)),
            'ttl_ms', l.ttl_ms,
            'maximum_lifetime_ms', l.maximum_lifetime_ms, 'owner_client_id', l.owner_client_id,
            'owner_credential_id', l.owner_credential_id, 'state', 'active'));
    ELSE
        result := jsonb_build_object('code', 'lease_acquired', 'lease', lease._lease_json(l));
    END IF;
    -- the requested TTL: ttl_ms, NULL when the request named none (ttl is
    -- then the policy's default)
    RETURN CASE WHEN lease._evidence_t('acquire', l, result, s.idempotency_retention_ms, prev,
                                       'active', request.ttl_ms, NULL, NULL,
                                       request.principal_id, request.principal_class,
                                       request.credential_id, request.request_id,
                                       request.request_digest, request.correlation_id,
                                       request.trace_id, request.deadline_class,
                                       request.latency_ms)
                THEN result || '{"replayed": false, "current_state": "active"}'::jsonb END;
    EXCEPTION WHEN unique_violation THEN
        -- this request id committed before (its lease since ended, so the
        -- row was free): the stored answer, and nothing of this attempt
        GET STACKED DIAGNOSTICS cn = CONSTRAINT_NAME;
        replay := CASE WHEN cn = 'idempotency_pkey'
                       THEN lease._replay_t(k, 'acquire', request.principal_id,
                                            request.request_id, request.request_digest)
                  END;
        IF replay IS NULL THEN
            RAISE;
        END IF;
        RETURN replay;
    END;
END
$function$;

COMMENT ON FUNCTION lease.acquire_brief_typed(lease.identity,lease.acquire_request,boolean) IS
    'The one acquire-if-free decision, on typed values, as two composites (migration 0029): the identity (lease.identity; its bad_field is not read) and the rest of the request (lease.acquire_request: a new optional field is one more attribute, not a new signature). What the service calls for an acquisition (briefly), and what lease.acquire calls with a jsonb request''s members (brief false: the whole record). A new identity is one INSERT ... ON CONFLICT DO NOTHING before anything reads it (the unique indexes decide, not a predicate-locking read: concurrent first acquisitions do not fail each other under SERIALIZABLE); an existing free or expired one (a lease in a session expires with its session: lease._effective_expiry) is one UPDATE with the exact condition; anything else is decided after reading the row (conflict, corrupt: fails closed LS001). The request id is looked up only after a conflict (the row held, or idempotency''s primary key refusing the evidence: the attempt rolls back to its savepoint and the stored answer is given), the same for every caller. Checks, in order: the shared call checks (LS002/LS003), the deadline, each identity component (operation_class NULL is the default), service_instance_id, execution_id, job_id, trace_id (NULL: none), ttl_ms and maximum_lifetime_ms (NULL: the policy''s), metadata (NULL: none; an object, by the rules of docs/api.md "Metadata"; lease._bad_metadata); request_digest is the 64 hex digits of the request''s SHA-256. Runs the namespace guard first; the idempotency record and audit event commit with the change. session_id (NULL: none): the lease is held in that session (lease.session_open), which must be open, unexpired and this principal''s and credential''s within the identity''s tenant (else lease_lost); its own expires_at is then its lifetime bound and the session keeps it alive. brief (the default): the short answer, what the database decided (docs/sql-api.md, "Result shape"); the answer given is what is stored for a repeat.';

REVOKE ALL ON FUNCTION lease.acquire_brief_typed(lease.identity,lease.acquire_request,boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.acquire_brief_typed(lease.identity,lease.acquire_request,boolean) TO lease_service;
