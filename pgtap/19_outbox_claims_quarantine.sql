-- The relay role acts only on rows its transaction claimed (0016), and the
-- quarantine of rows no destination will ever take: set aside with the
-- reason and an audit event, no longer claimed, no longer holding back the
-- identity; operators requeue or discard them.
-- The fixture rows are committed first: rows written by the test's own
-- transaction would count as its own (their xmin is this transaction).
BEGIN;
\ir helpers/fixtures.psql
INSERT INTO lease.locks (lock_key, tenant_id, program_id, target_namespace, target_id, actor_name,
                         workflow_name, operation_class, fencing_counter, created_at, state)
SELECT t.key(t.ident(x)), 'tenant-main', 'program-a', 'starintel-target', x, 'usernamegen',
       'default', 'default', 3, now(), 'free'
  FROM unnest(ARRAY['qa', 'qb']) x;
CREATE FUNCTION t.put(target text, token bigint, n integer) RETURNS bigint LANGUAGE sql AS $$
    INSERT INTO lease.outbox (lock_key, topic, payload, fencing_token, lease_id, execution_id,
                              trace_id, created_at)
    VALUES (t.key(t.ident(target)), 'results.' || target, jsonb_build_object('n', n), token,
            'lease_' || target || token, 'exec-' || target, 'trace-' || n,
            now() - interval '2 seconds')
    RETURNING outbox_id $$;
SELECT t.put('qa', 1, 1) AS a1 \gset
SELECT t.put('qa', 1, 2) AS a2 \gset
SELECT t.put('qb', 1, 3) AS b1 \gset
SELECT t.put('qa', 1, 4) AS a3 \gset
COMMIT;

BEGIN ISOLATION LEVEL READ COMMITTED;
SELECT plan(26);

-- unclaimed rows are refused ----------------------------------------------
SET LOCAL ROLE lease_relay;
SELECT throws_ok(format('SELECT lease.outbox_mark_published(ARRAY[%s]::bigint[], %L)', :b1, 'relay-x'),
                 '42501', NULL, 'mark_published of a row this transaction never claimed is refused');
SELECT throws_ok(format('SELECT lease.outbox_defer(%s, 86400000, %L)', :a1, 'held back'),
                 '42501', NULL, 'defer of an unclaimed row is refused');
SELECT throws_ok(format('SELECT lease.outbox_mark_refused(%s, %L, %L)', :a2, 'relay-x', 'no'),
                 '42501', NULL, 'mark_refused of an unclaimed row is refused');
SELECT throws_ok(format('SELECT lease.outbox_quarantine(%s, %L, %L)', :a1, 'relay-x', 'no'),
                 '42501', NULL, 'quarantine of an unclaimed row is refused');
SELECT throws_ok('SELECT lease.outbox_mark_published(ARRAY[987654321]::bigint[], ''relay-x'')',
                 '42501', NULL, 'a row that does not exist is refused');
RESET ROLE;
SELECT is((SELECT array_agg(row(published_at IS NULL, attempts, next_attempt_at IS NULL,
                                quarantined_at IS NULL)::text ORDER BY outbox_id)
             FROM lease.outbox WHERE outbox_id IN (:a1, :a2, :b1)),
          ARRAY['(t,0,t,t)', '(t,0,t,t)', '(t,0,t,t)'], 'the refused calls changed nothing');

