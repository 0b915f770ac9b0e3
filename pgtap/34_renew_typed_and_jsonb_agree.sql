-- lease.renew_brief_typed, what the service calls for one renewal, decides as
-- lease.renew does (both through lease._renew_t): the same answer, the
-- same evidence (idempotency record and audit event), one idempotency for
-- both (a request id first used by one is replayed by the other), and each
-- refusal naming the field the jsonb request's refusal names.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
SELECT plan(31);

SELECT ok(has_function_privilege('lease_service', f, 'EXECUTE')
          AND NOT has_function_privilege('public', f, 'EXECUTE'),
          'the service may call lease.renew_brief_typed, PUBLIC may not')
  FROM (VALUES ('lease.renew_brief_typed(lease.identity,lease.renew_request,boolean)')) v(f);
SELECT ok(NOT has_function_privilege('lease_service', f, 'EXECUTE'), f || ': internal')
  FROM unnest(ARRAY['lease._renew_t(lease.identity,lease.renew_request,boolean,lease._settings)',
                    'lease._evidence_t(text,lease.locks,jsonb,bigint,text,text,bigint,text,text,text,text,text,text,text,text,text,text,integer)']) f;

-- one signature: two composites (migration 0030), the positional one gone
SELECT is(ARRAY(SELECT p.oid FROM pg_proc p
                 WHERE p.pronamespace = 'lease'::regnamespace AND p.proname = 'renew_brief_typed'),
          ARRAY['lease.renew_brief_typed(lease.identity,lease.renew_request,boolean)'::regprocedure::oid],
          'lease.renew_brief_typed: one signature, on composites');
SELECT is(to_regprocedure('lease.renew_brief_typed(text,text,text,text,text,text,text,text,bigint,bigint,text,text,text,text,text,text,timestamp with time zone,text,text,text,integer,boolean)')::text, NULL,
          'lease.renew_brief_typed''s positional signature is gone');
SET LOCAL ROLE lease_service;
SELECT t.acquire('typed_1') AS a1 \gset
SELECT t.acquire('typed_2') AS a2 \gset
-- the same renewal of each lease, one typed, one as jsonb
SELECT t.ref(:'a1'::jsonb, '{"ttl_ms": 45000, "trace_id": "trace-typed"}') AS r1 \gset
SELECT t.ref(:'a2'::jsonb, '{"ttl_ms": 45000, "trace_id": "trace-typed"}') AS r2 \gset
SELECT t.renew_typed(:'r1'::jsonb) AS typed \gset
SELECT lease.renew(:'r2'::jsonb) AS json \gset
-- the same request ids again, through the other function each time
SELECT lease.renew(:'r1'::jsonb) AS typed_then_json \gset
SELECT t.renew_typed(:'r2'::jsonb) AS json_then_typed \gset
SELECT t.renew_typed(:'r1'::jsonb || jsonb_build_object('request_digest', t.digest())) AS conflict \gset
SELECT t.renew_typed(t.ref(:'a1'::jsonb, '{"fencing_token": 99}')) AS lost \gset
RESET ROLE;

SELECT is(:'typed'::jsonb ->> 'code', 'lease_renewed', 'typed: renewed');
SELECT is(:'typed'::jsonb - '{lease}'::text[], :'json'::jsonb - '{lease}'::text[],
          'typed and jsonb answer the same members');
SELECT is(ARRAY(SELECT jsonb_object_keys(:'typed'::jsonb -> 'lease') ORDER BY 1),
          ARRAY['acquired_at', 'execution_id', 'expires_at', 'job_id', 'maximum_lifetime_ms', 'metadata', 'owner_client_id', 'owner_principal_id', 'renewed_at', 'service_instance_id', 'state', 'trace_id', 'ttl_ms'],
          'the brief record (docs/sql-api.md, "Result shape")');
