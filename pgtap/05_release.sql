-- release-if-owner: compare-and-delete on the exact ownership tuple; terminal
-- evidence; the counter survives; a stale release cannot end a successor.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
SELECT plan(27);

SET LOCAL ROLE lease_service;
SELECT t.acquire() AS a1 \gset
SELECT t.acquire('target_02') AS other \gset
RESET ROLE;
SELECT t.snapshot() AS before \gset

-- every mismatching field: lease_lost, nothing written ------------------------------
SET LOCAL ROLE lease_service;
CREATE TEMP TABLE wrong (what text, r jsonb) ON COMMIT DROP;
INSERT INTO wrong VALUES
  ('identity (another target)', lease.release(t.ref(:'a1'::jsonb, jsonb_build_object('lock_identity', t.ident('target_02'))))),
  ('identity (other actor)', lease.release(t.ref(:'a1'::jsonb, jsonb_build_object('lock_identity', t.ident(actor => 'other'))))),
  ('lease id', lease.release(t.ref(:'a1'::jsonb, jsonb_build_object('lease_id', :'other'::jsonb #>> '{lease,lease_id}')))),
  ('fencing token', lease.release(t.ref(:'a1'::jsonb, '{"fencing_token": 7}'))),
  ('owner principal', lease.release(t.ref(:'a1'::jsonb, jsonb_build_object('principal', t.principal('p2'))))),
  ('service instance', lease.release(t.ref(:'a1'::jsonb, '{"service_instance_id": "inst-2"}')));
SELECT is(r, '{"code":"lease_lost"}'::jsonb, 'wrong ' || what || ': lease_lost') FROM wrong ORDER BY what;
SELECT is(lease.release(t.ref(:'a1'::jsonb) - 'service_instance_id') ->> 'field', 'service_instance_id',
          'service_instance_id is required');
SELECT is(lease.release(t.ref(:'a1'::jsonb, '{"lock_identity": {"tenant_id": "x"}}')) ->> 'field',
          'lock_identity.program_id', 'an incomplete identity is invalid');
RESET ROLE;
SELECT is(t.snapshot(), :'before', 'no mismatching release wrote anything');
SELECT is((SELECT count(*)::int FROM lease.active_leases), 2, 'both leases still active');

-- success: terminal evidence, row freed, counter kept -----------------------------------
SET LOCAL ROLE lease_service;
SELECT t.ref(:'a1'::jsonb) AS rq \gset
SELECT lease.release(:'rq'::jsonb) AS r1 \gset
RESET ROLE;
SELECT is(:'r1'::jsonb ->> 'code', 'lease_released', 'the exact owner releases');
SELECT is(:'r1'::jsonb #>> '{lease,state}', 'released', 'the answer is the terminal record');
SELECT is((:'r1'::jsonb #>> '{lease,ended_at}')::timestamptz, date_trunc('milliseconds', now()),
          'ended_at is backend time');
SELECT is((SELECT ARRAY[state, fencing_token::text, ended_by_principal_id, ended_by_credential_id,
                        coalesce(end_reason, '-')]
             FROM lease.history WHERE lease_id = :'a1'::jsonb #>> '{lease,lease_id}'),
          ARRAY['released', '1', 'p1', 'cred-p1', '-'], 'released evidence in history, ended by the owner');
SELECT is((t.row_of(t.ident())).state, 'free', 'the identity row is free');
SELECT is((SELECT count(*)::int FROM lease.active_leases WHERE lock_key = t.key(t.ident())), 0,
          'no live lease remains for the identity (the freed row keeps its last lease''s columns)');
SELECT is(t.counter(t.ident()), 1::bigint, 'the counter is kept');
SELECT is(t.idem_count(:'rq'::jsonb ->> 'request_id'), 1::bigint, 'one idempotency row');
SELECT is(t.audit_count(:'rq'::jsonb ->> 'request_id'), 1::bigint, 'one audit event');

-- releasing again (new request): the lease is gone -------------------------------------
SET LOCAL ROLE lease_service;
SELECT is(lease.release(t.ref(:'a1'::jsonb)), '{"code":"lease_lost"}'::jsonb, 'a second release: lease_lost');
RESET ROLE;

-- an expired lease cannot be released --------------------------------------------------
SELECT t.expire(:'other'::jsonb #>> '{lease,lease_id}') AS ignored \gset
SET LOCAL ROLE lease_service;
SELECT is(lease.release(t.ref(:'other'::jsonb)), '{"code":"lease_lost"}'::jsonb,
          'releasing an expired lease: lease_lost');
RESET ROLE;
SELECT is((SELECT count(*)::int FROM lease.history WHERE lease_id = :'other'::jsonb #>> '{lease,lease_id}'), 0,
          'an expired lease is not turned into a released one');

-- stale release after reacquire leaves the successor active ------------------------------
SET LOCAL ROLE lease_service;
SELECT t.acquire('target_03') AS s1 \gset
RESET ROLE;
SELECT t.expire(:'s1'::jsonb #>> '{lease,lease_id}') AS ignored \gset
SET LOCAL ROLE lease_service;
-- the successor is the same principal and instance: only the lease id and token differ
SELECT t.acquire('target_03') AS s2 \gset
SELECT is(:'s2'::jsonb #>> '{lease,fencing_token}', '2', 'the successor holds token 2');
SELECT is(lease.release(t.ref(:'s1'::jsonb)), '{"code":"lease_lost"}'::jsonb,
          'the stale release (old lease id and token): lease_lost');
SELECT is(lease.release(t.ref(:'s1'::jsonb, jsonb_build_object('lease_id', :'s2'::jsonb #>> '{lease,lease_id}'))),
          '{"code":"lease_lost"}'::jsonb, 'the successor''s id with the old token: lease_lost');
SELECT is(lease.release(t.ref(:'s1'::jsonb, '{"fencing_token": 2}')), '{"code":"lease_lost"}'::jsonb,
          'the old id with the successor''s token: lease_lost');
RESET ROLE;
SELECT is((SELECT ARRAY[lease_id, fencing_token::text] FROM lease.active_leases
            WHERE lock_key = t.key(t.ident('target_03'))),
          ARRAY[:'s2'::jsonb #>> '{lease,lease_id}', '2'], 'the successor remains active');

SELECT * FROM finish();
ROLLBACK;
