-- Fencing: the commit coordinator (lease.fenced_commit), lease.fence_check
-- inside a caller's transaction, and the trigger variant of docs/fencing.md
-- (run verbatim from the doc).
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
SELECT plan(66);

SET LOCAL ROLE lease_service;
SELECT t.acquire() AS a1 \gset
RESET ROLE;

-- accepted commit: documents and outbox rows carry the lease ------------------------------
SET LOCAL ROLE lease_service;
SELECT t.commit_req(:'a1'::jsonb, jsonb_build_array(t.doc('doc/a', 0, '{"n":1}'), t.doc('doc/b', 0),
                                                     t.pub('results.ready', '{"target":"target_01"}'))) AS cq \gset
SELECT lease.fenced_commit(:'cq'::jsonb) AS c1 \gset
RESET ROLE;
SELECT is(:'c1'::jsonb ->> 'code', 'commit_accepted', 'the holder''s commit is accepted');
SELECT is(:'c1'::jsonb -> 'results' -> 0, '{"kind":"document","key":"doc/a","revision":1}'::jsonb,
          'a new document gets revision 1 (expected 0)');
SELECT is(:'c1'::jsonb -> 'results' -> 2 ->> 'outbox_id',
          (SELECT max(outbox_id)::text FROM lease.outbox), 'the publication answers its outbox id');
