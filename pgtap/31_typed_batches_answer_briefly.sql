-- The batch functions the service calls answer each item briefly
-- (docs/sql-api.md, "Batch renewal and release"): lease.renew_many_brief_typed
-- and lease.release_many_brief_typed decide each item as a single renewal or
-- release is decided and answer it as renew_brief_typed and
-- release_brief_typed do; the jsonb batches psql calls, lease.renew_many and
-- release_many, still answer whole. The jsonb brief batches
-- (renew_many_brief, release_many_brief) and their helpers are gone: one
-- typed batch per operation.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
SELECT plan(18);

SELECT ok(has_function_privilege('lease_service', f, 'EXECUTE')
          AND NOT has_function_privilege('public', f, 'EXECUTE'),
          f || ': the service may call it, PUBLIC may not')
  FROM unnest(ARRAY['lease.renew_many_brief_typed(lease.identity[],lease.renew_request[])',
                    'lease.release_many_brief_typed(lease.identity[],lease.release_request[])']) f;
SELECT ok(NOT EXISTS (SELECT FROM pg_proc WHERE pronamespace = 'lease'::regnamespace AND proname = f),
          'lease.' || f || ' is gone')
  FROM unnest(ARRAY['renew_many_brief', 'release_many_brief']) f;

SET LOCAL ROLE lease_service;
SELECT t.acquire('many_brief_1') AS a1 \gset
SELECT t.acquire('many_brief_2') AS a2 \gset
SELECT t.ref(:'a1'::jsonb, '{"ttl_ms": 60000}') AS r1 \gset
SELECT t.renew_many_typed(jsonb_build_array(
           :'r1'::jsonb, t.ref(:'a2'::jsonb, '{"fencing_token": 99}'))) AS rb \gset
SELECT t.renew_many_typed(jsonb_build_array(:'r1'::jsonb)) AS again \gset
SELECT lease.renew_many(jsonb_build_object('renewals', jsonb_build_array(t.ref(:'a2'::jsonb)))) AS whole \gset
RESET ROLE;

-- renew_many_brief_typed
SELECT is(:'rb'::jsonb #>> '{results,0,code}', 'lease_renewed', 'the first item is renewed');
SELECT ok(NOT (:'rb'::jsonb #> '{results,0,lease}') ?| ARRAY['lock_identity', 'lease_id', 'fencing_token'],
          'its lease leaves out the identity, lease id and token the item named');
SELECT is(((:'rb'::jsonb #>> '{results,0,lease,expires_at}')::timestamptz),
          date_trunc('milliseconds', now()) + interval '60 s', 'the new expiry, from backend time');
SELECT is((t.row_of(t.ident('many_brief_1'))).ttl_ms, 60000::bigint, 'the row is renewed');
SELECT is(:'rb'::jsonb -> 'results' -> 1, '{"code":"lease_lost"}'::jsonb,
          'the exact ownership check per item: a wrong token is lost, the other item stands');
SELECT ok(t.idem_count(:'r1'::jsonb ->> 'request_id') = 1 AND t.audit_count(:'r1'::jsonb ->> 'request_id') = 1,
          'one idempotency row and one audit event for the renewed item');
SELECT ok((:'again'::jsonb #>> '{results,0,replayed}')::boolean
          AND :'again'::jsonb #> '{results,0,lease}' = :'rb'::jsonb #> '{results,0,lease}',
          'a repeated item: the stored answer, as it was given');
SELECT is(:'whole'::jsonb #> '{results,0,lease,lock_identity}', t.ident('many_brief_2'),
          'lease.renew_many still answers each item whole');

-- release_many_brief_typed
SET LOCAL ROLE lease_service;
SELECT t.ref(:'a1'::jsonb) AS l1 \gset
SELECT t.release_many_typed(jsonb_build_array(
           :'l1'::jsonb, t.ref(:'a2'::jsonb, '{"fencing_token": 99}'))) AS lb \gset
RESET ROLE;
SELECT is(:'lb'::jsonb #>> '{results,0,code}', 'lease_released', 'the first item is released');
SELECT ok(:'lb'::jsonb #>> '{results,0,lease,state}' = 'released'
          AND NOT (:'lb'::jsonb #> '{results,0,lease}') ?| ARRAY['lock_identity', 'lease_id', 'fencing_token'],
          'its lease: the terminal state, not what the item named');
SELECT is((SELECT state FROM lease.history WHERE lease_id = :'a1'::jsonb #>> '{lease,lease_id}'),
          'released', 'the history row is written');
SELECT is(:'lb'::jsonb -> 'results' -> 1, '{"code":"lease_lost"}'::jsonb,
          'a wrong token is lost, the other item stands');
SELECT is((t.row_of(t.ident('many_brief_2'))).state, 'active', 'the other lease is still held');
SELECT is(t.release_many_typed('[]'::jsonb) ->> 'code', 'invalid_lease_request',
          'an empty batch is refused as by release_many');

SELECT * FROM finish();
ROLLBACK;
