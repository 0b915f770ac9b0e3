-- lease.renew_many_brief_typed and release_many_brief_typed, what the
-- service calls for a batch, decide each item as lease.renew_many and
-- release_many do (lease._renew_t, lease._end_t): the same answers and
-- evidence, one idempotency for both forms (an item repeated through the
-- other form is replayed, the rest of its batch still decided), each item's
-- own refusal, and arrays that do not line up refused as a whole.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
SELECT plan(29);

SELECT ok(has_function_privilege('lease_service', f, 'EXECUTE')
          AND NOT has_function_privilege('public', f, 'EXECUTE'),
          f || ': the service may call it, PUBLIC may not')
  FROM unnest(ARRAY[
    'lease.renew_many_brief_typed(lease.identity[],lease.renew_request[])',
    'lease.release_many_brief_typed(lease.identity[],lease.release_request[])']) f;
SELECT ok(NOT has_function_privilege('lease_service', 'lease._typed_batch_size(integer[])', 'EXECUTE'),
          'lease._typed_batch_size is internal');
-- one signature each: the composites' arrays (migration 0030), the
-- positional ones (an array per field) gone
SELECT is(ARRAY(SELECT p.oid FROM pg_proc p
                 WHERE p.pronamespace = 'lease'::regnamespace AND p.proname = f[1]),
          ARRAY[f[2]::regprocedure::oid], f[1] || ': one signature, on composites')
  FROM (VALUES (ARRAY['renew_many_brief_typed', 'lease.renew_many_brief_typed(lease.identity[],lease.renew_request[])']),
               (ARRAY['release_many_brief_typed', 'lease.release_many_brief_typed(lease.identity[],lease.release_request[])'])) v(f);
SELECT is(to_regprocedure(f)::text, NULL, f || ': gone')
  FROM unnest(ARRAY[
    'lease.renew_many_brief_typed(text[],text[],text[],text[],text[],text[],text[],text[],bigint[],bigint[],text[],text[],text[],text[],text[],text[],timestamp with time zone[],text[],text[],text[],integer[])',
    'lease.release_many_brief_typed(text[],text[],text[],text[],text[],text[],text[],text[],bigint[],text[],text[],text[],text[],text[],text[],timestamp with time zone[],text[],text[],text[],integer[])']) f;

SET LOCAL ROLE lease_service;
SELECT t.acquire('many_typed_1') AS a1 \gset
SELECT t.acquire('many_typed_2') AS a2 \gset
SELECT t.acquire('many_typed_3') AS a3 \gset
SELECT t.acquire('many_typed_4') AS a4 \gset
SELECT t.ref(:'a1'::jsonb, '{"ttl_ms": 60000, "trace_id": "trace-many"}') AS r1 \gset
SELECT t.ref(:'a3'::jsonb, '{"ttl_ms": 60000, "trace_id": "trace-many"}') AS r3 \gset
-- the same batch shape typed (leases 1 and 2) and as jsonb (3 and 4)
SELECT t.renew_many_typed(jsonb_build_array(:'r1'::jsonb, t.ref(:'a2'::jsonb, '{"fencing_token": 99}'))) AS typed \gset
SELECT lease.renew_many(jsonb_build_object('renewals', jsonb_build_array(
           :'r3'::jsonb, t.ref(:'a4'::jsonb, '{"fencing_token": 99}')))) AS json \gset
-- each item again through the other form, each beside a new renewal
SELECT t.ref(:'a2'::jsonb) AS r2 \gset
SELECT t.renew_many_typed(jsonb_build_array(:'r3'::jsonb, :'r2'::jsonb)) AS json_then_typed \gset
SELECT lease.renew(:'r1'::jsonb) AS typed_then_json \gset
-- arrays that do not line up, none, too many; an absent optional array
SELECT lease.renew_many_brief_typed(ARRAY[t.identity_of(:'r1'::jsonb)],
           ARRAY[t.renew_request_of(:'r1'::jsonb), t.renew_request_of(:'r3'::jsonb)]) AS ragged \gset
SELECT lease.renew_many_brief_typed('{}', '{}') AS empty \gset
SELECT lease.renew_many_brief_typed(
           ARRAY(SELECT t.identity_of(:'r1'::jsonb) FROM generate_series(1, 101)),
           ARRAY(SELECT t.renew_request_of(:'r1'::jsonb || jsonb_build_object('request_id', 'q' || g))
                   FROM generate_series(1, 101) g)) AS too_many \gset
SELECT t.renew_many_typed(jsonb_build_array(t.ref(:'a4'::jsonb) - 'ttl_ms')) AS no_ttl \gset
RESET ROLE;

