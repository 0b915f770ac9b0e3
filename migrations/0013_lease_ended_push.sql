-- 0013: telling holders at once that their lease ended (GET /v1/leases/{id}/watch).
--
-- Two feeds, both read by leased's watch hub (docs/scaling.md, "Push"):
--
-- 1. NOTIFY lease_ended, payload = the lease id, sent by a trigger on
--    lease.history in the very transaction that ended the lease (every ended
--    lease lands there: force-release, revoke, sweep expiry, acquisition over
--    an expired lease, epoch recovery, and ordinary release). The listener
--    hears it only after that transaction committed.
--
--    Only ends the holder did not ask for itself notify: ordinary release
--    (state 'released' without an administrator's reason) does not. Every
--    transaction that notifies takes a database-wide lock on the notification
--    queue from the NOTIFY to the end of its commit (WAL flush included), so
--    commits that notify run one at a time; notifying on every release would
--    put that serialization on the hot path of every lease cycle. Measured at
--    16 clients with fsync on (docs/scaling.md has the table). A release by
--    another process of the same holder is caught by the polling fallback
--    below within LEASE_WATCH_POLL_MS.
--
-- 2. lease.watch_ended(ids): the batched poll leased runs every
--    LEASE_WATCH_POLL_MS for all the leases it has watchers for, when LISTEN
--    is unavailable (PgBouncer in transaction mode, a reconnecting listener)
--    and for the ends that send no notification.

CREATE FUNCTION lease._notify_lease_ended() RETURNS trigger
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    PERFORM pg_notify('lease_ended', NEW.lease_id);
    RETURN NULL;
END
$$;

CREATE TRIGGER history_notify_ended
    AFTER INSERT ON lease.history
    FOR EACH ROW
    WHEN (NEW.state <> 'released' OR NEW.end_reason IS NOT NULL)
    EXECUTE FUNCTION lease._notify_lease_ended();

-- The listed lease ids that are not active now (ended, expired at backend
-- time, or unknown), as a jsonb array. Read-only, by primary keys only; safe
-- at READ COMMITTED (a terminal state never turns active again, so a lease
-- reported here has ended for good; one reported active may end a moment
-- later and is caught by the next poll).
CREATE FUNCTION lease.watch_ended(ids text[]) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ended jsonb;
BEGIN
    IF ids IS NULL OR cardinality(ids) > 100000 THEN
        RAISE EXCEPTION 'ids must be an array of at most 100000 lease ids' USING ERRCODE = '22023';
    END IF;
    SELECT coalesce(jsonb_agg(x.id ORDER BY x.id), '[]'::jsonb) INTO ended
      FROM (SELECT DISTINCT u.id FROM unnest(ids) u(id)) x
     WHERE NOT EXISTS (
            SELECT 1
              FROM lease.lease_index li
              JOIN lease.locks l ON l.lock_key = li.lock_key
             WHERE li.lease_id = x.id AND l.lease_id = x.id
               AND l.state = 'active' AND l.expires_at > now());
    RETURN ended;
END
$$;

REVOKE EXECUTE ON FUNCTION lease._notify_lease_ended() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION lease.watch_ended(text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.watch_ended(text[]) TO lease_service;
