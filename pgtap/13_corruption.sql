-- Corruption fails closed: a stored record whose tuple does not match its
-- key (or an unknown record version) makes every operation on it raise
-- LS001 and change nothing; lease.quarantine records one open case per key
-- with a high-priority alert.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
SELECT plan(26);

SET LOCAL ROLE lease_service;
SELECT t.acquire() AS a1 \gset
SELECT t.acquire('target_02') AS a2 \gset
RESET ROLE;
-- the row under target_01's key now claims another target
UPDATE lease.locks SET target_id = 'target_01x' WHERE lock_key = t.key(t.ident());
SELECT t.snapshot() AS before \gset

SET LOCAL ROLE lease_service;
SELECT throws_ok(format('SELECT lease.acquire(%L::jsonb)', t.acq()), 'LS001', NULL, 'acquire raises LS001');
SELECT throws_ok(format('SELECT lease.renew(%L::jsonb)', t.ref(:'a1'::jsonb)), 'LS001', NULL, 'renew raises LS001');
SELECT throws_ok(format('SELECT lease.release(%L::jsonb)', t.ref(:'a1'::jsonb)), 'LS001', NULL, 'release raises LS001');
SELECT throws_ok(format('SELECT lease.force_release(%L::jsonb)', t.admin(:'a1'::jsonb)), 'LS001', NULL,
                 'force_release raises LS001');
SELECT throws_ok(format('SELECT lease.revoke(%L::jsonb)', t.admin(:'a1'::jsonb)), 'LS001', NULL, 'revoke raises LS001');
SELECT throws_ok(format('SELECT lease.inspect(%L::jsonb)', t.req(jsonb_build_object('scope', t.scope(),
                        'lock_identity', t.ident()))), 'LS001', NULL, 'inspect by identity raises LS001');
SELECT throws_ok(format('SELECT lease.inspect(%L::jsonb)', t.req(jsonb_build_object('scope', t.scope(),
                        'lease_id', :'a1'::jsonb #>> '{lease,lease_id}'))), 'LS001', NULL,
                 'inspect by lease id raises LS001');
SELECT throws_ok(format('SELECT lease.fenced_commit(%L::jsonb)',
                        t.commit_req(:'a1'::jsonb, jsonb_build_array(t.doc('d', 0), t.pub('x')))),
                 'LS001', NULL, 'fenced_commit raises LS001');
SELECT throws_ok(format('SELECT lease.fence_check(%L::jsonb, %L, 1)', t.ident(), :'a1'::jsonb #>> '{lease,lease_id}'),
                 'LS001', NULL, 'fence_check raises LS001');
RESET ROLE;
SELECT is(t.snapshot(), :'before', 'the refused calls changed nothing (no lease, counter, history, audit)');
SET LOCAL ROLE lease_service;
-- the identity the corrupt row now claims cannot be acquired over the ambiguity either
SELECT throws_ok(format('SELECT lease.acquire(%L::jsonb)', t.acq('target_01x')), 'LS001', NULL,
                 'acquiring the identity the corrupt row claims fails closed (LS001), no second row');
-- other identities are unaffected
SELECT is(lease.renew(t.ref(:'a2'::jsonb)) ->> 'code', 'lease_renewed', 'a healthy identity still renews');
RESET ROLE;
SELECT is((t.row_of(t.ident())).lease_id, :'a1'::jsonb #>> '{lease,lease_id}', 'the corrupt row is left as it was');
SELECT is(t.counter(t.ident()), 1::bigint, 'its counter did not move');
SELECT is((SELECT count(*)::int FROM lease.history WHERE lock_key = t.key(t.ident())), 0, 'nothing went to history');
SELECT is((SELECT count(*)::int FROM lease.fenced_documents), 0, 'no document was written');

-- an unknown record version is corrupt too
UPDATE lease.locks SET record_version = 2 WHERE lock_key = t.key(t.ident('target_02'));
SET LOCAL ROLE lease_service;
SELECT throws_ok(format('SELECT lease.renew(%L::jsonb)', t.ref(:'a2'::jsonb)), 'LS001', NULL,
                 'an unknown record version: LS001');
RESET ROLE;
UPDATE lease.locks SET record_version = 1 WHERE lock_key = t.key(t.ident('target_02'));

-- quarantine: one open case per key, deduplicated, with an alert -------------------------
SET LOCAL ROLE lease_service;
SELECT lease.quarantine(t.key(t.ident()), 'acquire', 'stored tuple does not match') AS q1 \gset
SELECT is(lease.quarantine(t.key(t.ident()), 'renew', 'seen again'), :q1::bigint,
          'a second report of the same key returns the open case');
RESET ROLE;
SELECT is((SELECT count(*)::int FROM lease.quarantine WHERE lock_key = t.key(t.ident())), 1, 'one open case');
SELECT is((SELECT ARRAY[operation, detail, stored_record ->> 'target_id'] FROM lease.quarantine WHERE quarantine_id = :q1),
          ARRAY['acquire', 'stored tuple does not match', 'target_01x'],
          'the case keeps the first operation, detail and the stored record');
SELECT is((SELECT count(*)::int FROM lease.audit_events WHERE event_type = 'target_lease_quarantine'), 1,
          'one audit event for the case (the repeat is not re-alerted)');
SELECT is((SELECT ARRAY[priority, decision, result_code] FROM lease.audit_events WHERE event_type = 'target_lease_quarantine'),
          ARRAY['high', 'error', 'lease_backend_unavailable'], 'a high-priority alert');
SELECT ok((SELECT position(t.key(t.ident()) IN a::text) = 0 FROM lease.audit_events a
            WHERE event_type = 'target_lease_quarantine'), 'the alert does not carry the lock key');
SET LOCAL ROLE lease_operator;
SELECT is((SELECT count(*)::int FROM lease.quarantined_records), 1, 'operators see the open case');
SELECT set_eq($$SELECT problem FROM lease.verify()$$, ARRAY['lock_key_mismatch', 'quarantined'],
              'verify reports the mismatch and the open case');
RESET ROLE;
-- once resolved, a new sighting opens a new case
UPDATE lease.quarantine SET resolved_at = now(), resolution = 'row repaired' WHERE quarantine_id = :q1;
SET LOCAL ROLE lease_service;
SELECT isnt(lease.quarantine(t.key(t.ident()), 'acquire', 'again'), :q1::bigint, 'a resolved case is not reopened: a new one is');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
