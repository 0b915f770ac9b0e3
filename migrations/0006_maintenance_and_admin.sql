-- 0006: sweeping, retention, audit batches, credentials, quarantine, health,
-- namespace sealing, epoch recovery, verification and psql conveniences.

-- One sweeper at a time across every leased instance.
CREATE FUNCTION lease._sweep_lock() RETURNS boolean
LANGUAGE sql VOLATILE
RETURN pg_try_advisory_xact_lock(7809644177848592744);

-- Ends one expired lease, conditional on its lease id and token: a delayed
-- cleanup that finds a successor (or a renewal) changes nothing.
CREATE FUNCTION lease._expire(k text, expected_lease_id text, expected_token bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    l lease.locks;
BEGIN
    SELECT * INTO l FROM lease.locks
     WHERE lock_key = k AND state = 'active' AND lease_id = expected_lease_id
       AND fencing_token = expected_token AND expires_at <= now();
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM lease._clear(k);  -- the row first, as in lease._end_lease
    PERFORM lease._to_history(l, 'expired', l.expires_at, NULL, NULL, NULL);
    RETURN true;
END
$$;

CREATE FUNCTION lease.sweep_expired(batch integer) RETURNS jsonb
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r record;
    n bigint := 0;
BEGIN
    PERFORM lease._require_serializable();
    IF batch IS NULL OR batch NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'batch must be between 1 and 10000' USING ERRCODE = '22023';
    END IF;
    IF NOT lease._sweep_lock() THEN
        RETURN jsonb_build_object('ran', false, 'expired', 0);
    END IF;
    FOR r IN SELECT l.lock_key, l.lease_id, l.fencing_token FROM lease.locks l
              WHERE l.state = 'active' AND l.expires_at <= now() LIMIT batch LOOP
        IF lease._expire(r.lock_key, r.lease_id, r.fencing_token) THEN
            n := n + 1;
        END IF;
    END LOOP;
    RETURN jsonb_build_object('ran', true, 'expired', n);
END
$$;

-- Deletes idempotency rows, history and audit past retention, in bounded
-- batches. The only path that may delete audit events.
CREATE FUNCTION lease.purge_retention(batch integer) RETURNS jsonb
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    pol lease.policy;
    idem bigint;
    hist bigint;
    aud bigint;
BEGIN
    PERFORM lease._require_serializable();
    IF batch IS NULL OR batch NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION 'batch must be between 1 and 100000' USING ERRCODE = '22023';
    END IF;
    IF NOT lease._sweep_lock() THEN
        RETURN jsonb_build_object('ran', false, 'idempotency_purged', 0, 'history_purged', 0,
                                  'audit_purged', 0);
    END IF;
    SELECT * INTO pol FROM lease.policy;
    DELETE FROM lease.idempotency WHERE ctid IN (
        SELECT ctid FROM lease.idempotency WHERE expires_at < now()
         ORDER BY expires_at LIMIT batch);
    GET DIAGNOSTICS idem = ROW_COUNT;
    DELETE FROM lease.history WHERE ctid IN (
        SELECT ctid FROM lease.history
         WHERE ended_at < now() - lease._ms(pol.history_retention_ms)
         ORDER BY ended_at LIMIT batch);
    GET DIAGNOSTICS hist = ROW_COUNT;
    -- a lease id outlives its history row only while the lease could live
    DELETE FROM lease.lease_index WHERE ctid IN (
        SELECT ctid FROM lease.lease_index
         WHERE created_at < now() - lease._ms(pol.history_retention_ms + pol.maximum_lifetime_ms)
         ORDER BY created_at LIMIT batch);
    PERFORM set_config('lease.audit_purge', 'on', true);
    DELETE FROM lease.audit_events WHERE event_id IN (
        SELECT event_id FROM lease.audit_events
         WHERE occurred_at < now() - lease._ms(pol.audit_retention_ms)
         ORDER BY occurred_at LIMIT batch);
    GET DIAGNOSTICS aud = ROW_COUNT;
    PERFORM set_config('lease.audit_purge', 'off', true);
    RETURN jsonb_build_object('ran', true, 'idempotency_purged', idem, 'history_purged', hist,
                              'audit_purged', aud);
END
$$;

-- Audit events of requests that did not reach a mutation, written in
-- batches by the service. Only the named columns are taken.
CREATE FUNCTION lease.record_audit(events jsonb) RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n integer;
BEGIN
    PERFORM lease._require_serializable();
    IF jsonb_typeof(events) IS DISTINCT FROM 'array' THEN
        PERFORM lease._malformed('events is not an array');
    END IF;
    INSERT INTO lease.audit_events (
        occurred_at, latency_ms, event_type, priority, decision, result_code, retryable,
        backend_health, request_id, correlation_id, trace_id, execution_id, job_id,
        principal_class, principal_id, credential_id, service_instance_id, tenant_id, program_id,
        target_namespace, target_id, actor_name, workflow_name, operation_class, lease_id,
        fencing_token, requested_ttl_ms, effective_ttl_ms, deadline_class, previous_state,
        resulting_state, reason, incident_id)
    -- the service's clock, but never in the future nor older than an hour,
    -- so no batch can place events inside the purge window
    SELECT greatest(least(coalesce(e.occurred_at, now()), now()), now() - interval '1 hour'),
           e.latency_ms, e.event_type,
           coalesce(e.priority, 'normal'), e.decision, left(e.result_code, 64),
           coalesce(e.retryable, false), coalesce(e.backend_health, 'ok'),
           left(e.request_id, 128), left(e.correlation_id, 64), left(e.trace_id, 128),
           left(e.execution_id, 128), left(e.job_id, 128), left(e.principal_class, 16),
           left(e.principal_id, 128), left(e.credential_id, 128), left(e.service_instance_id, 128),
           left(e.tenant_id, 64), left(e.program_id, 64), left(e.target_namespace, 64),
           left(e.target_id, 128), left(e.actor_name, 64), left(e.workflow_name, 64),
           left(e.operation_class, 16), left(e.lease_id, 128), e.fencing_token,
           e.requested_ttl_ms, e.effective_ttl_ms, left(e.deadline_class, 16),
           left(e.previous_state, 16), left(e.resulting_state, 16), left(e.reason, 512),
           left(e.incident_id, 128)
      FROM jsonb_to_recordset(events) AS e(
        occurred_at timestamptz, latency_ms integer, event_type text, priority text,
        decision text, result_code text, retryable boolean, backend_health text,
        request_id text, correlation_id text, trace_id text, execution_id text, job_id text,
        principal_class text, principal_id text, credential_id text, service_instance_id text,
        tenant_id text, program_id text, target_namespace text, target_id text,
        actor_name text, workflow_name text, operation_class text, lease_id text,
        fencing_token bigint, requested_ttl_ms bigint, effective_ttl_ms bigint,
        deadline_class text, previous_state text, resulting_state text, reason text,
        incident_id text);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- The principal of a psql session, as audit and history record it.
CREATE FUNCTION lease._sql_principal() RETURNS jsonb
LANGUAGE sql STABLE
RETURN jsonb_build_object(
    'principal_id', 'sql:' || regexp_replace(session_user, '[^A-Za-z0-9._:-]', '_', 'g'),
    'client_id', 'psql', 'credential_id', '', 'principal_class', 'sql');

-- The wire form of a credential; the digest only for the service's lookup.
CREATE FUNCTION lease._credential_json(c lease.credentials, with_digest boolean) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
RETURN jsonb_build_object('credential_id', c.credential_id, 'principal_id', c.principal_id,
    'client_id', c.client_id, 'tenant_id', c.tenant_id, 'program_id', c.program_id,
    'actor_names', to_jsonb(c.actor_names), 'capabilities', to_jsonb(c.capabilities),
    'admin', c.admin, 'description', c.description,
    'created_at', lease._ts(c.created_at), 'expires_at', lease._ts(c.expires_at),
    'revoked_at', lease._ts(c.revoked_at))
    || CASE WHEN with_digest
            THEN jsonb_build_object('secret_digest', encode(c.secret_digest, 'hex'))
            ELSE '{}'::jsonb END;

-- Credentials (docs/credentials.md). Only a digest of the secret is stored.
CREATE FUNCTION lease.credential_create(p jsonb) RETURNS jsonb
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c lease.credentials;
    actors text[];
    caps text[];
    a text;
    v text;
BEGIN
    PERFORM lease._require_serializable();
    IF jsonb_typeof(p) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'credential must be an object' USING ERRCODE = '22023';
    END IF;
    IF coalesce(p ->> 'credential_id', '') !~ '^key_[a-z2-7]{26}$' THEN
        RAISE EXCEPTION 'invalid credential_id' USING ERRCODE = '22023';
    END IF;
    IF NOT lease._id_ok(p -> 'principal_id') OR NOT lease._id_ok(p -> 'client_id') THEN
        RAISE EXCEPTION 'invalid principal_id or client_id' USING ERRCODE = '22023';
    END IF;
    IF lease.normalize_component('tenant_id', p ->> 'tenant_id') IS NULL THEN
        RAISE EXCEPTION 'invalid tenant_id' USING ERRCODE = '22023';
    END IF;
    IF p ->> 'program_id' IS DISTINCT FROM '*'
       AND lease.normalize_component('program_id', p ->> 'program_id') IS NULL THEN
        RAISE EXCEPTION 'invalid program_id' USING ERRCODE = '22023';
    END IF;
    IF jsonb_typeof(p -> 'actor_names') IS DISTINCT FROM 'array'
       OR jsonb_array_length(p -> 'actor_names') NOT BETWEEN 1 AND 32 THEN
        RAISE EXCEPTION 'actor_names must list 1 to 32 names' USING ERRCODE = '22023';
    END IF;
    actors := ARRAY[]::text[];
    FOR a IN SELECT jsonb_array_elements_text(p -> 'actor_names') LOOP
        v := CASE WHEN a = '*' THEN '*' ELSE lease.normalize_component('actor_name', a) END;
        IF v IS NULL THEN
            RAISE EXCEPTION 'invalid actor name %', a USING ERRCODE = '22023';
        END IF;
        actors := actors || v;
    END LOOP;
    IF '*' = ANY (actors) AND cardinality(actors) > 1 THEN
        RAISE EXCEPTION 'actor "*" must stand alone' USING ERRCODE = '22023';
    END IF;
    IF jsonb_typeof(p -> 'capabilities') IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'capabilities must be an array' USING ERRCODE = '22023';
    END IF;
    caps := ARRAY(SELECT DISTINCT jsonb_array_elements_text(p -> 'capabilities') ORDER BY 1);
    IF NOT caps <@ ARRAY['targets:lease', 'targets:read', 'targets:force-release', 'targets:revoke',
                         'audit:read'] THEN
        RAISE EXCEPTION 'unknown capability' USING ERRCODE = '22023';
    END IF;
    IF coalesce(jsonb_typeof(p -> 'admin'), 'boolean') <> 'boolean' THEN
        RAISE EXCEPTION 'admin must be true or false' USING ERRCODE = '22023';
    END IF;
    IF NOT coalesce((p -> 'admin')::boolean, false)
       AND (p ->> 'program_id' = '*'
            OR caps && ARRAY['targets:force-release', 'targets:revoke']) THEN
        RAISE EXCEPTION 'program "*", targets:force-release and targets:revoke need an administrator credential'
            USING ERRCODE = '22023';
    END IF;
    IF coalesce(p ->> 'secret_digest', '') !~ '^[0-9a-f]{64}$' THEN
        RAISE EXCEPTION 'invalid secret_digest' USING ERRCODE = '22023';
    END IF;
    IF p ->> 'description' ~ '[[:cntrl:]]' OR char_length(p ->> 'description') > 256 THEN
        RAISE EXCEPTION 'invalid description' USING ERRCODE = '22023';
    END IF;
    INSERT INTO lease.credentials (credential_id, principal_id, client_id, tenant_id,
                                   program_id, actor_names, capabilities, admin, secret_digest,
                                   description, expires_at)
    VALUES (p ->> 'credential_id', p ->> 'principal_id', p ->> 'client_id',
            lease.normalize_component('tenant_id', p ->> 'tenant_id'),
            CASE WHEN p ->> 'program_id' = '*' THEN '*'
                 ELSE lease.normalize_component('program_id', p ->> 'program_id') END,
            actors, caps, coalesce((p -> 'admin')::boolean, false),
            decode(p ->> 'secret_digest', 'hex'), p ->> 'description',
            (p ->> 'expires_at')::timestamptz)
    RETURNING * INTO c;
    PERFORM lease._audit(jsonb_build_object('principal', lease._sql_principal()),
                         'credential_create', 'credential_created',
                         jsonb_build_object('lock_identity', jsonb_build_object(
                                                'tenant_id', c.tenant_id,
                                                'program_id', c.program_id),
                                            'reason', 'credential ' || c.credential_id
                                                      || ' for ' || c.principal_id,
                                            'priority', 'high'));
    RETURN lease._credential_json(c, false);
END
$$;

CREATE FUNCTION lease.credential_lookup(credential_id text) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c lease.credentials;
BEGIN
    PERFORM lease._require_serializable();
    SELECT * INTO c FROM lease.credentials x WHERE x.credential_id = credential_lookup.credential_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN lease._credential_json(c, true);
END
$$;

CREATE FUNCTION lease.credential_revoke(credential_id text) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c lease.credentials;
BEGIN
    PERFORM lease._require_serializable();
    UPDATE lease.credentials x SET revoked_at = lease._now()
     WHERE x.credential_id = credential_revoke.credential_id AND x.revoked_at IS NULL
    RETURNING * INTO c;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM lease._audit(jsonb_build_object('principal', lease._sql_principal()),
                         'credential_revoke', 'credential_revoked',
                         jsonb_build_object('reason', 'credential ' || c.credential_id,
                                            'priority', 'high'));
    RETURN true;
END
$$;

CREATE FUNCTION lease.credential_list() RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
RETURN (SELECT coalesce(jsonb_agg(lease._credential_json(c, false)
                                  ORDER BY c.created_at, c.credential_id), '[]'::jsonb)
          FROM lease.credentials c);

-- Records a corrupt record seen by an operation (the operation itself raised
-- LS001 and rolled back), once per open case, with a high-priority alert.
CREATE FUNCTION lease.quarantine(lock_key text, operation text, detail text) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    id bigint;
BEGIN
    PERFORM lease._require_serializable();
    INSERT INTO lease.quarantine (lock_key, operation, detail, stored_record)
    SELECT quarantine.lock_key, left(operation, 64), left(detail, 1024),
           (SELECT to_jsonb(l) FROM lease.locks l WHERE l.lock_key = quarantine.lock_key)
    ON CONFLICT (lock_key) WHERE resolved_at IS NULL DO NOTHING
    RETURNING quarantine_id INTO id;
    IF id IS NOT NULL THEN
        PERFORM lease._audit(jsonb_build_object('principal', lease._sql_principal()),
                             'target_lease_quarantine', 'lease_backend_unavailable',
                             jsonb_build_object('decision', 'error', 'priority', 'high',
                                                'reason', left(operation, 64) || ': '
                                                          || left(detail, 400)));
    ELSE
        SELECT q.quarantine_id INTO id FROM lease.quarantine q
         WHERE q.lock_key = quarantine.lock_key AND q.resolved_at IS NULL;
    END IF;
    RETURN id;
END
$$;

-- Read-only report for readiness and metrics; any isolation.
CREATE FUNCTION lease.health() RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
RETURN (SELECT jsonb_build_object(
            'schema_version', (SELECT max(version) FROM lease.schema_migrations),
            'sealed', ns.sealed, 'sealed_reason', ns.sealed_reason, 'epoch', ns.epoch,
            'active_leases', (SELECT count(*) FROM lease.locks
                               WHERE state = 'active' AND expires_at > now()))
          FROM lease.namespace_state ns);

-- Compares the cluster this database runs on with the one recorded. After a
-- restore (another system identifier) or a failover (another timeline, when
-- the policy says so) the namespace is sealed: no acquisition, renewal or
-- commit until lease.recover_epoch proves fencing monotonicity again.
-- Writes only when it records the first identity or seals, so calling it
-- often does not conflict with lease operations.
CREATE FUNCTION lease.check_namespace() RETURNS jsonb
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ns lease.namespace_state;
    pol lease.policy;
    sysid numeric;
    tl integer;
    why text;
BEGIN
    PERFORM lease._require_serializable();
    BEGIN
        sysid := (pg_control_system()).system_identifier;
        tl := (pg_control_checkpoint()).timeline_id;
    EXCEPTION WHEN insufficient_privilege THEN
        RETURN jsonb_build_object('checked', false, 'reason', 'pg_control functions not permitted');
    END;
    SELECT * INTO ns FROM lease.namespace_state;
    SELECT * INTO pol FROM lease.policy;
    IF ns.system_identifier IS NULL THEN
        UPDATE lease.namespace_state SET system_identifier = sysid, timeline_id = tl,
                                         checked_at = lease._now();
        RETURN jsonb_build_object('checked', true, 'sealed', ns.sealed, 'recorded', true);
    END IF;
    IF ns.system_identifier <> sysid THEN
        why := 'database restored onto another cluster (system identifier changed)';
    ELSIF pol.seal_on_timeline_change AND ns.timeline_id <> tl THEN
        why := 'timeline changed from ' || ns.timeline_id || ' to ' || tl
               || ' (point-in-time restore or failover)';
    END IF;
    IF why IS NOT NULL AND NOT ns.sealed THEN
        UPDATE lease.namespace_state SET sealed = true, sealed_reason = why,
                                         sealed_at = lease._now(), checked_at = lease._now();
        PERFORM lease._audit(jsonb_build_object('principal', lease._sql_principal()),
                             'target_lease_alert', 'lease_backend_unavailable',
                             jsonb_build_object('decision', 'error', 'priority', 'high',
                                                'reason', 'namespace sealed: ' || why));
        RETURN jsonb_build_object('checked', true, 'sealed', true, 'sealed_reason', why);
    END IF;
    RETURN jsonb_build_object('checked', true, 'sealed', ns.sealed,
                              'sealed_reason', ns.sealed_reason);
END
$$;

-- Disaster recovery: raises every fencing counter by the epoch stride (or to
-- `floor` if higher, and never below an accepted token), revokes every live
-- lease, unseals the namespace and records why. Never lowers anything.
CREATE FUNCTION lease.recover_epoch(reason text, floor bigint DEFAULT NULL) RETURNS jsonb
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    pol lease.policy;
    ns lease.namespace_state;
    p jsonb := jsonb_build_object('principal', lease._sql_principal());
    l lease.locks;
    revoked bigint := 0;
    raised bigint;
    why text;
    sysid numeric;
    tl integer;
BEGIN
    PERFORM lease._require_serializable();
    IF reason IS NULL OR btrim(reason) = '' OR char_length(reason) > 512
       OR reason ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'a reason (1..512 characters) is required' USING ERRCODE = '22023';
    END IF;
    IF floor IS NOT NULL AND floor < 0 THEN
        RAISE EXCEPTION 'floor must not be negative' USING ERRCODE = '22023';
    END IF;
    SELECT * INTO pol FROM lease.policy;
    SELECT * INTO ns FROM lease.namespace_state FOR UPDATE;
    why := 'epoch recovery: ' || reason;

    IF EXISTS (SELECT 1 FROM lease.locks x LEFT JOIN lease.fence_marks m USING (lock_key)
                WHERE greatest(x.fencing_counter + pol.epoch_stride, coalesce(floor, 0),
                               coalesce(m.high_water_token, 0)) > pol.token_limit) THEN
        RAISE EXCEPTION 'raising counters would pass the policy token limit'
            USING ERRCODE = 'LS005', HINT = 'lower epoch_stride or floor; tokens never wrap';
    END IF;

    FOR l IN SELECT * FROM lease.locks WHERE state = 'active' LOOP
        IF l.expires_at <= now() THEN
            PERFORM lease._to_history(l, 'expired', l.expires_at, NULL, NULL, NULL);
        ELSE
            PERFORM lease._to_history(l, 'revoked', lease._now(), p, why, NULL);
            revoked := revoked + 1;
        END IF;
    END LOOP;

    UPDATE lease.locks x
       SET fencing_counter = greatest(x.fencing_counter + pol.epoch_stride, coalesce(floor, 0),
                                      coalesce((SELECT m.high_water_token FROM lease.fence_marks m
                                                 WHERE m.lock_key = x.lock_key), 0)),
           state = 'free', lease_id = NULL, fencing_token = NULL, owner_principal_id = NULL,
           owner_client_id = NULL, owner_credential_id = NULL, service_instance_id = NULL,
           acquired_at = NULL, renewed_at = NULL, expires_at = NULL, ttl_ms = NULL,
           maximum_lifetime_ms = NULL, execution_id = NULL, job_id = NULL, trace_id = NULL,
           request_id = NULL, metadata = NULL;
    GET DIAGNOSTICS raised = ROW_COUNT;

    BEGIN
        sysid := (pg_control_system()).system_identifier;
        tl := (pg_control_checkpoint()).timeline_id;
    EXCEPTION WHEN insufficient_privilege THEN
        sysid := ns.system_identifier;
        tl := ns.timeline_id;
    END;
    UPDATE lease.namespace_state
       SET epoch = epoch + 1, sealed = false, sealed_reason = NULL, sealed_at = NULL,
           system_identifier = sysid, timeline_id = tl, checked_at = lease._now();
    INSERT INTO lease.recoveries (epoch, reason, floor_token, counters_raised, leases_revoked,
                                  performed_by, performed_at)
    VALUES (ns.epoch + 1, reason, floor, raised, revoked, p #>> '{principal,principal_id}',
            lease._now());
    PERFORM lease._audit(p, 'target_lease_recover', 'lease_revoked',
                         jsonb_build_object('priority', 'high', 'reason', why,
                                            'resulting_state', 'revoked'));
    RETURN jsonb_build_object('epoch', ns.epoch + 1, 'counters_raised', raised,
                              'leases_revoked', revoked);
END
$$;

-- Consistency report; one row per problem, none when consistent.
CREATE FUNCTION lease.verify()
RETURNS TABLE (problem text, lock_key text, detail text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT 'lock_key_mismatch', l.lock_key, 'stored tuple derives ' || lease._key(ROW(
               l.tenant_id, l.program_id, l.target_namespace, l.target_id, l.actor_name,
               l.workflow_name, l.operation_class, NULL)::lease.identity)
      FROM lease.locks l
     WHERE l.lock_key <> lease._key(ROW(l.tenant_id, l.program_id, l.target_namespace,
               l.target_id, l.actor_name, l.workflow_name, l.operation_class,
               NULL)::lease.identity)
    UNION ALL
    SELECT 'token_above_counter', l.lock_key,
           'active token ' || l.fencing_token || ' > counter ' || l.fencing_counter
      FROM lease.locks l WHERE l.state = 'active' AND l.fencing_token > l.fencing_counter
    UNION ALL
    SELECT 'counter_below_accepted_token', m.lock_key,
           'accepted token ' || m.high_water_token || ' > counter '
           || coalesce(l.fencing_counter::text, 'missing')
      FROM lease.fence_marks m LEFT JOIN lease.locks l ON l.lock_key = m.lock_key
     WHERE l.lock_key IS NULL OR m.high_water_token > l.fencing_counter
    UNION ALL
    SELECT 'history_without_counter', h.lock_key,
           'history token ' || max(h.fencing_token) || ' > counter '
           || coalesce(max(l.fencing_counter)::text, 'missing')
      FROM lease.history h LEFT JOIN lease.locks l ON l.lock_key = h.lock_key
     GROUP BY h.lock_key
    HAVING max(l.fencing_counter) IS NULL OR max(h.fencing_token) > max(l.fencing_counter)
    UNION ALL
    SELECT 'document_token_above_counter', d.lock_key,
           'document ' || d.document_key || ' accepted token ' || d.fencing_token
      FROM lease.fenced_documents d LEFT JOIN lease.locks l ON l.lock_key = d.lock_key
     WHERE l.lock_key IS NULL OR d.fencing_token > l.fencing_counter
    UNION ALL
    SELECT 'quarantined', q.lock_key, q.operation || ': ' || q.detail
      FROM lease.quarantine q WHERE q.resolved_at IS NULL
    UNION ALL
    SELECT 'namespace_sealed', NULL, ns.sealed_reason
      FROM lease.namespace_state ns WHERE ns.sealed;
END;

-- psql conveniences: force-release or revoke the lease active under an id,
-- as the session user, with the same checks and audit as the service.
CREATE FUNCTION lease._admin_request(lease_id text, reason text, incident_id text, op text)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    l lease.locks;
BEGIN
    -- refuse before the lookup: even "lease_lost" is a decision
    PERFORM lease._require_serializable();
    SELECT l2.* INTO l FROM lease.lease_index x JOIN lease.locks l2 USING (lock_key)
     WHERE x.lease_id = _admin_request.lease_id AND l2.lease_id = x.lease_id;
    IF NOT FOUND THEN
        RETURN lease._result('lease_lost');
    END IF;
    RETURN jsonb_build_object(
        'deadline_at', lease._ts(now() + interval '30 seconds'),
        'request_id', 'sql-' || replace(gen_random_uuid()::text, '-', ''),
        'request_digest', encode(sha256(convert_to(concat_ws(E'\x1f', op, l.lease_id,
                                  l.fencing_token::text, reason, incident_id), 'UTF8')), 'hex'),
        'principal', lease._sql_principal(),
        'lock_identity', lease._lease_json(l) -> 'lock_identity',
        'lease_id', l.lease_id, 'fencing_token', l.fencing_token,
        'reason', reason, 'incident_id', incident_id);
END
$$;

CREATE FUNCTION lease.admin_force_release(lease_id text, reason text) RETURNS jsonb
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p jsonb := lease._admin_request(lease_id, reason, NULL, 'force_release');
BEGIN
    IF p ->> 'code' IS NOT NULL THEN
        RETURN p;
    END IF;
    RETURN lease.force_release(p);
END
$$;

CREATE FUNCTION lease.admin_revoke(lease_id text, reason text, incident_id text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p jsonb := lease._admin_request(lease_id, reason, incident_id, 'revoke');
BEGIN
    IF p ->> 'code' IS NOT NULL THEN
        RETURN p;
    END IF;
    RETURN lease.revoke(p);
END
$$;
