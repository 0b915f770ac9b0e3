-- lease.idempotency and lease.audit_events sample 3,000 rows when analysed,
-- not 30,000 (migration 0023): an ANALYZE's snapshot stops every pruning in
-- the database while it samples, and a renew-batch whose rows cannot be
-- pruned stops being HOT and fails other batches (docs/operators.md, "Long
-- transactions and batch renewals"). The sample is 300 x the largest
-- target among a table's columns, so every column counts, and a column a
-- later migration adds must set its own.
BEGIN;
SELECT plan(3);

SELECT is_empty(
    $$SELECT attrelid::regclass::text || '.' || attname FROM pg_attribute
       WHERE attrelid IN ('lease.idempotency_keys'::regclass, 'lease.audit_events'::regclass)
         AND attnum > 0 AND NOT attisdropped AND attstattarget <> 10$$,
    'every column of lease.idempotency_keys and lease.audit_events has statistics target 10');

-- ANALYZE then samples 300 x 10 rows: seen in what it reports
INSERT INTO lease.idempotency_keys (request_key, expires_at, event_id, brief, request_digest)
SELECT md5(g::text)::uuid, now() + interval '1 day', g, true, sha256(g::text::bytea)
  FROM generate_series(1, 20000) g;
ANALYZE lease.idempotency_keys;
SELECT cmp_ok(
    (SELECT array_length(histogram_bounds::text::text[], 1) FROM pg_stats
      WHERE schemaname = 'lease' AND tablename = 'idempotency_keys' AND attname = 'request_key'),
    '<=', 11, 'request_key''s histogram has at most 11 bounds (target 10)');
SELECT cmp_ok(
    (SELECT array_length(histogram_bounds::text::text[], 1) FROM pg_stats
      WHERE schemaname = 'lease' AND tablename = 'idempotency_keys' AND attname = 'request_key'),
    '>=', 2, 'request_key has a histogram at all');

SELECT * FROM finish();
ROLLBACK;
