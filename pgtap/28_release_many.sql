-- Many releases in one transaction: lease.release_many decides each item
-- with lease.release itself, so in one call one item releases, one is lost
-- (wrong token), one is the stored answer of its repeated request id, one
-- is an idempotency conflict and one is invalid, each its own typed result
-- in request order; the released item writes its own idempotency row and
-- audit event, the others leave their leases as they were.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
SELECT plan(19);

SET LOCAL ROLE lease_service;
SELECT t.acquire('target_01') AS a1 \gset
SELECT t.acquire('target_02') AS a2 \gset
SELECT t.acquire('target_03') AS a3 \gset
-- a3 was released once already: its request is repeated in the batch
SELECT t.ref(:'a3'::jsonb) AS rq3 \gset
SELECT lease.release(:'rq3'::jsonb) AS r3 \gset
RESET ROLE;

SELECT t.ref(:'a1'::jsonb) AS rq1 \gset
SELECT t.ref(:'a2'::jsonb, '{"fencing_token": 7}') AS rq2 \gset
SELECT (:'rq3'::jsonb || jsonb_build_object('request_digest', t.digest())) AS rq3x \gset
SELECT (t.ref(:'a1'::jsonb) - 'lease_id') AS rq4 \gset
SELECT (SELECT (t.lock_of(:'a2'::jsonb #>> '{lease,lease_id}'))::text) AS a2_row \gset

SET LOCAL ROLE lease_service;
SELECT lease.release_many(jsonb_build_object('releases', jsonb_build_array(
    :'rq1'::jsonb, :'rq2'::jsonb, :'rq3'::jsonb, :'rq3x'::jsonb, :'rq4'::jsonb))) AS b \gset
RESET ROLE;

SELECT is(jsonb_array_length(:'b'::jsonb -> 'results'), 5, 'one result per item');
SELECT is(:'b'::jsonb #>> '{results,0,code}', 'lease_released', 'item 1: the exact owner releases');
SELECT is(:'b'::jsonb #>> '{results,0,lease,state}', 'released', 'item 1: the answer shows it released');
SELECT is((SELECT count(*)::int FROM lease.active_leases WHERE lease_id = :'a1'::jsonb #>> '{lease,lease_id}'),
          0, 'item 1: no longer active');
SELECT is(t.idem_count(:'rq1'::jsonb ->> 'request_id'), 1::bigint, 'item 1: its own idempotency row');
SELECT is(t.audit_count(:'rq1'::jsonb ->> 'request_id'), 1::bigint, 'item 1: its own audit event');
SELECT is(:'b'::jsonb #>> '{results,1,code}', 'lease_lost', 'item 2 (wrong token): lease_lost');
SELECT is((t.lock_of(:'a2'::jsonb #>> '{lease,lease_id}'))::text, :'a2_row', 'item 2: its lease is unchanged');
SELECT is(t.idem_count(:'rq2'::jsonb ->> 'request_id'), 0::bigint, 'item 2: no idempotency row');
SELECT is(:'b'::jsonb #>> '{results,2,code}', 'lease_released', 'item 3 (a repeated request id): the stored answer');
SELECT is(:'b'::jsonb #>> '{results,2,replayed}', 'true', 'item 3: marked replayed');
SELECT is(t.audit_count(:'rq3'::jsonb ->> 'request_id'), 1::bigint, 'item 3: still one audit event');
SELECT is(:'b'::jsonb #>> '{results,3,code}', 'idempotency_conflict',
          'item 4 (same request id, other digest): idempotency_conflict');
SELECT is(:'b'::jsonb -> 'results' -> 4, '{"code":"invalid_lease_request","field":"lease_id"}'::jsonb,
          'item 5 (no lease_id): invalid_lease_request naming the field');

-- the whole call again (an unknown outcome repeated): every item its stored
-- answer or the same verdict, nothing written twice
SELECT t.snapshot() AS again_before \gset
SET LOCAL ROLE lease_service;
SELECT lease.release_many(jsonb_build_object('releases', jsonb_build_array(:'rq1'::jsonb))) AS b2 \gset
RESET ROLE;
SELECT is(:'b2'::jsonb #>> '{results,0,replayed}', 'true', 'a repeated batch: the stored answer');

-- bounds: 1 to 100 items; anything else is invalid and writes nothing ----------------
SELECT t.snapshot() AS before \gset
SET LOCAL ROLE lease_service;
SELECT is(lease.release_many('{"releases": []}') ->> 'field', 'releases', 'no items: invalid');
SELECT is(lease.release_many('{"releases": {}}') ->> 'field', 'releases', 'not an array: invalid');
SELECT is(lease.release_many(jsonb_build_object('releases',
              (SELECT jsonb_agg(t.ref(:'a2'::jsonb)) FROM generate_series(1, 101)))) ->> 'field',
          'releases', '101 items: invalid');
RESET ROLE;
SELECT is(t.snapshot(), :'before', 'the refused batches wrote nothing');

SELECT * FROM finish();
ROLLBACK;
