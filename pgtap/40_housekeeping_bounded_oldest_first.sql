-- The service's housekeeping steps (migrations/0024): lease.expire_due and
-- lease.purge_due at READ COMMITTED, bounded by their batch, oldest first,
-- saying whether more is due and how far behind they are. Their refusal
-- of any other isolation is pgtap/41_housekeeping_isolation.sql; the
-- service's use of them under load is tests/race/race_housekeeping_soak.c.
BEGIN ISOLATION LEVEL READ COMMITTED;
\ir helpers/fixtures.psql
SELECT plan(29);

-- Active leases written as an acquisition would (the fixtures write the
-- table directly, as the superuser): expired 600 s, 300 s and 1 s ago, and
-- one that has 60 s left.
CREATE FUNCTION t.active(target text, expires_in interval) RETURNS text LANGUAGE sql AS $$
    INSERT INTO lease.locks (lock_key, tenant_id, program_id, target_namespace, target_id,
                             actor_name, workflow_name, operation_class, fencing_counter,
                             created_at, state, lease_id, fencing_token, owner_principal_id,
                             owner_client_id, owner_credential_id, service_instance_id,
                             acquired_at, renewed_at, expires_at, ttl_ms, maximum_lifetime_ms,
                             execution_id, job_id, request_id, metadata)
    VALUES (t.key(t.ident(target)), 'tenant-main', 'program-a', 'starintel-target', target,
            'usernamegen', 'default', 'default', 1, now() - interval '1 hour', 'active',
            'lease_' || target, 1, 'p1', 'c1', 'key_1', 'si-1',
            now() + expires_in - interval '30 seconds', now() + expires_in - interval '30 seconds',
            now() + expires_in, 30000, 3600000, 'exec', 'job', 'req-' || target, '{}')
    RETURNING lease_id $$;
SELECT t.active('old', interval '-600 seconds'), t.active('older', interval '-900 seconds'),
       t.active('recent', interval '-1 second'), t.active('live', interval '60 seconds');

SET LOCAL ROLE lease_service;
SELECT lease.expire_due(2, 0) AS e1 \gset
RESET ROLE;
SELECT is((:'e1'::jsonb) - 'lag_ms', '{"ran": true, "expired": 2, "more": true}'::jsonb,
          'a full batch: two leases moved, more is due');
SELECT ok((:'e1'::jsonb ->> 'lag_ms')::bigint BETWEEN 899000 AND 960000,
          'lag_ms is the age of the oldest expired lease it found (900 s)');
SELECT set_eq($$SELECT lease_id FROM lease.history WHERE state = 'expired'$$,
              ARRAY['lease_older', 'lease_old'], 'oldest first: the two oldest are in history');
SELECT is((SELECT ended_at FROM lease.history WHERE lease_id = 'lease_old'),
          (SELECT expires_at FROM lease.history WHERE lease_id = 'lease_old'),
          'ended at its expiry');
SELECT is((t.row_of(t.ident('old'))).state, 'free', 'its identity row is free');
SELECT is((t.row_of(t.ident('old'))).fencing_counter, 1::bigint, 'and keeps its counter');

SET LOCAL ROLE lease_service;
SELECT is(lease.expire_due(10, 5000) - 'lag_ms', '{"ran": true, "expired": 0, "more": false}'::jsonb,
          'grace 5 s: a lease that expired 1 s ago is left to the next step');
SELECT is(lease.expire_due(10, 0) - 'lag_ms', '{"ran": true, "expired": 1, "more": false}'::jsonb,
          'without grace it moves');
SELECT is(lease.expire_due(10, 0), '{"ran": true, "expired": 0, "more": false, "lag_ms": 0}'::jsonb,
          'nothing left: lag 0');
RESET ROLE;
SELECT is((t.row_of(t.ident('live'))).state, 'active', 'the live lease was not touched');
SELECT is((SELECT count(*)::int FROM lease.history), 3, 'three leases in history');

SET LOCAL ROLE lease_service;
SELECT throws_ok($$SELECT lease.expire_due(0, 0)$$, '22023', NULL, 'batch 0 is invalid');
SELECT throws_ok($$SELECT lease.expire_due(10001, 0)$$, '22023', NULL, 'batch above 10000 is invalid');
SELECT throws_ok($$SELECT lease.expire_due(10, -1)$$, '22023', NULL, 'a negative grace is invalid');
SELECT throws_ok($$SELECT lease.purge_due(0)$$, '22023', NULL, 'purge batch 0 is invalid');
RESET ROLE;

