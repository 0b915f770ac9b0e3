-- 0008: the namespace guard. A database that is not the one the namespace
-- was recorded on never decides an acquisition, renewal or fenced commit.
--
-- Why (measured, issue 8): lease.check_namespace ran only at start and once
-- per sweep, and compared the timeline of the last *checkpoint*. A promoted
-- replica reports the old checkpoint's timeline until its first checkpoint
-- after promotion completes, and between sweeps it handed out fencing tokens
-- that had already been acknowledged on the lost primary. Now every deciding
-- call compares, before it decides (lease._namespace_refusal):
--   - the WAL *insert* timeline (pg_walfile_name(pg_current_wal_lsn()), any
--     role may call both), which changes the moment a standby is promoted or
--     a point-in-time restore ends;
--   - the system identifier (pg_control_system(), where permitted), which
--     changes when the database is restored onto another cluster;
--   - the object id of lease.namespace_state itself, which changes when the
--     schema is recreated from a logical dump: this works even where a
--     provider forbids the pg_control_* functions.
-- The sweeper (lease.check_namespace) also compares the WAL insert
-- position with the highest one leased saw on the same timeline: it never
-- moves backwards on one database, so an older copy restored on the same
-- timeline (a disk snapshot, a base backup started without archive
-- recovery) is sealed within one sweep interval while leased keeps running.
-- leased keeps that position in memory, not in the database: a copy of the
-- database carries its own older record, and would compare with itself.
-- Cost per deciding call: a few microseconds (docs/benchmarks.md).

ALTER TABLE lease.namespace_state ADD COLUMN relation_oid oid;

-- The timeline new WAL is written on. Unlike pg_control_checkpoint(), it
-- changes at the moment of promotion. Raises during recovery (a standby
-- decides nothing anyway).
CREATE FUNCTION lease._insert_timeline() RETURNS integer
LANGUAGE sql VOLATILE
RETURN ('x' || left(pg_walfile_name(pg_current_wal_lsn()), 8))::bit(32)::integer;

-- Whether this cluster's system identifier may be read here (managed
-- Postgres services may revoke pg_control_system from the migration owner).
CREATE FUNCTION lease._system_identifier() RETURNS numeric
LANGUAGE sql STABLE
RETURN CASE WHEN has_function_privilege('pg_catalog.pg_control_system()', 'EXECUTE')
            THEN (pg_control_system()).system_identifier END;

-- Why this database may not decide for the namespace recorded in ns, or
-- NULL when it may. A component recorded as NULL is not compared (not
-- recorded yet, or not readable when it was recorded). Pure: records and
-- seals nothing.
CREATE FUNCTION lease._namespace_mismatch(ns lease.namespace_state, seal_on_timeline_change boolean)
RETURNS text
LANGUAGE sql VOLATILE
RETURN CASE
    WHEN ns.relation_oid IS NOT NULL AND ns.relation_oid <> 'lease.namespace_state'::regclass::oid
        THEN 'the lease schema was recreated (restored from a logical dump)'
    WHEN ns.system_identifier IS NOT NULL
         AND ns.system_identifier <> (pg_control_system()).system_identifier
        THEN 'database restored onto another cluster (system identifier changed)'
    WHEN seal_on_timeline_change AND ns.timeline_id IS NOT NULL
         AND ns.timeline_id <> lease._insert_timeline()
        THEN 'timeline changed from ' || ns.timeline_id || ' to ' || lease._insert_timeline()
             || ' (failover or point-in-time restore)'
    END;

-- Records this database as the namespace's (first use, or after recovery).
CREATE FUNCTION lease._record_namespace() RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    UPDATE lease.namespace_state
       SET system_identifier = lease._system_identifier(),
           timeline_id = lease._insert_timeline(),
           relation_oid = 'lease.namespace_state'::regclass::oid,
           checked_at = lease._now();
END
$$;

-- Seals the namespace for `why` (once) with a high-priority audit event.
CREATE FUNCTION lease._seal(why text) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    UPDATE lease.namespace_state
       SET sealed = true, sealed_reason = left(why, 512), sealed_at = lease._now(),
           checked_at = lease._now()
     WHERE NOT sealed;
    IF FOUND THEN
        PERFORM lease._audit(jsonb_build_object('principal', lease._sql_principal()),
                             'target_lease_alert', 'lease_backend_unavailable',
                             jsonb_build_object('decision', 'error', 'priority', 'high',
                                                'reason', left('namespace sealed: ' || why, 512)));
    END IF;
END
$$;

