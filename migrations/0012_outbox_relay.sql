-- 0012: the database side of the outbox relay (leased-relay, docs/relay.md).
--
-- lease.fenced_commit writes publications to lease.outbox in the fenced
-- transaction. A relay makes them visible (RabbitMQ, CouchDB) in a
-- transaction of its own, at READ COMMITTED:
--
--   BEGIN;
--   SELECT * FROM lease.outbox_claim(500);             -- rows, locked
--   ... publish each row, wait for the broker's confirms ...
--   SELECT lease.outbox_mark_published(ARRAY[...], 'relay-1');
--   COMMIT;
--
-- A row is marked only after the destination confirmed it, so delivery is
-- at least once: a relay that dies mid-batch leaves its rows unpublished and
-- unlocked (the session ends, the transaction rolls back) and they are
-- delivered again.
--
-- Order per identity. Row locks with SKIP LOCKED alone let two relays split
-- one identity's rows (relay A holds rows 1 and 2, relay B skips them and
-- takes row 3): B could publish 3 before A publishes 1. So a claim first
-- takes a transaction advisory lock on the identity (try-lock, never
-- waiting): while a relay holds it, no other relay claims any row of that
-- identity, and it keeps it until its transaction ends, after its rows are
-- marked. Within one identity, rows are claimed in outbox_id order and a
-- claim stops at the first row it cannot take (locked, deferred for retry):
-- it never claims a later row of an identity whose earlier row stays
-- unpublished. Rows of one identity become visible in token order: a new
-- lease is granted only after every commit of the previous one finished
-- (a fenced commit holds the identity's row FOR SHARE, the acquisition
-- updates it), so all of a lower token's rows are visible, with lower ids,
-- before any row of a higher token exists. Concurrent commits of one lease
-- may become visible out of outbox_id order (ids are drawn before commit);
-- equal tokens carry no order between them.

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'lease_relay') THEN
        BEGIN
            CREATE ROLE lease_relay NOLOGIN;
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE EXCEPTION 'cannot create role lease_relay: the migrating user lacks CREATEROLE'
                USING HINT = 'Ask your provider''s administrator to run: CREATE ROLE lease_relay '
                             'NOLOGIN; then run leasectl migrate again.';
        END;
    END IF;
END
$$;
GRANT USAGE ON SCHEMA lease TO lease_relay;

-- Delivery bookkeeping. A row whose destination refused it for now (broker
-- returned or nacked it, CouchDB unreachable) waits until next_attempt_at;
-- the identity's later rows wait behind it.
ALTER TABLE lease.outbox
    ADD COLUMN attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    ADD COLUMN next_attempt_at timestamptz,
    ADD COLUMN last_error text CHECK (length(last_error) <= 512),
    ADD COLUMN published_by text CHECK (length(published_by) <= 128);

-- Published rows past retention are purged oldest first.
CREATE INDEX outbox_published ON lease.outbox (published_at) WHERE published_at IS NOT NULL;

-- The relay runs at READ COMMITTED: a row another relay published after this
-- transaction began is re-read under its lock instead of failing with 40001,
-- and the relay's reads add no predicate locks to the SERIALIZABLE commits
-- that insert outbox rows.
CREATE FUNCTION lease._require_read_committed() RETURNS void
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'outbox relay functions run at READ COMMITTED, not %',
                        current_setting('transaction_isolation')
            USING ERRCODE = 'LS020',
                  HINT = 'BEGIN ISOLATION LEVEL READ COMMITTED; then claim, publish, mark, COMMIT';
    END IF;
END
$$;

-- The relay's claim on one identity, held until the transaction ends. The
-- two-key form keeps these locks apart from the project's other advisory
-- locks (single bigint keys); a hash collision only makes two identities
-- share a relay, never splits one.
CREATE FUNCTION lease._relay_identity_lock(k text) RETURNS boolean
LANGUAGE sql VOLATILE
RETURN pg_try_advisory_xact_lock(1819042146, hashtext(k));