SELECT is(:'typed'::jsonb #>> '{results,0,code}', 'lease_renewed', 'typed: the first item is renewed');
SELECT is(:'typed'::jsonb -> 'results' -> 1, '{"code":"lease_lost"}'::jsonb,
          'the exact ownership check per item: a wrong token is lost, the other item stands');
SELECT is((:'typed'::jsonb #> '{results,0}') - 'lease', (:'json'::jsonb #> '{results,0}') - 'lease',
          'the item answers as the jsonb batch''s');
SELECT is((:'typed'::jsonb #> '{results,0,lease}') - '{acquired_at,renewed_at,expires_at}'::text[],
          (SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each(:'json'::jsonb #> '{results,0,lease}') e
            WHERE (:'typed'::jsonb #> '{results,0,lease}') ? e.key)
            - '{acquired_at,renewed_at,expires_at}'::text[],
          'with the jsonb batch''s values in its brief record (the times aside: two leases)');
SELECT is((t.row_of(t.ident('many_typed_1'))).ttl_ms, 60000::bigint, 'the row is renewed');
SELECT ok(t.idem_count(:'r1'::jsonb ->> 'request_id') = 1 AND t.audit_count(:'r1'::jsonb ->> 'request_id') = 1,
          'one idempotency row and one audit event for the renewed item');
SELECT is((SELECT (event_type, priority, decision, result_code, trace_id, principal_class,
                   principal_id, credential_id, service_instance_id, requested_ttl_ms,
                   effective_ttl_ms, deadline_class, latency_ms, previous_state, resulting_state)
             FROM lease.audit_events WHERE request_id = :'r1'::jsonb ->> 'request_id'),
          (SELECT (event_type, priority, decision, result_code, trace_id, principal_class,
                   principal_id, credential_id, service_instance_id, requested_ttl_ms,
                   effective_ttl_ms, deadline_class, latency_ms, previous_state, resulting_state)
             FROM lease.audit_events WHERE request_id = :'r3'::jsonb ->> 'request_id'),
          'the audit event is the jsonb batch''s');

-- one idempotency for both
SELECT is(:'typed_then_json'::jsonb ->> 'replayed', 'true', 'a typed item''s request id is replayed as jsonb');
SELECT is(:'json_then_typed'::jsonb #>> '{results,0,replayed}', 'true',
          'a jsonb item''s request id is replayed in a typed batch');
SELECT is(:'json_then_typed'::jsonb #> '{results,0,lease}', :'json'::jsonb #> '{results,0,lease}',
          'with the stored answer');
SELECT is(:'json_then_typed'::jsonb #>> '{results,1,code}', 'lease_renewed',
          'the other item of that batch is still decided');
SELECT is(t.idem_count(:'r2'::jsonb ->> 'request_id'), 1::bigint, '(its evidence written once)');

-- the batch as a whole
SELECT is(:'ragged'::jsonb ->> 'field', 'renewals', 'arrays of different lengths: refused as a whole');
SELECT is(:'empty'::jsonb ->> 'field', 'renewals', 'no renewal: refused');
SELECT is(:'too_many'::jsonb ->> 'field', 'renewals', '101 renewals: refused');
SELECT is(:'no_ttl'::jsonb #>> '{results,0,lease,ttl_ms}', '30000',
          'a NULL field is absent (the lease keeps its TTL)');

-- release_many_brief_typed
SET LOCAL ROLE lease_service;
SELECT t.ref(:'a1'::jsonb) AS l1 \gset
SELECT t.release_many_typed(jsonb_build_array(:'l1'::jsonb, t.ref(:'a3'::jsonb, '{"fencing_token": 99}'))) AS lt \gset
SELECT lease.release(:'l1'::jsonb) AS l1_again \gset
SELECT t.release_many_typed(jsonb_build_array(:'l1'::jsonb, t.ref(:'a3'::jsonb))) AS lt_again \gset
SELECT lease.release_many_brief_typed(ARRAY[t.identity_of(:'l1'::jsonb)],
           ARRAY[t.release_request_of(:'l1'::jsonb), t.release_request_of(:'r3'::jsonb)]) AS lragged \gset
RESET ROLE;
SELECT is(:'lt'::jsonb #>> '{results,0,code}', 'lease_released', 'typed: the first item is released');
SELECT is(:'lt'::jsonb -> 'results' -> 1, '{"code":"lease_lost"}'::jsonb, 'a wrong token is lost');
SELECT is((SELECT state FROM lease.history WHERE lease_id = :'a1'::jsonb #>> '{lease,lease_id}'),
          'released', 'the history row is written');
SELECT is(:'l1_again'::jsonb ->> 'replayed', 'true', 'the typed item''s request id is replayed as jsonb');
SELECT ok((:'lt_again'::jsonb #>> '{results,0,replayed}')::boolean
          AND :'lt_again'::jsonb #>> '{results,1,code}' = 'lease_released',
          'and in a typed batch, beside a release that is decided');
SELECT is(:'lragged'::jsonb ->> 'field', 'releases', 'arrays of different lengths: refused as a whole');

SELECT * FROM finish();
ROLLBACK;
