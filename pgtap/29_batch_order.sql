-- Batch items are decided in request order, and each answer sits at its
-- item's position: where two items of one batch touch the same lease, the
-- earlier one decides first (a second renewal's TTL is the one that stays;
-- of two releases the first releases and the second finds the lease gone),
-- and a batch of 100 distinct leases answers item i about lease i.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
SELECT plan(7);

SET LOCAL ROLE lease_service;
SELECT t.acquire('target_01') AS a1 \gset
SELECT t.acquire('target_02') AS a2 \gset
SELECT lease.renew_many(jsonb_build_object('renewals', jsonb_build_array(
    t.ref(:'a1'::jsonb, '{"ttl_ms": 20000}'), t.ref(:'a1'::jsonb, '{"ttl_ms": 40000}'),
    t.ref(:'a1'::jsonb, '{"ttl_ms": 30000}')))) AS rb \gset
SELECT lease.release_many(jsonb_build_object('releases', jsonb_build_array(
    t.ref(:'a2'::jsonb), t.ref(:'a2'::jsonb)))) AS lb \gset
RESET ROLE;

SELECT is(ARRAY(SELECT r ->> 'code' FROM jsonb_array_elements(:'rb'::jsonb -> 'results') r),
          ARRAY['lease_renewed', 'lease_renewed', 'lease_renewed'], 'three renewals of one lease: all renewed');
SELECT is((t.lock_of(:'a1'::jsonb #>> '{lease,lease_id}')).ttl_ms, 30000::bigint,
          'the last item''s TTL stays: the items were decided first to last');
SELECT is(ARRAY(SELECT (r #>> '{lease,ttl_ms}')::bigint FROM jsonb_array_elements(:'rb'::jsonb -> 'results') r),
          ARRAY[20000, 40000, 30000]::bigint[], 'each answer shows its own item''s TTL, in request order');
SELECT is(:'lb'::jsonb #>> '{results,0,code}', 'lease_released', 'two releases of one lease: the first releases');
SELECT is(:'lb'::jsonb #>> '{results,1,code}', 'lease_lost', 'and the second finds it gone');

-- 100 distinct leases: answer i is about lease i
SET LOCAL ROLE lease_service;
CREATE TEMP TABLE many AS
    SELECT i, t.acquire('target_m' || i) AS a FROM generate_series(1, 100) i;
SELECT lease.renew_many(jsonb_build_object('renewals',
    (SELECT jsonb_agg(t.ref(a) ORDER BY i) FROM many))) AS mb \gset
SELECT lease.release_many(jsonb_build_object('releases',
    (SELECT jsonb_agg(t.ref(a) ORDER BY i DESC) FROM many))) AS mr \gset
RESET ROLE;
SELECT is(ARRAY(SELECT r #>> '{lease,lease_id}' FROM jsonb_array_elements(:'mb'::jsonb -> 'results')
                WITH ORDINALITY AS x(r, n) ORDER BY n),
          ARRAY(SELECT a #>> '{lease,lease_id}' FROM many ORDER BY i),
          'renew_many of 100: answer i names lease i');
SELECT is(ARRAY(SELECT r #>> '{lease,lease_id}' FROM jsonb_array_elements(:'mr'::jsonb -> 'results')
                WITH ORDINALITY AS x(r, n) ORDER BY n),
          ARRAY(SELECT a #>> '{lease,lease_id}' FROM many ORDER BY i DESC),
          'release_many of 100 (in reverse order of acquisition): answer i names lease i');

SELECT * FROM finish();
ROLLBACK;
