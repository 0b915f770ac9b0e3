-- lease.release_brief_typed, what the service calls for one release, decides
-- as lease.release does (both through lease._end_t): the same answer,
-- the same terminal evidence (history row, idempotency record, audit event),
-- one idempotency for both, and each refusal naming the field the jsonb
-- request's refusal names. The administrative endings, still jsonb, decide
-- through lease._end_t too: their reason and incident rules hold.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
SELECT plan(26);

SELECT ok(has_function_privilege('lease_service', f, 'EXECUTE')
          AND NOT has_function_privilege('public', f, 'EXECUTE'),
          'the service may call lease.release_brief_typed, PUBLIC may not')
  FROM (VALUES ('lease.release_brief_typed(lease.identity,lease.release_request)')) v(f);
SELECT ok(NOT has_function_privilege('lease_service', f, 'EXECUTE'), f || ': internal')
  FROM unnest(ARRAY['lease._end_t(lease.identity,lease.release_request,text,text,text,text,text,boolean,text,boolean)',
                    'lease._to_history_t(lease.locks,text,timestamp with time zone,text,text,text,text)']) f;

-- one signature: two composites (migration 0030), the positional one gone
SELECT is(ARRAY(SELECT p.oid FROM pg_proc p
                 WHERE p.pronamespace = 'lease'::regnamespace AND p.proname = 'release_brief_typed'),
          ARRAY['lease.release_brief_typed(lease.identity,lease.release_request)'::regprocedure::oid],
          'lease.release_brief_typed: one signature, on composites');
SELECT is(to_regprocedure('lease.release_brief_typed(text,text,text,text,text,text,text,text,bigint,text,text,text,text,text,text,timestamp with time zone,text,text,text,integer)')::text, NULL,
          'lease.release_brief_typed''s positional signature is gone');
SET LOCAL ROLE lease_service;
SELECT t.acquire('rtyped_1') AS a1 \gset
SELECT t.acquire('rtyped_2') AS a2 \gset
SELECT t.ref(:'a1'::jsonb, '{"reason": "ignored for an owner"}') AS r1 \gset
SELECT t.ref(:'a2'::jsonb) AS r2 \gset
SELECT t.release_typed(:'r1'::jsonb) AS typed \gset
SELECT lease.release(:'r2'::jsonb) AS json \gset
SELECT lease.release(:'r1'::jsonb) AS typed_then_json \gset
SELECT t.release_typed(:'r2'::jsonb) AS json_then_typed \gset
SELECT t.release_typed(:'r1'::jsonb || jsonb_build_object('request_digest', t.digest())) AS conflict \gset
SELECT t.acquire('rtyped_3') AS a3 \gset
SELECT t.release_typed(t.ref(:'a3'::jsonb, '{"fencing_token": 99}')) AS lost \gset
SELECT t.release_typed(t.ref(:'a3'::jsonb, jsonb_build_object('principal', t.principal('p2')))) AS other_owner \gset
RESET ROLE;

SELECT is(:'typed'::jsonb ->> 'code', 'lease_released', 'typed: released');
SELECT is(ARRAY(SELECT jsonb_object_keys(:'typed'::jsonb -> 'lease') ORDER BY 1),
          ARRAY['acquired_at', 'ended_at', 'execution_id', 'expires_at', 'job_id', 'maximum_lifetime_ms', 'metadata', 'owner_client_id', 'owner_principal_id', 'renewed_at', 'service_instance_id', 'state', 'trace_id', 'ttl_ms'],
          'the brief record (docs/sql-api.md, "Result shape")');
