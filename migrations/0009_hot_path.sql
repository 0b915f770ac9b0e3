-- 0009: the lease operations at the cost of their essential work.
--
-- Measured before (issue 9, docs/benchmarks.md): a lease operation cost
-- about six times the lean reference's database CPU doing the same writes,
-- and first acquisitions of new identities failed under SERIALIZABLE.
-- Profiled with callgrind on a single-user backend (instructions per call,
-- repeatable): most of the cost was not the writes but per-call setup that
-- PL/pgSQL and the executor repeat in every transaction --
--   * CHECK constraints are re-parsed from text (stringToNode) and compiled
--     for every INSERT or UPDATE statement: about a quarter of an acquire.
--     Single-column rules become domains (their expressions are cached per
--     session); one compact multi-column rule per table remains;
--   * every PL/pgSQL expression and every helper call is compiled again in
--     each new transaction: the operations now read their request in one
--     statement, validate the identity with one regular expression over its
--     canonical form, and decide and change a row in one statement.
-- And the SERIALIZABLE collapse of new identities: see "Predicate locks".
--
-- Predicate locks (SSI). A read of a key that does not exist locks its
-- whole index page; concurrent first acquisitions whose rows land on that
-- page then failed each other ("pivot" conflicts). So:
--   * a new identity's row is created by INSERT ... ON CONFLICT DO NOTHING
--     before anything reads it (the unique indexes decide, not a read; the
--     old range read "does another row claim this tuple" is gone: the
--     identity index's uniqueness makes such a row impossible, and a tuple
--     claimed under another key still fails closed, LS001);
--   * an existing identity is decided and changed by one UPDATE ... WHERE
--     <the exact condition> RETURNING (a HOT update: no index covers a
--     column it changes); only when it matches nothing is the row read to
--     say why (conflict, lost, expired, corrupt);
--   * "optimistic" requests (the service sends them) do not look their
--     request id up before a state-changing decision: a repeated request
--     whose original committed collides on lease.idempotency's primary key
--     (SQLSTATE 23505, constraint idempotency_pkey) and rolls back, and the
--     service repeats it without "optimistic" to get the stored answer.
--     Paths that change nothing (conflict, lost) still look it up. Without
--     "optimistic" (psql, other callers) every call looks up first, as
--     before. That lookup of an absent key was the read that tied
--     transactions on different identities together.
--
-- A freed row keeps its last lease's columns (state 'free' says it is not
-- live): ending a lease writes one column, and the UPDATE's RETURNING
-- carries the lease into its terminal evidence without a second read.
-- Every deciding operation runs the namespace guard (0008) first. Metadata
-- numbers are bounded by 2^53 - 1 so every accepted number round-trips.

-- Domains: single-column rules whose checks are cached per session. ------
CREATE DOMAIN lease.lock_state AS text CHECK (VALUE IN ('free', 'active'));
CREATE DOMAIN lease.terminal_state AS text CHECK (VALUE IN ('expired', 'released', 'revoked'));
CREATE DOMAIN lease.sha256 AS bytea CHECK (length(VALUE) = 32);
CREATE DOMAIN lease.operation AS text CHECK (VALUE IN (
    'acquire', 'renew', 'release', 'force_release', 'revoke', 'commit'));
CREATE DOMAIN lease.audit_event_type AS text CHECK (VALUE IN (
    'target_lease_acquire', 'target_lease_renew', 'target_lease_release',
    'target_lease_force_release', 'target_lease_revoke', 'target_lease_inspect',
    'target_lease_list', 'target_lease_commit', 'target_lease_commit_rejected',
    'target_lease_recover', 'target_lease_quarantine', 'target_lease_alert',
    'target_lease_authenticate', 'credential_create', 'credential_revoke'));
CREATE DOMAIN lease.audit_priority AS text CHECK (VALUE IN ('normal', 'high'));
CREATE DOMAIN lease.audit_decision AS text CHECK (VALUE IN ('allow', 'deny', 'error'));
CREATE DOMAIN lease.backend_health AS text CHECK (VALUE IN ('ok', 'degraded', 'unavailable'));

-- Indexes every lease operation writes: only what a lookup needs. Time
-- columns of append-only tables get BRIN indexes (retention purges and time
-- range queries; nearly free to maintain); the history's identity index and
-- the audit's lease index, which no lease operation reads, are gone
-- (docs/operators.md queries filter by time first).
DROP INDEX lease.history_lock_key, lease.history_ended_at, lease.audit_events_lease_id,
    lease.audit_events_occurred_at, lease.idempotency_expires_at, lease.lease_index_created_at;
CREATE INDEX history_ended_at ON lease.history USING brin (ended_at);
CREATE INDEX audit_events_occurred_at ON lease.audit_events USING brin (occurred_at);
CREATE INDEX idempotency_expires_at ON lease.idempotency USING brin (expires_at);
CREATE INDEX lease_index_created_at ON lease.lease_index USING brin (created_at);