CREATE FUNCTION lease._relay_text(v text, what text, max_len integer) RETURNS text
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF v IS NULL OR length(v) NOT BETWEEN 1 AND max_len THEN
        RAISE EXCEPTION '% must be 1..% characters', what, max_len USING ERRCODE = '22023';
    END IF;
    RETURN v;
END
$$;

-- Claims up to batch_size unpublished rows in outbox_id order and locks them
-- (FOR UPDATE SKIP LOCKED) for the caller's transaction. Skips identities
-- another relay holds and identities whose oldest unpublished row waits for
-- a retry. Looks at most 20 * batch_size unpublished rows.
CREATE FUNCTION lease.outbox_claim(batch_size integer DEFAULT 100)
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
              WHERE o.published_at IS NULL
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
        -- since the scan began
        RETURN QUERY
            SELECT o.outbox_id,
                   lease._identity_json(l.tenant_id, l.program_id, l.target_namespace,
                                        l.target_id, l.actor_name, l.workflow_name,
                                        l.operation_class),
                   o.topic, o.payload, o.fencing_token, o.lease_id, o.execution_id, o.trace_id,
                   o.created_at, o.attempts
              FROM lease.outbox o
              JOIN lease.locks l ON l.lock_key = o.lock_key
             WHERE o.outbox_id = r.id AND o.published_at IS NULL
               FOR UPDATE OF o SKIP LOCKED;
        IF NOT FOUND THEN
            blocked := blocked || r.k;  -- never claim past a row this claim did not take
            CONTINUE;
        END IF;
        claimed := claimed + 1;
    END LOOP;
END
$$;

-- Marks rows the destination confirmed. Call it in the claiming transaction,
-- after the confirms, before COMMIT. Returns how many rows it marked (rows
-- already published are left as they are).
CREATE FUNCTION lease.outbox_mark_published(outbox_ids bigint[], relay_instance text)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n integer;
BEGIN
    PERFORM lease._require_read_committed();
    PERFORM lease._relay_text(relay_instance, 'relay_instance', 128);
    UPDATE lease.outbox o
       SET published_at = lease._now(), published_by = relay_instance, last_error = NULL
     WHERE o.outbox_id = ANY (outbox_ids) AND o.published_at IS NULL;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- A row whose destination refused it for good because the fence said so
-- (CouchDB's validate_doc_update: a higher token already wrote the
-- document). It is finished, like a published row, and says why.
CREATE FUNCTION lease.outbox_mark_refused(outbox_id bigint, relay_instance text, reason text)
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
    UPDATE lease.outbox o
       SET published_at = lease._now(), published_by = relay_instance,
           last_error = 'refused: ' || reason
     WHERE o.outbox_id = outbox_id AND o.published_at IS NULL;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- A row the destination could not take now: try again after delay_ms. The
-- identity's later rows wait behind it (order per identity).
CREATE FUNCTION lease.outbox_defer(outbox_id bigint, delay_ms integer, error text)
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
    UPDATE lease.outbox o
       SET attempts = o.attempts + 1, last_error = error,
           next_attempt_at = clock_timestamp() + lease._ms(delay_ms)
     WHERE o.outbox_id = outbox_id AND o.published_at IS NULL;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- Operators: give up on a row that can never be delivered (its identity's
-- later rows wait behind it). Recorded as published by "operator:<user>".
CREATE FUNCTION lease.outbox_discard(outbox_id bigint, reason text) RETURNS integer
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
    RETURN n;
END
$$;

-- How far behind delivery is: rows not yet published, how many of them wait
-- for a retry, and the age of the oldest.
CREATE FUNCTION lease.outbox_lag()
RETURNS TABLE (unpublished bigint, deferred bigint, oldest_created_at timestamptz,
               lag_seconds double precision)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT count(*), count(*) FILTER (WHERE o.next_attempt_at > now()), min(o.created_at),
           coalesce(extract(epoch FROM clock_timestamp() - min(o.created_at)), 0)::double precision
      FROM lease.outbox o
     WHERE o.published_at IS NULL;
