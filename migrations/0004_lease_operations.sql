-- 0004: the lease operations: acquire, renew, release, force_release, revoke.
--
-- Each is one call, one SERIALIZABLE transaction, deciding with now(). Rows
-- are read with plain SELECTs (predicate locks on rows that exist) and
-- changed with UPDATEs that fail with 40001 when a concurrent transaction
-- changed the row first; the service retries those. No SELECT ... FOR UPDATE:
-- a conflicting acquire stays read-only.

-- The identity's row, with its stored tuple checked against the request
-- (fails closed with LS001 on mismatch or an unknown record version).
-- Returns a row of NULLs when the identity has no row yet.
CREATE FUNCTION lease._row(k text, i lease.identity) RETURNS lease.locks
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    l lease.locks;
BEGIN
    SELECT * INTO l FROM lease.locks WHERE lock_key = k;
    IF FOUND AND (NOT lease._same_identity(l, i) OR l.record_version <> 1) THEN
        PERFORM lease._corrupt(k, 'stored identity tuple or record version does not match');
    END IF;
    RETURN l;
END
$$;

-- Validates metadata (docs/contract.md): a flat object, at most 16 keys
-- of [a-z0-9_]{1,64}, values string (<= 256 bytes), number or boolean, at
-- most 2 KiB compact. Returns the offending field or NULL.
CREATE FUNCTION lease._bad_metadata(m jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    e record;
    n integer := 0;
    size integer := 2;
BEGIN
    IF m IS NULL OR jsonb_typeof(m) = 'null' THEN
        RETURN NULL;  -- absent or null: no metadata
    END IF;
    IF jsonb_typeof(m) <> 'object' THEN
        RETURN 'metadata';
    END IF;
    FOR e IN SELECT key, value FROM jsonb_each(m) LOOP
        n := n + 1;
        IF n > 16 OR length(e.key) > 64 OR e.key !~ '^[a-z0-9_]+$' THEN
            RETURN 'metadata.' || left(e.key, 64);
        END IF;
        IF NOT (jsonb_typeof(e.value) IN ('number', 'boolean')
                OR jsonb_typeof(e.value) = 'string' AND octet_length(e.value #>> '{}') <= 256) THEN
            RETURN 'metadata.' || e.key;
        END IF;
        size := size + octet_length(to_jsonb(e.key)::text) + 1 + octet_length(e.value::text)
                + CASE WHEN n > 1 THEN 1 ELSE 0 END;
    END LOOP;
    IF size > 2048 THEN
        RETURN 'metadata';
    END IF;
    RETURN NULL;
END
$$;

-- The effective TTL: the request's, else the default; NULL when outside
-- minimum_ttl_ms < ttl <= maximum_ttl_ms.
CREATE FUNCTION lease._ttl(v jsonb, fallback bigint, pol lease.policy) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN v IS NULL OR jsonb_typeof(v) = 'null' THEN fallback
    WHEN lease._int(v) > pol.minimum_ttl_ms AND lease._int(v) <= pol.maximum_ttl_ms
        THEN lease._int(v)
    END;

-- The retry hint for a conflict: until the holder's expiry, 50..1000 ms.
CREATE FUNCTION lease._retry_after(expires_at timestamptz) RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE
RETURN least(1000, greatest(50, ceil(extract(epoch FROM expires_at - now()) * 1000)))::bigint;

CREATE FUNCTION lease._state_now(l lease.locks) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
RETURN CASE WHEN l.state = 'active' AND l.expires_at > now() THEN 'active'
            WHEN l.state = 'active' THEN 'expired'
            ELSE 'none' END;

CREATE FUNCTION lease.acquire(p jsonb) RETURNS jsonb
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    deadline timestamptz := lease._call_deadline(p, true);
    t timestamptz := lease._now();
    i lease.identity;
    k text;
    pol lease.policy;
    sealed boolean;
    l lease.locks;
    old lease.locks;
    replay jsonb;
    ttl bigint;
    maxlife bigint;
    token bigint;
    prev text := 'none';
    field text;
    result jsonb;
BEGIN
    IF now() >= deadline THEN
        RETURN lease._result('deadline_exceeded');
    END IF;
    i := lease._identity(p -> 'lock_identity');
    IF i.bad_field IS NOT NULL THEN
        RETURN lease._invalid(i.bad_field);
    END IF;
    field := CASE WHEN NOT lease._id_ok(p -> 'service_instance_id') THEN 'service_instance_id'
                  WHEN NOT lease._id_ok(p -> 'execution_id') THEN 'execution_id'
                  WHEN NOT lease._id_ok(p -> 'job_id') THEN 'job_id' END;
    IF field IS NULL AND coalesce(jsonb_typeof(p -> 'trace_id'), 'null') <> 'null'
       AND NOT lease._id_ok(p -> 'trace_id') THEN
        field := 'trace_id';
    END IF;
    IF field IS NOT NULL THEN
        RETURN lease._invalid(field);
    END IF;
    SELECT * INTO pol FROM lease.policy;
    SELECT ns.sealed INTO sealed FROM lease.namespace_state ns;
    ttl := lease._ttl(p -> 'ttl_ms', pol.default_ttl_ms, pol);
    IF ttl IS NULL THEN
        RETURN lease._invalid('ttl_ms');
    END IF;
    IF coalesce(jsonb_typeof(p -> 'maximum_lifetime_ms'), 'null') = 'null' THEN
        maxlife := pol.maximum_lifetime_ms;
    ELSE
        maxlife := lease._int(p -> 'maximum_lifetime_ms');
        IF maxlife IS NULL OR maxlife <= pol.minimum_ttl_ms
           OR maxlife > pol.maximum_lifetime_ms THEN
            RETURN lease._invalid('maximum_lifetime_ms');
        END IF;
    END IF;
    field := lease._bad_metadata(p -> 'metadata');
    IF field IS NOT NULL THEN
        RETURN lease._invalid(field);
    END IF;
    IF sealed THEN
        RETURN jsonb_build_object('code', 'lease_backend_unavailable', 'reason', 'sealed');
    END IF;

    k := lease._key(i);
    replay := lease._replay(k, 'acquire', p);
    IF replay IS NOT NULL THEN
        RETURN replay;
    END IF;

    l := lease._row(k, i);
    IF l.lock_key IS NOT NULL AND l.state = 'active' AND l.expires_at > now() THEN
        RETURN jsonb_build_object('code', 'lease_conflict',
                                  'retry_after_ms', lease._retry_after(l.expires_at));
    END IF;

    IF l.lock_key IS NULL AND EXISTS (
        SELECT 1 FROM lease.locks x
         WHERE x.tenant_id = i.tenant_id AND x.program_id = i.program_id
           AND x.target_namespace = i.target_namespace AND x.target_id = i.target_id
           AND x.actor_name = i.actor_name AND x.workflow_name = i.workflow_name
           AND x.operation_class = i.operation_class) THEN
        -- First acquire of this key, yet another row claims the tuple: no
        -- acquisition over that ambiguity (only on an identity's first use).
        PERFORM lease._corrupt(k, 'another row claims this identity tuple');
    END IF;

    token := coalesce(l.fencing_counter, 0) + 1;
    IF l.state = 'active' THEN
        prev := 'expired';
    END IF;
    -- Refuse before touching the row: a refusal must leave it as it was (an
    -- expired lease recorded here but left in place would be recorded again).
    IF token > pol.token_limit THEN
        PERFORM lease._audit(p, 'target_lease_alert', 'lease_backend_unavailable',
            jsonb_build_object('priority', 'high', 'decision', 'error',
                               'lock_identity', lease._identity_json(i.tenant_id, i.program_id,
                                   i.target_namespace, i.target_id, i.actor_name,
                                   i.workflow_name, i.operation_class),
                               'reason', 'fencing counter reached the policy token limit',
                               'previous_state', prev));
        RETURN jsonb_build_object('code', 'lease_backend_unavailable', 'reason', 'token_limit');
    END IF;
    old := l;

    -- One statement creates the identity's row or reuses it. A concurrent
    -- first acquire of the same identity, or any concurrent change of the
    -- row, makes this a serialization failure: the service retries and then
    -- sees the other lease.
    PERFORM lease._bound_lock_wait(deadline);
    INSERT INTO lease.locks AS x (
        lock_key, tenant_id, program_id, target_namespace, target_id, actor_name,
        workflow_name, operation_class, fencing_counter, created_at, state, lease_id,
        fencing_token, owner_principal_id, owner_client_id, owner_credential_id,
        service_instance_id, acquired_at, renewed_at, expires_at, ttl_ms, maximum_lifetime_ms,
        execution_id, job_id, trace_id, request_id, metadata)
    VALUES (
        k, i.tenant_id, i.program_id, i.target_namespace, i.target_id, i.actor_name,
        i.workflow_name, i.operation_class, token, t, 'active',
        'lease_' || replace(gen_random_uuid()::text, '-', ''), token,
        p #>> '{principal,principal_id}', coalesce(p #>> '{principal,client_id}', ''),
        coalesce(p #>> '{principal,credential_id}', ''), p ->> 'service_instance_id', t, t,
        t + lease._ms(least(ttl, maxlife)), ttl, maxlife, p ->> 'execution_id', p ->> 'job_id',
        p ->> 'trace_id', p ->> 'request_id', CASE WHEN jsonb_typeof(p -> 'metadata') = 'object' THEN p -> 'metadata'
             ELSE '{}'::jsonb END)
    ON CONFLICT (lock_key) DO UPDATE
       SET fencing_counter = EXCLUDED.fencing_counter, state = 'active',
           lease_id = EXCLUDED.lease_id, fencing_token = EXCLUDED.fencing_token,
           owner_principal_id = EXCLUDED.owner_principal_id,
           owner_client_id = EXCLUDED.owner_client_id,
           owner_credential_id = EXCLUDED.owner_credential_id,
           service_instance_id = EXCLUDED.service_instance_id,
           acquired_at = EXCLUDED.acquired_at, renewed_at = EXCLUDED.renewed_at,
           expires_at = EXCLUDED.expires_at, ttl_ms = EXCLUDED.ttl_ms,
           maximum_lifetime_ms = EXCLUDED.maximum_lifetime_ms,
           execution_id = EXCLUDED.execution_id, job_id = EXCLUDED.job_id,
           trace_id = EXCLUDED.trace_id, request_id = EXCLUDED.request_id,
           metadata = EXCLUDED.metadata
    RETURNING * INTO l;
    -- Evidence is written after the row changed hands: a concurrent acquire
    -- or sweep of the same expired lease has already failed on the row
    -- (40001) instead of colliding on the history key.
    IF old.state = 'active' THEN
        PERFORM lease._to_history(old, 'expired', old.expires_at, NULL, NULL, NULL);
    END IF;
    INSERT INTO lease.lease_index (lease_id, lock_key, created_at) VALUES (l.lease_id, k, t);

    result := jsonb_build_object('code', 'lease_acquired', 'lease', lease._lease_json(l));
    PERFORM lease._remember(k, 'acquire', p, result, l.lease_id);
    PERFORM lease._audit(p, 'target_lease_acquire', 'lease_acquired',
        jsonb_build_object('lock_identity', result #> '{lease,lock_identity}',
                           'lease_id', l.lease_id, 'fencing_token', l.fencing_token,
                           'service_instance_id', l.service_instance_id,
                           'execution_id', l.execution_id, 'job_id', l.job_id,
                           'requested_ttl_ms', lease._int(p -> 'ttl_ms'),
                           'effective_ttl_ms', ttl, 'previous_state', prev,
                           'resulting_state', 'active'));
    RETURN result || jsonb_build_object('replayed', false, 'current_state', 'active');
END
$$;

-- Checks what renew, release, force_release and revoke share: the identity
-- (normalised once by the caller), lease_id and fencing_token. Returns the
-- offending field or NULL.
CREATE FUNCTION lease._bad_lease_ref(p jsonb, i lease.identity) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN i.bad_field IS NOT NULL THEN i.bad_field
    WHEN NOT lease._id_ok(p -> 'lease_id') THEN 'lease_id'
    WHEN coalesce(lease._int(p -> 'fencing_token'), 0) <= 0 THEN 'fencing_token'
    END;

-- renew and release also name the service instance.
CREATE FUNCTION lease._bad_owner_ref(p jsonb, i lease.identity) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN coalesce(lease._bad_lease_ref(p, i),
                CASE WHEN NOT lease._id_ok(p -> 'service_instance_id')
                     THEN 'service_instance_id' END);

-- Whether a row holds exactly the lease a request names: active and
-- unexpired at backend time, same lease id and token, and (for the owner's
-- own operations) the same owner principal and service instance.
CREATE FUNCTION lease._names_lease(l lease.locks, p jsonb, as_owner boolean) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
RETURN coalesce(l.state = 'active' AND l.expires_at > now()
                AND l.lease_id = p ->> 'lease_id'
                AND l.fencing_token = lease._int(p -> 'fencing_token')
                AND (NOT as_owner
                     OR l.owner_principal_id = p #>> '{principal,principal_id}'
                        AND l.service_instance_id = p ->> 'service_instance_id'),
                false);

-- renew-if-owner: the exact lock identity, lease id, owner principal,
-- service instance and token of the active, unexpired lease. Sets renewed_at
-- to backend time and expires_at to min(now + ttl, acquired_at + lifetime);
-- never touches the token.
CREATE FUNCTION lease.renew(p jsonb) RETURNS jsonb
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    deadline timestamptz := lease._call_deadline(p, true);
    t timestamptz := lease._now();
    i lease.identity;
    k text;
    pol lease.policy;
    sealed boolean;
    l lease.locks;
    replay jsonb;
    ttl bigint;
    field text;
    result jsonb;
BEGIN
    IF now() >= deadline THEN
        RETURN lease._result('deadline_exceeded');
    END IF;
    i := lease._identity(p -> 'lock_identity');
    field := lease._bad_owner_ref(p, i);
    IF field IS NOT NULL THEN
        RETURN lease._invalid(field);
    END IF;
    SELECT * INTO pol FROM lease.policy;
    SELECT ns.sealed INTO sealed FROM lease.namespace_state ns;
    IF coalesce(jsonb_typeof(p -> 'ttl_ms'), 'null') <> 'null'
       AND lease._ttl(p -> 'ttl_ms', NULL, pol) IS NULL THEN
        RETURN lease._invalid('ttl_ms');
    END IF;
    IF sealed THEN
        RETURN jsonb_build_object('code', 'lease_backend_unavailable', 'reason', 'sealed');
    END IF;
    k := lease._key(i);
    replay := lease._replay(k, 'renew', p);
    IF replay IS NOT NULL THEN
        RETURN replay;
    END IF;

    l := lease._row(k, i);
    IF NOT lease._names_lease(l, p, true) THEN
        RETURN lease._result('lease_lost');
    END IF;

    ttl := coalesce(lease._ttl(p -> 'ttl_ms', NULL, pol), l.ttl_ms);
    PERFORM lease._bound_lock_wait(deadline);
    UPDATE lease.locks
       SET renewed_at = t,
           expires_at = least(t + lease._ms(ttl), acquired_at + lease._ms(maximum_lifetime_ms)),
           ttl_ms = ttl
     WHERE lock_key = k
    RETURNING * INTO l;

    result := jsonb_build_object('code', 'lease_renewed', 'lease', lease._lease_json(l));
    PERFORM lease._remember(k, 'renew', p, result, l.lease_id);
    PERFORM lease._audit(p, 'target_lease_renew', 'lease_renewed',
        jsonb_build_object('lock_identity', result #> '{lease,lock_identity}',
                           'lease_id', l.lease_id, 'fencing_token', l.fencing_token,
                           'service_instance_id', l.service_instance_id,
                           'execution_id', l.execution_id, 'job_id', l.job_id,
                           'trace_id', l.trace_id, 'requested_ttl_ms', lease._int(p -> 'ttl_ms'),
                           'effective_ttl_ms', ttl, 'previous_state', 'active',
                           'resulting_state', 'active'));
    RETURN result || jsonb_build_object('replayed', false, 'current_state', 'active');
END
$$;

-- Ends the active lease of a row: terminal evidence in history, row freed,
-- idempotency and audit in the same transaction. Shared by release,
-- force_release and revoke once each has matched the lease.
CREATE FUNCTION lease._end_lease(p jsonb, op text, l lease.locks, terminal_state text,
                                 reason text, incident text, success_code text) RETURNS jsonb
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    h lease.history;
    result jsonb;
BEGIN
    PERFORM lease._bound_lock_wait((p ->> 'deadline_at')::timestamptz);
    -- the row first: a concurrent change fails here (40001), before any
    -- evidence is written
    PERFORM lease._clear(l.lock_key);
    h := lease._to_history(l, terminal_state, lease._now(), p, reason, incident);
    result := jsonb_build_object('code', success_code, 'lease', lease._history_json(h));
    PERFORM lease._remember(l.lock_key, op, p, result, h.lease_id);
    PERFORM lease._audit(p, 'target_lease_' || op, success_code,
        jsonb_build_object('lock_identity', result #> '{lease,lock_identity}',
                           'lease_id', h.lease_id, 'fencing_token', h.fencing_token,
                           'service_instance_id', h.service_instance_id,
                           'execution_id', h.execution_id, 'job_id', h.job_id,
                           'trace_id', h.trace_id, 'effective_ttl_ms', h.ttl_ms,
                           'previous_state', 'active', 'resulting_state', terminal_state,
                           'reason', reason, 'incident_id', incident,
                           'priority', CASE WHEN op = 'release' THEN 'normal' ELSE 'high' END));
    RETURN result || jsonb_build_object('replayed', false, 'current_state', terminal_state);
END
$$;

-- release-if-owner: compare-and-delete on the exact ownership tuple.
CREATE FUNCTION lease.release(p jsonb) RETURNS jsonb
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    deadline timestamptz := lease._call_deadline(p, true);
    i lease.identity;
    k text;
    l lease.locks;
    replay jsonb;
    field text;
BEGIN
    IF now() >= deadline THEN
        RETURN lease._result('deadline_exceeded');
    END IF;
    i := lease._identity(p -> 'lock_identity');
    field := lease._bad_owner_ref(p, i);
    IF field IS NOT NULL THEN
        RETURN lease._invalid(field);
    END IF;
    k := lease._key(i);
    replay := lease._replay(k, 'release', p);
    IF replay IS NOT NULL THEN
        RETURN replay;
    END IF;
    l := lease._row(k, i);
    IF NOT lease._names_lease(l, p, true) THEN
        RETURN lease._result('lease_lost');
    END IF;
    RETURN lease._end_lease(p, 'release', l, 'released', NULL, NULL, 'lease_released');
END
$$;

-- Privileged force-release and revoke: compare against the observed lease
-- (lease id and token), never an unseen successor; a reason is required and
-- the high-priority audit event commits with the change.
CREATE FUNCTION lease._admin_end(p jsonb, op text) RETURNS jsonb
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    deadline timestamptz := lease._call_deadline(p, true);
    i lease.identity;
    k text;
    l lease.locks;
    replay jsonb;
    field text;
    reason text := p ->> 'reason';
    incident text;
BEGIN
    IF now() >= deadline THEN
        RETURN lease._result('deadline_exceeded');
    END IF;
    i := lease._identity(p -> 'lock_identity');
    field := lease._bad_lease_ref(p, i);
    IF field IS NULL AND (jsonb_typeof(p -> 'reason') IS DISTINCT FROM 'string'
                          OR char_length(reason) NOT BETWEEN 1 AND 512
                          OR reason ~ '[[:cntrl:]]' OR btrim(reason) = '') THEN
        field := 'reason';
    END IF;
    IF field IS NULL AND coalesce(jsonb_typeof(p -> 'incident_id'), 'null') <> 'null' THEN
        IF op <> 'revoke' OR NOT lease._id_ok(p -> 'incident_id') THEN
            field := 'incident_id';
        ELSE
            incident := p ->> 'incident_id';
        END IF;
    END IF;
    IF field IS NOT NULL THEN
        RETURN lease._invalid(field);
    END IF;
    k := lease._key(i);
    replay := lease._replay(k, op, p);
    IF replay IS NOT NULL THEN
        RETURN replay;
    END IF;
    l := lease._row(k, i);
    IF NOT lease._names_lease(l, p, false) THEN
        RETURN lease._result('lease_lost');
    END IF;
    IF op = 'revoke' THEN
        RETURN lease._end_lease(p, op, l, 'revoked', reason, incident, 'lease_revoked');
    END IF;
    RETURN lease._end_lease(p, op, l, 'released', reason, NULL, 'lease_released');
END
$$;

CREATE FUNCTION lease.force_release(p jsonb) RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
RETURN lease._admin_end(p, 'force_release');

CREATE FUNCTION lease.revoke(p jsonb) RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
RETURN lease._admin_end(p, 'revoke');
