-- Privileged force-release and revoke: a bounded reason, comparison against
-- the observed lease (never an unseen successor), terminal state with the
-- reason/incident, a high-priority audit event in the same transaction, the
-- fence rejecting the invalidated lease, and the psql wrappers.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
SELECT plan(48);

SET LOCAL ROLE lease_service;
SELECT t.acquire() AS a1 \gset
RESET ROLE;
SELECT t.snapshot() AS before \gset

-- reasons ---------------------------------------------------------------------------
SET LOCAL ROLE lease_service;
CREATE TEMP TABLE bad (what text, op text, r jsonb) ON COMMIT DROP;
INSERT INTO bad
SELECT what, op, CASE op WHEN 'force_release' THEN lease.force_release(q) ELSE lease.revoke(q) END
  FROM (VALUES ('missing reason', t.admin(:'a1'::jsonb) - 'reason'),
               ('null reason', t.admin(:'a1'::jsonb, NULL)),
               ('empty reason', t.admin(:'a1'::jsonb, '')),
               ('blank reason', t.admin(:'a1'::jsonb, '   ')),
               ('reason of 513 characters', t.admin(:'a1'::jsonb, repeat('r', 513))),
               ('reason with a newline', t.admin(:'a1'::jsonb, E'stuck\nworker')),
               ('reason with a control character', t.admin(:'a1'::jsonb, E'stuck\x01')),
               ('numeric reason', t.admin(:'a1'::jsonb, NULL, '{"reason": 42}'))) v(what, q),
       unnest(ARRAY['force_release', 'revoke']) op;
SELECT is(r, '{"code":"invalid_lease_request","field":"reason"}'::jsonb, op || ': ' || what || ' is invalid')
  FROM bad ORDER BY op, what;
SELECT is(lease.force_release(t.admin(:'a1'::jsonb, 'x', '{"incident_id": "INC-1"}')) ->> 'field',
          'incident_id', 'force_release takes no incident id');
SELECT is(lease.revoke(t.admin(:'a1'::jsonb, 'x', '{"incident_id": "INC 1"}')) ->> 'field',
          'incident_id', 'revoke refuses a malformed incident id');
RESET ROLE;
SELECT is(t.snapshot(), :'before', 'invalid administrative requests wrote nothing');

-- compare against the observed lease -------------------------------------------------
SET LOCAL ROLE lease_service;
SELECT is(lease.force_release(t.admin(:'a1'::jsonb, 'x', '{"fencing_token": 2}')), '{"code":"lease_lost"}'::jsonb,
          'force_release with another token: lease_lost');
SELECT is(lease.revoke(t.admin(:'a1'::jsonb, 'x', '{"lease_id": "lease_0"}')), '{"code":"lease_lost"}'::jsonb,
          'revoke with another lease id: lease_lost');
