-- Expiry sweeping, conditional cleanup, the operator views, retention, and
-- the append-only audit table.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
SELECT plan(35);

SET LOCAL ROLE lease_service;
SELECT t.acquire('target_01') AS a1 \gset
SELECT t.acquire('target_02') AS a2 \gset
SELECT t.acquire('target_03') AS a3 \gset
RESET ROLE;
SELECT t.expire(:'a1'::jsonb #>> '{lease,lease_id}') AS a1_expiry \gset
-- a3 is old but not expired: 29 s of its 30 s gone
SELECT t.age(:'a3'::jsonb #>> '{lease,lease_id}', '29 seconds') AS ignored \gset

-- views before sweeping -------------------------------------------------------------
SELECT set_eq($$SELECT lease_id FROM lease.active_leases$$,
              ARRAY[:'a2'::jsonb #>> '{lease,lease_id}', :'a3'::jsonb #>> '{lease,lease_id}'],
              'active_leases excludes the expired (unswept) lease');
SELECT is((SELECT ARRAY[state, ended_at::text] FROM lease.lease_history
            WHERE lease_id = :'a1'::jsonb #>> '{lease,lease_id}'),
          ARRAY['expired', :'a1_expiry'::timestamptz::text],
          'lease_history shows the not-yet-swept lease as expired at its expires_at');
SELECT is((SELECT count(*)::int FROM lease.history), 0, 'nothing is in the history table yet');
SELECT is((SELECT state FROM lease.fencing_counters WHERE lock_key = t.key(t.ident('target_01'))),
          'expired', 'fencing_counters reports the identity as expired');
SET LOCAL ROLE lease_service;
SELECT is(lease.health() ->> 'active_leases', '2', 'health counts only unexpired leases');
SELECT is(lease.inspect(t.req(jsonb_build_object('lock_identity', t.ident('target_01'),
            'scope', t.scope()))) #>> '{lease,state}',
          'expired', 'inspect reports an active-shaped row past expires_at as expired');

-- sweep --------------------------------------------------------------------------------
SELECT is(lease.sweep_expired(100), '{"ran": true, "expired": 1}'::jsonb, 'sweep_expired ends the expired lease');
RESET ROLE;
SELECT is((SELECT ARRAY[state, ended_at::text, coalesce(ended_by_principal_id, '-')] FROM lease.history
            WHERE lease_id = :'a1'::jsonb #>> '{lease,lease_id}'),
          ARRAY['expired', :'a1_expiry'::timestamptz::text, '-'], 'the lease moved to history as expired');
SELECT is((t.row_of(t.ident('target_01'))).state, 'free', 'its identity row is free');
SELECT is(t.counter(t.ident('target_01')), 1::bigint, 'and keeps its counter');
SELECT is((SELECT count(*)::int FROM lease.lease_history WHERE lease_id = :'a1'::jsonb #>> '{lease,lease_id}'), 1,
          'lease_history shows it exactly once after the sweep');
SELECT set_eq($$SELECT lease_id FROM lease.active_leases$$,
              ARRAY[:'a2'::jsonb #>> '{lease,lease_id}', :'a3'::jsonb #>> '{lease,lease_id}'],
              'the unexpired leases were not touched (not even the almost expired one)');
SET LOCAL ROLE lease_service;
SELECT is(lease.sweep_expired(100), '{"ran": true, "expired": 0}'::jsonb, 'a second sweep finds nothing');
SELECT throws_ok($$SELECT lease.sweep_expired(0)$$, '22023', NULL, 'batch 0 is invalid');
SELECT throws_ok($$SELECT lease.sweep_expired(10001)$$, '22023', NULL, 'batch above 10000 is invalid');
RESET ROLE;

-- the batch bounds one sweep ------------------------------------------------------------
SELECT t.expire(:'a2'::jsonb #>> '{lease,lease_id}') AS ignored \gset
SELECT t.expire(:'a3'::jsonb #>> '{lease,lease_id}') AS ignored \gset
SET LOCAL ROLE lease_service;
SELECT is(lease.sweep_expired(1) ->> 'expired', '1', 'batch 1 ends one lease');
SELECT is(lease.sweep_expired(1) ->> 'expired', '1', 'the next sweep ends the other');
RESET ROLE;
SELECT is((SELECT count(*)::int FROM lease.history WHERE state = 'expired'), 3, 'three expired leases in history');

-- delayed cleanup of an old lease after a successor changes nothing --------------------------
SET LOCAL ROLE lease_service;
SELECT t.acquire('target_04') AS old \gset
RESET ROLE;
SELECT t.expire(:'old'::jsonb #>> '{lease,lease_id}') AS ignored \gset
SET LOCAL ROLE lease_service;
SELECT t.acquire('target_04') AS succ \gset
RESET ROLE;
SELECT t.snapshot() AS before \gset
SELECT is(lease._expire(t.key(t.ident('target_04')), :'old'::jsonb #>> '{lease,lease_id}',
                        (:'old'::jsonb #>> '{lease,fencing_token}')::bigint),
          false, 'a delayed cleanup of the old lease id and token finds nothing to end');
SELECT is(lease._expire(t.key(t.ident('target_04')), :'succ'::jsonb #>> '{lease,lease_id}',
                        (:'old'::jsonb #>> '{lease,fencing_token}')::bigint),
          false, 'nor with the successor''s id and the old token');
SELECT is(lease._expire(t.key(t.ident('target_04')), :'succ'::jsonb #>> '{lease,lease_id}',
                        (:'succ'::jsonb #>> '{lease,fencing_token}')::bigint),
          false, 'the successor itself is not expired, so even its own cleanup does nothing');
SELECT is(t.snapshot(), :'before', 'the successor and everything else are unchanged');
SELECT is((SELECT ARRAY[lease_id, fencing_token::text] FROM lease.active_leases
            WHERE lock_key = t.key(t.ident('target_04'))),
          ARRAY[:'succ'::jsonb #>> '{lease,lease_id}', '2'], 'the successor remains active');

-- retention ---------------------------------------------------------------------------------
-- one idempotency row, one history row and one audit event past retention;
-- everything else is recent
UPDATE lease.idempotency_keys SET expires_at = now() - interval '1 second'
 WHERE request_key IN (SELECT request_key FROM lease.idempotency
                        WHERE lease_id = :'a1'::jsonb #>> '{lease,lease_id}');
UPDATE lease.history SET ended_at = now() - interval '31 days'
 WHERE lease_id = :'a2'::jsonb #>> '{lease,lease_id}';
INSERT INTO lease.audit_events (occurred_at, event_type, decision, result_code, request_id)
VALUES (now() - interval '91 days', 'target_lease_inspect', 'allow', 'lease_inspected', 'old-audit'),
       (now() - interval '89 days', 'target_lease_inspect', 'allow', 'lease_inspected', 'kept-audit');
SELECT count(*) AS idem_before, (SELECT count(*) FROM lease.history) AS hist_before,
       (SELECT count(*) FROM lease.audit_events) AS audit_before
  FROM lease.idempotency \gset
SET LOCAL ROLE lease_service;
SELECT is(lease.purge_retention(1000),
          '{"ran": true, "idempotency_purged": 1, "history_purged": 1, "audit_purged": 1}'::jsonb,
          'purge_retention removes exactly the rows past retention');
SELECT throws_ok($$SELECT lease.purge_retention(0)$$, '22023', NULL, 'batch 0 is invalid');
RESET ROLE;
SELECT is((SELECT count(*) FROM lease.idempotency), (:idem_before - 1)::bigint, 'one idempotency row fewer');
SELECT is((SELECT count(*)::int FROM lease.idempotency WHERE lease_id = :'a1'::jsonb #>> '{lease,lease_id}'), 0,
          'the expired idempotency row is gone');
SELECT is((SELECT count(*) FROM lease.history), (:hist_before - 1)::bigint, 'one history row fewer');
SELECT is((SELECT count(*)::int FROM lease.history WHERE lease_id = :'a2'::jsonb #>> '{lease,lease_id}'), 0,
          'the 31-day-old history row is gone');
SELECT is((SELECT array_agg(request_id) FROM lease.audit_events WHERE request_id LIKE '%-audit'),
          ARRAY['kept-audit'], 'the 91-day-old audit event is gone, the 89-day-old one kept');
SELECT is((SELECT count(*) FROM lease.audit_events), (:audit_before - 1)::bigint, 'one audit event fewer');

-- audit_events is append-only, even for its owner ----------------------------------------------
SELECT throws_ok($$UPDATE lease.audit_events SET result_code = 'x'$$, 'LS004', NULL, 'UPDATE is refused (LS004)');
SELECT throws_ok($$DELETE FROM lease.audit_events$$, 'LS004', NULL, 'DELETE is refused (LS004)');
SELECT throws_ok($$TRUNCATE lease.audit_events$$, 'LS004', NULL, 'TRUNCATE is refused (LS004)');
SELECT is((SELECT count(*) FROM lease.audit_events), (:audit_before - 1)::bigint, 'the audit events are all still there');

SELECT * FROM finish();
ROLLBACK;