-- claimed rows are accepted -------------------------------------------------
SET LOCAL ROLE lease_relay;
-- claims at the top level of the transaction, as the relay makes them
-- (pgTAP's results_eq runs its query inside a subtransaction)
SELECT array_agg(outbox_id)::text AS got FROM lease.outbox_claim(1) \gset
SELECT is(:'got', format('{%s}', :a1), 'a claim of one row takes the oldest');
SELECT throws_ok(format('SELECT lease.outbox_mark_published(ARRAY[%s, %s]::bigint[], %L)', :a1, :b1, 'relay-x'),
                 '42501', NULL, 'one unclaimed row refuses the whole mark');
SELECT is(lease.outbox_mark_published(ARRAY[:a1]::bigint[], 'relay-x'), 1, 'a claimed row is marked');
SELECT is(lease.outbox_mark_published(ARRAY[:a1]::bigint[], 'relay-x'), 0,
          'marking it again in the same transaction answers 0 (already published)');

-- quarantine ---------------------------------------------------------------
SELECT array_agg(outbox_id ORDER BY outbox_id)::text AS got FROM lease.outbox_claim(10) \gset
SELECT is(:'got', format('{%s,%s,%s}', :a2, :b1, :a3), 'the rest is claimed');
SELECT is(lease.outbox_quarantine(:a2, 'relay-x', 'message size 300000 is larger than configured max size 131072'),
          1, 'a claimed row is quarantined');
SELECT is(lease.outbox_quarantine(:a2, 'relay-x', 'again'), 0, 'a quarantined row is not quarantined twice');
SELECT throws_ok(format('SELECT lease.outbox_quarantine(%s, %L, %L)', :a3, 'relay-x', ''),
                 '22023', NULL, 'a quarantine needs a reason');
SELECT array_agg(outbox_id ORDER BY outbox_id)::text AS got FROM lease.outbox_claim(10) \gset
SELECT is(:'got', format('{%s,%s}', :b1, :a3),
                  'a quarantined row is not claimed, and its identity''s later row is');
SELECT is((SELECT unpublished FROM lease.outbox_lag()), 2::bigint,
          'the lag counts rows still to deliver, not quarantined ones');
RESET ROLE;
SELECT is((SELECT row(published_at IS NULL, quarantined_at IS NOT NULL, quarantine_reason, last_error, attempts)::text
             FROM lease.outbox WHERE outbox_id = :a2),
          row(true, true, 'message size 300000 is larger than configured max size 131072',
              'quarantined: message size 300000 is larger than configured max size 131072', 1)::text,
          'the row keeps its reason, unpublished');
SELECT is((SELECT row(event_type, decision, result_code, priority, principal_id, principal_class,
                      tenant_id, target_id, lease_id, fencing_token)::text
             FROM lease.audit_events WHERE result_code = 'outbox_quarantined'),
          row('target_lease_quarantine', 'error', 'outbox_quarantined', 'high', 'relay:relay-x', 'relay',
              'tenant-main', 'qa', 'lease_qa1', 1)::text,
          'the quarantine is audited with the row''s identity, lease and token');
SELECT is((SELECT quarantine_reason FROM lease.outbox_backlog WHERE outbox_id = :a2),
          'message size 300000 is larger than configured max size 131072',
          'operators see it in outbox_backlog');

-- operators: requeue, discard --------------------------------------------------
SET LOCAL ROLE lease_relay;
SELECT throws_ok(format('SELECT lease.outbox_requeue(%s, %L)', :a2, 'limit raised'), '42501', NULL,
                 'the relay cannot requeue');
RESET ROLE;
SET LOCAL ROLE lease_admin;
SELECT is(lease.outbox_requeue(:a2, 'broker limit raised, OPS-7'), 1, 'lease_admin requeues a quarantined row');
SELECT is(lease.outbox_requeue(:a2, 'again'), 0, 'a row not quarantined is not requeued');
RESET ROLE;
SELECT is((SELECT row(quarantined_at IS NULL, last_error)::text FROM lease.outbox WHERE outbox_id = :a2),
          row(true, 'requeued: broker limit raised, OPS-7')::text, 'a requeued row is deliverable again');
SELECT is((SELECT count(*) FROM lease.audit_events
            WHERE result_code IN ('outbox_requeued', 'outbox_discarded')), 1::bigint,
          'the requeue is audited');
SET LOCAL ROLE lease_admin;
SELECT is(lease.outbox_discard(:a2, 'payload too large for any broker, OPS-8'), 1, 'lease_admin discards it');
RESET ROLE;
SELECT is((SELECT row(event_type, decision, principal_class)::text FROM lease.audit_events
            WHERE result_code = 'outbox_discarded'),
          row('target_lease_quarantine', 'allow', 'sql')::text, 'the discard is audited');

SELECT * FROM finish();
ROLLBACK;