-- retention ------------------------------------------------------------------
-- 5 idempotency rows past their expiry (1..5 hours) and 1 not; the three
-- history rows and their lease ids aged past retention, one audit event
-- per hour for 5 hours past the audit retention and one fresh.
-- (narrow rows: their request ids kept in the stored answer, to name them)
INSERT INTO lease.idempotency_keys (request_key, expires_at, brief, request_digest, answer)
SELECT lease._request_key(t.key(t.ident('old')), 'acquire', 'p1', 'idem-' || g),
       now() - g * interval '1 hour', true, sha256(g::text::bytea),
       jsonb_build_object('request_id', 'idem-' || g)
  FROM generate_series(0, 5) g;
UPDATE lease.idempotency_keys SET expires_at = now() + interval '1 hour'
 WHERE answer ->> 'request_id' = 'idem-0';
UPDATE lease.history SET ended_at = ended_at - interval '31 days';
INSERT INTO lease.lease_index (lease_id, lock_key, created_at)
SELECT lease_id, lock_key, now() - interval '40 days' FROM lease.history;
INSERT INTO lease.audit_events (occurred_at, event_type, decision, result_code, request_id)
SELECT now() - interval '90 days' - g * interval '1 hour', 'target_lease_acquire', 'allow',
       'lease_acquired', 'aud-' || g
  FROM generate_series(0, 5) g ORDER BY g DESC; -- event ids in time order, as leased writes them

SET LOCAL ROLE lease_service;
SELECT lease.purge_due(2) AS p1 \gset
RESET ROLE;
SELECT is((:'p1'::jsonb) - ARRAY['idempotency_lag_ms', 'audit_lag_ms', 'history_lag_ms',
                                 'lease_index_lag_ms'],
          '{"ran": true, "more": true, "idempotency_purged": 2, "history_purged": 2,
            "lease_index_purged": 2, "audit_purged": 2, "sessions_purged": 0}'::jsonb,
          'at most batch rows of each table, and more is due');
SELECT ok((:'p1'::jsonb ->> 'idempotency_lag_ms')::bigint BETWEEN 3 * 3600000 - 60000 AND 3 * 3600000 + 60000,
          'idempotency lag: the oldest row left expired 3 hours ago');
SELECT ok((:'p1'::jsonb ->> 'audit_lag_ms')::bigint BETWEEN 3 * 3600000 - 60000 AND 3 * 3600000 + 60000,
          'audit lag: the oldest event left is 3 hours past retention');
SELECT ok((:'p1'::jsonb ->> 'history_lag_ms')::bigint > 0, 'history lag: one row left past retention');
SELECT ok((:'p1'::jsonb ->> 'lease_index_lag_ms')::bigint > 0, 'lease index lag: one id left past retention');
SELECT set_eq($$SELECT answer ->> 'request_id' FROM lease.idempotency_keys$$,
              ARRAY['idem-0', 'idem-1', 'idem-2', 'idem-3'], 'the oldest idempotency rows went first');
SELECT set_eq($$SELECT request_id FROM lease.audit_events$$,
              ARRAY['aud-0', 'aud-1', 'aud-2', 'aud-3'], 'the oldest audit events went first');
SELECT is(current_setting('lease.audit_purge', true), 'off', 'the audit purge switch is off again');

SET LOCAL ROLE lease_service;
SELECT lease.purge_due(2) AS p2 \gset
SELECT lease.purge_due(2) AS p3 \gset
RESET ROLE;
SELECT is((:'p2'::jsonb ->> 'more')::boolean, true, 'a second step: still more (idempotency, audit)');
SELECT is((SELECT count(*)::int FROM lease.lease_index), 0, 'the second step took the last lease id');
SELECT is(:'p3'::jsonb, '{"ran": true, "more": false, "idempotency_purged": 1, "history_purged": 0,
            "lease_index_purged": 0, "audit_purged": 1, "sessions_purged": 0, "idempotency_lag_ms": 0,
            "history_lag_ms": 0, "lease_index_lag_ms": 0, "audit_lag_ms": 0}'::jsonb,
          'the third step finishes: nothing left past retention, lag 0');
SELECT set_eq($$SELECT answer ->> 'request_id' FROM lease.idempotency_keys$$, ARRAY['idem-0'],
              'the unexpired idempotency row stays');
SELECT set_eq($$SELECT request_id FROM lease.audit_events$$, ARRAY['aud-0'],
              'the event inside retention stays');
SELECT is((SELECT count(*)::int FROM lease.history), 0, 'history past retention is gone');

SELECT * FROM finish();
ROLLBACK;