END;

-- Deletes published rows older than retention_ms, at most batch of them.
CREATE FUNCTION lease.outbox_purge(retention_ms bigint, batch integer) RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n integer;
BEGIN
    IF retention_ms IS NULL OR retention_ms < 0 THEN
        RAISE EXCEPTION 'retention_ms must be >= 0' USING ERRCODE = '22023';
    END IF;
    IF batch IS NULL OR batch NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION 'batch must be between 1 and 100000' USING ERRCODE = '22023';
    END IF;
    DELETE FROM lease.outbox o
     WHERE o.outbox_id IN (SELECT p.outbox_id FROM lease.outbox p
                            WHERE p.published_at < now() - lease._ms(retention_ms)
                            ORDER BY p.published_at LIMIT batch
                              FOR UPDATE SKIP LOCKED);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- Message ids are outbox ids, and consumers drop a message id they have
-- seen. A restored database (or a promoted replica that missed commits)
-- hands out outbox ids again that the lost database had already published;
-- epoch recovery must run before it accepts commits (docs/operators.md), so
-- every epoch raise moves the outbox id sequence 2^40 further on, the way it
-- moves the fencing counters.
CREATE FUNCTION lease._outbox_ids_follow_epoch() RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    seq text := pg_get_serial_sequence('lease.outbox', 'outbox_id');
    last bigint;
BEGIN
    EXECUTE format('SELECT last_value FROM %s', seq) INTO last;
    PERFORM setval(seq::regclass, greatest(last, coalesce((SELECT max(o.outbox_id) FROM lease.outbox o), 0))
                        + (NEW.epoch - OLD.epoch) * 1099511627776);
    RETURN NEW;
END
$$;

CREATE TRIGGER outbox_ids_follow_epoch
    AFTER UPDATE OF epoch ON lease.namespace_state
    FOR EACH ROW WHEN (NEW.epoch > OLD.epoch)
    EXECUTE FUNCTION lease._outbox_ids_follow_epoch();

-- What operators look at: every row still to be delivered.
CREATE VIEW lease.outbox_backlog AS
SELECT o.outbox_id, o.topic, o.fencing_token, o.lease_id, o.execution_id, o.trace_id,
       jsonb_build_object('tenant_id', l.tenant_id, 'program_id', l.program_id,
                          'target_namespace', l.target_namespace, 'target_id', l.target_id,
                          'actor_name', l.actor_name, 'workflow_name', l.workflow_name,
                          'operation_class', l.operation_class) AS lock_identity,
       o.created_at, o.attempts, o.next_attempt_at, o.last_error
  FROM lease.outbox o
  JOIN lease.locks l ON l.lock_key = o.lock_key
 WHERE o.published_at IS NULL;

-- Privileges: the relay role executes its functions and nothing else.
REVOKE ALL ON lease.outbox_backlog FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION lease._require_read_committed(), lease._relay_identity_lock(text),
    lease._relay_text(text, text, integer), lease._outbox_ids_follow_epoch(),
    lease.outbox_claim(integer), lease.outbox_mark_published(bigint[], text),
    lease.outbox_mark_refused(bigint, text, text), lease.outbox_defer(bigint, integer, text),
    lease.outbox_discard(bigint, text), lease.outbox_lag(), lease.outbox_purge(bigint, integer)
FROM PUBLIC;

GRANT EXECUTE ON FUNCTION
    lease.outbox_claim(integer), lease.outbox_mark_published(bigint[], text),
    lease.outbox_mark_refused(bigint, text, text), lease.outbox_defer(bigint, integer, text),
    lease.outbox_lag(), lease.outbox_purge(bigint, integer)
TO lease_relay;
GRANT EXECUTE ON FUNCTION lease.outbox_lag() TO lease_operator;
GRANT SELECT ON lease.outbox_backlog TO lease_operator;
GRANT EXECUTE ON FUNCTION lease.outbox_discard(bigint, text), lease.outbox_purge(bigint, integer)
TO lease_admin;
