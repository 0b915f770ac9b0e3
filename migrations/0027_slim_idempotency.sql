-- 0027: an idempotency record is a narrow row that links to the audit
-- event of its request (issue 40, "Bytes per operation measured and
-- halved"; docs/scaling.md, "Bytes per mutation").
--
-- lease.idempotency (schema 26 and before) kept the whole stored answer
-- (about 458 bytes of jsonb) under a four-column primary key (lock key,
-- operation, owner principal, request id: about 171 bytes an entry): 938
-- bytes a mutation with its indexes, beside the audit event's 414.
-- lease.idempotency_keys keeps only what a replay cannot find elsewhere:
--   request_key    the MD5 of the four key columns as a uuid
--                  (lease._request_key), the primary key; its constraint is
--                  still named idempotency_pkey, the name the deciders'
--                  unique_violation handlers recognise a repeat by;
--   expires_at     when the purge may delete it (its B-tree is the purge's
--                  order: lease.purge_due);
--   event_id       the audit event of the same request
--                  (lease.audit_events' primary key);
--   brief          whether the answer was the brief one (the service's) or
--                  the whole record (psql's lease.acquire, renew, ...);
--   request_digest the request's SHA-256, to tell a repeat from a conflict;
--   answer         the stored answer, only where the audit event and the
--                  lease cannot rebuild it: a fenced commit's (its
--                  document revisions and outbox ids), and the rows this
--                  migration carries over. NULL for every lease operation.
-- The replay answer is rebuilt from the audit event (code, lease id,
-- fencing token, effective TTL, time, and for a renewal the new column
-- lease_acquired_at) and the lease itself (lease.locks
-- while it is the row's lease, lease.history after: acquired at, maximum
-- lifetime, owner, metadata, ...; both outlive the idempotency record:
-- history_retention_ms >= idempotency_retention_ms and audit_retention_ms
-- >= history_retention_ms are the policy's CHECKs) by lease._replay_answer.
-- lease.idempotency is now a view over the two with the columns it had
-- (lease._replay_answer's answer as result), for operators and tests.
--
-- The rows of the old table move over with their stored answer (answer),
-- each linked to its request's audit event where one matches (request id,
-- principal, operation and lease id; none: event_id NULL, and the view
-- shows only what the row holds).

-- A renewal's audit event records when its lease was acquired (the one
-- value of a renewal's answer that neither the event nor the renewal's
-- time gives; NULL for every other event).
ALTER TABLE lease.audit_events ADD COLUMN lease_acquired_at timestamptz;
ALTER TABLE lease.audit_events ALTER COLUMN lease_acquired_at SET STATISTICS 10;
COMMENT ON COLUMN lease.audit_events.lease_acquired_at IS
    'A renewal''s event: when the renewed lease was acquired (its replay answer is rebuilt from this event, lease._replay_answer). NULL for other events.';

ALTER TABLE lease.idempotency RENAME CONSTRAINT idempotency_pkey TO idempotency_pkey_26;
ALTER INDEX lease.idempotency_expires_at RENAME TO idempotency_expires_at_26;

CREATE TABLE lease.idempotency_keys (
    request_key uuid NOT NULL,
    expires_at timestamptz NOT NULL,
    event_id bigint,
    brief boolean NOT NULL,
    request_digest bytea NOT NULL,
    answer jsonb,
    CONSTRAINT idempotency_pkey PRIMARY KEY (request_key)
);
CREATE INDEX idempotency_keys_expires_at ON lease.idempotency_keys (expires_at);
REVOKE ALL ON TABLE lease.idempotency_keys FROM PUBLIC;

COMMENT ON TABLE lease.idempotency_keys IS
    'One narrow row per state-changing request (migration 0027): its key''s hash, digest, expiry and the audit event it links to; the answer is rebuilt from that event and the lease (lease._replay_answer). Read it through the view lease.idempotency.';

INSERT INTO lease.idempotency_keys (request_key, expires_at, event_id, brief, request_digest,
                                    answer)
SELECT md5(i.lock_key || i.operation || length(i.owner_principal_id) || ':'
           || i.owner_principal_id || i.request_id)::uuid,
       i.expires_at,
       (SELECT max(a.event_id) FROM lease.audit_events a
         WHERE a.request_id = i.request_id AND a.principal_id = i.owner_principal_id
           AND a.event_type = 'target_lease_' || i.operation
           AND a.lease_id IS NOT DISTINCT FROM i.lease_id),
       NOT (i.result -> 'lease' ? 'lock_identity'), i.request_digest, i.result
  FROM lease.idempotency i;

DROP TABLE lease.idempotency;

-- statistics target 10 on every column, as 0023 set for the table it replaces
DO $$
DECLARE
    c name;
BEGIN
    FOR c IN SELECT attname FROM pg_attribute
              WHERE attrelid = 'lease.idempotency_keys'::regclass AND attnum > 0
                AND NOT attisdropped LOOP
        EXECUTE format('ALTER TABLE lease.idempotency_keys ALTER COLUMN %I SET STATISTICS 10', c);
    END LOOP;
END
$$;
