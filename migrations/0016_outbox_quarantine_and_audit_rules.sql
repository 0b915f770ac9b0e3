-- 0016: no poison outbox row, the relay acts only on rows it claimed, and the
-- service cannot forge audit (docs/relay.md, docs/sql-api.md).
--
-- 1. Topics are at most 255 characters (they are ASCII, so 255 bytes): the
--    AMQP short string that carries a routing key and the message's "type".
--    A longer topic is refused at commit time (writes[i].topic) instead of
--    becoming a row no relay can publish.
-- 2. Quarantine. A row its destination refuses for a reason that retrying
--    cannot fix (invalid AMQP data, a message over the broker's size limit,
--    a document CouchDB refuses for good) is set aside by the relay with
--    outbox_quarantine: it keeps its reason, is never claimed again and no
--    longer holds back its identity's later rows. Operators requeue it
--    (outbox_requeue) or give up on it (outbox_discard); the three write an
--    audit event (target_lease_quarantine).
-- 3. Claims. outbox_mark_published, outbox_mark_refused, outbox_defer and
--    outbox_quarantine act only on rows the calling transaction claimed:
--    rows outbox_claim locked for it (the row's xmax is this transaction)
--    or rows it already changed after claiming them (xmin is this
--    transaction). The relay role has no other way to lock or write an
--    outbox row, so a row it never claimed is refused with 42501.
-- 4. record_audit (the service's batches) stores backend time, derives the
--    principal class from the credential, and refuses events of
--    administrator types it cannot back: force_release and revoke events
--    that say "allow" must name a lease that principal really ended that
--    way (leased audits replays of those calls); recover, quarantine,
--    alert and credential events come only from SQL. Every audit reason is
--    stored with control, line-separator and bidirectional-formatting
--    characters replaced, whichever path wrote it.

-- As 0005, with topics of at most 255 characters (ASCII: 255 bytes), what an
-- AMQP short string (routing key, the "type" property) carries: a topic the
-- relay could never publish is refused at commit time (docs/relay.md).
CREATE OR REPLACE FUNCTION lease._bad_writes(w jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    x jsonb;
    idx integer := -1;
    k text;
    keys text[] := ARRAY[]::text[];
    f text;
BEGIN
    IF jsonb_typeof(w) IS DISTINCT FROM 'array' OR jsonb_array_length(w) NOT BETWEEN 1 AND 32 THEN
        RETURN 'writes';
    END IF;
    FOR x IN SELECT value FROM jsonb_array_elements(w) LOOP
        idx := idx + 1;
        f := 'writes[' || idx || ']';
        IF jsonb_typeof(x) <> 'object' THEN
            RETURN f;
        END IF;
        IF x ->> 'kind' = 'document' THEN
            FOR k IN SELECT jsonb_object_keys(x) LOOP
                IF NOT k = ANY (ARRAY['kind', 'key', 'expected_revision', 'body']) THEN
                    RETURN f || '.' || k;
                END IF;
            END LOOP;
            IF jsonb_typeof(x -> 'key') IS DISTINCT FROM 'string'
               OR x ->> 'key' !~ '^[A-Za-z0-9._:/-]+$' OR length(x ->> 'key') > 256
               OR x ->> 'key' = ANY (keys) THEN
                RETURN f || '.key';
            END IF;
            keys := keys || (x ->> 'key');
            IF lease._int(x -> 'expected_revision') IS NULL
               OR lease._int(x -> 'expected_revision') < 0 THEN
                RETURN f || '.expected_revision';
            END IF;
            IF jsonb_typeof(x -> 'body') IS DISTINCT FROM 'object' THEN
                RETURN f || '.body';
            END IF;
        ELSIF x ->> 'kind' = 'publication' THEN
            FOR k IN SELECT jsonb_object_keys(x) LOOP
                IF NOT k = ANY (ARRAY['kind', 'topic', 'payload']) THEN
                    RETURN f || '.' || k;
                END IF;
            END LOOP;
            IF jsonb_typeof(x -> 'topic') IS DISTINCT FROM 'string'
               OR x ->> 'topic' !~ '^[A-Za-z0-9._:/-]+$' OR length(x ->> 'topic') > 255 THEN
                RETURN f || '.topic';
            END IF;
            IF jsonb_typeof(x -> 'payload') IS DISTINCT FROM 'object' THEN
                RETURN f || '.payload';
            END IF;
        ELSE
            RETURN f || '.kind';
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;

-- 2. Quarantine ------------------------------------------------------------

ALTER TABLE lease.outbox
    ADD COLUMN quarantined_at timestamptz,
    ADD COLUMN quarantine_reason text CHECK (length(quarantine_reason) <= 512);

COMMENT ON COLUMN lease.outbox.quarantined_at IS
    'set aside by the relay: its destination refused it for a reason retrying cannot fix';

-- As 0012, without quarantined rows: they are neither claimed nor hold back
-- their identity.
CREATE OR REPLACE FUNCTION lease.outbox_claim(batch_size integer DEFAULT 100)
RETURNS TABLE (outbox_id bigint, lock_identity jsonb, topic text, payload jsonb,
               fencing_token bigint, lease_id text, execution_id text, trace_id text,
               created_at timestamptz, attempts integer)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    r record;
    mine text[] := ARRAY[]::text[];
    blocked text[] := ARRAY[]::text[];
    claimed integer := 0;
    scanned integer := 0;
BEGIN
    PERFORM lease._require_read_committed();
    IF batch_size IS NULL OR batch_size NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'batch_size must be between 1 and 10000' USING ERRCODE = '22023';
    END IF;
    FOR r IN SELECT o.outbox_id AS id, o.lock_key AS k, o.next_attempt_at AS not_before
               FROM lease.outbox o
              WHERE o.published_at IS NULL AND o.quarantined_at IS NULL
              ORDER BY o.outbox_id LOOP
        scanned := scanned + 1;
        EXIT WHEN claimed >= batch_size OR scanned > 20 * batch_size;
        CONTINUE WHEN r.k = ANY (blocked);
        IF r.not_before > now() THEN
            blocked := blocked || r.k;  -- later rows of this identity wait behind it
            CONTINUE;
        END IF;
        IF NOT r.k = ANY (mine) THEN
            IF NOT lease._relay_identity_lock(r.k) THEN
                blocked := blocked || r.k;  -- another relay delivers this identity
                CONTINUE;
            END IF;
            mine := mine || r.k;
        END IF;
        -- the row itself, re-read under its lock: it may have been published
        -- (or quarantined) since the scan began
        RETURN QUERY
            SELECT o.outbox_id,
                   lease._identity_json(l.tenant_id, l.program_id, l.target_namespace,
                                        l.target_id, l.actor_name, l.workflow_name,
                                        l.operation_class),
                   o.topic, o.payload, o.fencing_token, o.lease_id, o.execution_id, o.trace_id,
                   o.created_at, o.attempts
              FROM lease.outbox o
              JOIN lease.locks l ON l.lock_key = o.lock_key
             WHERE o.outbox_id = r.id AND o.published_at IS NULL AND o.quarantined_at IS NULL
               FOR UPDATE OF o SKIP LOCKED;
        IF NOT FOUND THEN
            blocked := blocked || r.k;  -- never claim past a row this claim did not take
            CONTINUE;
        END IF;
        claimed := claimed + 1;
    END LOOP;
END
$$;

-- 3. Claims ----------------------------------------------------------------

-- Refuses unless this transaction holds every row of ids: locked by its
-- outbox_claim (xmax) or already changed by it after the claim (xmin). The
-- relay role can neither lock nor write outbox rows any other way.
CREATE FUNCTION lease._outbox_require_claimed(ids bigint[]) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    me xid := pg_catalog.xid(pg_current_xact_id_if_assigned());
    bad bigint;
BEGIN
    SELECT i INTO bad
      FROM unnest(ids) AS i
      LEFT JOIN lease.outbox o ON o.outbox_id = i
     WHERE i IS NULL OR me IS NULL OR o.outbox_id IS NULL OR NOT (o.xmax = me OR o.xmin = me)
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'outbox row % is not claimed by this transaction', bad
            USING ERRCODE = '42501',
                  HINT = 'claim rows with lease.outbox_claim in the same transaction first';
    END IF;
END
$$;

-- As 0012, for claimed rows only.
CREATE OR REPLACE FUNCTION lease.outbox_mark_published(outbox_ids bigint[], relay_instance text)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n integer;
BEGIN
    PERFORM lease._require_read_committed();
    PERFORM lease._relay_text(relay_instance, 'relay_instance', 128);
    PERFORM lease._outbox_require_claimed(outbox_ids);
    UPDATE lease.outbox o
       SET published_at = lease._now(), published_by = relay_instance, last_error = NULL
     WHERE o.outbox_id = ANY (outbox_ids) AND o.published_at IS NULL;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

CREATE OR REPLACE FUNCTION lease.outbox_mark_refused(outbox_id bigint, relay_instance text,
                                                     reason text)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    n integer;
BEGIN
    PERFORM lease._require_read_committed();
    PERFORM lease._relay_text(relay_instance, 'relay_instance', 128);
    PERFORM lease._relay_text(reason, 'reason', 400);
    PERFORM lease._outbox_require_claimed(ARRAY[outbox_id]);
    UPDATE lease.outbox o
       SET published_at = lease._now(), published_by = relay_instance,
           last_error = 'refused: ' || reason
     WHERE o.outbox_id = outbox_id AND o.published_at IS NULL;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

CREATE OR REPLACE FUNCTION lease.outbox_defer(outbox_id bigint, delay_ms integer, error text)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    n integer;
BEGIN
    PERFORM lease._require_read_committed();
    PERFORM lease._relay_text(error, 'error', 512);
    IF delay_ms IS NULL OR delay_ms NOT BETWEEN 0 AND 86400000 THEN
        RAISE EXCEPTION 'delay_ms must be between 0 and 86400000' USING ERRCODE = '22023';
    END IF;
    PERFORM lease._outbox_require_claimed(ARRAY[outbox_id]);
    UPDATE lease.outbox o
       SET attempts = o.attempts + 1, last_error = error,
           next_attempt_at = clock_timestamp() + lease._ms(delay_ms)
     WHERE o.outbox_id = outbox_id AND o.published_at IS NULL;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- The audit event of a quarantine decision about one outbox row, with the
-- row's identity, lease and token.
CREATE FUNCTION lease._outbox_audit(id bigint, principal jsonb, result_code text, decision text,
                                    reason text)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    o lease.outbox;
    l lease.locks;
BEGIN
    SELECT * INTO o FROM lease.outbox x WHERE x.outbox_id = id;
    SELECT * INTO l FROM lease.locks x WHERE x.lock_key = o.lock_key;
    PERFORM lease._audit(jsonb_build_object('principal', principal), 'target_lease_quarantine',
                         result_code,
                         jsonb_build_object(
                             'decision', decision, 'priority', 'high',
                             'lock_identity', lease._identity_json(
                                 l.tenant_id, l.program_id, l.target_namespace, l.target_id,
                                 l.actor_name, l.workflow_name, l.operation_class),
                             'lease_id', o.lease_id, 'fencing_token', o.fencing_token,
                             'execution_id', o.execution_id, 'trace_id', o.trace_id,
                             'reason', left('outbox row ' || id || ' (topic ' || o.topic || '): '
                                            || reason, 512)));
END
$$;

-- The relay sets a claimed row aside: its destination refused it for a
-- reason retrying cannot fix. Returns 1, or 0 for a row already finished.
CREATE FUNCTION lease.outbox_quarantine(outbox_id bigint, relay_instance text, reason text)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    n integer;
BEGIN
    PERFORM lease._require_read_committed();
    PERFORM lease._relay_text(relay_instance, 'relay_instance', 128);
    PERFORM lease._relay_text(reason, 'reason', 400);
    PERFORM lease._outbox_require_claimed(ARRAY[outbox_id]);
    UPDATE lease.outbox o
       SET quarantined_at = lease._now(), quarantine_reason = reason,
           last_error = 'quarantined: ' || reason, attempts = o.attempts + 1,
           next_attempt_at = NULL
     WHERE o.outbox_id = outbox_id AND o.published_at IS NULL AND o.quarantined_at IS NULL;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        PERFORM lease._outbox_audit(outbox_id,
                                    jsonb_build_object('principal_id', left('relay:' || relay_instance, 128),
                                                       'principal_class', 'relay',
                                                       'credential_id', ''),
                                    'outbox_quarantined', 'error', reason);
    END IF;
    RETURN n;
END
$$;

-- Operators: deliver a quarantined row again (after fixing the broker's
-- limit, the route or the CouchDB database). It is claimed like a new row,
-- after the later rows of its identity that went out meanwhile.
CREATE FUNCTION lease.outbox_requeue(outbox_id bigint, reason text) RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    n integer;
BEGIN
    PERFORM lease._relay_text(reason, 'reason', 400);
    UPDATE lease.outbox o
       SET quarantined_at = NULL, next_attempt_at = NULL, last_error = 'requeued: ' || reason
     WHERE o.outbox_id = outbox_id AND o.published_at IS NULL AND o.quarantined_at IS NOT NULL;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        PERFORM lease._outbox_audit(outbox_id, lease._sql_principal(), 'outbox_requeued', 'allow',
                                    reason);
    END IF;
    RETURN n;
END
$$;

-- As 0012 (any unpublished row, quarantined or not), now audited.
CREATE OR REPLACE FUNCTION lease.outbox_discard(outbox_id bigint, reason text) RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    n integer;
BEGIN
    PERFORM lease._relay_text(reason, 'reason', 400);
    UPDATE lease.outbox o
       SET published_at = lease._now(), published_by = left('operator:' || session_user, 128),
           last_error = 'discarded: ' || reason
     WHERE o.outbox_id = outbox_id AND o.published_at IS NULL;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        PERFORM lease._outbox_audit(outbox_id, lease._sql_principal(), 'outbox_discarded', 'allow',
                                    reason);
    END IF;
    RETURN n;
END
$$;

-- As 0012: the lag of what is still to be delivered. Quarantined rows wait
-- for an operator, not for a relay; they are counted apart
-- (lease.outbox_backlog, the relay's leased_relay_quarantined_total).
CREATE OR REPLACE FUNCTION lease.outbox_lag()
RETURNS TABLE (unpublished bigint, deferred bigint, oldest_created_at timestamptz,
               lag_seconds double precision)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT count(*), count(*) FILTER (WHERE o.next_attempt_at > now()), min(o.created_at),
           coalesce(extract(epoch FROM clock_timestamp() - min(o.created_at)), 0)::double precision
      FROM lease.outbox o
     WHERE o.published_at IS NULL AND o.quarantined_at IS NULL;
END;

-- The backlog view gains the quarantine (appended columns).
CREATE OR REPLACE VIEW lease.outbox_backlog AS
SELECT o.outbox_id, o.topic, o.fencing_token, o.lease_id, o.execution_id, o.trace_id,
       jsonb_build_object('tenant_id', l.tenant_id, 'program_id', l.program_id,
                          'target_namespace', l.target_namespace, 'target_id', l.target_id,
                          'actor_name', l.actor_name, 'workflow_name', l.workflow_name,
                          'operation_class', l.operation_class) AS lock_identity,
       o.created_at, o.attempts, o.next_attempt_at, o.last_error, o.quarantined_at,
       o.quarantine_reason
  FROM lease.outbox o
  JOIN lease.locks l ON l.lock_key = o.lock_key
 WHERE o.published_at IS NULL;

-- 4. Audit ------------------------------------------------------------------

-- Audit reasons are free text shown to people: C0 and C1 controls (CR, LF,
-- U+0085 ...), DEL, line and paragraph separators (U+2028, U+2029) and
-- bidirectional formatting (U+200E, U+200F, U+202A..U+202E, U+2066..U+2069)
-- become U+FFFD, on every path that writes an audit row (accepted calls,
-- refused ones, the service's batches). The trigger runs only when the WHEN
-- clause finds such a character: events without a reason cost nothing.
CREATE FUNCTION lease._audit_clean(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN regexp_replace(t, '[\u0001-\u001f\u007f-\u009f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]',
                      E'\uFFFD', 'g');

CREATE FUNCTION lease._audit_reason_clean() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    NEW.reason := lease._audit_clean(NEW.reason);
    RETURN NEW;
END
$$;

CREATE TRIGGER audit_reason_clean
    BEFORE INSERT ON lease.audit_events
    FOR EACH ROW
    WHEN (NEW.reason ~ '[\u0001-\u001f\u007f-\u009f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]')
    EXECUTE FUNCTION lease._audit_reason_clean();

-- As 0014, with three rules for what the service may claim:
-- - occurred_at is the backend's now(), whatever the event says;
-- - principal_class is the credential's ('admin' or 'worker') when
--   credential_id and principal_id name one credential, else NULL;
-- - administrator event types: recover, quarantine, alert and credential
--   events only come from SQL; force_release and revoke events are refusals
--   (deny, error), or an "allow" (a replayed call) naming a lease that this
--   principal really ended that way.
CREATE OR REPLACE FUNCTION lease.record_audit(events jsonb) RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n integer;
    forged text;
BEGIN
    PERFORM lease._require_serializable();
    IF jsonb_typeof(events) IS DISTINCT FROM 'array' THEN
        PERFORM lease._malformed('events is not an array');
    END IF;
    SELECT e.event_type INTO forged
      FROM jsonb_to_recordset(events) AS e(event_type text, decision text, principal_id text,
                                           lease_id text)
     WHERE e.event_type IN ('target_lease_recover', 'target_lease_quarantine',
                            'target_lease_alert', 'credential_create', 'credential_revoke')
        OR (e.event_type IN ('target_lease_force_release', 'target_lease_revoke')
            AND e.decision IS DISTINCT FROM 'deny' AND e.decision IS DISTINCT FROM 'error'
            AND NOT EXISTS (
                SELECT 1 FROM lease.history h
                 WHERE h.lease_id = e.lease_id AND h.ended_by_principal_id = e.principal_id
                   AND h.state = CASE e.event_type WHEN 'target_lease_revoke' THEN 'revoked'
                                                   ELSE 'released' END))
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'the service may not record % events it cannot back', forged
            USING ERRCODE = '42501',
                  HINT = 'administrator events are written by the operations themselves';
    END IF;
    INSERT INTO lease.audit_events (
        occurred_at, latency_ms, event_type, priority, decision, result_code, retryable,
        backend_health, request_id, correlation_id, trace_id, execution_id, job_id,
        principal_class, principal_id, credential_id, service_instance_id, tenant_id, program_id,
        target_namespace, target_id, actor_name, workflow_name, operation_class, lease_id,
        fencing_token, requested_ttl_ms, effective_ttl_ms, deadline_class, previous_state,
        resulting_state, reason, incident_id, event_count, source_address)
    SELECT now(), e.latency_ms, e.event_type,
           coalesce(e.priority, 'normal'), e.decision, left(e.result_code, 64),
           coalesce(e.retryable, false), coalesce(e.backend_health, 'ok'),
           left(e.request_id, 128), left(e.correlation_id, 64), left(e.trace_id, 128),
           left(e.execution_id, 128), left(e.job_id, 128),
           (SELECT CASE WHEN c.admin THEN 'admin' ELSE 'worker' END
              FROM lease.credentials c
             WHERE c.credential_id = e.credential_id AND c.principal_id = e.principal_id),
           left(e.principal_id, 128), left(e.credential_id, 128), left(e.service_instance_id, 128),
           left(e.tenant_id, 64), left(e.program_id, 64), left(e.target_namespace, 64),
           left(e.target_id, 128), left(e.actor_name, 64), left(e.workflow_name, 64),
           left(e.operation_class, 16), left(e.lease_id, 128), e.fencing_token,
           e.requested_ttl_ms, e.effective_ttl_ms, left(e.deadline_class, 16),
           left(e.previous_state, 16), left(e.resulting_state, 16), left(e.reason, 512),
           left(e.incident_id, 128), greatest(coalesce(e.event_count, 1), 1),
           left(e.source_address, 64)
      FROM jsonb_to_recordset(events) AS e(
        latency_ms integer, event_type text, priority text,
        decision text, result_code text, retryable boolean, backend_health text,
        request_id text, correlation_id text, trace_id text, execution_id text, job_id text,
        principal_id text, credential_id text, service_instance_id text,
        tenant_id text, program_id text, target_namespace text, target_id text,
        actor_name text, workflow_name text, operation_class text, lease_id text,
        fencing_token bigint, requested_ttl_ms bigint, effective_ttl_ms bigint,
        deadline_class text, previous_state text, resulting_state text, reason text,
        incident_id text, event_count integer, source_address text);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- Privileges ------------------------------------------------------------------
REVOKE EXECUTE ON FUNCTION lease._outbox_require_claimed(bigint[]),
    lease._outbox_audit(bigint, jsonb, text, text, text),
    lease.outbox_quarantine(bigint, text, text), lease.outbox_requeue(bigint, text),
    lease._audit_clean(text), lease._audit_reason_clean()
FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.outbox_quarantine(bigint, text, text) TO lease_relay;
GRANT EXECUTE ON FUNCTION lease.outbox_requeue(bigint, text) TO lease_admin;
