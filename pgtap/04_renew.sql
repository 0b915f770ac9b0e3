-- renew-if-owner: every field of the ownership tuple is required; a wrong one
-- answers lease_lost and mutates nothing; success keeps the token and bounds
-- expires_at by the TTL and the maximum lifetime; expiry cannot be undone.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
SELECT plan(36);

SET LOCAL ROLE lease_service;
SELECT t.acquire() AS a1 \gset
-- an unrelated lease of another identity, to aim wrong identities at
SELECT t.acquire('target_02') AS other \gset
RESET ROLE;
-- the lease was acquired 10 s ago: a renewal is visible as renewed_at moving
SELECT t.age(:'a1'::jsonb #>> '{lease,lease_id}', '10 seconds') AS ignored \gset
SELECT t.snapshot() AS before \gset

-- every mismatching field: lease_lost, nothing written ---------------------------
SET LOCAL ROLE lease_service;
CREATE TEMP TABLE wrong (what text, r jsonb) ON COMMIT DROP;
INSERT INTO wrong VALUES
  ('identity (another target)', lease.renew(t.ref(:'a1'::jsonb, jsonb_build_object('lock_identity', t.ident('target_02'))))),
  ('identity (unknown target)', lease.renew(t.ref(:'a1'::jsonb, jsonb_build_object('lock_identity', t.ident('target_99'))))),
  ('identity (other operation class)', lease.renew(t.ref(:'a1'::jsonb,
      jsonb_build_object('lock_identity', t.ident(opclass => 'collect'))))),
  ('lease id', lease.renew(t.ref(:'a1'::jsonb, jsonb_build_object('lease_id', :'other'::jsonb #>> '{lease,lease_id}')))),
  ('fencing token', lease.renew(t.ref(:'a1'::jsonb, '{"fencing_token": 2}'))),
  ('owner principal', lease.renew(t.ref(:'a1'::jsonb, jsonb_build_object('principal', t.principal('p2'))))),
  ('service instance', lease.renew(t.ref(:'a1'::jsonb, '{"service_instance_id": "inst-2"}')));
SELECT is(r, '{"code":"lease_lost"}'::jsonb, 'wrong ' || what || ': lease_lost') FROM wrong ORDER BY what;
RESET ROLE;
SELECT is(t.snapshot(), :'before', 'no mismatching renewal wrote anything (lease, idempotency, audit)');

-- invalid requests ----------------------------------------------------------------
SET LOCAL ROLE lease_service;
SELECT is(lease.renew(t.ref(:'a1'::jsonb) - 'service_instance_id') ->> 'field', 'service_instance_id',
          'service_instance_id is required');
SELECT is(lease.renew(t.ref(:'a1'::jsonb) - 'lease_id') ->> 'field', 'lease_id', 'lease_id is required');
SELECT is(lease.renew(t.ref(:'a1'::jsonb, '{"fencing_token": 0}')) ->> 'field', 'fencing_token',
          'a non-positive token is invalid');
SELECT is(lease.renew(t.ref(:'a1'::jsonb, '{"fencing_token": "1"}')) ->> 'field', 'fencing_token',
          'a string token is invalid');
SELECT is(lease.renew(t.ref(:'a1'::jsonb, '{"ttl_ms": 1000}')) ->> 'field', 'ttl_ms', 'TTL bounds apply to renewal');
SELECT is(lease.renew(t.ref(:'a1'::jsonb, jsonb_build_object('deadline_at', t.rfc3339(now() - interval '1 s')))),
          '{"code":"deadline_exceeded"}'::jsonb, 'a passed deadline: deadline_exceeded');
RESET ROLE;
SELECT is(t.snapshot(), :'before', 'invalid and late renewals wrote nothing');

-- success ------------------------------------------------------------------------
SET LOCAL ROLE lease_service;
SELECT t.ref(:'a1'::jsonb) AS rq \gset
SELECT lease.renew(:'rq'::jsonb) AS r1 \gset
RESET ROLE;
SELECT is(:'r1'::jsonb ->> 'code', 'lease_renewed', 'the exact owner renews');
SELECT is(:'r1'::jsonb #> '{lease,fencing_token}', :'a1'::jsonb #> '{lease,fencing_token}', 'the token is kept');
SELECT is(:'r1'::jsonb #> '{lease,lease_id}', :'a1'::jsonb #> '{lease,lease_id}', 'the lease id is kept');
SELECT is((t.lock_of(:'a1'::jsonb #>> '{lease,lease_id}')).renewed_at, date_trunc('milliseconds', now()),
          'renewed_at is backend time');
SELECT is((t.lock_of(:'a1'::jsonb #>> '{lease,lease_id}')).expires_at,
          date_trunc('milliseconds', now()) + interval '30 seconds', 'expires_at = now + ttl');
SELECT is((t.lock_of(:'a1'::jsonb #>> '{lease,lease_id}')).acquired_at,
          date_trunc('milliseconds', now()) - interval '10 seconds', 'acquired_at is unchanged');
SELECT is(t.counter(t.ident()), 1::bigint, 'renewal allocates no token');
SELECT is(ARRAY[(t.lock_of(:'a1'::jsonb #>> '{lease,lease_id}')).execution_id,
                (t.lock_of(:'a1'::jsonb #>> '{lease,lease_id}')).job_id,
                (t.lock_of(:'a1'::jsonb #>> '{lease,lease_id}')).owner_principal_id,
                (t.lock_of(:'a1'::jsonb #>> '{lease,lease_id}')).maximum_lifetime_ms::text],
          ARRAY['exec-1', 'job-1', 'p1', '3600000'],
          'owner, execution, job and maximum lifetime are unchanged');
SELECT is(t.idem_count(:'rq'::jsonb ->> 'request_id'), 1::bigint, 'one idempotency row');
SELECT is(t.audit_count(:'rq'::jsonb ->> 'request_id'), 1::bigint, 'one audit event');

-- a renewal may change the TTL within bounds ----------------------------------------
SET LOCAL ROLE lease_service;
SELECT is(lease.renew(t.ref(:'a1'::jsonb, '{"ttl_ms": 60000}')) #>> '{lease,ttl_ms}', '60000',
          'a renewal with ttl_ms 60000');
RESET ROLE;
SELECT is((t.lock_of(:'a1'::jsonb #>> '{lease,lease_id}')).expires_at,
          date_trunc('milliseconds', now()) + interval '60 seconds', 'expires_at follows the new TTL');

-- maximum lifetime bounds a renewal ----------------------------------------------------
SET LOCAL ROLE lease_service;
SELECT t.acquire('life-1', '{"ttl_ms": 30000, "maximum_lifetime_ms": 40000}') AS l1 \gset
RESET ROLE;
SELECT t.age(:'l1'::jsonb #>> '{lease,lease_id}', '25 seconds') AS ignored \gset
SET LOCAL ROLE lease_service;
SELECT lease.renew(t.ref(:'l1'::jsonb)) AS lr \gset
RESET ROLE;
SELECT is(:'lr'::jsonb ->> 'code', 'lease_renewed', 'renewal 25 s into a 40 s lifetime');
SELECT is((t.lock_of(:'l1'::jsonb #>> '{lease,lease_id}')).expires_at,
          (t.lock_of(:'l1'::jsonb #>> '{lease,lease_id}')).acquired_at + interval '40 seconds',
          'expires_at is capped at acquired_at + maximum_lifetime_ms, not now + ttl');
SELECT is((:'lr'::jsonb #>> '{lease,expires_at}')::timestamptz,
          date_trunc('milliseconds', now()) + interval '15 seconds', 'the answer shows the capped expiry');

-- an expired renewal cannot revive the lease --------------------------------------------
SELECT t.expire(:'a1'::jsonb #>> '{lease,lease_id}') AS expired_at \gset
SELECT t.snapshot() AS before \gset
SET LOCAL ROLE lease_service;
SELECT is(lease.renew(t.ref(:'a1'::jsonb)), '{"code":"lease_lost"}'::jsonb,
          'renewing an expired lease: lease_lost');
RESET ROLE;
SELECT is(t.snapshot(), :'before', 'the expired renewal wrote nothing');
SELECT is((t.lock_of(:'a1'::jsonb #>> '{lease,lease_id}')).expires_at, :'expired_at'::timestamptz,
          'expires_at stays in the past');
SELECT is((SELECT count(*)::int FROM lease.active_leases WHERE lease_id = :'a1'::jsonb #>> '{lease,lease_id}'), 0,
          'the lease is not active');

-- expiry is inclusive: a lease whose expires_at equals backend time is expired
SET LOCAL ROLE lease_service;
SELECT t.acquire('edge-1') AS e1 \gset
RESET ROLE;
UPDATE lease.locks SET acquired_at = now() - interval '30 s', renewed_at = now() - interval '30 s', expires_at = now()
 WHERE lease_id = :'e1'::jsonb #>> '{lease,lease_id}';
SET LOCAL ROLE lease_service;
SELECT is(lease.renew(t.ref(:'e1'::jsonb)), '{"code":"lease_lost"}'::jsonb,
          'expires_at = backend time: the renewal is too late');
SELECT is(t.acquire('edge-1', jsonb_build_object('principal', t.principal('p2'))) #>> '{lease,fencing_token}', '2',
          'and another owner acquires token 2');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
