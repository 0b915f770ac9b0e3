-- 0003: canonical identity, lock keys, and the helpers every operation uses.
--
-- Helpers whose names start with "_" are internal: not granted to anyone,
-- called only from the SECURITY DEFINER operations. They return NULL or a
-- field name instead of raising so the hot path needs no subtransactions.

-- A normalised identity, or the name of the offending component.
CREATE TYPE lease.identity AS (
    tenant_id text,
    program_id text,
    target_namespace text,
    target_id text,
    actor_name text,
    workflow_name text,
    operation_class text,
    bad_field text
);

-- ASCII-only case folding: lower() would follow the database locale
-- (Turkish dotless i), and the rules fold ASCII letters only.
CREATE FUNCTION lease._fold(v text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN lower(v COLLATE "C");  -- the C collation folds ASCII letters only

-- Validates and normalises one component by name (docs/contract.md, "Identity and lock keys").
-- Returns the canonical value, or NULL when it is invalid (or the field is
-- not a component). Regular expressions use explicit code-point ranges, so
-- no locale is involved, and unbounded repetition plus a length check:
-- PostgreSQL's engine makes bounded repetitions ({0,63}) several times
-- slower, and every operation normalises seven components.
CREATE FUNCTION lease.normalize_component(field text, v text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN field = 'target_id' THEN
        CASE WHEN length(v) <= 128 AND v ~ '^[A-Za-z0-9][A-Za-z0-9._:-]*$'
                  AND strpos(v, '..') = 0 THEN v END
    WHEN field IN ('tenant_id', 'program_id', 'actor_name', 'workflow_name') THEN
        CASE WHEN length(v) <= 64 AND lease._fold(v) ~ '^[a-z0-9][a-z0-9_-]*$'
             THEN lease._fold(v) END
    WHEN field = 'target_namespace' THEN
        CASE WHEN length(v) <= 64 AND lease._fold(v) ~ '^[a-z0-9][a-z0-9._-]*$'
                  AND strpos(lease._fold(v), '..') = 0 THEN lease._fold(v) END
    WHEN field = 'operation_class' THEN
        CASE WHEN v IS NULL THEN 'default'
             WHEN lease._fold(v) IN ('default', 'collect', 'enrich', 'publish', 'maintenance')
                 THEN lease._fold(v) END
    END;

-- A component of a lock_identity object: its string value, or NULL when it
-- is missing or not a string (operation_class: absent or null is default).
CREATE FUNCTION lease._component(p jsonb, field text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN lease.normalize_component(field,
    CASE WHEN jsonb_typeof(p -> field) = 'string' THEN p ->> field
         WHEN field = 'operation_class' AND coalesce(jsonb_typeof(p -> field), 'null') = 'null'
             THEN NULL
         ELSE chr(1) END);  -- never valid

-- The canonical lock key of a normalised identity (no validation).
CREATE FUNCTION lease._key(i lease.identity) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
RETURN 'starintel:target-lease:v1:'
    || rtrim(translate(encode(sha256(convert_to(
           '["v1","' || i.tenant_id || '","' || i.program_id || '","'
           || i.target_namespace || '","' || i.target_id || '","' || i.actor_name
           || '","' || i.workflow_name || '","' || i.operation_class || '"]',
           'UTF8')), 'base64'), '+/', '-_'), '=');

-- Normalises the lock_identity object of a request. Unknown keys, non-string
-- values and invalid components set bad_field ("lock_identity.target_id"),
-- the first in tuple order.
CREATE FUNCTION lease._identity(p jsonb) RETURNS lease.identity
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    r lease.identity;
    extra jsonb;
BEGIN
    IF p IS NULL OR jsonb_typeof(p) <> 'object' THEN
        r.bad_field := 'lock_identity';
        RETURN r;
    END IF;
    extra := p - ARRAY['tenant_id', 'program_id', 'target_namespace', 'target_id', 'actor_name',
                       'workflow_name', 'operation_class'];
    IF extra <> '{}'::jsonb THEN
        r.bad_field := 'lock_identity.' || (SELECT min(k) FROM jsonb_object_keys(extra) k);
        RETURN r;
    END IF;
    r.tenant_id := lease._component(p, 'tenant_id');
    r.program_id := lease._component(p, 'program_id');
    r.target_namespace := lease._component(p, 'target_namespace');
    r.target_id := lease._component(p, 'target_id');
    r.actor_name := lease._component(p, 'actor_name');
    r.workflow_name := lease._component(p, 'workflow_name');
    r.operation_class := lease._component(p, 'operation_class');
    r.bad_field := CASE
        WHEN r.tenant_id IS NULL THEN 'lock_identity.tenant_id'
        WHEN r.program_id IS NULL THEN 'lock_identity.program_id'
        WHEN r.target_namespace IS NULL THEN 'lock_identity.target_namespace'
        WHEN r.target_id IS NULL THEN 'lock_identity.target_id'
        WHEN r.actor_name IS NULL THEN 'lock_identity.actor_name'
        WHEN r.workflow_name IS NULL THEN 'lock_identity.workflow_name'
        WHEN r.operation_class IS NULL THEN 'lock_identity.operation_class'
        END;
    RETURN r;
END
$$;

-- Operator-facing: validates, normalises and derives the lock key. Raises
-- 22023 naming the component on invalid input.
CREATE FUNCTION lease.lock_key(tenant_id text, program_id text, target_namespace text,
                               target_id text, actor_name text, workflow_name text,
                               operation_class text DEFAULT 'default') RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    i lease.identity;
BEGIN
    i := lease._identity(jsonb_build_object(
        'tenant_id', tenant_id, 'program_id', program_id, 'target_namespace', target_namespace,
        'target_id', target_id, 'actor_name', actor_name, 'workflow_name', workflow_name,
        'operation_class', operation_class));
    IF i.bad_field IS NOT NULL THEN
        RAISE EXCEPTION 'invalid %', substr(i.bad_field, length('lock_identity.') + 1)
            USING ERRCODE = '22023';
    END IF;
    RETURN lease._key(i);
END
$$;

-- Whether a stored row's seven fields are exactly the identity's.
CREATE FUNCTION lease._same_identity(l lease.locks, i lease.identity) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN l.tenant_id = i.tenant_id AND l.program_id = i.program_id
   AND l.target_namespace = i.target_namespace AND l.target_id = i.target_id
   AND l.actor_name = i.actor_name AND l.workflow_name = i.workflow_name
   AND l.operation_class = i.operation_class;

CREATE FUNCTION lease._identity_json(tenant_id text, program_id text, target_namespace text,
                                     target_id text, actor_name text, workflow_name text,
                                     operation_class text) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
RETURN jsonb_build_object('tenant_id', tenant_id, 'program_id', program_id,
                          'target_namespace', target_namespace, 'target_id', target_id,
                          'actor_name', actor_name, 'workflow_name', workflow_name,
                          'operation_class', operation_class);

-- RFC 3339 UTC with exactly three fractional digits.
CREATE FUNCTION lease._ts(t timestamptz) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
RETURN to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');

-- Backend time as stored: truncated to milliseconds so the wire value equals
-- the stored value.
CREATE FUNCTION lease._now() RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE
RETURN date_trunc('milliseconds', now());

CREATE FUNCTION lease._ms(ms bigint) RETURNS interval
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN ms * interval '1 millisecond';

-- The wire form of a live lease row, with the state it has at backend time.
CREATE FUNCTION lease._lease_json(l lease.locks) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
RETURN jsonb_build_object(
    'lock_identity', lease._identity_json(l.tenant_id, l.program_id, l.target_namespace,
                                          l.target_id, l.actor_name, l.workflow_name,
                                          l.operation_class),
    'lease_id', l.lease_id, 'fencing_token', l.fencing_token,
    'state', CASE WHEN l.expires_at > now() THEN 'active' ELSE 'expired' END,
    'acquired_at', lease._ts(l.acquired_at), 'renewed_at', lease._ts(l.renewed_at),
    'expires_at', lease._ts(l.expires_at), 'ended_at', NULL,
    'ttl_ms', l.ttl_ms, 'maximum_lifetime_ms', l.maximum_lifetime_ms,
    'owner_principal_id', l.owner_principal_id, 'owner_client_id', l.owner_client_id,
    'owner_credential_id', l.owner_credential_id, 'service_instance_id', l.service_instance_id,
    'execution_id', l.execution_id, 'job_id', l.job_id, 'trace_id', l.trace_id,
    'request_id', l.request_id, 'metadata', l.metadata,
    'end_reason', NULL, 'incident_id', NULL);

-- The wire form of a terminal lease.
CREATE FUNCTION lease._history_json(h lease.history) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
RETURN jsonb_build_object(
    'lock_identity', lease._identity_json(h.tenant_id, h.program_id, h.target_namespace,
                                          h.target_id, h.actor_name, h.workflow_name,
                                          h.operation_class),
    'lease_id', h.lease_id, 'fencing_token', h.fencing_token, 'state', h.state,
    'acquired_at', lease._ts(h.acquired_at), 'renewed_at', lease._ts(h.renewed_at),
    'expires_at', lease._ts(h.expires_at), 'ended_at', lease._ts(h.ended_at),
    'ttl_ms', h.ttl_ms, 'maximum_lifetime_ms', h.maximum_lifetime_ms,
    'owner_principal_id', h.owner_principal_id, 'owner_client_id', h.owner_client_id,
    'owner_credential_id', h.owner_credential_id, 'service_instance_id', h.service_instance_id,
    'execution_id', h.execution_id, 'job_id', h.job_id, 'trace_id', h.trace_id,
    'request_id', h.request_id, 'metadata', h.metadata,
    'end_reason', h.end_reason, 'incident_id', h.incident_id);

-- Refuses to run outside SERIALIZABLE: every decision relies on it. The
-- check is an inlinable expression; only a failure calls the raiser.
CREATE FUNCTION lease._isolation_error() RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    RAISE EXCEPTION 'lease functions run only at SERIALIZABLE isolation (this transaction is %)',
        current_setting('transaction_isolation')
        USING ERRCODE = 'LS002',
              HINT = 'ALTER ROLE <login role> SET default_transaction_isolation = ''serializable''';
END
$$;

CREATE FUNCTION lease._require_serializable() RETURNS void
LANGUAGE sql VOLATILE
RETURN CASE WHEN current_setting('transaction_isolation') <> 'serializable'
            THEN lease._isolation_error() END;

-- Raised for requests the service should never send (a bug, not user input).
CREATE FUNCTION lease._malformed(what text) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    RAISE EXCEPTION 'malformed lease call: %', what USING ERRCODE = 'LS003';
END
$$;

-- Fails closed on a stored record that does not match the request.
CREATE FUNCTION lease._corrupt(lock_key text, what text) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    RAISE EXCEPTION 'corrupt lease record: %', what
        USING ERRCODE = 'LS001', DETAIL = 'lock_key=' || lock_key,
              HINT = 'call lease.quarantine(lock_key, operation, detail); see docs/operators.md';
END
$$;

-- Identifier fields: 1..128 of [A-Za-z0-9._:-].
CREATE FUNCTION lease._id_ok(v jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN coalesce(jsonb_typeof(v) = 'string' AND length(v #>> '{}') <= 128
                AND (v #>> '{}') ~ '^[A-Za-z0-9._:-]+$', false);

-- A JSON integer in bigint range, or NULL.
CREATE FUNCTION lease._int(v jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN jsonb_typeof(v) = 'number' AND length(v #>> '{}') <= 19
                 AND (v #>> '{}') ~ '^-?[0-9]+$'
            THEN (v #>> '{}')::bigint END;

-- The common envelope of every call: isolation, shape, deadline.
-- Returns the deadline, or raises LS003 for a call the service cannot send.
CREATE FUNCTION lease._call_deadline(p jsonb, mutation boolean) RETURNS timestamptz
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    d text;
BEGIN
    PERFORM lease._require_serializable();
    IF p IS NULL OR jsonb_typeof(p) <> 'object' THEN
        PERFORM lease._malformed('request is not an object');
    END IF;
    d := p ->> 'deadline_at';
    -- the service always sends RFC 3339; the shape check keeps any other
    -- text (which the cast might read some other way) out
    IF d IS NULL OR length(d) > 40 OR d !~ '^[0-9-]+T[0-9:]+(\.[0-9]+)?(Z|[+-][0-9:]+)$' THEN
        PERFORM lease._malformed('deadline_at missing or not RFC 3339');
    END IF;
    IF jsonb_typeof(p -> 'principal') <> 'object'
       OR NOT lease._id_ok(p #> '{principal,principal_id}') THEN
        PERFORM lease._malformed('principal missing');
    END IF;
    IF mutation AND (NOT lease._id_ok(p -> 'request_id')
                     OR coalesce(length(p ->> 'request_digest'), 0) <> 64
                     OR (p ->> 'request_digest') !~ '^[0-9a-f]+$') THEN
        PERFORM lease._malformed('request_id or request_digest missing');
    END IF;
    RETURN d::timestamptz;
END
$$;

-- Bounds how long this transaction may wait for a row lock: never past the
-- caller's deadline, so no backend lock wait outlives the request.
CREATE FUNCTION lease._bound_lock_wait(deadline timestamptz) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    PERFORM set_config('lock_timeout',
        least(600000, greatest(1, ceil(extract(epoch FROM deadline - clock_timestamp()) * 1000)))
            ::bigint::text || 'ms', true);
END
$$;

-- Typed results.
CREATE FUNCTION lease._result(code text) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
RETURN jsonb_build_object('code', code);

CREATE FUNCTION lease._invalid(field text) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
RETURN jsonb_build_object('code', 'invalid_lease_request', 'field', field);

-- Inserts one audit event of a mutation, inside its transaction. `p` is the
-- request (for request/correlation/trace ids, principal, deadline class,
-- latency); `extra` supplies the event's own columns. Only named, non-secret
-- columns are copied: metadata, bodies and lock keys never reach audit.
CREATE FUNCTION lease._audit(p jsonb, event_type text, result_code text, extra jsonb)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    INSERT INTO lease.audit_events (
        latency_ms, event_type, priority, decision, result_code, retryable, request_id,
        correlation_id, trace_id, execution_id, job_id, principal_class, principal_id,
        credential_id, service_instance_id, tenant_id, program_id, target_namespace, target_id,
        actor_name, workflow_name, operation_class, lease_id, fencing_token, requested_ttl_ms,
        effective_ttl_ms, deadline_class, previous_state, resulting_state, reason, incident_id)
    VALUES (
        lease._int(p -> 'latency_ms')::integer, event_type,
        coalesce(extra ->> 'priority', 'normal'),
        coalesce(extra ->> 'decision', 'allow'), result_code,
        coalesce((extra ->> 'retryable')::boolean, false),
        left(p ->> 'request_id', 128), left(p ->> 'correlation_id', 64),
        left(coalesce(extra ->> 'trace_id', p ->> 'trace_id'), 128),
        extra ->> 'execution_id', extra ->> 'job_id',
        left(p #>> '{principal,principal_class}', 16), left(p #>> '{principal,principal_id}', 128),
        left(p #>> '{principal,credential_id}', 128), extra ->> 'service_instance_id',
        extra #>> '{lock_identity,tenant_id}', extra #>> '{lock_identity,program_id}',
        extra #>> '{lock_identity,target_namespace}', extra #>> '{lock_identity,target_id}',
        extra #>> '{lock_identity,actor_name}', extra #>> '{lock_identity,workflow_name}',
        extra #>> '{lock_identity,operation_class}', extra ->> 'lease_id',
        (extra ->> 'fencing_token')::bigint, (extra ->> 'requested_ttl_ms')::bigint,
        (extra ->> 'effective_ttl_ms')::bigint, left(p ->> 'deadline_class', 16),
        extra ->> 'previous_state', extra ->> 'resulting_state', extra ->> 'reason',
        extra ->> 'incident_id');
END
$$;

-- Looks up a stored idempotent result. Returns NULL when the request is new,
-- the replayed result (with "replayed" and the lease's current state) when
-- the digest matches, or idempotency_conflict when it does not.
CREATE FUNCTION lease._replay(k text, op text, p jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    idem lease.idempotency;
    cur text;
BEGIN
    SELECT * INTO idem FROM lease.idempotency
     WHERE lock_key = k AND operation = op
       AND owner_principal_id = p #>> '{principal,principal_id}'
       AND request_id = p ->> 'request_id';
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF idem.request_digest <> decode(p ->> 'request_digest', 'hex') THEN
        RETURN lease._result('idempotency_conflict');
    END IF;
    IF idem.lease_id IS NOT NULL THEN
        SELECT CASE WHEN l.state = 'active' AND l.expires_at > now() THEN 'active'
                    WHEN l.state = 'active' THEN 'expired' END
          INTO cur FROM lease.locks l WHERE l.lock_key = k AND l.lease_id = idem.lease_id;
        IF cur IS NULL THEN
            SELECT h.state INTO cur FROM lease.history h WHERE h.lease_id = idem.lease_id;
        END IF;
    END IF;
    RETURN idem.result || jsonb_build_object('replayed', true,
                                             'current_state', coalesce(cur, 'expired'));
END
$$;

-- Stores the typed result of a state-changing request with its mutation.
CREATE FUNCTION lease._remember(k text, op text, p jsonb, result jsonb, lease_id text)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    INSERT INTO lease.idempotency (lock_key, operation, owner_principal_id, request_id,
                                   request_digest, result, lease_id, created_at, expires_at)
    SELECT k, op, p #>> '{principal,principal_id}', p ->> 'request_id',
           decode(p ->> 'request_digest', 'hex'), result, lease_id, lease._now(),
           lease._now() + lease._ms(pol.idempotency_retention_ms)
      FROM lease.policy pol;
END
$$;

-- Moves an active-shaped row's lease into history (terminal evidence).
CREATE FUNCTION lease._to_history(l lease.locks, terminal_state text, ended_at timestamptz,
                                  p jsonb, reason text, incident text) RETURNS lease.history
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    h lease.history;
BEGIN
    INSERT INTO lease.history (
        lease_id, lock_key, tenant_id, program_id, target_namespace, target_id, actor_name,
        workflow_name, operation_class, record_version, fencing_token, owner_principal_id,
        owner_client_id, owner_credential_id, service_instance_id, acquired_at, renewed_at,
        expires_at, ttl_ms, maximum_lifetime_ms, execution_id, job_id, trace_id, request_id,
        metadata, state, ended_at, ended_by_principal_id, ended_by_credential_id, end_reason,
        incident_id)
    VALUES (
        l.lease_id, l.lock_key, l.tenant_id, l.program_id, l.target_namespace, l.target_id,
        l.actor_name, l.workflow_name, l.operation_class, l.record_version, l.fencing_token,
        l.owner_principal_id, l.owner_client_id, l.owner_credential_id, l.service_instance_id,
        l.acquired_at, l.renewed_at, l.expires_at, l.ttl_ms, l.maximum_lifetime_ms,
        l.execution_id, l.job_id, l.trace_id, l.request_id, l.metadata, terminal_state,
        ended_at, p #>> '{principal,principal_id}', p #>> '{principal,credential_id}',
        reason, incident)
    RETURNING * INTO h;
    RETURN h;
END
$$;

-- Clears the live lease of a row (the counter stays).
CREATE FUNCTION lease._clear(k text) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    UPDATE lease.locks
       SET state = 'free', lease_id = NULL, fencing_token = NULL, owner_principal_id = NULL,
           owner_client_id = NULL, owner_credential_id = NULL, service_instance_id = NULL,
           acquired_at = NULL, renewed_at = NULL, expires_at = NULL, ttl_ms = NULL,
           maximum_lifetime_ms = NULL, execution_id = NULL, job_id = NULL, trace_id = NULL,
           request_id = NULL, metadata = NULL
     WHERE lock_key = k;
END
$$;
