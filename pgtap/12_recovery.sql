-- Recovery: namespace sealing after a restore or failover, what a sealed
-- namespace refuses, lease.recover_epoch (raise by stride or to a floor,
-- never lower, revoke live leases, unseal, record), its token-limit refusal,
-- and lease.verify.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
SELECT plan(62);

SET LOCAL ROLE lease_operator;
SELECT is_empty('SELECT * FROM lease.verify()', 'verify is empty on a fresh, consistent namespace');
RESET ROLE;

-- check_namespace records, then seals on a changed system identifier -----------------------
UPDATE lease.namespace_state SET system_identifier = NULL, timeline_id = NULL;
SET LOCAL ROLE lease_service;
SELECT is(lease.check_namespace() - 'epoch' - 'timeline' - 'wal_lsn',
          '{"checked": true, "sealed": false, "sealed_reason": null, "recorded": true}'::jsonb,
          'the first check records the cluster identity');
SELECT is(lease.check_namespace() - 'epoch' - 'timeline' - 'wal_lsn',
          '{"checked": true, "sealed": false, "sealed_reason": null}'::jsonb,
          'an unchanged cluster stays unsealed');
SELECT ok((lease.check_namespace() ->> 'wal_lsn')::pg_lsn <= pg_current_wal_lsn(),
          'the check answers the WAL position for leased to keep');
-- leased saw a later position on this timeline: the database went back in
-- time (an older copy restored on the same timeline): sealed
SELECT is(lease.check_namespace(0, ('x' || left(pg_walfile_name(pg_current_wal_lsn()), 8))::bit(32)::integer + 1, 'FFFFFFFF/0') ->> 'sealed', 'false',
          'a position seen on another timeline is not compared');
SELECT is(lease.check_namespace(1, ('x' || left(pg_walfile_name(pg_current_wal_lsn()), 8))::bit(32)::integer, 'FFFFFFFF/0') ->> 'sealed', 'false',
          'nor one seen before a recovery (another epoch)');
SAVEPOINT copy;
SELECT is(lease.check_namespace(0, ('x' || left(pg_walfile_name(pg_current_wal_lsn()), 8))::bit(32)::integer, 'FFFFFFFF/0') ->> 'sealed', 'true',
          'a position behind the one seen on the same timeline seals');
RESET ROLE;
SELECT matches((SELECT sealed_reason FROM lease.namespace_state), 'older copy',
               'with the reason');
ROLLBACK TO SAVEPOINT copy;
SET LOCAL ROLE lease_service;
RESET ROLE;
SELECT is((SELECT ARRAY[system_identifier, timeline_id::numeric] FROM lease.namespace_state),
          ARRAY[(pg_control_system()).system_identifier::numeric, (pg_control_checkpoint()).timeline_id::numeric],
          'the recorded identity is this cluster''s system identifier and timeline');