SELECT is((SELECT ARRAY[revision::text, fencing_token::text, lease_id, execution_id, trace_id, body::text]
             FROM lease.fenced_documents WHERE document_key = 'doc/a'),
          ARRAY['1', '1', :'a1'::jsonb #>> '{lease,lease_id}', 'exec-1', 'trace-commit', '{"n": 1}'],
          'the document records revision, token, lease, execution and trace');
SELECT is((SELECT ARRAY[topic, payload::text, fencing_token::text, lease_id, execution_id, trace_id,
                        coalesce(published_at::text, 'unpublished')] FROM lease.outbox),
          ARRAY['results.ready', '{"target": "target_01"}', '1', :'a1'::jsonb #>> '{lease,lease_id}', 'exec-1',
                'trace-commit', 'unpublished'],
          'the outbox row records token, lease, execution and trace');
SELECT is((SELECT high_water_token FROM lease.fence_marks WHERE lock_key = t.key(t.ident())), 1::bigint,
          'the commit raised the high-water mark to its token');
SELECT is((SELECT ARRAY[event_type, result_code, lease_id, fencing_token::text] FROM lease.audit_events
            WHERE request_id = :'cq'::jsonb ->> 'request_id'),
          ARRAY['target_lease_commit', 'commit_accepted', :'a1'::jsonb #>> '{lease,lease_id}', '1'],
          'the commit is audited');

-- next revision ---------------------------------------------------------------------
SET LOCAL ROLE lease_service;
SELECT is(lease.fenced_commit(t.commit_req(:'a1'::jsonb, jsonb_build_array(t.doc('doc/a', 1, '{"n":2}'))))
            -> 'results' -> 0 ->> 'revision', '2', 'expected revision 1 writes revision 2');
RESET ROLE;
SELECT is((SELECT body FROM lease.fenced_documents WHERE document_key = 'doc/a'), '{"n":2}'::jsonb,
          'with the new body');

-- write_conflict writes nothing --------------------------------------------------------
SELECT t.snapshot() AS before \gset
SET LOCAL ROLE lease_service;
SELECT is(lease.fenced_commit(t.commit_req(:'a1'::jsonb, jsonb_build_array(
              t.doc('doc/c', 0), t.doc('doc/a', 1), t.pub('results.ready')))),
          '{"code":"write_conflict","field":"writes[1].expected_revision","current_revision":2}'::jsonb,
          'a stale expected revision: write_conflict naming the write and the current revision');
SELECT is(lease.fenced_commit(t.commit_req(:'a1'::jsonb, jsonb_build_array(t.doc('doc/b', 0)))),
          '{"code":"write_conflict","field":"writes[0].expected_revision","current_revision":1}'::jsonb,
          'expected revision 0 for an existing document: write_conflict');
SELECT is(lease.fenced_commit(t.commit_req(:'a1'::jsonb, jsonb_build_array(t.doc('doc/new', 3)))),
          '{"code":"write_conflict","field":"writes[0].expected_revision","current_revision":0}'::jsonb,
          'a revision for a missing document: write_conflict with current revision 0');
RESET ROLE;
SELECT is(t.snapshot(), :'before', 'a conflicting commit wrote no document, no outbox row, no mark');

-- malformed writes ----------------------------------------------------------------------
SET LOCAL ROLE lease_service;
CREATE TEMP TABLE badw (what text, w jsonb, field text) ON COMMIT DROP;
INSERT INTO badw VALUES
  ('no writes', '[]', 'writes'),
  ('writes not a list', '{}', 'writes'),
  ('33 writes', (SELECT jsonb_agg(t.pub('x')) FROM generate_series(1, 33)), 'writes'),
  ('unknown kind', '[{"kind":"delete","key":"k"}]', 'writes[0].kind'),
  ('unknown field', jsonb_build_array(t.doc('k', 0) || '{"extra":1}'), 'writes[0].extra'),
  ('key with a space', jsonb_build_array(t.doc('a b', 0)), 'writes[0].key'),
  ('key of 257 characters', jsonb_build_array(t.doc(repeat('k', 257), 0)), 'writes[0].key'),
  ('duplicate key', jsonb_build_array(t.doc('k', 0), t.doc('k', 0)), 'writes[1].key'),
  ('negative revision', jsonb_build_array(t.doc('k', -1)), 'writes[0].expected_revision'),
  ('body not an object', jsonb_build_array(t.doc('k', 0, '[1]')), 'writes[0].body'),
  ('publication without payload', '[{"kind":"publication","topic":"t"}]', 'writes[0].payload'),
  ('topic of 256 characters', jsonb_build_array(t.pub(repeat('t', 256))), 'writes[0].topic');
SELECT is(lease.fenced_commit(t.commit_req(:'a1'::jsonb, w)),
          jsonb_build_object('code', 'invalid_lease_request', 'field', field), what || ': ' || field)
  FROM badw ORDER BY what;
SELECT is(lease.fenced_commit(t.commit_req(:'a1'::jsonb, jsonb_build_array(t.doc(repeat('k', 256), 0),
                                                                           t.pub(repeat('t', 255))))) ->> 'code',
          'commit_accepted', 'keys of 256 and topics of 255 characters (an AMQP short string, 0016) are accepted');
SELECT is(lease.fenced_commit(t.commit_req(:'a1'::jsonb, jsonb_build_array(t.pub('x'))) - 'execution_id')
            ->> 'field', 'execution_id', 'execution_id is required');

-- the exact lease: wrong execution, owner or token -----------------------------------------
RESET ROLE;
SELECT t.snapshot() AS before \gset
SET LOCAL ROLE lease_service;
SELECT is(lease.fenced_commit(t.commit_req(:'a1'::jsonb, jsonb_build_array(t.pub('x')), '{"execution_id":"exec-2"}')),
          '{"code":"lease_lost"}'::jsonb, 'another execution of the holder: lease_lost');
SELECT is(lease.fenced_commit(t.commit_req(:'a1'::jsonb, jsonb_build_array(t.pub('x')),
                                           jsonb_build_object('principal', t.principal('p2')))),
          '{"code":"lease_lost"}'::jsonb, 'another principal: lease_lost');
SELECT is(lease.fenced_commit(t.commit_req(:'a1'::jsonb, jsonb_build_array(t.pub('x')), '{"fencing_token":2}')),
          '{"code":"lease_lost"}'::jsonb, 'another token: lease_lost');
SELECT is(lease.fenced_commit(t.commit_req(:'a1'::jsonb, jsonb_build_array(t.pub('x')),
                                           jsonb_build_object('lock_identity', t.ident('target_02')))),
          '{"code":"lease_lost"}'::jsonb, 'another identity: lease_lost');
RESET ROLE;
SELECT is(t.snapshot(), :'before', 'refused commits wrote nothing');

-- fence_check inside the caller's transaction ----------------------------------------------
SET LOCAL ROLE lease_service;
SELECT is(lease.fence_check(t.ident(), :'a1'::jsonb #>> '{lease,lease_id}', 1),
          (:'a1'::jsonb #>> '{lease,expires_at}')::timestamptz, 'fence_check returns the lease''s expires_at');
SELECT is(lease.fence_check(t.ident(), :'a1'::jsonb #>> '{lease,lease_id}', 1, 'p1'),
          (:'a1'::jsonb #>> '{lease,expires_at}')::timestamptz, 'and accepts the right owner');
SELECT throws_ok(format('SELECT lease.fence_check(%L::jsonb, %L, 1, %L)', t.ident(), :'a1'::jsonb #>> '{lease,lease_id}', 'p2'),
                 'LS010', NULL, 'fence_check with another owner: LS010');
SELECT throws_ok(format('SELECT lease.fence_check(%L::jsonb, %L, 2)', t.ident(), :'a1'::jsonb #>> '{lease,lease_id}'),
                 'LS010', NULL, 'fence_check with another token: LS010');
SELECT throws_ok(format('SELECT lease.fence_check(%L::jsonb, %L, 1)', t.ident(), 'lease_other'),
                 'LS010', NULL, 'fence_check with another lease id: LS010');
SELECT throws_ok(format('SELECT lease.fence_check(%L::jsonb, %L, 1)', t.ident('target_99'), :'a1'::jsonb #>> '{lease,lease_id}'),
                 'LS010', NULL, 'fence_check for an identity without a lease: LS010');
SELECT throws_ok(format('SELECT lease.fence_check(%L::jsonb, %L, 1)', t.ident(tenant => 'Bad Tenant'), 'lease_x'),
                 '22023', NULL, 'a malformed identity: 22023');
SELECT throws_ok(format('SELECT lease.fence_check(%L::jsonb, %L, 0)', t.ident(), 'lease_x'),
                 '22023', NULL, 'a non-positive token: 22023');
SELECT t.acquire('target_05') AS f1 \gset
SELECT lives_ok(format('SELECT lease.fence_check(%L::jsonb, %L, 1)', t.ident('target_05'), :'f1'::jsonb #>> '{lease,lease_id}'),
                'fence_check of a fresh lease');
RESET ROLE;
SELECT is((SELECT high_water_token FROM lease.fence_marks WHERE lock_key = t.key(t.ident('target_05'))), 1::bigint,
          'fence_check records the token as accepted');

-- revoked: LS010 ------------------------------------------------------------------------
SET LOCAL ROLE lease_service;
SELECT is(lease.revoke(t.admin(:'f1'::jsonb)) ->> 'code', 'lease_revoked', 'revoke target_05');
SELECT throws_ok(format('SELECT lease.fence_check(%L::jsonb, %L, 1)', t.ident('target_05'), :'f1'::jsonb #>> '{lease,lease_id}'),
                 'LS010', NULL, 'fence_check of a revoked lease: LS010');
RESET ROLE;

-- former holder after expiry ------------------------------------------------------------
SELECT t.expire(:'a1'::jsonb #>> '{lease,lease_id}') AS ignored \gset
SELECT t.snapshot() AS before \gset
SET LOCAL ROLE lease_service;
SELECT is(lease.fenced_commit(t.commit_req(:'a1'::jsonb, jsonb_build_array(t.doc('doc/a', 2)))),
          '{"code":"lease_lost"}'::jsonb, 'the former holder commits after expiry: lease_lost');
SELECT throws_ok(format('SELECT lease.fence_check(%L::jsonb, %L, 1)', t.ident(), :'a1'::jsonb #>> '{lease,lease_id}'),
                 'LS010', NULL, 'fence_check after expiry: LS010');
RESET ROLE;
SELECT is(t.snapshot(), :'before', 'nothing written after expiry');

-- former holder after reacquisition (lower token) -------------------------------------------
SET LOCAL ROLE lease_service;
SELECT t.acquire('target_01', jsonb_build_object('principal', t.principal('p2'), 'execution_id', 'exec-9')) AS a2 \gset
SELECT is(lease.fenced_commit(t.commit_req(:'a1'::jsonb, jsonb_build_array(t.doc('doc/a', 2)))),
          '{"code":"lease_lost"}'::jsonb, 'the former holder commits after reacquisition: lease_lost');
SELECT is(lease.fenced_commit(t.commit_req(:'a2'::jsonb, jsonb_build_array(t.doc('doc/a', 2, '{"n":3}')))) ->> 'code',
          'commit_accepted', 'the new holder commits');
SELECT is(lease.fenced_commit(t.commit_req(:'a1'::jsonb, jsonb_build_array(t.doc('doc/a', 3)))),
          '{"code":"lease_lost"}'::jsonb, 'the former holder, lower token, still lease_lost');
SELECT throws_ok(format('SELECT lease.fence_check(%L::jsonb, %L, 1)', t.ident(), :'a1'::jsonb #>> '{lease,lease_id}'),
                 'LS011', NULL, 'fence_check with a token below the high-water mark: LS011');
RESET ROLE;
SELECT is((SELECT ARRAY[revision::text, fencing_token::text, execution_id] FROM lease.fenced_documents
            WHERE document_key = 'doc/a'), ARRAY['3', '2', 'exec-9'],
          'the document holds the new holder''s write, token 2');
SELECT is((SELECT high_water_token FROM lease.fence_marks WHERE lock_key = t.key(t.ident())), 2::bigint,
          'the high-water mark is 2');

-- the high-water mark refuses a lower token even for a lease that looks active --------------
-- (a restored row whose counter lags an accepted token; recover_epoch exists for this)
UPDATE lease.fence_marks SET high_water_token = 5 WHERE lock_key = t.key(t.ident());
UPDATE lease.locks SET fencing_counter = 5 WHERE lock_key = t.key(t.ident());
SET LOCAL ROLE lease_service;
SELECT is(lease.fenced_commit(t.commit_req(:'a2'::jsonb, jsonb_build_array(t.pub('x')))),
          '{"code":"lease_lost"}'::jsonb, 'fenced_commit refuses a token below the high-water mark');
SELECT throws_ok(format('SELECT lease.fence_check(%L::jsonb, %L, 2)', t.ident(), :'a2'::jsonb #>> '{lease,lease_id}'),
                 'LS011', NULL, 'fence_check refuses it with LS011');
RESET ROLE;
UPDATE lease.fence_marks SET high_water_token = 2 WHERE lock_key = t.key(t.ident());

-- sealed namespace -----------------------------------------------------------------------------
UPDATE lease.namespace_state SET sealed = true, sealed_reason = 'test', sealed_at = now();
SET LOCAL ROLE lease_service;
SELECT is(lease.fenced_commit(t.commit_req(:'a2'::jsonb, jsonb_build_array(t.pub('x')))),
          '{"code":"lease_backend_unavailable","reason":"sealed","detail":"test"}'::jsonb, 'a sealed namespace refuses commits');
SELECT throws_ok(format('SELECT lease.fence_check(%L::jsonb, %L, 2)', t.ident(), :'a2'::jsonb #>> '{lease,lease_id}'),
                 'LS010', NULL, 'and fence_check');
RESET ROLE;
UPDATE lease.namespace_state SET sealed = false, sealed_reason = NULL, sealed_at = NULL;

-- the trigger variant, exactly as docs/fencing.md shows it --------------------------------------
CREATE ROLE app_writer NOLOGIN;
\set example `sed -n '/^-- example: fencing trigger/,/^-- end of example/p' docs/fencing.md`
SELECT cmp_ok(length(:'example'), '>', 500, 'docs/fencing.md contains the trigger example');
:example

SET LOCAL ROLE app_writer;
SELECT lives_ok(format($$INSERT INTO app_target_results (target_id, result, lock_identity, lease_id, fencing_token)
                         VALUES ('target_01', '{"open_ports":[22]}', %L, %L, 2)$$,
                       t.ident(), :'a2'::jsonb #>> '{lease,lease_id}'),
                'the holder of the live lease inserts through the trigger');
SELECT lives_ok(format($$UPDATE app_target_results SET result = '{"open_ports":[22,443]}'
                          WHERE target_id = 'target_01' AND lease_id = %L$$, :'a2'::jsonb #>> '{lease,lease_id}'),
                'and updates');
SELECT throws_ok(format($$INSERT INTO app_target_results (target_id, result, lock_identity, lease_id, fencing_token)
                          VALUES ('target_01b', '{}', %L, %L, 1)$$, t.ident(), :'a1'::jsonb #>> '{lease,lease_id}'),
                 'LS011', NULL, 'the trigger rejects the stale token of the former holder');
SELECT throws_ok(format($$UPDATE app_target_results SET lease_id = %L, fencing_token = 1, result = '{}'
                          WHERE target_id = 'target_01'$$, :'a1'::jsonb #>> '{lease,lease_id}'),
                 'LS011', NULL, 'an update by the former holder is rejected too');
SELECT throws_ok(format($$INSERT INTO app_target_results (target_id, result, lock_identity, lease_id, fencing_token)
                          VALUES ('target_05', '{}', %L, %L, 1)$$, t.ident('target_05'), :'f1'::jsonb #>> '{lease,lease_id}'),
                 'LS010', NULL, 'a revoked lease cannot write through the trigger');
SELECT throws_ok($$SELECT lease.acquire('{}'::jsonb)$$, '42501', NULL,
                 'the writer role was granted fence_check only');
SELECT is((SELECT result FROM app_target_results WHERE target_id = 'target_01'), '{"open_ports":[22,443]}'::jsonb,
          'only the live lease''s writes are in the table');
RESET ROLE;
SELECT is((SELECT count(*)::int FROM app_target_results), 1, 'one row: the rejected inserts left nothing');

SELECT * FROM finish();
ROLLBACK;
