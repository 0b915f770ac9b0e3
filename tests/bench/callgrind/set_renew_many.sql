-- An experiment, not the schema: lease.renew_many deciding the items of a
-- batch with one set-based statement (one UPDATE joined to the items, one
-- idempotency INSERT and one audit INSERT for all renewed items) instead of
-- lease.renew once per item. Items it cannot decide that way (invalid, past
-- their deadline, unmatched, a lock named twice, the namespace guard needed)
-- go through lease.renew as before; a repeated request id falls back item
-- by item as before. For
--   tests/bench/callgrind/pair --plain --batch 10 --sql tests/bench/callgrind/set_renew_many.sql
-- docs/benchmarks.md, "Issue 20: a set-based batch renewal, measured and
-- not kept", says what it measured (6% fewer instructions per renewal) and
-- why the schema does not use it. `lock_key = ANY (ARRAY(...))` keeps the
-- join an index look-up: joined on lock_key alone, the generic plan seq-scanned
-- lease.locks (1.2 M per renewal on 5,000 rows, and growing with the table).
-- the jsonb identity's canonical text and the TTL rule as helpers of their
-- own, as the schema had them when this was measured (the deciders now
-- check typed values)
CREATE OR REPLACE FUNCTION lease._identity_ok(li jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN coalesce(CASE WHEN jsonb_typeof(li) = 'object' THEN
    -- only an object: "li - text[]" raises on a scalar (a string or null lock_identity).
    -- A component's JSON text is quoted only when it is a string, and no
    -- allowed character needs an escape: one pattern checks the type and
    -- the characters (no jsonb_typeof look-up). [A-Za-z] accepts what
    -- lower(x COLLATE "C") ~ '[a-z]' accepted: that lower() changes only
    -- ASCII letters, and a range in a pattern is one of code points. The
    -- length stays a length(): a bound in the pattern ({0,63}) made one
    -- renewal cost 0.11 M instructions more.
    (li -> 'tenant_id')::text ~ '^"[A-Za-z0-9][A-Za-z0-9_-]*"$'
    AND length(li ->> 'tenant_id') <= 64
    AND (li -> 'program_id')::text ~ '^"[A-Za-z0-9][A-Za-z0-9_-]*"$'
    AND length(li ->> 'program_id') <= 64
    AND (li -> 'target_namespace')::text ~ '^"[A-Za-z0-9][A-Za-z0-9._-]*"$'
    AND length(li ->> 'target_namespace') <= 64
    AND strpos(li ->> 'target_namespace', '..') = 0
    AND (li -> 'target_id')::text ~ '^"[A-Za-z0-9][A-Za-z0-9._:-]*"$'
    AND length(li ->> 'target_id') <= 128
    AND strpos(li ->> 'target_id', '..') = 0
    AND (li -> 'actor_name')::text ~ '^"[A-Za-z0-9][A-Za-z0-9_-]*"$'
    AND length(li ->> 'actor_name') <= 64
    AND (li -> 'workflow_name')::text ~ '^"[A-Za-z0-9][A-Za-z0-9_-]*"$'
    AND length(li ->> 'workflow_name') <= 64
    -- absent or JSON null: the default
    AND lower(coalesce(li -> 'operation_class', 'null')::text COLLATE "C")
        IN ('null', '"default"', '"collect"', '"enrich"', '"publish"', '"maintenance"')
    AND (li - ARRAY['tenant_id', 'program_id', 'target_namespace', 'target_id', 'actor_name',
                    'workflow_name', 'operation_class']) = '{}'::jsonb
    END, false);

CREATE OR REPLACE FUNCTION lease._canonical_text(li jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN '["v1","' || lower(li ->> 'tenant_id' COLLATE "C")
       || '","' || lower(li ->> 'program_id' COLLATE "C")
       || '","' || lower(li ->> 'target_namespace' COLLATE "C")
       || '","' || (li ->> 'target_id')
       || '","' || lower(li ->> 'actor_name' COLLATE "C")
       || '","' || lower(li ->> 'workflow_name' COLLATE "C")
       || '","' || lower(coalesce(li ->> 'operation_class', 'default') COLLATE "C")
       || '"]';

CREATE OR REPLACE FUNCTION lease._canonical(li jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN lease._identity_ok(li) THEN lease._canonical_text(li) END;

CREATE OR REPLACE FUNCTION lease._ttl_in(v jsonb, fallback bigint, minimum bigint, maximum bigint)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN v IS NULL OR jsonb_typeof(v) = 'null' THEN fallback
    -- lease._int's checks (a regular expression) once: it inlines, and each
    -- use would run them again. Past them the cast is the one _int makes.
    WHEN lease._int(v) IS NULL THEN NULL
    WHEN (v #>> '{}')::bigint > minimum AND (v #>> '{}')::bigint <= maximum
        THEN (v #>> '{}')::bigint
    END;

CREATE OR REPLACE FUNCTION lease.renew_many(p jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET plan_cache_mode TO force_generic_plan
AS $function$
DECLARE
    brief boolean := false;  -- lease.renew_many answers whole
    items jsonb := CASE WHEN jsonb_typeof(p) = 'object' THEN p -> 'renewals' END;
    s lease._settings;
    done jsonb := '{}';
BEGIN
    IF current_setting('transaction_isolation') <> 'serializable' THEN
        PERFORM lease._isolation_error();
    END IF;
    IF jsonb_typeof(items) IS DISTINCT FROM 'array' THEN
        RETURN lease._invalid('renewals', 'renewals must be an array of 1 to 100 renewals');
    END IF;
    IF jsonb_array_length(items) NOT BETWEEN 1 AND 100 THEN
        RETURN lease._invalid('renewals', 'renewals must be an array of 1 to 100 renewals');
    END IF;
    SELECT * INTO s FROM lease._settings;
    BEGIN
        IF NOT s.guard_needed THEN
                WITH item AS MATERIALIZED (
                    SELECT e.n, e.value AS req, x.c, lease._key_of(x.c) AS k,
                           lease._call_deadline(e.value, true) AS deadline,
                           lease._ttl_in(e.value -> 'ttl_ms', NULL, s.minimum_ttl_ms, s.maximum_ttl_ms) AS ttl
                      FROM jsonb_array_elements(items) WITH ORDINALITY AS e(value, n),
                           LATERAL (SELECT lease._canonical(e.value -> 'lock_identity') AS c) x
                ), ok AS MATERIALIZED (
                    SELECT i.n, i.req, i.c, i.k, i.ttl, i.deadline, (i.req ->> 'fencing_token')::bigint AS token
                      FROM item i
                     WHERE i.deadline > now() AND lease._bad_reference(i.req, i.c, true) IS NULL
                       AND (i.ttl IS NOT NULL OR coalesce(jsonb_typeof(i.req -> 'ttl_ms'), 'null') = 'null')
                ), gate AS MATERIALIZED (
                    SELECT count(*) = count(DISTINCT k) AND lease._lock_wait_until(min(deadline)) AS go
                      FROM ok
                ), upd AS (
                    UPDATE lease.locks l
                       SET renewed_at = lease._now(),
                           expires_at = least(lease._now() + lease._ms(coalesce(o.ttl, l.ttl_ms)),
                                              l.acquired_at + lease._ms(l.maximum_lifetime_ms)),
                           ttl_ms = coalesce(o.ttl, l.ttl_ms)
                      FROM ok o
                     WHERE (SELECT go FROM gate) AND l.lock_key = ANY (ARRAY(SELECT k FROM ok))
                       AND l.lock_key = o.k AND l.state = 'active' AND l.expires_at > now()
                       AND l.record_version = 1 AND l.lease_id = o.req ->> 'lease_id'
                       AND l.fencing_token = o.token
                       AND l.owner_principal_id = o.req #>> '{principal,principal_id}'
                       AND l.service_instance_id = o.req ->> 'service_instance_id'
                       AND lease._canonical_of(l.tenant_id, l.program_id, l.target_namespace,
                                               l.target_id, l.actor_name, l.workflow_name,
                                               l.operation_class) = o.c
                    RETURNING o.n, o.req, o.ttl, l AS r
                ), res AS MATERIALIZED (
                    SELECT u.n, u.req, u.ttl, u.r,
                           jsonb_build_object('code', 'lease_renewed', 'lease',
                               CASE WHEN brief THEN lease._renewed_json(u.r)
                                    ELSE lease._lease_json(u.r) END) AS result
                      FROM upd u
                ), remembered AS (
                    INSERT INTO lease.idempotency (lock_key, operation, owner_principal_id, request_id,
                                                   request_digest, result, lease_id, created_at, expires_at)
                    SELECT (r).lock_key, 'renew', req #>> '{principal,principal_id}', req ->> 'request_id',
                           decode(req ->> 'request_digest', 'hex'), result, (r).lease_id, lease._now(),
                           lease._now() + lease._ms(s.idempotency_retention_ms)
                      FROM res
                ), audited AS (
                    INSERT INTO lease.audit_events (
                        latency_ms, event_type, priority, decision, result_code, request_id, correlation_id,
                        trace_id, execution_id, job_id, principal_class, principal_id, credential_id,
                        service_instance_id, tenant_id, program_id, target_namespace, target_id, actor_name,
                        workflow_name, operation_class, lease_id, fencing_token, requested_ttl_ms,
                        effective_ttl_ms, deadline_class, previous_state, resulting_state, reason, incident_id)
                    SELECT lease._int(req -> 'latency_ms')::integer, 'target_lease_renew', 'normal', 'allow',
                           'lease_renewed', req ->> 'request_id', left(req ->> 'correlation_id', 64),
                           coalesce(req ->> 'trace_id', (r).trace_id), (r).execution_id, (r).job_id,
                           left(req #>> '{principal,principal_class}', 16), req #>> '{principal,principal_id}',
                           left(req #>> '{principal,credential_id}', 128), (r).service_instance_id, (r).tenant_id,
                           (r).program_id, (r).target_namespace, (r).target_id, (r).actor_name, (r).workflow_name,
                           (r).operation_class, (r).lease_id, (r).fencing_token, ttl, (r).ttl_ms,
                           left(req ->> 'deadline_class', 16), 'active', 'active', NULL, NULL
                      FROM res
                )
                SELECT coalesce(jsonb_object_agg(n::text, result || '{"replayed": false, "current_state": "active"}'::jsonb), '{}')
                  INTO done FROM res;
        END IF;
        RETURN jsonb_build_object('results',
            (SELECT jsonb_agg(CASE WHEN done ? e.n::text THEN done -> e.n::text
                                   ELSE lease.renew(e.value, false) END ORDER BY e.n)
               FROM jsonb_array_elements(items) WITH ORDINALITY AS e(value, n)));
    EXCEPTION WHEN unique_violation THEN
        RETURN jsonb_build_object('results',
            (SELECT jsonb_agg(lease.renew(e.value) ORDER BY e.n)
               FROM jsonb_array_elements(items) WITH ORDINALITY AS e(value, n)));
    END;
END
$function$;