-- leases and counters to recover later
SET LOCAL ROLE lease_service;
SELECT t.acquire('r-x') AS x1 \gset
SELECT t.acquire('r-y') AS y1 \gset
SELECT t.acquire('r-z') AS z1 \gset
SELECT t.acquire('r-w') AS w1 \gset
SELECT is(lease.release(t.ref(:'y1'::jsonb)) ->> 'code', 'lease_released', 'fixture: release r-y');
SELECT is(lease.release(t.ref(:'z1'::jsonb)) ->> 'code', 'lease_released', 'fixture: release r-z');
RESET ROLE;
SELECT t.set_counter(t.ident('r-y'), 5) AS ignored \gset
SELECT t.set_counter(t.ident('r-z'), 3) AS ignored \gset
-- r-z: a downstream store accepted token 50, above the restored counter
INSERT INTO lease.fence_marks VALUES (t.key(t.ident('r-z')), 50, now());
SELECT t.expire(:'w1'::jsonb #>> '{lease,lease_id}') AS ignored \gset
SELECT is((SELECT array_agg(problem) FROM lease.verify() WHERE lock_key = t.key(t.ident('r-z'))),
          ARRAY['counter_below_accepted_token'], 'verify reports a counter below an accepted token');

-- restore onto another cluster: sealed
UPDATE lease.namespace_state SET system_identifier = system_identifier + 1;
SET LOCAL ROLE lease_service;
SELECT is(lease.check_namespace() ->> 'sealed', 'true', 'another system identifier seals the namespace');
RESET ROLE;
SELECT is((SELECT sealed FROM lease.namespace_state), true, 'the namespace is sealed');
SELECT matches((SELECT sealed_reason FROM lease.namespace_state), 'system identifier', 'with the reason');
SELECT is((SELECT ARRAY[priority, decision] FROM lease.audit_events
            WHERE event_type = 'target_lease_alert' AND reason LIKE 'namespace sealed:%'),
          ARRAY['high', 'error'], 'sealing writes a high-priority alert');

-- what a sealed namespace refuses
SELECT t.snapshot() AS before \gset
SET LOCAL ROLE lease_service;
SELECT is(t.acquire('r-new') - 'detail', '{"code":"lease_backend_unavailable","reason":"sealed"}'::jsonb, 'sealed: acquire refused');
SELECT matches(t.acquire('r-new2') ->> 'detail', 'system identifier', 'and says why');
SELECT is(lease.renew(t.ref(:'x1'::jsonb)) - 'detail', '{"code":"lease_backend_unavailable","reason":"sealed"}'::jsonb,
          'sealed: renew refused');
SELECT is(lease.fenced_commit(t.commit_req(:'x1'::jsonb, jsonb_build_array(t.pub('x')))) - 'detail',
          '{"code":"lease_backend_unavailable","reason":"sealed"}'::jsonb, 'sealed: fenced_commit refused');
SELECT throws_ok(format('SELECT lease.fence_check(%L::jsonb, %L, 1)', t.ident('r-x'), :'x1'::jsonb #>> '{lease,lease_id}'),
                 'LS010', NULL, 'sealed: fence_check raises LS010');
SELECT is(lease.health() ->> 'sealed', 'true', 'health reports the seal');
SELECT is(lease.check_namespace() ->> 'sealed', 'true', 'checking again keeps it sealed');
RESET ROLE;
SELECT is(t.snapshot(), :'before', 'the refused operations wrote nothing');
SET LOCAL ROLE lease_operator;
SELECT is((SELECT count(*)::int FROM lease.verify() WHERE problem = 'namespace_sealed'), 1, 'verify reports the seal');
RESET ROLE;

-- a changed timeline seals too (failover, point-in-time restore)
UPDATE lease.namespace_state SET sealed = false, sealed_reason = NULL, sealed_at = NULL,
       system_identifier = (pg_control_system()).system_identifier, timeline_id = timeline_id + 1;
SET LOCAL ROLE lease_service;
SELECT is(lease.check_namespace() ->> 'sealed', 'true', 'another timeline seals the namespace');
RESET ROLE;
SELECT matches((SELECT sealed_reason FROM lease.namespace_state), 'timeline changed', 'with the reason');
UPDATE lease.namespace_state SET sealed = false, sealed_reason = NULL, sealed_at = NULL;
UPDATE lease.policy SET seal_on_timeline_change = false;
SET LOCAL ROLE lease_service;
SELECT is(lease.check_namespace() ->> 'sealed', 'false', 'unless the policy ignores timeline changes');
RESET ROLE;
UPDATE lease.policy SET seal_on_timeline_change = true;
SET LOCAL ROLE lease_service;
SELECT is(lease.check_namespace() ->> 'sealed', 'true', 'sealed again for recovery');
RESET ROLE;

-- recover_epoch: by the stride, to the high-water mark, never lower ----------------------------
UPDATE lease.policy SET epoch_stride = 10;
SET LOCAL ROLE lease_admin;
SELECT throws_ok($$SELECT lease.recover_epoch('')$$, '22023', NULL, 'recovery needs a reason');
SELECT throws_ok($$SELECT lease.recover_epoch('x', -1)$$, '22023', NULL, 'a negative floor is invalid');
SELECT lease.recover_epoch('restore drill') AS rec \gset
RESET ROLE;
SELECT is(:'rec'::jsonb, '{"epoch": 1, "counters_raised": 4, "leases_revoked": 1}'::jsonb,
          'recover_epoch raised 4 counters and revoked the 1 live lease');
SELECT is(t.counter(t.ident('r-x')), 11::bigint, 'r-x: counter 1 + stride 10');
SELECT is(t.counter(t.ident('r-y')), 15::bigint, 'r-y: counter 5 + stride 10');
SELECT is(t.counter(t.ident('r-z')), 50::bigint, 'r-z: raised to the accepted high-water mark 50, above counter + stride');
SELECT is((SELECT ARRAY[state, end_reason] FROM lease.history WHERE lease_id = :'x1'::jsonb #>> '{lease,lease_id}'),
          ARRAY['revoked', 'epoch recovery: restore drill'], 'the live lease was revoked with the reason');
SELECT is((SELECT state FROM lease.history WHERE lease_id = :'w1'::jsonb #>> '{lease,lease_id}'), 'expired',
          'the already expired lease is recorded as expired, not revoked');
SELECT is((SELECT count(*)::int FROM lease.locks WHERE state = 'active'), 0, 'no restored lease is active');
SELECT is((SELECT ARRAY[sealed::text, epoch::text] FROM lease.namespace_state), ARRAY['false', '1'],
          'the namespace is unsealed at epoch 1');
SELECT is((SELECT ARRAY[epoch::text, reason, counters_raised::text, leases_revoked::text, coalesce(floor_token::text, '-')]
             FROM lease.recoveries),
          ARRAY['1', 'restore drill', '4', '1', '-'], 'lease.recoveries records the recovery');
SELECT is((SELECT ARRAY[priority, reason] FROM lease.audit_events WHERE event_type = 'target_lease_recover'),
          ARRAY['high', 'epoch recovery: restore drill'], 'and a high-priority audit event');
SET LOCAL ROLE lease_operator;
SELECT is_empty('SELECT * FROM lease.verify()', 'verify is empty after recovery');
RESET ROLE;

-- the former holder has no authority; the next token is above every old one
SET LOCAL ROLE lease_service;
SELECT is(lease.renew(t.ref(:'x1'::jsonb)), '{"code":"lease_lost"}'::jsonb, 'the revoked holder cannot renew');
SELECT throws_ok(format('SELECT lease.fence_check(%L::jsonb, %L, 1)', t.ident('r-x'), :'x1'::jsonb #>> '{lease,lease_id}'),
                 'LS010', NULL, 'nor pass the fence');
SELECT is(t.acquire('r-x') #>> '{lease,fencing_token}', '12', 'the next acquisition of r-x gets token 12');
SELECT is(t.acquire('r-z') #>> '{lease,fencing_token}', '51', 'the next acquisition of r-z gets token 51');
RESET ROLE;

-- a floor above, a floor below
SET LOCAL ROLE lease_admin;
SELECT is(lease.recover_epoch('proven floor', 1000) ->> 'counters_raised', '4', 'recover to floor 1000');
RESET ROLE;
SELECT is((SELECT array_agg(DISTINCT fencing_counter) FROM lease.locks), ARRAY[1000::bigint],
          'every counter is raised to the floor');
SET LOCAL ROLE lease_admin;
SELECT is(lease.recover_epoch('floor below the counters', 5) ->> 'epoch', '3', 'recover with a floor below the counters');
RESET ROLE;
SELECT is((SELECT array_agg(DISTINCT fencing_counter) FROM lease.locks), ARRAY[1010::bigint],
          'a floor below never lowers: counter + stride');

-- the token limit: refuse (LS005) and change nothing
UPDATE lease.policy SET token_limit = 1015;
SELECT t.snapshot() AS before \gset
SET LOCAL ROLE lease_admin;
SELECT throws_ok($$SELECT lease.recover_epoch('would pass the limit')$$, 'LS005', NULL,
                 'a stride past the token limit is refused (LS005)');
SELECT throws_ok($$SELECT lease.recover_epoch('floor past the limit', 2000)$$, 'LS005', NULL,
                 'a floor past the token limit is refused (LS005)');
RESET ROLE;
SELECT is(t.snapshot(), :'before', 'refused recoveries changed nothing');
SELECT is((SELECT max(epoch) FROM lease.recoveries), 3, 'no recovery was recorded');

-- verify reports each injected inconsistency -------------------------------------------------
CREATE FUNCTION t.problems(k text) RETURNS text[] LANGUAGE sql STABLE
RETURN (SELECT array_agg(problem ORDER BY problem) FROM lease.verify() v WHERE v.lock_key = k);
UPDATE lease.locks SET target_id = 'r-y-moved' WHERE lock_key = t.key(t.ident('r-y'));
INSERT INTO lease.fenced_documents VALUES (t.key(t.ident('r-x')), 'doc', 1, '{}', 5000, 'lease_x', 'exec', NULL, now());
INSERT INTO lease.history
SELECT 'lease_ghost', t.key(t.ident('r-w')), 'tenant-main', 'program-a', 'starintel-target', 'r-w', 'usernamegen',
       'default', 'default', 1, 9999, 'p1', 'c', 'k', 'i', now(), now(), now(), 30000, 3600000, 'e', 'j', NULL,
       'r', '{}', 'expired', now(), NULL, NULL, NULL, NULL;
INSERT INTO lease.fence_marks VALUES (t.key(t.ident('r-missing')), 7, now());
ALTER TABLE lease.locks DROP CONSTRAINT locks_fencing;  -- to store the corrupt row verify must find
UPDATE lease.locks SET state = 'active', lease_id = 'lease_x', fencing_token = 2000, owner_principal_id = 'p1',
       owner_client_id = 'c', owner_credential_id = 'k', service_instance_id = 'i', acquired_at = now(),
       renewed_at = now(), expires_at = now() + interval '1 minute', ttl_ms = 60000, maximum_lifetime_ms = 3600000,
       execution_id = 'e', job_id = 'j', request_id = 'r', metadata = '{}'
 WHERE lock_key = t.key(t.ident('r-z'));
-- shapes no CHECK enforces any more (0009): an active row missing a column,
-- and an administrative end without its administrator
SET LOCAL ROLE lease_service;
SELECT t.acquire('r-v') IS NOT NULL AS acquired_r_v \gset
RESET ROLE;
UPDATE lease.locks SET execution_id = NULL WHERE lock_key = t.key(t.ident('r-v'));
INSERT INTO lease.history
SELECT 'lease_unattributed', t.key(t.ident('r-v')), 'tenant-main', 'program-a', 'starintel-target', 'r-v',
       'usernamegen', 'default', 'default', 1, 1, 'p1', 'c', 'k', 'i', now(), now(), now(), 30000, 3600000,
       'e', 'j', NULL, 'r', '{}', 'released', now(), NULL, NULL, NULL, NULL;
SET LOCAL ROLE lease_service;
SELECT cmp_ok(lease.quarantine(t.key(t.ident('r-new')), 'acquire', 'test case'), '>', 0::bigint, 'fixture: quarantine');
RESET ROLE;
SET LOCAL ROLE lease_operator;
SELECT is(t.problems(t.key(t.ident('r-y'))), ARRAY['lock_key_mismatch'], 'verify: stored tuple does not derive its key');
SELECT is(t.problems(t.key(t.ident('r-x'))), ARRAY['document_token_above_counter'],
          'verify: a document accepted a token above the counter');
SELECT is(t.problems(t.key(t.ident('r-w'))), ARRAY['history_without_counter'], 'verify: history token above the counter');
SELECT is(t.problems(t.key(t.ident('r-missing'))), ARRAY['counter_below_accepted_token'],
          'verify: an accepted token without a counter');
SELECT is(t.problems(t.key(t.ident('r-z'))), ARRAY['token_above_counter'], 'verify: an active token above the counter');
SELECT is(t.problems(t.key(t.ident('r-new'))), ARRAY['quarantined'], 'verify: an open quarantine case');
SELECT is(t.problems(t.key(t.ident('r-v'))), ARRAY['active_row_malformed', 'history_malformed'],
          'verify: an active row missing a column, and an unattributed administrative end');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