RESET ROLE;
SELECT t.expire(:'a1'::jsonb #>> '{lease,lease_id}') AS ignored \gset
SET LOCAL ROLE lease_service;
SELECT is(lease.force_release(t.admin(:'a1'::jsonb)), '{"code":"lease_lost"}'::jsonb,
          'force_release of an expired lease: lease_lost');
-- a successor appears; the administrator still acts on the lease they observed
SELECT t.acquire('target_01', jsonb_build_object('principal', t.principal('p2'))) AS a2 \gset
SELECT is(lease.force_release(t.admin(:'a1'::jsonb)), '{"code":"lease_lost"}'::jsonb,
          'force_release of the observed (old) lease does not touch the successor');
SELECT is(lease.revoke(t.admin(:'a1'::jsonb)), '{"code":"lease_lost"}'::jsonb,
          'revoke of the observed (old) lease does not touch the successor');
SELECT is(lease.revoke(t.admin(:'a2'::jsonb, 'x', '{"fencing_token": 1}')), '{"code":"lease_lost"}'::jsonb,
          'revoke of the successor''s id with the stale token: lease_lost');
RESET ROLE;
SELECT is((SELECT lease_id FROM lease.active_leases WHERE lock_key = t.key(t.ident())),
          :'a2'::jsonb #>> '{lease,lease_id}', 'the successor is untouched');

-- force_release -----------------------------------------------------------------------
SET LOCAL ROLE lease_service;
SELECT t.admin(:'a2'::jsonb, 'worker wedged on target_01') AS fq \gset
SELECT lease.force_release(:'fq'::jsonb) AS f1 \gset
RESET ROLE;
SELECT is(:'f1'::jsonb ->> 'code', 'lease_released', 'force_release: lease_released');
SELECT is((SELECT ARRAY[state, end_reason, ended_by_principal_id, coalesce(incident_id, '-')]
             FROM lease.history WHERE lease_id = :'a2'::jsonb #>> '{lease,lease_id}'),
          ARRAY['released', 'worker wedged on target_01', 'adm1', '-'],
          'history: released (operational), with the reason and the administrator');
SELECT is((SELECT ARRAY[event_type, priority, result_code, reason, principal_class, resulting_state]
             FROM lease.audit_events WHERE request_id = :'fq'::jsonb ->> 'request_id'),
          ARRAY['target_lease_force_release', 'high', 'lease_released', 'worker wedged on target_01',
                'admin', 'released'],
          'a high-priority audit event with the reason, in the same transaction');
SELECT is(t.counter(t.ident()), 2::bigint, 'force_release keeps the counter');
SET LOCAL ROLE lease_service;
SELECT throws_ok(format('SELECT lease.fence_check(%L::jsonb, %L, 2)', t.ident(), :'a2'::jsonb #>> '{lease,lease_id}'),
                 'LS010', NULL, 'the fence rejects the force-released lease');
SELECT is(lease.renew(t.ref(:'a2'::jsonb)), '{"code":"lease_lost"}'::jsonb, 'its holder cannot renew');
RESET ROLE;

-- revoke --------------------------------------------------------------------------------
SET LOCAL ROLE lease_service;
SELECT t.acquire() AS a3 \gset
SELECT t.admin(:'a3'::jsonb, repeat('r', 512), '{"incident_id": "INC-2026-17"}') AS vq \gset
SELECT lease.revoke(:'vq'::jsonb) AS v1 \gset
RESET ROLE;
SELECT is(:'v1'::jsonb ->> 'code', 'lease_revoked', 'revoke with a 512-character reason: lease_revoked');
SELECT is(ARRAY[:'v1'::jsonb #>> '{lease,state}', :'v1'::jsonb #>> '{lease,incident_id}'],
          ARRAY['revoked', 'INC-2026-17'], 'the answer carries the security state and incident');
SELECT is((SELECT ARRAY[state, (end_reason = repeat('r', 512))::text, incident_id] FROM lease.history
            WHERE lease_id = :'a3'::jsonb #>> '{lease,lease_id}'),
          ARRAY['revoked', 'true', 'INC-2026-17'],
          'history: revoked (security), with reason and incident');
SELECT is((SELECT ARRAY[event_type, priority, incident_id, resulting_state, previous_state]
             FROM lease.audit_events WHERE request_id = :'vq'::jsonb ->> 'request_id'),
          ARRAY['target_lease_revoke', 'high', 'INC-2026-17', 'revoked', 'active'],
          'a high-priority revoke audit event with the incident');
SET LOCAL ROLE lease_service;
SELECT throws_ok(format('SELECT lease.fence_check(%L::jsonb, %L, 3)', t.ident(), :'a3'::jsonb #>> '{lease,lease_id}'),
                 'LS010', NULL, 'the fence rejects the revoked lease');
SELECT is(lease.acquire(t.acq()) #>> '{lease,fencing_token}', '4', 'the next acquisition gets token 4');
RESET ROLE;

-- psql wrappers, as lease_admin -------------------------------------------------------------
SET LOCAL ROLE lease_service;
SELECT t.acquire('target_w1') AS w1 \gset
SELECT t.acquire('target_w2') AS w2 \gset
SELECT throws_ok(format('SELECT lease.admin_revoke(%L, %L)', :'w1'::jsonb #>> '{lease,lease_id}', 'x'),
                 '42501', NULL, 'lease_service cannot use the psql wrappers');
RESET ROLE;
SET LOCAL ROLE lease_admin;
SELECT is(lease.admin_force_release(:'w1'::jsonb #>> '{lease,lease_id}', 'drain host-7') ->> 'code',
          'lease_released', 'admin_force_release');
SELECT is(lease.admin_revoke(:'w2'::jsonb #>> '{lease,lease_id}', 'credential leak', 'INC-9') #>> '{lease,state}',
          'revoked', 'admin_revoke');
SELECT is(lease.admin_revoke(:'w2'::jsonb #>> '{lease,lease_id}', 'again'), '{"code":"lease_lost"}'::jsonb,
          'a wrapper on a lease that is no longer active: lease_lost');
SELECT is(lease.admin_force_release('lease_unknown', 'x'), '{"code":"lease_lost"}'::jsonb,
          'a wrapper on an unknown lease id: lease_lost');
RESET ROLE;
SET LOCAL ROLE lease_service;
SELECT t.acquire('target_w3') AS w3 \gset
RESET ROLE;
SET LOCAL ROLE lease_admin;
SELECT is(lease.admin_force_release(:'w3'::jsonb #>> '{lease,lease_id}', NULL),
          '{"code":"invalid_lease_request","field":"reason"}'::jsonb, 'the wrappers require a reason');
SELECT is(lease.admin_revoke(:'w3'::jsonb #>> '{lease,lease_id}', E'bad\treason'),
          '{"code":"invalid_lease_request","field":"reason"}'::jsonb, 'and refuse control characters');
RESET ROLE;
SELECT is((SELECT array_agg(ARRAY[state, end_reason, ended_by_principal_id, coalesce(incident_id, '-')]
                            ORDER BY state)
             FROM lease.history WHERE lease_id IN (:'w1'::jsonb #>> '{lease,lease_id}', :'w2'::jsonb #>> '{lease,lease_id}')),
          ARRAY[ARRAY['released', 'drain host-7', 'sql:' || session_user, '-'],
                ARRAY['revoked', 'credential leak', 'sql:' || session_user, 'INC-9']],
          'the wrappers record the session user as the administrator');
SELECT is((SELECT count(*)::int FROM lease.audit_events
            WHERE lease_id IN (:'w1'::jsonb #>> '{lease,lease_id}', :'w2'::jsonb #>> '{lease,lease_id}')
              AND priority = 'high' AND principal_class = 'sql'),
          2, 'each wrapper call wrote one high-priority audit event');
SELECT is((SELECT lease_id FROM lease.active_leases WHERE lock_key = t.key(t.ident('target_w3'))),
          :'w3'::jsonb #>> '{lease,lease_id}', 'refused wrapper calls left the lease active');

SELECT * FROM finish();
ROLLBACK;