-- The views and SQL-bodied functions that read these columns are recreated
-- unchanged below (a column's type cannot change under them).
DROP VIEW lease.active_leases, lease.lease_history, lease.audit_log, lease.fencing_counters;
DROP FUNCTION lease._history_json(lease.history), lease._state_now(lease.locks),
    lease._names_lease(lease.locks, jsonb, boolean), lease.health(), lease.verify();

ALTER TABLE lease.locks DROP CONSTRAINT locks_check, DROP CONSTRAINT locks_state_check,
    DROP CONSTRAINT locks_fencing_counter_check, ALTER COLUMN state TYPE lease.lock_state;
-- One small rule: PostgreSQL re-reads every CHECK expression from its text
-- for each INSERT or UPDATE statement (measured: the old rules cost a
-- quarter of an acquisition). The one kept is the fencing invariant: a
-- token never exceeds the durable counter, and the counter is never
-- negative. The rest of an active row's shape is the operations' business;
-- lease.verify() reports violations.
ALTER TABLE lease.locks ADD CONSTRAINT locks_fencing
    CHECK (fencing_counter >= 0 AND fencing_token <= fencing_counter);

ALTER TABLE lease.history DROP CONSTRAINT history_state_check,
    DROP CONSTRAINT history_fencing_token_check, DROP CONSTRAINT history_check,
    ALTER COLUMN state TYPE lease.terminal_state;

ALTER TABLE lease.idempotency DROP CONSTRAINT idempotency_operation_check,
    DROP CONSTRAINT idempotency_request_digest_check,
    ALTER COLUMN operation TYPE lease.operation, ALTER COLUMN request_digest TYPE lease.sha256;

ALTER TABLE lease.audit_events DROP CONSTRAINT audit_events_event_type_check,
    DROP CONSTRAINT audit_events_priority_check, DROP CONSTRAINT audit_events_decision_check,
    DROP CONSTRAINT audit_events_backend_health_check,
    ALTER COLUMN event_type TYPE lease.audit_event_type,
    ALTER COLUMN priority TYPE lease.audit_priority,
    ALTER COLUMN decision TYPE lease.audit_decision,
    ALTER COLUMN backend_health TYPE lease.backend_health;

CREATE VIEW lease.active_leases AS
SELECT l.lock_key, l.tenant_id, l.program_id, l.target_namespace, l.target_id, l.actor_name,
       l.workflow_name, l.operation_class, l.lease_id, l.fencing_token, l.owner_principal_id,
       l.owner_client_id, l.owner_credential_id, l.service_instance_id, l.acquired_at,
       l.renewed_at, l.expires_at, l.expires_at - now() AS remaining, l.ttl_ms,
       l.maximum_lifetime_ms, l.execution_id, l.job_id, l.trace_id, l.request_id, l.metadata
  FROM lease.locks l
 WHERE l.state = 'active' AND l.expires_at > now();

CREATE VIEW lease.lease_history AS
SELECT h.lease_id, h.lock_key, h.tenant_id, h.program_id, h.target_namespace, h.target_id,
       h.actor_name, h.workflow_name, h.operation_class, h.fencing_token,
       h.state::text AS state, h.acquired_at, h.renewed_at, h.expires_at, h.ended_at,
       h.ended_by_principal_id, h.ended_by_credential_id, h.end_reason, h.incident_id,
       h.owner_principal_id, h.owner_client_id, h.owner_credential_id, h.service_instance_id,
       h.ttl_ms, h.maximum_lifetime_ms, h.execution_id, h.job_id, h.trace_id, h.request_id
  FROM lease.history h
UNION ALL
SELECT l.lease_id, l.lock_key, l.tenant_id, l.program_id, l.target_namespace, l.target_id,
       l.actor_name, l.workflow_name, l.operation_class, l.fencing_token, 'expired',
       l.acquired_at, l.renewed_at, l.expires_at, l.expires_at, NULL, NULL, NULL, NULL,
       l.owner_principal_id, l.owner_client_id, l.owner_credential_id, l.service_instance_id,
       l.ttl_ms, l.maximum_lifetime_ms, l.execution_id, l.job_id, l.trace_id, l.request_id
  FROM lease.locks l
 WHERE l.state = 'active' AND l.expires_at <= now();

CREATE VIEW lease.audit_log AS
SELECT * FROM lease.audit_events;

CREATE VIEW lease.fencing_counters AS
SELECT l.lock_key, l.tenant_id, l.program_id, l.target_namespace, l.target_id, l.actor_name,
       l.workflow_name, l.operation_class, l.fencing_counter,
       m.high_water_token,
       CASE WHEN l.state = 'active' AND l.expires_at > now() THEN 'active'
            WHEN l.state = 'active' THEN 'expired' ELSE 'free' END AS state,
       l.created_at
  FROM lease.locks l LEFT JOIN lease.fence_marks m ON m.lock_key = l.lock_key;

REVOKE ALL ON lease.active_leases, lease.lease_history, lease.audit_log, lease.fencing_counters
    FROM PUBLIC;
GRANT SELECT ON lease.active_leases, lease.lease_history, lease.audit_log, lease.fencing_counters
    TO lease_operator;


-- Recreated as they were (0003, 0004, 0006, 0008).
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

CREATE FUNCTION lease._state_now(l lease.locks) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
RETURN CASE WHEN l.state = 'active' AND l.expires_at > now() THEN 'active'
            WHEN l.state = 'active' THEN 'expired'
            ELSE 'none' END;

CREATE FUNCTION lease.health() RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
RETURN (SELECT jsonb_build_object(
            'schema_version', (SELECT max(version) FROM lease.schema_migrations),
            'sealed', ns.sealed OR m.why IS NOT NULL,
            'sealed_reason', coalesce(ns.sealed_reason, m.why),
            'epoch', ns.epoch,
            'active_leases', (SELECT count(*) FROM lease.locks
                               WHERE state = 'active' AND expires_at > now()))
          FROM lease.namespace_state ns, lease.policy pol,
               LATERAL (SELECT CASE WHEN pg_is_in_recovery() THEN 'the database is a standby'
                                    ELSE lease._namespace_mismatch(ns, pol.seal_on_timeline_change)
                               END AS why) m);

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
    -- the shape an active row must have (0009 keeps only the fencing CHECK:
    -- every CHECK costs each write statement a parse)
    SELECT 'active_row_malformed', l.lock_key,
           'an active lease misses a column, or its times or token are out of order'
      FROM lease.locks l
     WHERE l.state = 'active'
       AND NOT coalesce(l.lease_id IS NOT NULL AND l.owner_principal_id IS NOT NULL
                        AND l.owner_client_id IS NOT NULL AND l.owner_credential_id IS NOT NULL
                        AND l.service_instance_id IS NOT NULL AND l.execution_id IS NOT NULL
                        AND l.job_id IS NOT NULL AND l.request_id IS NOT NULL
                        AND l.metadata IS NOT NULL AND l.ttl_ms IS NOT NULL
                        AND l.fencing_token >= 1 AND l.renewed_at >= l.acquired_at
                        AND l.expires_at <= l.acquired_at
                                           + l.maximum_lifetime_ms * interval '1 millisecond',
                        false)
    UNION ALL
    SELECT 'history_malformed', h.lock_key, 'history lease ' || h.lease_id
           || ' has a token below 1 or an administrative end without its administrator'
      FROM lease.history h
     WHERE h.fencing_token < 1 OR (h.state <> 'expired' AND h.ended_by_principal_id IS NULL)
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

REVOKE EXECUTE ON FUNCTION lease.health(), lease.verify() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.health() TO lease_service, lease_operator;
GRANT EXECUTE ON FUNCTION lease.verify() TO lease_operator;

DROP FUNCTION lease._clear(text);

-- Request shapes, as inlinable expressions (no call at run time). --------
-- PL/pgSQL compiles every expression again in each new transaction, and a
-- SQL function is inlined only when its volatility matches its body and it
-- holds no sub-select; the functions below are written to inline.

-- Whether a lock_identity object is valid (docs/contract.md, "Identity and lock keys"): each
-- component a string matching its rule after ASCII case folding where the
-- rule folds, bounded, no "..", operation_class absent, null or one of the
-- enum, and no other key. lease._identity names the offending field.
-- One small regular expression per component: PostgreSQL runs one long
-- pattern over the whole identity several times slower.
CREATE FUNCTION lease._identity_ok(li jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN coalesce(
    jsonb_typeof(li -> 'tenant_id') = 'string' AND jsonb_typeof(li -> 'program_id') = 'string'
    AND jsonb_typeof(li -> 'target_namespace') = 'string'
    AND jsonb_typeof(li -> 'target_id') = 'string' AND jsonb_typeof(li -> 'actor_name') = 'string'
    AND jsonb_typeof(li -> 'workflow_name') = 'string'
    AND coalesce(jsonb_typeof(li -> 'operation_class'), 'null') IN ('string', 'null')
    AND length(li ->> 'tenant_id') <= 64
    AND lower(li ->> 'tenant_id' COLLATE "C") ~ '^[a-z0-9][a-z0-9_-]*$'
    AND length(li ->> 'program_id') <= 64
    AND lower(li ->> 'program_id' COLLATE "C") ~ '^[a-z0-9][a-z0-9_-]*$'
    AND length(li ->> 'target_namespace') <= 64
    AND lower(li ->> 'target_namespace' COLLATE "C") ~ '^[a-z0-9][a-z0-9._-]*$'
    AND strpos(li ->> 'target_namespace', '..') = 0
    AND length(li ->> 'target_id') <= 128
    AND (li ->> 'target_id') ~ '^[A-Za-z0-9][A-Za-z0-9._:-]*$'
    AND strpos(li ->> 'target_id', '..') = 0
    AND length(li ->> 'actor_name') <= 64
    AND lower(li ->> 'actor_name' COLLATE "C") ~ '^[a-z0-9][a-z0-9_-]*$'
    AND length(li ->> 'workflow_name') <= 64
    AND lower(li ->> 'workflow_name' COLLATE "C") ~ '^[a-z0-9][a-z0-9_-]*$'
    AND lower(coalesce(li ->> 'operation_class', 'default') COLLATE "C")
        IN ('default', 'collect', 'enrich', 'publish', 'maintenance')
    AND (li - ARRAY['tenant_id', 'program_id', 'target_namespace', 'target_id', 'actor_name',
                    'workflow_name', 'operation_class']) = '{}'::jsonb,
    false);

-- The canonical identity of a valid lock_identity object: the versioned
-- JSON array the lock key hashes (its components need no escaping).
CREATE FUNCTION lease._canonical_text(li jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN '["v1","' || lower(li ->> 'tenant_id' COLLATE "C")
       || '","' || lower(li ->> 'program_id' COLLATE "C")
       || '","' || lower(li ->> 'target_namespace' COLLATE "C")
       || '","' || (li ->> 'target_id')
       || '","' || lower(li ->> 'actor_name' COLLATE "C")
       || '","' || lower(li ->> 'workflow_name' COLLATE "C")
       || '","' || lower(coalesce(li ->> 'operation_class', 'default') COLLATE "C")
       || '"]';

-- The canonical identity, or NULL when the object is not valid.
CREATE FUNCTION lease._canonical(li jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN lease._identity_ok(li) THEN lease._canonical_text(li) END;

-- The canonical identity of stored columns (the tuple check in WHERE
-- clauses: a row whose stored tuple is not the request's never matches, and
-- the read that follows fails closed).
CREATE FUNCTION lease._canonical_of(tenant_id text, program_id text, target_namespace text,
                                    target_id text, actor_name text, workflow_name text,
                                    operation_class text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN '["v1","' || tenant_id || '","' || program_id || '","' || target_namespace || '","'
       || target_id || '","' || actor_name || '","' || workflow_name || '","'
       || operation_class || '"]';

-- The lock key of a canonical identity (STABLE like convert_to, so that it
-- inlines).
CREATE FUNCTION lease._key_of(c text) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
RETURN 'starintel:target-lease:v1:'
    || rtrim(translate(encode(sha256(convert_to(c, 'UTF8')), 'base64'), '+/', '-_'), '=');

-- The identity of a canonical array (its components are between quotes).
CREATE FUNCTION lease._identity_of(c text) RETURNS lease.identity
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN ROW(split_part(c, '"', 4), split_part(c, '"', 6), split_part(c, '"', 8),
           split_part(c, '"', 10), split_part(c, '"', 12), split_part(c, '"', 14),
           split_part(c, '"', 16), NULL)::lease.identity;

-- Raisers usable where a timestamptz is expected (lease._call_deadline).
CREATE FUNCTION lease._isolation_error_ts() RETURNS timestamptz
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    PERFORM lease._isolation_error();
    RETURN NULL;
END
$$;

CREATE FUNCTION lease._malformed_ts(what text) RETURNS timestamptz
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    PERFORM lease._malformed(what);
    RETURN NULL;
END
$$;

-- The deadline of a call, after the checks every call shares: SERIALIZABLE,
-- a request object, an RFC 3339 deadline, a principal and, for mutations,
-- a request id and digest. Raises LS002 or LS003 (a call the service never
-- sends) otherwise. VOLATILE like its raisers, so that it inlines.
CREATE OR REPLACE FUNCTION lease._call_deadline(p jsonb, mutation boolean) RETURNS timestamptz
LANGUAGE sql VOLATILE
RETURN CASE
    WHEN current_setting('transaction_isolation') <> 'serializable'
        THEN lease._isolation_error_ts()
    WHEN jsonb_typeof(p) IS DISTINCT FROM 'object'
        THEN lease._malformed_ts('request is not an object')
    -- the service always sends RFC 3339; the shape check keeps any other
    -- text (which the cast might read some other way) out
    WHEN NOT coalesce(length(p ->> 'deadline_at') <= 40
                      AND (p ->> 'deadline_at') ~ '^[0-9-]+T[0-9:]+(\.[0-9]+)?(Z|[+-][0-9:]+)$',
                      false)
        THEN lease._malformed_ts('deadline_at missing or not RFC 3339')
    WHEN NOT lease._id_ok(p #> '{principal,principal_id}')
        THEN lease._malformed_ts('principal missing')
    WHEN mutation AND NOT (lease._id_ok(p -> 'request_id')
                           AND coalesce(length(p ->> 'request_digest') = 64
                                        AND (p ->> 'request_digest') ~ '^[0-9a-f]+$', false))
        THEN lease._malformed_ts('request_id or request_digest missing')
    ELSE (p ->> 'deadline_at')::timestamptz END;

-- Bounds how long this transaction may wait for a row lock: never past the
-- caller's deadline, so no backend lock wait outlives the request. False
-- (and nothing set) when the deadline has already passed: the caller then
-- answers deadline_exceeded before its first write. An expression, used in
-- an IF (PERFORM would run a query).
CREATE FUNCTION lease._lock_wait_until(deadline timestamptz) RETURNS boolean
LANGUAGE sql VOLATILE
RETURN clock_timestamp() < deadline
       AND set_config('lock_timeout',
               least(600000, ceil(extract(epoch FROM deadline - clock_timestamp()) * 1000))
                   ::bigint::text || 'ms', true) IS NOT NULL;

-- A new lease id: 32 hex digits, the first 12 the acquisition time in ms,
-- then 80 random bits. Opaque to clients, unique (the primary keys check),
-- and time-ordered, so the lease index and the history insert at the right
-- edge of their primary keys instead of at random pages: each page that a
-- write touches first after a checkpoint costs a full-page image in the WAL
-- (measured: random ids doubled the WAL of an acquire/release pair).
CREATE FUNCTION lease._new_lease_id(t timestamptz) RETURNS text
LANGUAGE sql VOLATILE
RETURN 'lease_' || lpad(to_hex((extract(epoch FROM t) * 1000)::bigint), 12, '0')
       || left(replace(gen_random_uuid()::text, '-', ''), 20);

-- Whether an acquire's caller knows the identity's row exists (the service
-- remembers identities it has seen): the update comes first and the insert
-- probe is skipped. A wrong hint costs time, never correctness.
CREATE FUNCTION lease._existing(p jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN coalesce(p -> 'existing' = 'true'::jsonb, false);

-- Whether the caller asked to skip the request-id lookup before a
-- state-changing decision (see the file comment).
CREATE FUNCTION lease._optimistic(p jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN coalesce(p -> 'optimistic' = 'true'::jsonb, false);

-- A TTL in ms from a request value: the fallback when absent, NULL when
-- outside minimum < ttl <= maximum.
CREATE FUNCTION lease._ttl_in(v jsonb, fallback bigint, minimum bigint, maximum bigint)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN v IS NULL OR jsonb_typeof(v) = 'null' THEN fallback
    WHEN lease._int(v) > minimum AND lease._int(v) <= maximum THEN lease._int(v)
    END;

-- The metadata object to store (absent or null: empty).
CREATE FUNCTION lease._metadata(p jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN jsonb_typeof(p -> 'metadata') = 'object' THEN p -> 'metadata' ELSE '{}' END;

-- invalid_lease_request naming a field, with a human detail (bounds).
CREATE FUNCTION lease._invalid(field text, detail text) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
RETURN CASE WHEN detail IS NULL THEN lease._invalid(field)
            ELSE jsonb_build_object('code', 'invalid_lease_request', 'field', field,
                                    'detail', detail) END;

-- Metadata (docs/contract.md), as in 0004, and numbers within
-- +-(2^53 - 1) so every accepted value round-trips exactly.
CREATE OR REPLACE FUNCTION lease._bad_metadata(m jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    e record;
    n integer := 0;
    size integer := 2;
BEGIN
    IF m IS NULL OR jsonb_typeof(m) = 'null' OR m = '{}'::jsonb THEN
        RETURN NULL;  -- absent, null or empty: no metadata
    END IF;
    IF jsonb_typeof(m) <> 'object' THEN
        RETURN 'metadata';
    END IF;
    FOR e IN SELECT key, value FROM jsonb_each(m) LOOP
        n := n + 1;
        IF n > 16 OR length(e.key) > 64 OR e.key !~ '^[a-z0-9_]+$' THEN
            RETURN 'metadata.' || left(e.key, 64);
        END IF;
        IF NOT (jsonb_typeof(e.value) = 'boolean'
                OR jsonb_typeof(e.value) = 'number'
                   AND abs((e.value #>> '{}')::numeric) <= 9007199254740991
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

-- Everything a deciding operation reads before it decides, in one row:
-- the policy, and whether the namespace guard (0008) must look closer
-- (sealed, not recorded yet, or this database is not the recorded one).
CREATE VIEW lease._settings AS
SELECT pol.minimum_ttl_ms, pol.default_ttl_ms, pol.maximum_ttl_ms, pol.maximum_lifetime_ms,
       pol.idempotency_retention_ms, pol.token_limit,
       ns.sealed OR ns.timeline_id IS NULL
       OR lease._namespace_mismatch(ns, pol.seal_on_timeline_change) IS NOT NULL AS guard_needed
  FROM lease.policy pol, lease.namespace_state ns;
REVOKE ALL ON lease._settings FROM PUBLIC;

-- Results. ---------------------------------------------------------------
-- A "brief" request (the service sends it) gets an answer that carries
-- what the database decided, not what the request already said: building a
-- JSON object costs per key, and the full 30-key lease was a sixth of a
-- call. The service completes the record from the request it sent
-- (identity, lease id, token, owner, instance, ...). Other callers (psql)
-- get whole records, as do inspect and list (lease._lease_json).

CREATE FUNCTION lease._brief(p jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN coalesce(p -> 'brief' = 'true'::jsonb, false);

-- An acquisition: the new lease's id, token, times, TTLs and client.
CREATE FUNCTION lease._acquired_json(l lease.locks) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
RETURN jsonb_build_object(
    'lease_id', l.lease_id, 'fencing_token', l.fencing_token,
    'acquired_at', lease._ts(l.acquired_at), 'renewed_at', lease._ts(l.acquired_at),
    'expires_at', lease._ts(l.expires_at), 'ttl_ms', l.ttl_ms,
    'maximum_lifetime_ms', l.maximum_lifetime_ms, 'owner_client_id', l.owner_client_id,
    'owner_credential_id', l.owner_credential_id, 'state', 'active');

-- A renewal: the lease's times and TTLs, and what the renewing request did
-- not name (execution, job, trace, metadata, owner).
CREATE FUNCTION lease._renewed_json(l lease.locks) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
RETURN jsonb_build_object(
    'acquired_at', lease._ts(l.acquired_at), 'renewed_at', lease._ts(l.renewed_at),
    'expires_at', lease._ts(l.expires_at), 'ttl_ms', l.ttl_ms,
    'maximum_lifetime_ms', l.maximum_lifetime_ms, 'owner_principal_id', l.owner_principal_id,
    'owner_client_id', l.owner_client_id, 'service_instance_id', l.service_instance_id,
    'execution_id', l.execution_id, 'job_id', l.job_id, 'trace_id', l.trace_id,
    'metadata', l.metadata, 'state', 'active');

-- An ended lease (release, force-release, revoke): as a renewal, plus its
-- terminal state and when it ended (the reason and incident are the
-- request's).
CREATE FUNCTION lease._ended_json(l lease.locks, terminal_state text, ended_at timestamptz)
RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
RETURN jsonb_build_object(
    'acquired_at', lease._ts(l.acquired_at), 'renewed_at', lease._ts(l.renewed_at),
    'expires_at', lease._ts(l.expires_at), 'ended_at', lease._ts(ended_at), 'ttl_ms', l.ttl_ms,
    'maximum_lifetime_ms', l.maximum_lifetime_ms, 'owner_principal_id', l.owner_principal_id,
    'owner_client_id', l.owner_client_id, 'service_instance_id', l.service_instance_id,
    'execution_id', l.execution_id, 'job_id', l.job_id, 'trace_id', l.trace_id,
    'metadata', l.metadata, 'state', terminal_state);

-- Evidence. ---------------------------------------------------------------

-- The evidence of a state-changing lease operation, in one statement,
-- inside its transaction: the idempotency record and the audit event (the
-- lease index entry and the history row are the operations' own: one
-- statement holding both, most of it idle, costs more to start). The audit event is built from the
-- lease row itself: only named, non-secret columns (metadata, bodies and
-- lock keys never reach audit). A repeated optimistic request fails here
-- on idempotency's primary key (23505). Returns true; an expression
-- (assigned, not PERFORMed: PERFORM would run a query).
CREATE FUNCTION lease._evidence(p jsonb, op text, l lease.locks, result jsonb, retention_ms bigint,
                                previous_state text, resulting_state text,
                                requested_ttl_ms bigint, reason text, incident_id text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    WITH remembered AS (
        INSERT INTO lease.idempotency (lock_key, operation, owner_principal_id, request_id,
                                       request_digest, result, lease_id, created_at, expires_at)
        VALUES (l.lock_key, op, p #>> '{principal,principal_id}', p ->> 'request_id',
                decode(p ->> 'request_digest', 'hex'), result, l.lease_id, lease._now(),
                lease._now() + lease._ms(retention_ms)))
    INSERT INTO lease.audit_events (
        latency_ms, event_type, priority, decision, result_code, request_id, correlation_id,
        trace_id, execution_id, job_id, principal_class, principal_id, credential_id,
        service_instance_id, tenant_id, program_id, target_namespace, target_id, actor_name,
        workflow_name, operation_class, lease_id, fencing_token, requested_ttl_ms,
        effective_ttl_ms, deadline_class, previous_state, resulting_state, reason, incident_id)
    VALUES (
        lease._int(p -> 'latency_ms')::integer, 'target_lease_' || op,
        CASE WHEN op IN ('force_release', 'revoke') THEN 'high' ELSE 'normal' END, 'allow',
        result ->> 'code', p ->> 'request_id', left(p ->> 'correlation_id', 64),
        coalesce(p ->> 'trace_id', l.trace_id), l.execution_id, l.job_id,
        left(p #>> '{principal,principal_class}', 16), p #>> '{principal,principal_id}',
        left(p #>> '{principal,credential_id}', 128), l.service_instance_id, l.tenant_id,
        l.program_id, l.target_namespace, l.target_id, l.actor_name, l.workflow_name,
        l.operation_class, l.lease_id, l.fencing_token, requested_ttl_ms, l.ttl_ms,
        left(p ->> 'deadline_class', 16), previous_state, resulting_state, reason, incident_id);
    RETURN true;
END
$$;

-- Stores the typed result of a state-changing request with its mutation
-- (fenced_commit; the lease operations use lease._evidence).
CREATE OR REPLACE FUNCTION lease._remember(k text, op text, p jsonb, result jsonb, lease_id text)
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

-- Moves an expired lease still in its row into history and frees the row,
-- conditional on its lease id and token (a delayed cleanup that finds a
-- successor or a renewal changes nothing). Returns whether it did.
CREATE OR REPLACE FUNCTION lease._expire(k text, expected_lease_id text, expected_token bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    l lease.locks;
BEGIN
    UPDATE lease.locks SET state = 'free'
     WHERE lock_key = k AND state = 'active' AND lease_id = expected_lease_id
       AND fencing_token = expected_token AND expires_at <= now()
    RETURNING * INTO l;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM lease._to_history(l, 'expired', l.expires_at, NULL, NULL, NULL);
    RETURN true;
END
$$;

-- The answer when a state-changing write matched nothing: the stored answer
-- of a repeated request (optimistic callers only: the others looked first),
-- LS001 when the stored tuple differs, else `otherwise`.
CREATE FUNCTION lease._unmatched(k text, op text, p jsonb, c text, otherwise jsonb) RETURNS jsonb
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    replay jsonb;
BEGIN
    IF lease._optimistic(p) THEN
        replay := lease._replay(k, op, p);
        IF replay IS NOT NULL THEN
            RETURN replay;
        END IF;
    END IF;
    PERFORM lease._row(k, lease._identity_of(c));
    RETURN otherwise;
END
$$;

-- The operations. ----------------------------------------------------------

-- acquire-if-free. A new identity is one INSERT, an existing free one one
-- UPDATE; anything else is decided after reading the row (see the file
-- comment).
CREATE OR REPLACE FUNCTION lease.acquire(p jsonb) RETURNS jsonb
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    deadline timestamptz := lease._call_deadline(p, true);
    t timestamptz := lease._now();
    c text := lease._canonical(p -> 'lock_identity');
    k text;
    s lease._settings;
    why text;
    field text;
    ttl bigint;
    maxlife bigint;
    lid text;
    l lease.locks;
    insert_next boolean := NOT lease._existing(p);
    inserted boolean := false;
    prev text := 'none';
    replay jsonb;
    result jsonb;
BEGIN
    IF now() >= deadline THEN
        RETURN lease._result('deadline_exceeded');
    END IF;
    SELECT * INTO s FROM lease._settings;
    ttl := lease._ttl_in(p -> 'ttl_ms', s.default_ttl_ms, s.minimum_ttl_ms, s.maximum_ttl_ms);
    maxlife := lease._ttl_in(p -> 'maximum_lifetime_ms', s.maximum_lifetime_ms, s.minimum_ttl_ms,
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
    IF NOT lease._optimistic(p) THEN
        replay := lease._replay(k, 'acquire', p);
        IF replay IS NOT NULL THEN
            RETURN replay;
        END IF;
    END IF;
    lid := lease._new_lease_id(t);

    -- A new identity: its row is created holding the lease, before anything
    -- reads it. An existing row (or a tuple another key claims) makes the
    -- insert a no-op; a concurrent first acquisition of the same identity
    -- makes it a serialization failure, and the retry finds the row.
    -- An existing identity: a free row of exactly this tuple, below the
    -- token limit, takes the lease in one update. A request that says
    -- "existing" (the service has seen this identity's row) skips the insert
    -- probe; should the row not exist after all, the loop inserts it.
    LOOP
        IF insert_next THEN
            insert_next := false;
            inserted := true;
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
            EXIT WHEN FOUND;
        END IF;
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
        IF l.lock_key IS NULL AND NOT inserted THEN
            insert_next := true;  -- "existing" was wrong: a new identity after all
            CONTINUE;
        ELSIF l.lock_key IS NULL THEN
            -- the insert skipped, yet no row has this key: another row
            -- claims this identity tuple
            PERFORM lease._corrupt(k, 'another row claims this identity tuple');
        END IF;
        IF l.state = 'active' AND l.expires_at > now() THEN
            IF lease._optimistic(p) THEN
                replay := lease._replay(k, 'acquire', p);
                IF replay IS NOT NULL THEN
                    RETURN replay;
                END IF;
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
    END LOOP;

    INSERT INTO lease.lease_index (lease_id, lock_key, created_at) VALUES (lid, k, t);
    -- (separate assignments: PL/pgSQL compiles only the expression it runs)
    IF lease._brief(p) THEN
        result := jsonb_build_object('code', 'lease_acquired', 'lease', lease._acquired_json(l));
    ELSE
        result := jsonb_build_object('code', 'lease_acquired', 'lease', lease._lease_json(l));
    END IF;
    RETURN CASE WHEN lease._evidence(p, 'acquire', l, result, s.idempotency_retention_ms, prev,
                                     'active', lease._int(p -> 'ttl_ms'), NULL, NULL)
                THEN result || '{"replayed": false, "current_state": "active"}'::jsonb END;
END
$$;

-- The references renew, release, force_release and revoke share: the
-- offending field, or NULL.
CREATE FUNCTION lease._bad_reference(p jsonb, c text, as_owner boolean) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN c IS NULL THEN (lease._identity(p -> 'lock_identity')).bad_field
    WHEN NOT lease._id_ok(p -> 'lease_id') THEN 'lease_id'
    WHEN coalesce(lease._int(p -> 'fencing_token'), 0) <= 0 THEN 'fencing_token'
    WHEN as_owner AND NOT lease._id_ok(p -> 'service_instance_id') THEN 'service_instance_id'
    END;

-- renew-if-owner: the exact identity, lease id, owner principal, service
-- instance and token of the active, unexpired lease. renewed_at becomes
-- backend time, expires_at min(now + ttl, acquired_at + lifetime); the token
-- never changes.
CREATE OR REPLACE FUNCTION lease.renew(p jsonb) RETURNS jsonb
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    deadline timestamptz := lease._call_deadline(p, true);
    t timestamptz := lease._now();
    c text := lease._canonical(p -> 'lock_identity');
    k text;
    s lease._settings;
    why text;
    field text;
    ttl bigint;
    l lease.locks;
    replay jsonb;
    result jsonb;
BEGIN
    IF now() >= deadline THEN
        RETURN lease._result('deadline_exceeded');
    END IF;
    field := lease._bad_reference(p, c, true);
    IF field IS NOT NULL THEN
        RETURN lease._invalid(field);
    END IF;
    SELECT * INTO s FROM lease._settings;
    ttl := lease._ttl_in(p -> 'ttl_ms', NULL, s.minimum_ttl_ms, s.maximum_ttl_ms);
    IF ttl IS NULL AND coalesce(jsonb_typeof(p -> 'ttl_ms'), 'null') <> 'null' THEN
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
    IF NOT lease._optimistic(p) THEN
        replay := lease._replay(k, 'renew', p);
        IF replay IS NOT NULL THEN
            RETURN replay;
        END IF;
    END IF;

    IF NOT lease._lock_wait_until(deadline) THEN
        RETURN lease._result('deadline_exceeded');
    END IF;
    UPDATE lease.locks
       SET renewed_at = t,
           expires_at = least(t + lease._ms(coalesce(ttl, ttl_ms)),
                              acquired_at + lease._ms(maximum_lifetime_ms)),
           ttl_ms = coalesce(ttl, ttl_ms)
     WHERE lock_key = k AND state = 'active' AND expires_at > now() AND record_version = 1
       AND lease_id = p ->> 'lease_id' AND fencing_token = lease._int(p -> 'fencing_token')
       AND owner_principal_id = p #>> '{principal,principal_id}'
       AND service_instance_id = p ->> 'service_instance_id'
       AND lease._canonical_of(tenant_id, program_id, target_namespace, target_id, actor_name,
                               workflow_name, operation_class) = c
    RETURNING * INTO l;
    IF NOT FOUND THEN
        RETURN lease._unmatched(k, 'renew', p, c, lease._result('lease_lost'));
    END IF;

    IF lease._brief(p) THEN
        result := jsonb_build_object('code', 'lease_renewed', 'lease', lease._renewed_json(l));
    ELSE
        result := jsonb_build_object('code', 'lease_renewed', 'lease', lease._lease_json(l));
    END IF;
    RETURN CASE WHEN lease._evidence(p, 'renew', l, result, s.idempotency_retention_ms, 'active',
                                     'active', lease._int(p -> 'ttl_ms'), NULL, NULL)
                THEN result || '{"replayed": false, "current_state": "active"}'::jsonb END;
END
$$;

-- Ends a lease: the exact lease (for its owner: also the owner principal
-- and service instance) active and unexpired, freed in one statement, then
-- its terminal evidence (history, idempotency, audit) in the same
-- transaction. Shared by release, force_release and revoke; the privileged
-- two compare against the observed lease (id and token), never an unseen
-- successor, and their high-priority audit commits with the change.
CREATE FUNCTION lease._end(p jsonb, op text, terminal_state text, success_code text)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    deadline timestamptz := lease._call_deadline(p, true);
    c text := lease._canonical(p -> 'lock_identity');
    as_owner boolean := op = 'release';
    k text;
    field text;
    reason text;
    incident text;
    l lease.locks;
    h lease.history;
    replay jsonb;
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
    IF NOT lease._optimistic(p) THEN
        replay := lease._replay(k, op, p);
        IF replay IS NOT NULL THEN
            RETURN replay;
        END IF;
    END IF;
    IF NOT lease._lock_wait_until(deadline) THEN
        RETURN lease._result('deadline_exceeded');
    END IF;
    UPDATE lease.locks SET state = 'free'
     WHERE lock_key = k AND state = 'active' AND expires_at > now() AND record_version = 1
       AND lease_id = p ->> 'lease_id' AND fencing_token = lease._int(p -> 'fencing_token')
       AND (NOT as_owner OR owner_principal_id = p #>> '{principal,principal_id}'
                            AND service_instance_id = p ->> 'service_instance_id')
       AND lease._canonical_of(tenant_id, program_id, target_namespace, target_id, actor_name,
                               workflow_name, operation_class) = c
    RETURNING * INTO l;
    IF NOT FOUND THEN
        RETURN lease._unmatched(k, op, p, c, lease._result('lease_lost'));
    END IF;
    h := lease._to_history(l, terminal_state, lease._now(), p, reason, incident);
    IF lease._brief(p) THEN
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
$$;

-- release-if-owner: compare-and-delete on the exact ownership tuple. The
-- entry points are PL/pgSQL, not SQL: a SECURITY DEFINER SQL function is
-- never inlined and would be planned again on every call.
CREATE OR REPLACE FUNCTION lease.release(p jsonb) RETURNS jsonb
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN lease._end(p, 'release', 'released', 'lease_released');
END
$$;

CREATE OR REPLACE FUNCTION lease.force_release(p jsonb) RETURNS jsonb
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN lease._end(p, 'force_release', 'released', 'lease_released');
END
$$;

CREATE OR REPLACE FUNCTION lease.revoke(p jsonb) RETURNS jsonb
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN lease._end(p, 'revoke', 'revoked', 'lease_revoked');
END
$$;

DROP FUNCTION lease._admin_end(jsonb, text);
DROP FUNCTION lease._end_lease(jsonb, text, lease.locks, text, text, text, text);
DROP FUNCTION lease._bad_owner_ref(jsonb, lease.identity);

-- Inspect (0005's rules). A freed row keeps its last lease's columns, so
-- only an active row answers for its lease id; otherwise history does.
CREATE OR REPLACE FUNCTION lease.inspect(p jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    deadline timestamptz := lease._call_deadline(p, false);
    scope jsonb := p -> 'scope';
    i lease.identity;
    l lease.locks;
    h lease.history;
BEGIN
    IF now() >= deadline THEN
        RETURN lease._result('deadline_exceeded');
    END IF;
    PERFORM lease._check_scope(scope);
    IF coalesce(jsonb_typeof(p -> 'lock_identity'), 'null') <> 'null' THEN
        i := lease._identity(p -> 'lock_identity');
        IF i.bad_field IS NOT NULL THEN
            RETURN lease._invalid(i.bad_field);
        END IF;
        l := lease._row(lease._key(i), i);
    ELSIF lease._id_ok(p -> 'lease_id') THEN
        SELECT l2.* INTO l FROM lease.lease_index x JOIN lease.locks l2 USING (lock_key)
         WHERE x.lease_id = p ->> 'lease_id' AND l2.lease_id = x.lease_id
           AND l2.state = 'active';
        IF l.lock_key IS NULL THEN
            SELECT * INTO h FROM lease.history WHERE lease_id = p ->> 'lease_id';
            IF h.lease_id IS NOT NULL
               AND lease._in_scope(h.tenant_id, h.program_id, h.actor_name, scope) THEN
                RETURN jsonb_build_object('code', 'lease_inspected', 'lease', lease._history_json(h));
            END IF;
            RETURN lease._result('lease_not_found');
        END IF;
        IF l.lock_key <> lease._key_of(lease._canonical_of(l.tenant_id, l.program_id,
                              l.target_namespace, l.target_id, l.actor_name, l.workflow_name,
                              l.operation_class)) THEN
            PERFORM lease._corrupt(l.lock_key, 'lock key does not match the stored tuple');
        END IF;
    ELSIF p ? 'lease_id' THEN
        RETURN lease._invalid('lease_id');
    ELSE
        RETURN lease._invalid('lock_identity');
    END IF;
    IF l.lock_key IS NULL OR l.state <> 'active'
       OR NOT lease._in_scope(l.tenant_id, l.program_id, l.actor_name, scope) THEN
        RETURN lease._result('lease_not_found');
    END IF;
    RETURN jsonb_build_object('code', 'lease_inspected', 'lease', lease._lease_json(l));
END
$$;

-- Fencing (0005's rules) behind the namespace guard. fenced_commit always
-- looks its request id up first: a repeated commit must not meet its own
-- documents' new revisions as a write_conflict.
CREATE OR REPLACE FUNCTION lease.fence_check(lock_identity jsonb, lease_id text, fencing_token bigint,
                                  owner_principal_id text DEFAULT NULL)
RETURNS timestamptz
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    i lease.identity;
    k text;
    l lease.locks;
    hw bigint;
BEGIN
    PERFORM lease._require_serializable();
    i := lease._identity(lock_identity);
    IF i.bad_field IS NOT NULL THEN
        RAISE EXCEPTION 'invalid %', i.bad_field USING ERRCODE = '22023';
    END IF;
    IF lease_id IS NULL OR length(lease_id) > 128 OR lease_id !~ '^[A-Za-z0-9._:-]+$'
       OR coalesce(fencing_token, 0) <= 0 THEN
        RAISE EXCEPTION 'invalid lease_id or fencing_token' USING ERRCODE = '22023';
    END IF;
    -- the guard may seal, but this raise rolls that back with the caller's
    -- transaction: the refusal does not depend on it (the sweeper records it)
    IF lease._guard() IS NOT NULL THEN
        RAISE EXCEPTION 'lease namespace is sealed until recovery' USING ERRCODE = 'LS010';
    END IF;
    k := lease._key(i);
    l := lease._fence(k, i, lease_id, fencing_token, owner_principal_id, NULL);
    IF l.lock_key IS NULL THEN
        SELECT m.high_water_token INTO hw FROM lease.fence_marks m WHERE m.lock_key = k;
        IF hw IS NOT NULL AND fencing_token < hw THEN
            RAISE EXCEPTION 'fencing token % is below the accepted high-water mark %',
                fencing_token, hw USING ERRCODE = 'LS011';
        END IF;
        RAISE EXCEPTION 'lease % is not the active lease of this identity', lease_id
            USING ERRCODE = 'LS010';
    END IF;
    PERFORM lease._accept_token(k, fencing_token);
    RETURN l.expires_at;
END
$$;

CREATE OR REPLACE FUNCTION lease.fenced_commit(p jsonb) RETURNS jsonb
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    deadline timestamptz := lease._call_deadline(p, true);
    t timestamptz := lease._now();
    i lease.identity;
    k text;
    l lease.locks;
    replay jsonb;
    field text;
    token bigint := lease._int(p -> 'fencing_token');
    x jsonb;
    idx integer := -1;
    cur bigint;
    rev bigint;
    oid bigint;
    results jsonb := '[]'::jsonb;
    result jsonb;
    why text;
BEGIN
    IF now() >= deadline THEN
        RETURN lease._result('deadline_exceeded');
    END IF;
    i := lease._identity(p -> 'lock_identity');
    field := lease._bad_lease_ref(p, i);
    IF field IS NULL AND NOT lease._id_ok(p -> 'execution_id') THEN
        field := 'execution_id';
    END IF;
    IF field IS NULL AND coalesce(jsonb_typeof(p -> 'trace_id'), 'null') <> 'null'
       AND NOT lease._id_ok(p -> 'trace_id') THEN
        field := 'trace_id';
    END IF;
    IF field IS NULL THEN
        field := lease._bad_writes(p -> 'writes');
    END IF;
    IF field IS NOT NULL THEN
        RETURN lease._invalid(field);
    END IF;
    why := lease._guard();
    IF why IS NOT NULL THEN
        RETURN lease._sealed_result(why);
    END IF;
    k := lease._key(i);
    replay := lease._replay(k, 'commit', p);
    IF replay IS NOT NULL THEN
        RETURN replay;
    END IF;

    PERFORM lease._bound_lock_wait(deadline);
    l := lease._fence(k, i, p ->> 'lease_id', token, p #>> '{principal,principal_id}',
                      p ->> 'execution_id');
    IF l.lock_key IS NULL THEN
        RETURN lease._result('lease_lost');
    END IF;

    -- every expected revision first: a conflict writes nothing
    FOR x IN SELECT value FROM jsonb_array_elements(p -> 'writes') LOOP
        idx := idx + 1;
        CONTINUE WHEN x ->> 'kind' <> 'document';
        SELECT d.revision INTO cur FROM lease.fenced_documents d
         WHERE d.lock_key = k AND d.document_key = x ->> 'key';
        IF coalesce(cur, 0) <> lease._int(x -> 'expected_revision') THEN
            RETURN jsonb_build_object('code', 'write_conflict',
                                      'field', 'writes[' || idx || '].expected_revision',
                                      'current_revision', coalesce(cur, 0));
        END IF;
    END LOOP;

    FOR x IN SELECT value FROM jsonb_array_elements(p -> 'writes') LOOP
        IF x ->> 'kind' = 'document' THEN
            INSERT INTO lease.fenced_documents AS d (lock_key, document_key, revision, body,
                fencing_token, lease_id, execution_id, trace_id, updated_at)
            VALUES (k, x ->> 'key', lease._int(x -> 'expected_revision') + 1, x -> 'body',
                    token, l.lease_id, l.execution_id, p ->> 'trace_id', t)
            ON CONFLICT (lock_key, document_key) DO UPDATE
               SET revision = EXCLUDED.revision, body = EXCLUDED.body,
                   fencing_token = EXCLUDED.fencing_token, lease_id = EXCLUDED.lease_id,
                   execution_id = EXCLUDED.execution_id, trace_id = EXCLUDED.trace_id,
                   updated_at = EXCLUDED.updated_at
            RETURNING d.revision INTO rev;
            results := results || jsonb_build_object('kind', 'document', 'key', x ->> 'key',
                                                     'revision', rev);
        ELSE
            INSERT INTO lease.outbox (lock_key, topic, payload, fencing_token, lease_id,
                                      execution_id, trace_id, created_at)
            VALUES (k, x ->> 'topic', x -> 'payload', token, l.lease_id, l.execution_id,
                    p ->> 'trace_id', t)
            RETURNING outbox_id INTO oid;
            results := results || jsonb_build_object('kind', 'publication',
                                                     'topic', x ->> 'topic', 'outbox_id', oid);
        END IF;
    END LOOP;
    PERFORM lease._accept_token(k, token);

    result := jsonb_build_object('code', 'commit_accepted', 'lease_id', l.lease_id,
                                 'fencing_token', token, 'results', results);
    PERFORM lease._remember(k, 'commit', p, result, l.lease_id);
    PERFORM lease._audit(p, 'target_lease_commit', 'commit_accepted',
        jsonb_build_object('lock_identity', lease._identity_json(l.tenant_id, l.program_id,
                               l.target_namespace, l.target_id, l.actor_name, l.workflow_name,
                               l.operation_class),
                           'lease_id', l.lease_id, 'fencing_token', token,
                           'service_instance_id', l.service_instance_id,
                           'execution_id', l.execution_id, 'job_id', l.job_id,
                           'trace_id', p ->> 'trace_id', 'previous_state', 'active',
                           'resulting_state', 'active'));
    RETURN result || jsonb_build_object('replayed', false);
END
$$;

-- Helpers are internal: nothing in this schema is executable by PUBLIC
-- (a per-schema default privilege cannot revoke the global default).
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA lease FROM PUBLIC;
