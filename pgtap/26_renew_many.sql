-- Many renewals in one transaction: lease.renew_many decides each item with
-- lease.renew itself, so in one call one item renews, one is lost, one is
-- the stored answer of its repeated request id, one is an idempotency
-- conflict and one is invalid, each its own typed result in request order,
-- and only the renewed item writes (its own idempotency row and audit event).
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
SELECT plan(22);

SET LOCAL ROLE lease_service;
SELECT t.acquire('target_01') AS a1 \gset
SELECT t.acquire('target_02') AS a2 \gset
SELECT t.acquire('target_03') AS a3 \gset
-- a3 was renewed once already: its request is repeated in the batch
SELECT t.ref(:'a3'::jsonb) AS rq3 \gset
SELECT lease.renew(:'rq3'::jsonb) AS r3 \gset
RESET ROLE;
SELECT t.age(:'a1'::jsonb #>> '{lease,lease_id}', '10 seconds') AS ignored \gset

SELECT t.ref(:'a1'::jsonb) AS rq1 \gset
SELECT t.ref(:'a2'::jsonb, '{"fencing_token": 7}') AS rq2 \gset
SELECT (:'rq3'::jsonb || jsonb_build_object('request_digest', t.digest())) AS rq3x \gset
SELECT (t.ref(:'a1'::jsonb) - 'lease_id') AS rq4 \gset
SELECT (SELECT (t.lock_of(:'a2'::jsonb #>> '{lease,lease_id}'))::text) AS a2_row \gset

SET LOCAL ROLE lease_service;
SELECT lease.renew_many(jsonb_build_object('renewals', jsonb_build_array(
    :'rq1'::jsonb || '{"optimistic": true}' /* an item's flag is not the batch's */, :'rq2'::jsonb, :'rq3'::jsonb, :'rq3x'::jsonb, :'rq4'::jsonb))) AS b \gset
RESET ROLE;

SELECT is(jsonb_array_length(:'b'::jsonb -> 'results'), 5, 'one result per item');
SELECT is(:'b'::jsonb #>> '{results,0,code}', 'lease_renewed', 'item 1: the exact owner renews');
SELECT is(:'b'::jsonb #>> '{results,0,replayed}', 'false', 'item 1: a new request');
SELECT is((t.lock_of(:'a1'::jsonb #>> '{lease,lease_id}')).renewed_at, date_trunc('milliseconds', now()),
          'item 1: renewed_at is backend time');
SELECT is(t.idem_count(:'rq1'::jsonb ->> 'request_id'), 1::bigint, 'item 1: its own idempotency row');
SELECT is(t.audit_count(:'rq1'::jsonb ->> 'request_id'), 1::bigint, 'item 1: its own audit event');
SELECT is(:'b'::jsonb -> 'results' -> 1, '{"code":"lease_lost"}'::jsonb, 'item 2 (wrong token): lease_lost');
SELECT is((t.lock_of(:'a2'::jsonb #>> '{lease,lease_id}'))::text, :'a2_row', 'item 2: its lease is unchanged');
SELECT is(t.idem_count(:'rq2'::jsonb ->> 'request_id') + t.audit_count(:'rq2'::jsonb ->> 'request_id'),
          0::bigint, 'item 2: no idempotency row, no audit event');
SELECT is(:'b'::jsonb #>> '{results,2,code}', 'lease_renewed', 'item 3 (a repeated request id): the stored answer');
SELECT is(:'b'::jsonb #>> '{results,2,replayed}', 'true', 'item 3: marked replayed');
SELECT is(:'b'::jsonb #> '{results,2,lease,expires_at}', :'r3'::jsonb #> '{lease,expires_at}',
          'item 3: the original expiry, not a second renewal');
SELECT is(t.audit_count(:'rq3'::jsonb ->> 'request_id'), 1::bigint, 'item 3: still one audit event');
SELECT is(:'b'::jsonb -> 'results' -> 3, '{"code":"idempotency_conflict"}'::jsonb,
          'item 4 (same request id, other digest): idempotency_conflict');
SELECT is(:'b'::jsonb -> 'results' -> 4, '{"code":"invalid_lease_request","field":"lease_id"}'::jsonb,
          'item 5 (no lease_id): invalid_lease_request naming the field');

-- a repeated request id in a batch (any flag) gets its stored answer, and
-- the other items are decided as usual
SELECT t.ref(:'a2'::jsonb) AS rq5 \gset
SET LOCAL ROLE lease_service;
SELECT lease.renew_many(jsonb_build_object('optimistic', true,
       'renewals', jsonb_build_array(:'rq5'::jsonb, :'rq1'::jsonb))) AS b2 \gset
RESET ROLE;
SELECT is(:'b2'::jsonb #>> '{results,1,replayed}', 'true',
          'a repeated request id in a later batch: its stored answer');
SELECT is(:'b2'::jsonb #>> '{results,1,code}', 'lease_renewed', '... the same code as the first time');
SELECT is(t.idem_count(:'rq5'::jsonb ->> 'request_id'), 1::bigint,
          'the other item of that batch was decided and recorded');

-- bounds: 1 to 100 items; anything else is invalid and writes nothing ----------------
SELECT t.snapshot() AS before \gset
SET LOCAL ROLE lease_service;
SELECT is(lease.renew_many('{"renewals": []}') ->> 'field', 'renewals', 'no items: invalid');
SELECT is(lease.renew_many('{"renewals": {}}') ->> 'field', 'renewals', 'not an array: invalid');
SELECT is(lease.renew_many(jsonb_build_object('renewals',
              (SELECT jsonb_agg(t.ref(:'a1'::jsonb)) FROM generate_series(1, 101)))) ->> 'field',
          'renewals', '101 items: invalid');
RESET ROLE;
SELECT is(t.snapshot(), :'before', 'the refused batches wrote nothing');

SELECT * FROM finish();
ROLLBACK;
