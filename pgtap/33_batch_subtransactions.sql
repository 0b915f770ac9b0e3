-- A batch is one subtransaction, not one per item. A subtransaction that
-- writes takes a transaction id of its own, which becomes the xmin of the
-- rows it writes (how this file counts them); past 64 in one transaction,
-- every snapshot other sessions take while it runs overflows into
-- pg_subtrans (docs/operators.md, "Batches and subtransactions"). A batch
-- of 80 renewals or 40 releases writes with one transaction id, not one per
-- item. An
-- item that repeats a request id whose lease still matched sends the batch
-- item by item: its answer is the stored one, the other items are decided
-- as before, and nothing of the repeated attempt stays.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
SELECT plan(13);

SET LOCAL ROLE lease_service;
CREATE TEMP TABLE held AS
    SELECT i, t.acquire('target_s' || i) AS a FROM generate_series(1, 80) i;
RESET ROLE;

SET LOCAL ROLE lease_service;
SELECT lease.renew_many(jsonb_build_object('renewals',
    (SELECT jsonb_agg(t.ref(a) ORDER BY i) FROM held))) AS rb \gset
RESET ROLE;
SELECT is((SELECT count(*) FROM jsonb_array_elements(:'rb'::jsonb -> 'results') r
            WHERE r ->> 'code' = 'lease_renewed'), 80::bigint, 'a batch of 80 renewals: all renewed');
SELECT is((SELECT count(DISTINCT l.xmin::text) FROM lease.locks l JOIN held h
             ON l.lease_id = h.a #>> '{lease,lease_id}'), 1::bigint,
          'and its 80 lease rows were written by one transaction id (one subtransaction), not one per item');

-- The typed batch the service sends, the same way: lease.renew_brief_typed
-- per item, none in a subtransaction of its own.
SET LOCAL ROLE lease_service;
SELECT t.renew_many_typed((SELECT jsonb_agg(t.ref(a) ORDER BY i) FROM held)) AS tb \gset
RESET ROLE;
SELECT is((SELECT count(*) FROM jsonb_array_elements(:'tb'::jsonb -> 'results') r
            WHERE r ->> 'code' = 'lease_renewed'), 80::bigint, 'a typed batch of 80 renewals: all renewed');
SELECT is((SELECT count(DISTINCT l.xmin::text) FROM lease.locks l JOIN held h
             ON l.lease_id = h.a #>> '{lease,lease_id}'), 1::bigint,
          'and its 80 lease rows were written by one transaction id');
-- After a batch, in the same transaction, a single renewal is again in a
-- subtransaction of its own: a repeated request id gets its stored answer.
SET LOCAL ROLE lease_service;
SELECT t.ref(a, '{"ttl_ms": 25000}') AS single FROM held WHERE i = 44 \gset
SELECT t.renew_typed(:'single'::jsonb) AS single_first \gset
SELECT t.renew_typed(:'single'::jsonb) AS single_again \gset
RESET ROLE;
SELECT is(:'single_first'::jsonb ->> 'replayed', 'false', 'after the batch: a single renewal renews');
SELECT is(:'single_again'::jsonb ->> 'replayed', 'true', 'and its repeat is answered from its stored result');

SET LOCAL ROLE lease_service;
SELECT lease.release_many(jsonb_build_object('releases',
    (SELECT jsonb_agg(t.ref(a) ORDER BY i) FROM held WHERE i <= 40))) AS lb \gset
RESET ROLE;
SELECT is((SELECT count(*) FROM jsonb_array_elements(:'lb'::jsonb -> 'results') r
            WHERE r ->> 'code' = 'lease_released'), 40::bigint, 'a batch of 40 releases: all released');
SELECT is((SELECT count(DISTINCT x.xmin::text) FROM lease.history x JOIN held h
             ON x.lease_id = h.a #>> '{lease,lease_id}' WHERE h.i <= 40), 1::bigint,
          'and its 40 history rows were written by one transaction id');

-- A repeated request id whose lease still matched, among new items: the
-- batch is decided again item by item.
SET LOCAL ROLE lease_service;
SELECT t.ref(a, '{"ttl_ms": 20000}') AS once FROM held WHERE i = 41 \gset
SELECT lease.renew(:'once'::jsonb) AS first \gset
SELECT lease.renew_many(jsonb_build_object('renewals', jsonb_build_array(
    (SELECT t.ref(a, '{"ttl_ms": 45000}') FROM held WHERE i = 42),
    :'once'::jsonb,
    (SELECT t.ref(a, '{"ttl_ms": 50000}') FROM held WHERE i = 43)))) AS mixed \gset
RESET ROLE;
SELECT is(ARRAY(SELECT r ->> 'code' FROM jsonb_array_elements(:'mixed'::jsonb -> 'results') r),
          ARRAY['lease_renewed', 'lease_renewed', 'lease_renewed'], 'the mixed batch: every item answered');
SELECT is(:'mixed'::jsonb #>> '{results,1,replayed}', 'true', 'the repeated item: its stored answer');
SELECT is(:'mixed'::jsonb #>> '{results,1,lease,expires_at}', :'first'::jsonb #>> '{lease,expires_at}',
          'as first given, not renewed again');
SELECT is(ARRAY[(t.lock_of(:'mixed'::jsonb #>> '{results,0,lease,lease_id}')).ttl_ms,
                (t.lock_of(:'mixed'::jsonb #>> '{results,2,lease,lease_id}')).ttl_ms],
          ARRAY[45000, 50000]::bigint[], 'the new items around it were renewed, once each');
SELECT is((SELECT count(*) FROM lease.audit_events
            WHERE event_type = 'target_lease_renew'
              AND request_id = :'once'::jsonb ->> 'request_id'), 1::bigint,
          'the repeated attempt left no second audit event');

SELECT * FROM finish();
ROLLBACK;