SELECT is((SELECT state FROM lease.locks WHERE lock_key = t.key(:'a1'::jsonb #> '{lease,lock_identity}')),
          'free', 'the row is free');
SELECT is((SELECT ARRAY[state::text, ended_by_principal_id, ended_by_credential_id,
                        coalesce(end_reason, '-')]
             FROM lease.history WHERE lease_id = :'a1'::jsonb #>> '{lease,lease_id}'),
          (SELECT ARRAY[state::text, ended_by_principal_id, ended_by_credential_id,
                        coalesce(end_reason, '-')]
             FROM lease.history WHERE lease_id = :'a2'::jsonb #>> '{lease,lease_id}'),
          'the history row is the jsonb path''s (an owner''s reason not recorded)');
SELECT is((SELECT ARRAY[operation::text, owner_principal_id, encode(request_digest, 'hex'),
                        result ->> 'code']
             FROM lease.idempotency WHERE request_id = :'r1'::jsonb ->> 'request_id'),
          ARRAY['release', 'p1', :'r1'::jsonb ->> 'request_digest', 'lease_released'],
          'the idempotency record');
SELECT is((SELECT ROW(event_type, priority, decision, result_code, trace_id, principal_class,
                      principal_id, credential_id, deadline_class, latency_ms, previous_state,
                      resulting_state, reason)::text
             FROM lease.audit_events WHERE request_id = :'r1'::jsonb ->> 'request_id'),
          (SELECT ROW(event_type, priority, decision, result_code, trace_id, principal_class,
                      principal_id, credential_id, deadline_class, latency_ms, previous_state,
                      resulting_state, reason)::text
             FROM lease.audit_events WHERE request_id = :'r2'::jsonb ->> 'request_id'),
          'the audit event is the jsonb path''s');
SELECT is(:'typed_then_json'::jsonb ->> 'replayed', 'true', 'a typed request id is replayed as jsonb');
SELECT is(:'json_then_typed'::jsonb ->> 'replayed', 'true', 'a jsonb request id is replayed typed');
SELECT is(:'conflict'::jsonb ->> 'code', 'idempotency_conflict', 'another digest: idempotency_conflict');
SELECT is(:'lost'::jsonb ->> 'code', 'lease_lost', 'another token: lease_lost');
SELECT is(:'other_owner'::jsonb ->> 'code', 'lease_lost', 'another principal: lease_lost');

CREATE FUNCTION t.both(r jsonb) RETURNS text[] LANGUAGE sql VOLATILE
RETURN ARRAY[t.release_typed(r) ->> 'field', lease.release(r) ->> 'field'];
SELECT is(t.both(t.ref(:'a3'::jsonb, '{"lock_identity": {"tenant_id": "bad tenant", "program_id": "program-a", "target_namespace": "starintel-target", "target_id": "rtyped_3", "actor_name": "usernamegen", "workflow_name": "default"}, "lease_id": "x y"}')),
          ARRAY['lock_identity.tenant_id', 'lock_identity.tenant_id'], 'a bad tenant first');
SELECT is(t.both(t.ref(:'a3'::jsonb, '{"lease_id": "x y"}')), ARRAY['lease_id', 'lease_id'], 'lease_id');
SELECT is(t.both(t.ref(:'a3'::jsonb, '{"fencing_token": 0}')),
          ARRAY['fencing_token', 'fencing_token'], 'fencing_token');
SELECT is(t.both(t.ref(:'a3'::jsonb, '{"service_instance_id": "a b"}')),
          ARRAY['service_instance_id', 'service_instance_id'], 'service_instance_id');
SELECT throws_ok($$SELECT t.release_typed(t.ref('$$ || :'a3' || $$'::jsonb, '{"request_digest": "zz"}'))$$,
                 'LS003', NULL, 'a digest that is not 64 hex digits: LS003');

-- the administrative endings (jsonb) decide through lease._end_t as well
SET LOCAL ROLE lease_service;
SELECT lease.revoke(t.admin(:'a3'::jsonb, 'bad', '{"incident_id": 7}')) ->> 'field' AS inc_num \gset
SELECT lease.force_release(t.admin(:'a3'::jsonb, 'stuck', '{"incident_id": "inc-1"}')) ->> 'field' AS inc_force \gset
SELECT lease.revoke(t.admin(:'a3'::jsonb, E'bad\x01reason')) ->> 'field' AS reason_ctl \gset
SELECT lease.revoke(t.admin(:'a3'::jsonb, 'stuck, OPS-2', '{"incident_id": "inc-2"}')) AS revoked \gset
RESET ROLE;
SELECT is(:'inc_num'::text, 'incident_id', 'revoke: an incident id that is not a string');
SELECT is(:'inc_force'::text, 'incident_id', 'force_release: no incident id');
SELECT is(:'reason_ctl'::text, 'reason', 'a reason with a control character');
SELECT is((SELECT ARRAY[state::text, ended_by_principal_id, end_reason, incident_id]
             FROM lease.history WHERE lease_id = :'a3'::jsonb #>> '{lease,lease_id}'),
          ARRAY['revoked', 'adm1', 'stuck, OPS-2', 'inc-2'],
          'revoke: the administrator, reason and incident recorded');

-- a new optional field is one more attribute of lease.release_request
-- (migration 0030), not a new signature: the function the service
-- prepared, its grant and its batch's stay (rolled back with the test)
SELECT 'lease.release_brief_typed(lease.identity,lease.release_request)'::regprocedure::oid AS release_oid \gset
SELECT 'lease.release_many_brief_typed(lease.identity[],lease.release_request[])'::regprocedure::oid AS many_oid \gset
ALTER TYPE lease.release_request ADD ATTRIBUTE example_field text;
SELECT ok('lease.release_brief_typed(lease.identity,lease.release_request)'::regprocedure::oid = :'release_oid'::oid
          AND 'lease.release_many_brief_typed(lease.identity[],lease.release_request[])'::regprocedure::oid = :'many_oid'::oid
          AND has_function_privilege('lease_service', :'release_oid'::oid, 'EXECUTE'),
          'ALTER TYPE ... ADD ATTRIBUTE keeps lease.release_brief_typed, its batch and the grant');

SELECT * FROM finish();
ROLLBACK;