SELECT is((:'typed'::jsonb #>> '{lease,ttl_ms}')::int, 45000, 'the requested TTL');
SELECT is((SELECT ttl_ms FROM lease.locks WHERE lease_id = :'a1'::jsonb #>> '{lease,lease_id}'),
          45000::bigint, 'the row has the new TTL');
SELECT is((SELECT expires_at - renewed_at FROM lease.locks
            WHERE lease_id = :'a1'::jsonb #>> '{lease,lease_id}'),
          interval '45 seconds', 'expires_at is renewed_at + ttl');

-- the evidence, column by column, against the jsonb path's
SELECT is((SELECT count(*) FROM lease.idempotency WHERE request_id = :'r1'::jsonb ->> 'request_id'),
          1::bigint, 'one idempotency record');
SELECT is((SELECT ARRAY[operation::text, owner_principal_id, encode(request_digest, 'hex'),
                         result ->> 'code']
             FROM lease.idempotency WHERE request_id = :'r1'::jsonb ->> 'request_id'),
          ARRAY['renew', 'p1', :'r1'::jsonb ->> 'request_digest', 'lease_renewed'],
          'the idempotency record holds the operation, owner, digest and answer');
SELECT is((SELECT (event_type, priority, decision, result_code, correlation_id, trace_id,
                   principal_class, principal_id, credential_id, service_instance_id,
                   requested_ttl_ms, effective_ttl_ms, deadline_class, latency_ms,
                   previous_state, resulting_state)
             FROM lease.audit_events WHERE request_id = :'r1'::jsonb ->> 'request_id'),
          (SELECT (event_type, priority, decision, result_code,
                   :'r1'::jsonb ->> 'correlation_id', trace_id, principal_class, principal_id,
                   credential_id, service_instance_id, requested_ttl_ms, effective_ttl_ms,
                   deadline_class, latency_ms, previous_state, resulting_state)
             FROM lease.audit_events WHERE request_id = :'r2'::jsonb ->> 'request_id'),
          'the audit event is the jsonb path''s (its own correlation id)');
SELECT is((SELECT trace_id FROM lease.audit_events
            WHERE request_id = :'r1'::jsonb ->> 'request_id'), 'trace-typed',
          'the request''s trace id is audited');

-- one idempotency for both
SELECT is(:'typed_then_json'::jsonb ->> 'replayed', 'true', 'a typed request id is replayed as jsonb');
SELECT is(:'json_then_typed'::jsonb ->> 'replayed', 'true', 'a jsonb request id is replayed typed');
SELECT is(:'json_then_typed'::jsonb - '{replayed,current_state}'::text[],
          :'json'::jsonb - '{replayed,current_state}'::text[], 'with the stored answer');
SELECT is(:'conflict'::jsonb ->> 'code', 'idempotency_conflict', 'another digest: idempotency_conflict');
SELECT is(:'lost'::jsonb ->> 'code', 'lease_lost', 'another token: lease_lost');

-- each refusal names the field the jsonb request names
CREATE FUNCTION t.both(r jsonb) RETURNS text[] LANGUAGE sql VOLATILE
RETURN ARRAY[t.renew_typed(r) ->> 'field', lease.renew(r) ->> 'field'];
SELECT is(t.both(t.ref(:'a1'::jsonb, '{"lock_identity": {"tenant_id": "bad tenant", "program_id": "program-a", "target_namespace": "starintel-target", "target_id": "typed_1", "actor_name": "usernamegen", "workflow_name": "default"}, "lease_id": "x y"}')),
          ARRAY['lock_identity.tenant_id', 'lock_identity.tenant_id'], 'a bad tenant first');
SELECT is(t.both(t.ref(:'a1'::jsonb, jsonb_build_object('lock_identity', (:'a1'::jsonb #> '{lease,lock_identity}') || '{"operation_class": "bogus"}'))),
          ARRAY['lock_identity.operation_class', 'lock_identity.operation_class'], 'operation_class');
SELECT is(t.both(t.ref(:'a1'::jsonb, '{"lease_id": "x y"}')), ARRAY['lease_id', 'lease_id'], 'lease_id');
SELECT is(t.both(t.ref(:'a1'::jsonb, '{"fencing_token": 0}')),
          ARRAY['fencing_token', 'fencing_token'], 'fencing_token');
SELECT is(t.both(t.ref(:'a1'::jsonb, '{"service_instance_id": "a b"}')),
          ARRAY['service_instance_id', 'service_instance_id'], 'service_instance_id');
SELECT is(t.both(t.ref(:'a1'::jsonb, '{"ttl_ms": 1}')), ARRAY['ttl_ms', 'ttl_ms'], 'ttl_ms');
SELECT is(t.renew_typed(t.ref(:'a1'::jsonb, '{"ttl_ms": 1}')) ->> 'detail',
          lease.renew(t.ref(:'a1'::jsonb, '{"ttl_ms": 1}')) ->> 'detail', 'with the same detail');
SELECT is(t.renew_typed(t.ref(:'a1'::jsonb, jsonb_build_object('deadline_at', t.rfc3339(now() - interval '1 second')))) ->> 'code',
          'deadline_exceeded', 'a passed deadline: deadline_exceeded');
SELECT throws_ok($$SELECT t.renew_typed(t.ref('$$ || :'a1' || $$'::jsonb, '{"request_digest": "zz"}'))$$,
                 'LS003', NULL, 'a digest that is not 64 hex digits: LS003, as for jsonb');
SELECT throws_ok($$SELECT t.renew_typed(t.ref('$$ || :'a1' || $$'::jsonb, jsonb_build_object('principal', t.principal('a b'))))$$,
                 'LS003', NULL, 'a principal that is not an id: LS003');

-- a new optional field is one more attribute of lease.renew_request
-- (migration 0030), not a new signature: the function the service
-- prepared, and its grants, stay (rolled back with the test)
SELECT 'lease.renew_brief_typed(lease.identity,lease.renew_request,boolean)'::regprocedure::oid AS renew_oid \gset
ALTER TYPE lease.renew_request ADD ATTRIBUTE example_field text;
SELECT ok('lease.renew_brief_typed(lease.identity,lease.renew_request,boolean)'::regprocedure::oid = :'renew_oid'::oid
          AND has_function_privilege('lease_service', :'renew_oid'::oid, 'EXECUTE'),
          'ALTER TYPE ... ADD ATTRIBUTE keeps lease.renew_brief_typed and its grant');

SELECT * FROM finish();
ROLLBACK;
