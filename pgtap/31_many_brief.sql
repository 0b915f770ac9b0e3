-- The batch functions the service calls answer each item briefly
-- (docs/sql-api.md, "Batch renewal and release"): lease.renew_many_brief and
-- lease.release_many_brief decide exactly as lease.renew_many and
-- release_many (lease._renew_many, _release_many: each item as a single
-- renewal or release is decided) and answer each item as renew_brief and
-- release_brief do; the whole-answer functions still answer whole.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
SELECT plan(18);

SELECT ok(has_function_privilege('lease_service', f, 'EXECUTE')
          AND NOT has_function_privilege('public', f, 'EXECUTE'),
          f || ': the service may call it, PUBLIC may not')
  FROM unnest(ARRAY['lease.renew_many_brief(jsonb)', 'lease.release_many_brief(jsonb)']) f;
SELECT ok(NOT has_function_privilege('lease_service', f, 'EXECUTE'),
          f || ': internal, the service cannot choose the answer''s shape by argument')
  FROM unnest(ARRAY['lease._renew_many(jsonb,boolean)', 'lease._release_many(jsonb,boolean)']) f;

SET LOCAL ROLE lease_service;
SELECT t.acquire('many_brief_1') AS a1 \gset
SELECT t.acquire('many_brief_2') AS a2 \gset
SELECT t.ref(:'a1'::jsonb, '{"ttl_ms": 60000}') AS r1 \gset
SELECT lease.renew_many_brief(jsonb_build_object('renewals', jsonb_build_array(
           :'r1'::jsonb, t.ref(:'a2'::jsonb, '{"fencing_token": 99}')))) AS rb \gset
SELECT lease.renew_many_brief(jsonb_build_object('renewals', jsonb_build_array(:'r1'::jsonb))) AS again \gset
SELECT lease.renew_many(jsonb_build_object('renewals', jsonb_build_array(t.ref(:'a2'::jsonb)))) AS whole \gset
RESET ROLE;

-- renew_many_brief
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

-- release_many_brief
SET LOCAL ROLE lease_service;
SELECT t.ref(:'a1'::jsonb) AS l1 \gset
SELECT lease.release_many_brief(jsonb_build_object('releases', jsonb_build_array(
           :'l1'::jsonb, t.ref(:'a2'::jsonb, '{"fencing_token": 99}')))) AS lb \gset
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
SELECT is(lease.release_many_brief('{"releases": []}'::jsonb) ->> 'code', 'invalid_lease_request',
          'an empty batch is refused as by release_many');

SELECT * FROM finish();
ROLLBACK;