-- The guard every deciding operation runs before it decides: NULL when this
-- database may decide, else the reason it may not (the namespace is then
-- sealed, in this transaction, which commits with the caller's refusal).
-- Callers read ns and pol in their own first statement and call this only
-- when ns.sealed or lease._namespace_mismatch says something; the common
-- case costs one inlined expression.
CREATE FUNCTION lease._namespace_refusal(ns lease.namespace_state, pol lease.policy) RETURNS text
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    why text;
BEGIN
    IF ns.sealed THEN
        RETURN ns.sealed_reason;
    END IF;
    why := lease._namespace_mismatch(ns, pol.seal_on_timeline_change);
    IF why IS NULL THEN
        IF ns.timeline_id IS NULL THEN
            PERFORM lease._record_namespace();  -- first deciding call of a new namespace
        END IF;
        RETURN NULL;
    END IF;
    PERFORM lease._seal(why);
    RETURN why;
END
$$;

-- The guard as deciding operations call it: NULL when this database may
-- decide (recording the namespace if it was not yet), else why not (the
-- namespace is then sealed, in the caller's transaction).
CREATE FUNCTION lease._guard() RETURNS text
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    ns lease.namespace_state;
    pol lease.policy;
BEGIN
    SELECT * INTO ns FROM lease.namespace_state;
    SELECT * INTO pol FROM lease.policy;
    RETURN lease._namespace_refusal(ns, pol);
END
$$;

-- The refusal a deciding operation returns while the namespace is sealed.
CREATE FUNCTION lease._sealed_result(why text) RETURNS jsonb
LANGUAGE sql STABLE
RETURN jsonb_build_object('code', 'lease_backend_unavailable', 'reason', 'sealed',
                          'detail', why);

-- The sweeper's check: the deciding calls' guard, plus the WAL insert
-- position, which never moves backwards on one timeline of one database:
-- seen_timeline and seen_wal_lsn are the highest position the caller (leased)
-- saw before, in recovery epoch seen_epoch; a lower one now, on the same
-- timeline and in the same epoch, means an older copy of the database was
-- restored (after lease.recover_epoch the position starts over). Answers
-- the epoch and position now for the caller to keep.
-- Writes lease.namespace_state only when it records the first identity or
-- seals, so it does not conflict with lease operations.
CREATE FUNCTION lease.check_namespace(seen_epoch integer, seen_timeline integer,
                                      seen_wal_lsn pg_lsn) RETURNS jsonb
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ns lease.namespace_state;
    pol lease.policy;
    recorded boolean := false;
BEGIN
    PERFORM lease._require_serializable();
    SELECT * INTO ns FROM lease.namespace_state;
    SELECT * INTO pol FROM lease.policy;
    IF NOT ns.sealed AND seen_epoch = ns.epoch AND seen_timeline = lease._insert_timeline()
       AND pg_current_wal_lsn() < seen_wal_lsn THEN
        PERFORM lease._seal('the WAL insert position ' || pg_current_wal_lsn()
                            || ' is behind the ' || seen_wal_lsn
                            || ' seen on the same timeline (an older copy of the database was restored)');
    ELSIF NOT ns.sealed AND ns.timeline_id IS NULL THEN
        PERFORM lease._record_namespace();
        recorded := true;
    ELSE
        PERFORM lease._namespace_refusal(ns, pol);
    END IF;
    SELECT * INTO ns FROM lease.namespace_state;
    RETURN jsonb_build_object('checked', true, 'sealed', ns.sealed, 'sealed_reason',
                              ns.sealed_reason, 'epoch', ns.epoch,
                              'timeline', lease._insert_timeline(),
                              'wal_lsn', pg_current_wal_lsn()::text)
           || CASE WHEN recorded THEN '{"recorded": true}'::jsonb ELSE '{}'::jsonb END;
END
$$;

-- The same without a position to compare (psql, operators).
CREATE OR REPLACE FUNCTION lease.check_namespace() RETURNS jsonb
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN lease.check_namespace(NULL, NULL, NULL);
END
$$;

-- Readiness: what lease.health() reported, plus whether this database is the
-- namespace's right now (computed, so readiness says "sealed" from the first
-- probe after a failover, before any call or sweep has recorded the seal).
CREATE OR REPLACE FUNCTION lease.health() RETURNS jsonb
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

-- Disaster recovery (unchanged rules, see 0006): also records this database
-- (insert timeline, system identifier, schema object id, WAL position) as
-- the namespace's.
CREATE OR REPLACE FUNCTION lease.recover_epoch(reason text, floor bigint DEFAULT NULL) RETURNS jsonb
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

    UPDATE lease.namespace_state
       SET epoch = epoch + 1, sealed = false, sealed_reason = NULL, sealed_at = NULL;
    PERFORM lease._record_namespace();
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

-- Record the namespace on the database being migrated (an existing
-- namespace keeps its recorded identity: migrating must not hide a restore).
UPDATE lease.namespace_state SET relation_oid = 'lease.namespace_state'::regclass::oid;
DO $$
BEGIN
    IF (SELECT timeline_id IS NULL FROM lease.namespace_state) AND NOT pg_is_in_recovery() THEN
        PERFORM lease._record_namespace();
    END IF;
END
$$;

REVOKE ALL ON FUNCTION lease.check_namespace(integer, integer, pg_lsn) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.check_namespace(integer, integer, pg_lsn) TO lease_service, lease_admin;

-- Helpers are internal: nothing in this schema is executable by PUBLIC
-- (a per-schema default privilege cannot revoke the global default).
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA lease FROM PUBLIC;
