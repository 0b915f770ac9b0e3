CREATE OR REPLACE FUNCTION lease.outbox_claim(batch_size integer DEFAULT 100)
 RETURNS TABLE(outbox_id bigint, lock_identity jsonb, topic text, payload jsonb, fencing_token bigint, lease_id text, execution_id text, trace_id text, created_at timestamp with time zone, attempts integer)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;

COMMENT ON FUNCTION lease.outbox_claim(integer) IS
    'The relay claims up to batch deliverable rows (READ COMMITTED, FOR UPDATE SKIP LOCKED), at most one identity per relay at a time and in order within an identity; quarantined rows are neither claimed nor hold back their identity.';

REVOKE ALL ON FUNCTION lease.outbox_claim(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.outbox_claim(integer) TO lease_relay;
